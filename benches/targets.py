#!/usr/bin/env python3
"""The targets of issue 22 ("Speed, second edition"), marked met or missed, from the
output of `cargo bench -p mqlite-benches --bench throughput`:

    cargo bench -p mqlite-benches --bench throughput 2>&1 | tee throughput.log
    python3 benches/targets.py throughput.log

Also reads the output of `cargo bench -p mqlite-benches --bench libsql` (one log may
hold both). Prints one markdown table: each path's bare and mqlite time (criterion's
median estimate), their ratio (bare's time / mqlite's, or mqlite's / bare's for the latency
rows), the target and whether it is met, and the lateness probe's p99.9 on mqlite's
side, with the sleeping and the parked thread's p99.9 in the same window (the
machine's floor), against the target of 1 ms. A path missing from the log (a filtered
run) is left out; the exit status is 0 whatever is missed.
"""

import re
import sys

# (what the issue calls it, the base's id, mqlite's id, the base's scale, target, kind):
# kind "x" is the base's time × scale / mqlite's, at least the target; "latency" is
# mqlite's time / the base's, at most it; "peers" has its target against the peers
# (benches/peers/run.sh); None has none. The lateness shown is the probe's beside
# mqlite's id. Ids are criterion's `group/function`.
TARGETS = [
    # cargo bench -p mqlite-benches --bench throughput
    ("single send", "single_send/bare", "single_send/mqlite", 1, 0.8, "x"),
    ("send_batch of 64", "send_batch_64/bare", "send_batch_64/mqlite", 1, 0.6, "x"),
    ("16 producers (bare: one thread)", "producers_16/bare", "producers_16/mqlite", 1, 2.0, "x"),
    ("drain 64", "drain_64/bare", "drain_64/mqlite", 1, 0.8, "x"),
    ("drain, single operations", "drain_single/bare", "drain_single/mqlite", 1, None, None),
    ("worker end to end", "worker_end_to_end/bare", "worker_end_to_end/mqlite", 1, 0.5, "x"),
    (
        "claim + complete, 1k backlog",
        "claim_complete_at_backlog/1000/bare",
        "claim_complete_at_backlog/1000/mqlite",
        1,
        1.5,
        "latency",
    ),
    (
        "claim + complete, 200k backlog",
        "claim_complete_at_backlog/200000/bare",
        "claim_complete_at_backlog/200000/mqlite",
        1,
        1.5,
        "latency",
    ),
    ("16 producers under FULL", "producers_16_full/bare", "producers_16_full/mqlite", 1, 4.0, "x"),
    ("end to end 4 × 4", "end_to_end_4x4/bare", "end_to_end_4x4/mqlite", 1, None, "peers"),
    # cargo bench -p mqlite-benches --bench libsql
    ("libSQL: send 1", "libsql/send_single/bare", "libsql/send_single/mqlite", 1, 1.0, "x"),
    (
        "libSQL: send a batch of 64",
        "libsql/send_batch_64/bare",
        "libsql/send_batch_64/mqlite",
        1,
        1.0,
        "x",
    ),
    (
        "libSQL: receive 1 + complete",
        "libsql/receive_complete/bare",
        "libsql/receive_complete/mqlite",
        1,
        1.0,
        "x",
    ),
    (
        "libSQL: 16 producers (base: 16 × one)",
        "libsql/producers_16/mqlite/1",
        "libsql/producers_16/mqlite/16",
        16,
        8.0,
        "x",
    ),
]

# Executor lateness, p99.9, on every path.
LATENESS_MS = 1.0

UNITS = {"ps": 1e-6, "ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
DURATION = r"([0-9.]+)(ps|ns|µs|us|ms|s)"


def micros(value, unit):
    return float(value) * UNITS[unit]


def parse(text):
    """Criterion's median time (µs) per id (`group/function`), and the probe's p99.9
    (ms) with the two floors per id."""
    times = {}
    for m in re.finditer(
        r"^([a-z_0-9\-]+(?:/[a-z_0-9\-]+)+)\s*\n?\s*time:\s+\[\S+ \S+ ([0-9.]+) (\S+)",
        text,
        re.M,
    ):
        times[m.group(1)] = micros(m.group(2), m.group(3))
    lateness = {}
    for m in re.finditer(
        r"^lateness ([a-z_0-9\-]+(?:/[a-z_0-9\-]+)+): .*?p99\.9 "
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
            micros(m.group(i), m.group(i + 1)) / 1e3 for i in (2, 4, 6)
        )
        lateness[m.group(1)] = (probe, sleeping, parked)
    return times, lateness


def show_time(us):
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.1f} µs"


def table(text):
    times, lateness = parse(text)
    lines = [
        "| path | bare | mqlite | ratio | target | | lateness p99.9 (floors) | ≤ 1 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, base_id, mine_id, scale, target, kind in TARGETS:
        bare, mine = times.get(base_id), times.get(mine_id)
        if bare is None and mine is None:
            continue
        if bare is not None:
            bare *= scale
        if bare and mine and kind == "latency":
            ratio = f"{mine / bare:.2f} ×"
            met = mine / bare <= target
            goal = f"≤ {target:g} ×"
        elif bare and mine and kind == "x":
            times_sign = " ×" if target >= 1 else ""
            ratio = f"{bare / mine:.2f}{times_sign}"
            met = bare / mine >= target
            goal = f"≥ {target:g}{times_sign}"
        elif kind == "peers":
            # Its bare side is the inserts alone; the target is against the peers.
            ratio, met, goal = "—", None, "against the peers (benches/peers/run.sh)"
        else:
            ratio = f"{bare / mine:.2f}" if bare and mine else "—"
            met, goal = None, "—"
        late = lateness.get(mine_id)
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
        sys.exit(f"usage: {sys.argv[0]} LOG (the output of the throughput or libsql bench, or - for stdin)")
    source = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1], encoding="utf-8")
    print(table(source.read()))


if __name__ == "__main__":
    main()
