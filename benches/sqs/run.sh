#!/usr/bin/env bash
# The SQS endpoint's throughput through boto3 beside mqlite's own wire (throughput.py),
# against the release broker on a scratch database: once with auth off, once with auth
# on (boto3 signing every request, the wire sending a bearer token).
#
#   bash benches/sqs/run.sh [N]      # N messages per path, default 5000
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
n="${1:-5000}"
cargo build --quiet --release -p mqlite-cli --manifest-path "$root/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$root/target}/release/mqlite"
py="$root/.tools/sqs-py-1.43.11"
[ -d "$py/boto3" ] || python3 -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore --no-warn-conflicts --target "$py" boto3==1.43.11 botocore==1.43.11
work="$(mktemp -d)"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
for tokens in off "bench-token-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"; do
    rm -f "$work"/b.db*
    MQLITE_TOKENS="$tokens" MQLITE_ADDR=127.0.0.1:0 MQLITE_DB="$work/b.db" "$bin" serve >"$work/log" 2>&1 &
    pid=$!
    addr=
    until [ -n "$addr" ]; do
        sleep 0.1
        addr=$(grep -o 'listening on http://[0-9.:]*' "$work/log" | sed 's#.*http://##' || true)
    done
    echo "== auth $([ "$tokens" = off ] && echo off || echo on), load $(cut -d' ' -f1-3 /proc/loadavg)"
    args=("http://$addr" "$n")
    [ "$tokens" = off ] || args+=("$tokens")
    PYTHONPATH="$py" python3 "$root/benches/sqs/throughput.py" "${args[@]}"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
