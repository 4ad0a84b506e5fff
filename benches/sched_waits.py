#!/usr/bin/env python3
"""Where a runtime worker's wake-ups waited: reads `perf sched timehist` output and, for
each wake-up of a tokio worker thread that waited longer than a bound to run (its
"sch delay"), says what held its CPU meanwhile and how much of that wait the machine's
other CPUs sat idle. docs/benchmark.md, "Lateness: what the probe waits for", shows how
it is run:

    perf sched record -o /tmp/sched.data -- <bench binary> --bench 'single_send/mqlite$'
    perf sched timehist -i /tmp/sched.data > /tmp/timehist.txt
    python3 benches/sched_waits.py /tmp/timehist.txt [--over-ms 1]

Each line of timehist ends a run of one task on one CPU: its end time, CPU, task,
wait time, scheduling delay and run time (ms), so the CPU's timeline is rebuilt from
the lines' [end - run, end] intervals.
"""

import collections
import sys


def parse(path):
    """Per-CPU intervals (start, end, task), and the workers' waits (start, wait, cpu)."""
    runs = collections.defaultdict(list)
    waits = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 6 or not p[1].startswith("["):
                continue
            try:
                end = float(p[0])
                cpu = int(p[1][1:-1])
                delay = float(p[-2]) / 1000
                run = float(p[-1]) / 1000
            except ValueError:
                continue
            task = " ".join(p[2:-3])
            runs[cpu].append((end - run, end, task))
            if task.startswith("tokio-rt-worker"):
                waits.append((end - run, delay, cpu))
    return runs, waits


def overlap(a, b, s, e):
    return max(0.0, min(b, e) - max(a, s))


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    over = 1.0
    if "--over-ms" in args:
        i = args.index("--over-ms")
        over = float(args[i + 1])
        del args[i : i + 2]
    runs, waits = parse(args[0])
    cpus = sorted(runs)
    long_waits = [w for w in waits if w[1] > over / 1000]
    print(f"runtime-worker wake-ups: {len(waits)}; waited over {over} ms to run: {len(long_waits)}")
    if not long_waits:
        return
    holders = collections.Counter()
    idle_share = []
    for started, delay, cpu in long_waits:
        a, b = started - delay, started
        on_cpu = collections.Counter()
        for s, e, task in runs[cpu]:
            o = overlap(a, b, s, e)
            if o > 0:
                on_cpu[task] += o
        holders[on_cpu.most_common(1)[0][0] if on_cpu else "-"] += 1
        others = [c for c in cpus if c != cpu]
        idle = sum(
            overlap(a, b, s, e)
            for c in others
            for s, e, task in runs[c]
            if task.startswith("<idle>")
        )
        idle_share.append(idle / delay / max(1, len(others)))
    print("what ran on the worker's CPU for most of its wait (wake-ups):")
    for task, n in holders.most_common(8):
        print(f"  {n:5}  {task}")
    print(
        "share of those waits the other CPUs sat idle: mean %.2f"
        % (sum(idle_share) / len(idle_share))
    )


if __name__ == "__main__":
    main()
