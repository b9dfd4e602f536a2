#!/usr/bin/env bash
# The conformance suite's own checks, as `make test` runs them: ruff (lint
# and format) and mypy --strict over conformance/tests, then pytest: the
# schema test (every case's configuration against schema/config.schema.json,
# and scripts/gen-schema.py's refusals), the docs' case names, and, for the
# frameworks named in LIBRL_EXAMPLES (comma-separated, or `all`), the
# black-box runner's self-test (against the first) and every case against
# `scripts/serve-example NAME`, one pytest per framework, side by side (each
# with its own Redis), each one's output and time printed when all are done.
# Uses the project's virtualenv (.deps/venv, made by scripts/install-deps.sh
# test). Extra arguments go to every pytest (e.g. -k routes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin="$root/.deps/venv/bin"
if [ ! -x "$bin/pytest" ]; then
  echo "conformance: $bin is missing; run scripts/install-deps.sh test" >&2
  exit 1
fi
cd "$here"
examples=${LIBRL_EXAMPLES:-}
if [ "$examples" = all ]; then
  examples=$(cd "$root/scripts/examples" && ls -- *.sh | sed 's/\.sh$//' | paste -sd, -)
fi
export LIBRL_EXAMPLES=$examples
status=0
"$bin/ruff" check --config pyproject.toml tests || status=1
"$bin/ruff" format --check --config pyproject.toml tests || status=1
"$bin/mypy" --config-file pyproject.toml || status=1
"$bin/pytest" tests/test_schema.py tests/test_docs.py tests/test_selftest.py "$@" || status=1
[ -n "$examples" ] || exit $status

logs=$(mktemp -d "${TMPDIR:-/tmp}/librl-conformance.XXXXXX")
trap 'rm -rf "$logs"' EXIT
pids=()
names=()
for name in ${examples//,/ }; do
  (
    start=$(date +%s)
    rc=0
    LIBRL_EXAMPLES=$name "$bin/pytest" tests/test_blackbox.py "$@" >"$logs/$name.log" 2>&1 || rc=$?
    echo "== black-box $name: $(($(date +%s) - start)) s" >>"$logs/$name.log"
    exit $rc
  ) &
  pids+=($!)
  names+=("$name")
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    status=1
  fi
  echo "== black-box runner: ${names[$i]}"
  cat "$logs/${names[$i]}.log"
done
exit $status
