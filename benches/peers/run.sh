#!/usr/bin/env bash
# Benchmarks mqlite's peers (plainjob, apalis) on this machine with the same workload.
#
#   benches/peers/run.sh [N] [--variants]
#
# N (default 20000, or $N) is the number of 256-byte jobs per scenario. Installs what is
# needed inside benches/peers only (npm ci in plainjob/, cargo build --release in
# apalis/, both under `nice -n 10`), then prints one JSON line per peer and scenario on
# stdout; install and build output goes to stderr. --variants adds the extra end-to-end
# runs described in README.md (other poll intervals, apalis's stock interval poller).
set -euo pipefail
cd "$(dirname "$0")"

n="${N:-20000}"
extra=()
for arg in "$@"; do
    case "$arg" in
        --variants) extra+=(--variants) ;;
        ''|*[!0-9]*) echo "usage: $0 [N] [--variants]" >&2; exit 2 ;;
        *) n="$arg" ;;
    esac
done

# plainjob: better-sqlite3 is compiled from source by its install script (about a
# minute on 2 cores); skip the install when the compiled module is already there.
if [[ ! -f plainjob/node_modules/better-sqlite3/build/Release/better_sqlite3.node \
      || plainjob/package-lock.json -nt plainjob/node_modules/.package-lock.json ]]; then
    echo "== npm ci (plainjob)" >&2
    (cd plainjob && nice -n 10 npm ci --no-audit --no-fund) >&2
fi

echo "== cargo build --release (apalis)" >&2
(cd apalis && nice -n 10 cargo build --release --locked) >&2

echo "== plainjob, n=$n" >&2
(cd plainjob && node bench.mjs --n "$n" "${extra[@]}")
echo "== apalis, n=$n" >&2
apalis/target/release/mqlite-peer-apalis --n "$n" "${extra[@]}"
