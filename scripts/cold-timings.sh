#!/usr/bin/env bash
# The README's two commands, cold: a fresh clone of REV (default HEAD) in a temporary
# folder with an empty target directory (the crates already downloaded to ~/.cargo stay:
# this times building, not the network). Prints the seconds until the broker logs
# "listening", the build and the run of `cargo test --workspace`, and the load before
# each. Run it on a quiet machine; it takes 20-40 minutes on 2 cores.
#
#   bash scripts/cold-timings.sh [REV]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rev="${1:-HEAD}"
work="$(mktemp -d)"
trap 'kill "${serve:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
git clone --quiet "$root" "$work/mqlite"
git -C "$work/mqlite" checkout --quiet "$rev"
cd "$work/mqlite"
export CARGO_TARGET_DIR="$work/target"
echo "rev $(git rev-parse --short HEAD); $(nproc) cores; rustc $(rustc --version | cut -d' ' -f2)"

echo "load before the main command: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS
MQLITE_TOKENS=dev-token-change-me MQLITE_ADDR=127.0.0.1:0 \
    cargo run --quiet --release -p mqlite-cli -- serve >"$work/serve.log" 2>&1 &
serve=$!
until grep -q "listening" "$work/serve.log"; do
    kill -0 "$serve" 2>/dev/null || { cat "$work/serve.log"; echo "serve exited"; exit 1; }
    sleep 1
done
echo "main command to \"listening\": $((SECONDS - start)) s"
kill "$serve"; wait "$serve" 2>/dev/null || true; serve=

echo "load before the test command: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS
cargo test --workspace --no-run 2>"$work/build.log" || { tail -30 "$work/build.log"; exit 1; }
built=$((SECONDS - start))
echo "test command, build: $built s ($(grep -c 'Executable' "$work/build.log" || true) test binaries)"
cargo test --workspace >"$work/test.log" 2>&1 || { grep -E "FAILED|panicked" "$work/test.log" | head; }
echo "test command, run: $((SECONDS - start - built)) s; total $((SECONDS - start)) s"
grep -E "^test result" "$work/test.log" |
    awk '{p+=$4;f+=$6;i+=$8} END{print "passed " p ", failed " f ", ignored " i}'
