#!/usr/bin/env python3
"""The targets of issue 22 ("Speed, second edition"), marked met or missed, from the
output of `cargo bench -p mqlite-benches --bench throughput`:

    cargo bench -p mqlite-benches --bench throughput 2>&1 | tee throughput.log
    python3 benches/targets.py throughput.log

Prints one markdown table: each path's bare and mqlite time (criterion's median
estimate), their ratio (bare's time / mqlite's, or mqlite's / bare's for the latency
rows), the target and whether it is met, and the lateness probe's p99.9 on mqlite's
side, with the sleeping and the parked thread's p99.9 in the same window (the
machine's floor), against the target of 1 ms. A path missing from the log (a filtered
run) is left out; the exit status is 0 whatever is missed.
"""

import re
import sys

# (criterion group, what the issue calls it, target, kind): kind "x" is bare's time /
# mqlite's at least the target; "latency" is mqlite's time / bare's at most it; None
# has no ratio target (the peers' script marks end to end).
TARGETS = [
    ("single_send", "single send", 0.8, "x"),
    ("send_batch_64", "send_batch of 64", 0.6, "x"),
    ("producers_16", "16 producers (bare: one thread)", 2.0, "x"),
    ("drain_64", "drain 64", 0.8, "x"),
    ("drain_single", "drain, single operations", None, None),
    ("worker_end_to_end", "worker end to end", 0.5, "x"),
    ("claim_complete_at_backlog/1000", "claim + complete, 1k backlog", 1.5, "latency"),
    ("claim_complete_at_backlog/200000", "claim + complete, 200k backlog", 1.5, "latency"),
    ("producers_16_full", "16 producers under FULL", 4.0, "x"),
    ("end_to_end_4x4", "end to end 4 × 4", None, "peers"),
]

# Executor lateness, p99.9, on every path.
LATENESS_MS = 1.0

UNITS = {"ps": 1e-6, "ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
DURATION = r"([0-9.]+)(ps|ns|µs|us|ms|s)"


def micros(value, unit):
    return float(value) * UNITS[unit]


def parse(text):
    """Criterion's median time (µs) per (group, function), and the probe's p99.9 (ms)
    with the two floors per (group, function)."""
    times = {}
    for m in re.finditer(
        r"^([a-z_0-9]+(?:/[0-9]+)?)/([a-z_\-]+)\s*\n?\s*time:\s+\[\S+ \S+ ([0-9.]+) (\S+)",
        text,
        re.M,
    ):
        times[(m.group(1), m.group(2))] = micros(m.group(3), m.group(4))
    lateness = {}
    for m in re.finditer(
        r"^lateness ([a-z_0-9]+(?:/[0-9]+)?)/([a-z_\-]+): .*?p99\.9 "
        + DURATION
        + r", max.*?plain thread.*?p99\.9 "
        + DURATION
        + r", max.*?parked thread.*?p99\.9 "
        + DURATION
        + r", max",
        text,
        re.M,
    ):
        probe, sleeping, parked = (
            micros(m.group(i), m.group(i + 1)) / 1e3 for i in (3, 5, 7)
        )
        lateness[(m.group(1), m.group(2))] = (probe, sleeping, parked)
    return times, lateness


def show_time(us):
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.1f} µs"


def table(text):
    times, lateness = parse(text)
    lines = [
        "| path | bare | mqlite | ratio | target | | lateness p99.9 (floors) | ≤ 1 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for group, name, target, kind in TARGETS:
        bare, mine = times.get((group, "bare")), times.get((group, "mqlite"))
        if bare is None and mine is None:
            continue
        if bare and mine and kind == "latency":
            ratio = f"{mine / bare:.2f} ×"
            met = mine / bare <= target
            goal = f"≤ {target:g} ×"
        elif bare and mine and kind == "x":
            ratio = f"{bare / mine:.2f}" + (" ×" if target >= 1 else "")
            met = bare / mine >= target
            goal = f"≥ {target:g}" + (" ×" if target >= 1 else "")
        elif kind == "peers":
            # Its bare side is the inserts alone; the target is against the peers.
            ratio, met, goal = "—", None, "against the peers (benches/peers/run.sh)"
        else:
            ratio = f"{bare / mine:.2f}" if bare and mine else "—"
            met, goal = None, "—"
        late = lateness.get((group, "mqlite"))
        if late:
            probe, sleeping, parked = late
            late_cell = f"{probe:.2f} ms ({sleeping:.2f} / {parked:.2f})"
            late_met = "met" if probe <= LATENESS_MS else "**missed**"
        else:
            late_cell, late_met = "—", "—"
        lines.append(
            f"| {name} | {show_time(bare) if bare else '—'} | "
            f"{show_time(mine) if mine else '—'} | {ratio} | {goal} | "
            f"{'—' if met is None else ('met' if met else '**missed**')} | "
            f"{late_cell} | {late_met} |"
        )
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} THROUGHPUT_LOG (the output of the throughput bench, or - for stdin)")
    source = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1], encoding="utf-8")
    print(table(source.read()))


if __name__ == "__main__":
    main()
