#!/usr/bin/env bash
# The Python client's checks, as `make test` runs them: ruff (lint and
# format), mypy --strict and pytest, over the package (its HTTP integrations
# included), its tests, examples/python and the client bench script. Uses
# the project's virtualenv (.deps/venv, made by scripts/install-deps.sh
# test). The tests start their own redis-server 7.0 and valkey-server 9.1
# processes (standalone and 3-primary clusters) with
# target/release/librl.so, or $LIBRL_MODULE, and serve the FastAPI, Django
# and Flask apps of examples/python (uvicorn, waitress) for every
# conformance case.
# Extra arguments go to pytest (e.g. check.sh -k cluster).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/.deps/venv/bin"
if [ ! -x "$bin/pytest" ]; then
  echo "clients/python: $bin is missing; run scripts/install-deps.sh test" >&2
  exit 1
fi
cd "$here"
code=(src tests "$root/examples/python" "$root/bench/clients/python_bench.py")
status=0
"$bin/ruff" check --config pyproject.toml "${code[@]}" || status=1
"$bin/ruff" format --check --config pyproject.toml "${code[@]}" || status=1
"$bin/mypy" --config-file pyproject.toml "${code[@]}" || status=1
"$bin/pytest" "$@" || status=1
exit $status
