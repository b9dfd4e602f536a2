#!/usr/bin/env bash
# Installs what `make bench` and `make bench-profile` need beyond
# scripts/install-deps.sh, and only what is missing:
#   - redis-benchmark (Debian's redis-tools, which comes with redis-server);
#   - valgrind, for callgrind's instruction counts (both targets);
#   - matplotlib from PyPI into .deps/bench-py (no root, not system-wide,
#     apart from the project's venv) for the chart.
# The floor module (bench/floor) and redis-cell 0.2.2 (from crates.io) are
# built by bench/bench.py itself, with cargo, under target/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
matplotlib_version=3.9.2
pydeps="$root/.deps/bench-py"

missing=()
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v callgrind_annotate >/dev/null 2>&1 || missing+=(valgrind)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "librl bench: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have stale or empty package lists: update and retry.
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

if ! PYTHONPATH="$pydeps" python3 -c "import matplotlib" >/dev/null 2>&1; then
  echo "librl bench: installing matplotlib $matplotlib_version (PyPI) into .deps/bench-py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore --upgrade \
    --target "$pydeps" "matplotlib==$matplotlib_version"
fi
