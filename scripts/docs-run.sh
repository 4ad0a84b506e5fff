#!/usr/bin/env bash
# Runs the shell blocks of docs/production.md marked `<!-- ci: run -->`, in order, as a
# reader would type them, against the mqlite binary given: with /var/lib/mqlite,
# /etc/mqlite and /backups moved into a scratch folder, 127.0.0.1:6754 replaced by the
# address the broker got, and `systemctl start|stop mqlite` standing for starting or
# stopping `mqlite serve` with deploy/mqlite.service's Environment= and ExecStart=.
#
#   bash scripts/docs-run.sh target/release/mqlite
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root="$(cd "$(dirname "$0")/.." && pwd)"
page="$root/docs/production.md"
unit="$root/deploy/mqlite.service"
work="$(mktemp -d)"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/bin" "$work/var/lib/mqlite" "$work/etc/mqlite" "$work/backups"
ln -s "$bin" "$work/bin/mqlite"
export PATH="$work/bin:$PATH"
cd "$work"

moved() {
    sed -e "s#/var/lib/mqlite#$work/var/lib/mqlite#g" -e "s#/etc/mqlite#$work/etc/mqlite#g" \
        -e "s#/backups#$work/backups#g" -e "s#127.0.0.1:6754#\$addr#g" \
        -e "s#/usr/local/bin/mqlite#mqlite#g"
}
token="docs-run-token-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
echo "$token" >"$work/etc/mqlite/tokens"
export MQLITE_TOKEN="$token"
addr=

# The unit's settings, paths moved; the address is any free port (the log names it).
mapfile -t unit_env < <(grep '^Environment=' "$unit" | sed 's/^Environment=//' | moved)
read -r -a exec_start < <(grep '^ExecStart=' "$unit" | sed 's/^ExecStart=//' | moved)
systemctl() {
    [ "${2:-}" = mqlite ] || { echo "systemctl stand-in: $*: only start|stop mqlite"; return 1; }
    case "$1" in
    start)
        env "${unit_env[@]}" MQLITE_ADDR=127.0.0.1:0 "${exec_start[@]}" >"$work/serve.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            addr=$(grep -o 'listening on http://[0-9.:]*' "$work/serve.log" | sed 's#.*http://##' || true)
            [ -n "$addr" ] && break
            kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; return 1; }
            sleep 0.1
        done
        [ -n "$addr" ] || { cat "$work/serve.log"; echo "the broker did not start"; return 1; }
        export MQLITE_ENDPOINT="http://$addr"
        curl -fsS "http://$addr/healthz" >/dev/null
        ;;
    stop)
        kill -TERM "$pid"
        local code=0
        wait "$pid" || code=$?
        pid=
        [ "$code" = 0 ] || { cat "$work/serve.log"; echo "the broker exited $code on SIGTERM"; return 1; }
        ;;
    *) echo "systemctl stand-in: $1?"; return 1 ;;
    esac
}

# Something to back up, restore and migrate.
systemctl start mqlite
mqlite create-queue jobs >/dev/null
for i in 1 2 3; do mqlite send jobs "job $i" >/dev/null; done

blocks=0
while IFS= read -r -d $'\x1e' block; do
    blocks=$((blocks + 1))
    echo "== docs/production.md, block $blocks"
    printf '%s\n' "$block"
    eval "$(printf '%s\n' "$block" | moved)"
done < <(awk '
    /<!-- ci: run -->/ { armed = 1; next }
    armed && /^```sh/ { inside = 1; armed = 0; next }
    inside && /^```/ { inside = 0; printf "\x1e"; next }
    inside { print }
' "$page")
[ "$blocks" -gt 0 ] || { echo "no runnable block in $page"; exit 1; }

# What the blocks should have left: the three jobs, through a backup, a restore and a
# migration, on the broker the unit's settings started.
stats=$(mqlite --output json stats jobs)
echo "$stats" | grep -Eq '"active": ?3[,}]' || { echo "expected 3 active jobs: $stats"; exit 1; }
systemctl stop mqlite
echo "== docs-run: $blocks blocks of docs/production.md ran"
