#!/usr/bin/env bash
# Regenerates the report cards in docs/backends.md ("Grades from the kit"): every registered store
# graded by `mqlite-tck --output markdown`, spliced between the section's markers. The
# libSQL card needs sqld (scripts/install-sqld.sh).
#
#   scripts/report-cards.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Release: the cards carry the short benchmark's ratios to the SQLite store.
cargo build --quiet --release -p mqlite-tck-cli
tck="${CARGO_TARGET_DIR:-target}/release/mqlite-tck"
cards="$(mktemp)"
trap 'rm -f "$cards"' EXIT
for store in sqlite redb libsql; do
    echo "grading $store" >&2
    # A failing card is still written: the doc shows what failed.
    "$tck" --store "$store" --output markdown --quiet >>"$cards" || true
done
begin='<!-- report cards: begin -->'
end='<!-- report cards: end -->'
awk -v begin="$begin" -v end="$end" -v cards="$cards" '
    $0 == begin { print; while ((getline line < cards) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
' docs/backends.md >docs/backends.md.new
mv docs/backends.md.new docs/backends.md
echo "docs/backends.md: report cards rewritten" >&2
