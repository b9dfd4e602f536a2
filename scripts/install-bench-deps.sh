#!/usr/bin/env bash
# Installs what `make bench` and `make bench-profile` need beyond
# scripts/install-deps.sh, and only what is missing:
#   - redis-benchmark (Debian's redis-tools, which comes with redis-server)
#     and valgrind, for callgrind's instruction counts (both targets), as
#     `scripts/install-deps.sh bench` installs Debian's packages;
#   - matplotlib from PyPI into .deps/bench-py (no root, not system-wide,
#     apart from the project's venv) for the chart.
# The floor module (bench/floor) and redis-cell 0.2.2 (from crates.io) are
# built by bench/bench.py itself, with cargo, under target/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
matplotlib_version=3.9.2
pydeps="$root/.deps/bench-py"

"$root/scripts/install-deps.sh" bench

if ! PYTHONPATH="$pydeps" python3 -c "import matplotlib" >/dev/null 2>&1; then
  echo "librl bench: installing matplotlib $matplotlib_version (PyPI) into .deps/bench-py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore --upgrade \
    --target "$pydeps" "matplotlib==$matplotlib_version"
fi
