#!/usr/bin/env bash
# The README's three-files output is what `cargo run -p mqlite --example three_files`
# prints today (the example reads a manual clock, so its output is stable).
# Usage: scripts/readme-example.sh [--bless]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
actual="$(cargo run -q -p mqlite --example three_files)"
expected="$(awk '/^### Across three databases/{on=1} on && /^```text$/{grab=1; next} grab && /^```$/{exit} grab' README.md)"
if [[ "${1:-}" == "--bless" ]]; then
  python3 - "$actual" <<'PY'
import sys, re
out = sys.argv[1]
s = open("README.md").read()
head, rest = s.split("### Across three databases", 1)
pre, block = rest.split("```text\n", 1)
_, post = block.split("\n```", 1)
open("README.md", "w").write(head + "### Across three databases" + pre + "```text\n" + out + "\n```" + post)
PY
  exit 0
fi
if [[ "$actual" != "$expected" ]]; then
  diff <(echo "$expected") <(echo "$actual") || true
  echo "README.md's three_files output is stale: run scripts/readme-example.sh --bless" >&2
  exit 1
fi
echo "README three_files output matches"
