#!/usr/bin/env bash
# Benchmarks mqlite's peers (plainjob, apalis, BullMQ) on this machine with the same
# workload.
#
#   benches/peers/run.sh [N] [--variants] [--rounds R]
#
# N (default 20000, or $N) is the number of 256-byte jobs per scenario. Installs what is
# needed inside benches/peers only (npm ci in plainjob/, cargo build --release in
# apalis/, both under `nice -n 10`), then prints one JSON line per peer and scenario on
# stdout; install and build output goes to stderr. --variants adds the extra end-to-end
# runs described in README.md (other poll intervals, apalis's stock interval poller).
# --rounds R (default 1) runs every peer R times, the peers taking turns within each
# round, and the joined table gives each rate's median over the rounds: on a machine
# whose speed drifts, a peer measured in a slow minute no longer decides a ratio alone.
set -euo pipefail
cd "$(dirname "$0")"

n="${N:-20000}"
rounds=1
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --variants) extra+=(--variants) ;;
        --rounds)
            shift
            case "${1:-}" in
                ''|*[!0-9]*|0) echo "usage: $0 [N] [--variants] [--rounds R]" >&2; exit 2 ;;
            esac
            rounds="$1" ;;
        ''|*[!0-9]*) echo "usage: $0 [N] [--variants] [--rounds R]" >&2; exit 2 ;;
        *) n="$1" ;;
    esac
    shift
done

# plainjob: better-sqlite3 is compiled from source by its install script (about a
# minute on 2 cores); skip the install when the compiled module is already there.
if [[ ! -f plainjob/node_modules/better-sqlite3/build/Release/better_sqlite3.node \
      || plainjob/package-lock.json -nt plainjob/node_modules/.package-lock.json ]]; then
    echo "== npm ci (plainjob)" >&2
    (cd plainjob && nice -n 10 npm ci --no-audit --no-fund) >&2
fi

if [[ ! -d bullmq/node_modules/bullmq || bullmq/package-lock.json -nt bullmq/node_modules/.package-lock.json ]]; then
    echo "== npm ci (bullmq)" >&2
    (cd bullmq && nice -n 10 npm ci --no-audit --no-fund) >&2
fi

echo "== cargo build --release (apalis)" >&2
(cd apalis && nice -n 10 cargo build --release --locked) >&2

# Every JSON line goes to stdout and to $lines, which the joined table is made from.
lines="$(mktemp)"
exec > >(tee "$lines")

echo "== cargo build --release --example peer_scenarios (mqlite)" >&2
(cd ../.. && nice -n 10 cargo build --release -p mqlite-benches --example peer_scenarios) >&2

for round in $(seq "$rounds"); do
    echo "== round $round of $rounds" >&2
    echo "== mqlite (target/release/examples/peer_scenarios), n=$n" >&2
    (cd ../.. && target/release/examples/peer_scenarios --n "$n")

    echo "== plainjob, n=$n" >&2
    (cd plainjob && node bench.mjs --n "$n" "${extra[@]}")
    echo "== apalis, n=$n" >&2
    apalis/target/release/mqlite-peer-apalis --n "$n" "${extra[@]}"
    # BullMQ on Debian's redis-server (apt-get install redis-server): loopback only, a fresh
    # directory, AOF on with appendfsync everysec (Redis's durable setting closest to WAL +
    # NORMAL: at most a second lost on power failure), no RDB snapshots; stopped at the end.
    if command -v redis-server >/dev/null; then
        redis_dir="$(mktemp -d)"
        redis_port="${REDIS_PORT:-6390}"
        redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$redis_dir" \
            --appendonly yes --appendfsync everysec --save '' --daemonize no \
            --logfile "$redis_dir/redis.log" &
        redis_pid=$!
        trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$redis_dir"' EXIT
        for _ in $(seq 100); do
            redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
            sleep 0.1
        done
        echo "== bullmq, n=$n" >&2
        (cd bullmq && REDIS_PORT="$redis_port" node bench.mjs --n "$n")
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null || true
        rm -rf "$redis_dir"
        trap - EXIT
    else
        echo "== bullmq skipped: no redis-server (apt-get install redis-server)" >&2
    fi
done

# The joined table (stderr): jobs/s per scenario and peer, and mqlite's ratio to each.
sleep 0.2
python3 - "$lines" >&2 <<'PY'
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peers = [p for p in ["mqlite", "plainjob", "bullmq", "apalis"] if any(r["peer"] == p for r in rows)]
# Each rate is the median of its rounds (one value with --rounds 1). A variant run
# (--variants) has its own scenario name.
runs = {}
for r in rows:
    runs.setdefault((r["peer"], r["scenario"]), []).append(r["jobs_per_sec"])
rate = {k: round(median(v)) for k, v in runs.items()}
print(f"\nmedian of {max(len(v) for v in runs.values())} round(s) per rate")
scenarios = ["enqueue_single", "enqueue_bulk", "end_to_end", "worker_end_to_end", "end_to_end_workers"]
print()
print("| scenario | " + " | ".join(peers) + " | " + " | ".join(f"mqlite / {p}" for p in peers[1:]) + " |")
print("|---" * (1 + 2 * len(peers) - 1) + "|")
for s in scenarios:
    if not any(k[1] == s for k in rate):
        continue
    cells = [f"{rate[(p, s)]:,}" if (p, s) in rate else "—" for p in peers]
    # mqlite's worker paths are compared with the peers' own end_to_end (their workers).
    mine = rate.get(("mqlite", s))
    theirs = "end_to_end" if s in ("worker_end_to_end", "end_to_end_workers") else s
    ratios = [f"{mine / rate[(p, theirs)]:.2f}" if mine and (p, theirs) in rate else "—" for p in peers[1:]]
    print(f"| {s} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
# Issue 22's targets against the peers, each marked met or missed.
targets = [
    ("single send ≥ 1.5 × plainjob", "enqueue_single", "plainjob", 1.5),
    ("send_batch of 64 ≥ 1.5 × plainjob's bulk", "enqueue_bulk", "plainjob", 1.5),
    ("end to end 4 × 4 ≥ 2 × plainjob", "end_to_end", "plainjob", 2.0),
    ("end to end 4 × 4 ≥ 2 × BullMQ", "end_to_end", "bullmq", 2.0),
]
print()
print("| target | mqlite / peer | |")
print("|---|---|---|")
for name, s, p, goal in targets:
    mine, theirs = rate.get(("mqlite", s)), rate.get((p, s))
    if not mine or not theirs:
        print(f"| {name} | — | not run |")
        continue
    print(f"| {name} | {mine / theirs:.2f} | {'met' if mine / theirs >= goal else '**missed**'} |")
PY
rm -f "$lines"
