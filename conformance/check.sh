#!/usr/bin/env bash
# The conformance suite's own checks, as `make test` runs them: ruff (lint
# and format) and mypy --strict over conformance/tests, then pytest: the
# schema test (every case's configuration against schema/config.schema.json,
# and scripts/gen-schema.py's refusals). Uses the project's virtualenv
# (.deps/venv, made by scripts/install-deps.sh test). Extra arguments go to
# pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin="$root/.deps/venv/bin"
if [ ! -x "$bin/pytest" ]; then
  echo "conformance: $bin is missing; run scripts/install-deps.sh test" >&2
  exit 1
fi
cd "$here"
status=0
"$bin/ruff" check --config pyproject.toml tests || status=1
"$bin/ruff" format --check --config pyproject.toml tests || status=1
"$bin/mypy" --config-file pyproject.toml || status=1
"$bin/pytest" "$@" || status=1
exit $status
