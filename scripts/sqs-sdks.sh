#!/usr/bin/env bash
# The SQS endpoint through real AWS SDKs: boto3 and the AWS SDK for JavaScript v3, each
# pinned and installed into .tools/ (PyPI and npm), against the mqlite binary given,
# served with auth off on a free loopback port over a scratch database.
#
#   bash scripts/sqs-sdks.sh target/release/mqlite
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root="$(cd "$(dirname "$0")/.." && pwd)"
BOTO3=1.43.11
CLIENT_SQS=3.1175.0
py="$root/.tools/sqs-py-$BOTO3"
js="$root/.tools/sqs-js-$CLIENT_SQS"
if [ ! -d "$py/boto3" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        --no-warn-conflicts --target "$py" "boto3==$BOTO3" "botocore==$BOTO3"
fi
if [ ! -d "$js/node_modules/@aws-sdk/client-sqs" ]; then
    mkdir -p "$js"
    npm install --silent --no-audit --no-fund --prefix "$js" "@aws-sdk/client-sqs@$CLIENT_SQS"
fi

work="$(mktemp -d)"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cp "$root/scripts/sqs/js_suite.mjs" "$js/js_suite.mjs"

# Serves a scratch database with MQLITE_TOKENS=$1 on a free loopback port; sets $addr.
serve() {
    [ -n "$pid" ] && { kill "$pid"; wait "$pid" 2>/dev/null || true; }
    rm -f "$work"/sqs.db*
    MQLITE_TOKENS="$1" MQLITE_ADDR=127.0.0.1:0 MQLITE_DB="$work/sqs.db" "$bin" serve >"$work/serve.log" 2>&1 &
    pid=$!
    addr=
    for _ in $(seq 100); do
        addr=$(grep -o 'listening on http://[0-9.:]*' "$work/serve.log" | sed 's#.*http://##' || true)
        [ -n "$addr" ] && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
        sleep 0.1
    done
    cat "$work/serve.log"; echo "the broker did not start"; exit 1
}

# (The JavaScript SDK warns that its releases after January 2027 need Node.js 22.)
serve off
PYTHONPATH="$py" python3 "$root/scripts/sqs/boto3_suite.py" "http://$addr"
NODE_NO_WARNINGS=1 node "$js/js_suite.mjs" "http://$addr"

# Auth on: every request signed (Signature Version 4) with an administrator token.
token="sqs-suite-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
serve "$token"
PYTHONPATH="$py" python3 "$root/scripts/sqs/boto3_suite.py" "http://$addr" "$token"
NODE_NO_WARNINGS=1 node "$js/js_suite.mjs" "http://$addr" "$token"
