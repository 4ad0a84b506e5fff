#!/usr/bin/env bash
# The broker from the outside: boots the release `mqlite` binary on a random port and
# walks send / receive / abandon / redelivery / dead-letter / redrive / complete with
# curl alone, checks the discovery card, the console's assets and /metrics, measures the broker's RSS idle and
# with a 100,000-message backlog, and stops it with SIGTERM (exit status 0).
#
#   cargo build --release -p mqlite-cli && scripts/blackbox.sh target/release/mqlite
set -euo pipefail

bin="${1:-target/release/mqlite}"
[ -x "$bin" ] || { echo "blackbox: no binary at $bin (build it: cargo build --release -p mqlite-cli)" >&2; exit 2; }
work="$(mktemp -d)"
pid=""
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

token="blackbox-token-$RANDOM$RANDOM"
fail() { echo "blackbox: FAIL: $*" >&2; exit 1; }
step() { echo "blackbox: $*"; }

# Start on port 0 and read the address it printed.
"$bin" serve --addr 127.0.0.1:0 --db "$work/bb.db" --tokens "$token" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1 300); do
    grep -q 'http://' "$work/out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/err" >&2; fail "the broker exited at start"; }
    sleep 0.1
done
url="$(grep -o 'http://[0-9.:]*' "$work/out" | head -1)"
[ -n "$url" ] || fail "no listening line: $(cat "$work/out")"
step "broker at $url (pid $pid)"

# rpc Service/Method JSON -> the answer body; the HTTP status lands in $work/status.
rpc() {
    curl -sS -o "$work/body" -w '%{http_code}' -X POST "$url/mqlite.v1.$1" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -d "$2" >"$work/status"
    cat "$work/body"
}
status() { cat "$work/status"; }
expect_status() { [ "$(status)" = "$1" ] || fail "$2: HTTP $(status), wanted $1: $(cat "$work/body")"; }
# num FIELD JSON -> the first integer value of FIELD.
num() { grep -o "\"$1\":[0-9-]*" <<<"$2" | head -1 | cut -d: -f2; }
# str FIELD JSON -> the first string value of FIELD.
str() { grep -o "\"$1\":\"[^\"]*\"" <<<"$2" | head -1 | cut -d\" -f4; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

# Open routes.
[ "$(curl -sS "$url/healthz")" = "ok" ] || fail "/healthz"
card="$(curl -sS "$url/")"
grep -q '"name":"mqlite"' <<<"$card" || fail "discovery card: $card"
grep -q '/mqlite.v1.QueueService/Send' <<<"$card" || fail "the card lists no Send: $card"
grep -q '"ui":"/ui"' <<<"$card" || fail "auth is on, yet the card names no console: $card"
page="$(curl -sS "$url/ui")"
grep -q 'src="/ui/app.js"' <<<"$page" || fail "/ui is not the console: $page"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$url/ui/app.js")" = 200 ] || fail "/ui/app.js"
step "discovery card, health and console ok"
idle_rss="$(rss_kb)"

# Unauthenticated calls are 401.
code="$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$url/mqlite.v1.AdminService/ListQueues" -H 'Content-Type: application/json' -d '{}')"
[ "$code" = 401 ] || fail "no token: HTTP $code"

rpc AdminService/CreateQueue '{"name":"jobs","config":{"max_delivery_count":2}}' >/dev/null
expect_status 200 "CreateQueue"
sent="$(rpc QueueService/Send '{"queue":"jobs","messages":[{"body":"aGVsbG8=","subject":"greeting"}]}')"
expect_status 200 "Send"
seq="$(grep -o '"seq_numbers":\[[0-9]*' <<<"$sent" | grep -o '[0-9]*$')"
[ -n "$seq" ] && [ "$seq" -gt 0 ] || fail "Send answered $sent"
step "sent #$seq"

# Receive, abandon, receive again: the redelivery.
got="$(rpc QueueService/Receive '{"queue":"jobs"}')"
[ "$(num seq_number "$got")" = "$seq" ] || fail "Receive: $got"
[ "$(str body "$got")" = "aGVsbG8=" ] || fail "the body came back changed: $got"
lock="$(str lock_token "$got")"
rpc QueueService/Abandon "{\"queue\":\"jobs\",\"seq_number\":$seq,\"lock_token\":\"$lock\"}" >/dev/null
expect_status 200 "Abandon"
got="$(rpc QueueService/Receive '{"queue":"jobs"}')"
[ "$(num delivery_count "$got")" = 2 ] || fail "redelivery: $got"
old="$lock"
lock="$(str lock_token "$got")"
# The first token is fenced.
rpc QueueService/Complete "{\"queue\":\"jobs\",\"seq_number\":$seq,\"lock_token\":\"$old\"}" >/dev/null
expect_status 409 "Complete with the fenced token"
grep -q '"code":"lock_lost"' "$work/body" || fail "fenced token: $(cat "$work/body")"
step "abandoned, redelivered (delivery 2), old token fenced"

# The second abandon reaches the bound of 2 deliveries: a dead letter.
rpc QueueService/Abandon "{\"queue\":\"jobs\",\"seq_number\":$seq,\"lock_token\":\"$lock\"}" >/dev/null
expect_status 200 "Abandon at the bound"
stats="$(rpc QueueService/Stats '{"queue":"jobs"}')"
[ "$(num dead_lettered "$stats")" = 1 ] || fail "dead letter: $stats"
peek="$(rpc QueueService/Peek '{"queue":"jobs","state":"dead_lettered"}')"
[ "$(str dead_letter_reason "$peek")" = "MaxDeliveryCountExceeded" ] || fail "reason: $peek"
step "dead-lettered at the delivery bound"

moved="$(rpc AdminService/Redrive '{"queue":"jobs"}')"
[ "$(num moved "$moved")" = 1 ] || fail "Redrive: $moved"
got="$(rpc QueueService/Receive '{"queue":"jobs"}')"
lock="$(str lock_token "$got")"
rpc QueueService/Complete "{\"queue\":\"jobs\",\"seq_number\":$seq,\"lock_token\":\"$lock\"}" >/dev/null
expect_status 200 "Complete"
stats="$(rpc QueueService/Stats '{"queue":"jobs"}')"
[ "$(num total "$stats")" = 0 ] || fail "drained: $stats"
step "redriven, received, completed: the queue is empty"

metrics="$(curl -sS -H "Authorization: Bearer $token" "$url/metrics")"
grep -q 'mqlite_requests_total{rpc="QueueService/Complete",code="200"} 1' <<<"$metrics" || fail "/metrics: $metrics"
grep -q 'mqlite_queue_messages{queue="jobs",state="active"} 0' <<<"$metrics" || fail "/metrics gauges: $metrics"
step "/metrics counts the calls"

# A 100,000-message backlog, 1,000 per request, then the RSS again.
rpc AdminService/CreateQueue '{"name":"backlog"}' >/dev/null
batch='{"queue":"backlog","messages":['
for i in $(seq 1 1000); do
    batch+='{"body":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}'
    if [ "$i" -lt 1000 ]; then batch+=','; fi
done
batch+=']}'
printf '%s' "$batch" >"$work/batch.json"
for _ in $(seq 1 100); do
    curl -sS -o /dev/null -w '%{http_code}\n' -X POST "$url/mqlite.v1.QueueService/Send" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        --data-binary "@$work/batch.json" >>"$work/codes"
done
[ "$(sort -u "$work/codes")" = 200 ] || fail "backlog sends: $(sort "$work/codes" | uniq -c)"
stats="$(rpc QueueService/Stats '{"queue":"backlog"}')"
[ "$(num active "$stats")" = 100000 ] || fail "backlog: $stats"
backlog_rss="$(rss_kb)"
step "RSS: idle $((idle_rss / 1024)) MiB ($idle_rss kB), with a 100,000-message backlog $((backlog_rss / 1024)) MiB ($backlog_rss kB)"

# SIGTERM: a graceful stop, exit status 0.
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM: $(cat "$work/err")"
grep -q 'stopped' "$work/out" || fail "no stop line: $(cat "$work/out")"
step "stopped by SIGTERM, exit status 0"
echo "blackbox: ok"
