#!/usr/bin/env bash
# What scripts/examples/{fastapi,django,flask}.sh run: serve.py NAME with
# the project's virtualenv (.deps/venv), after installing the pinned
# packages into it when one NAME needs is missing; librl itself runs from
# clients/python/src.
#   examples/python/serve.sh NAME    (NAME: fastapi, django or flask)
set -euo pipefail
name=${1:?usage: examples/python/serve.sh NAME}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$root/.deps/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
export PYTHONPATH="$root/clients/python/src:$here${PYTHONPATH:+:$PYTHONPATH}"
# make test installs them first (make deps) and says so with
# LIBRL_EXAMPLE_PREBUILT=1: the check would start Python twice per case.
if [ "${LIBRL_EXAMPLE_PREBUILT:-}" != 1 ] && ! "$venv/bin/python" "$here/serve.py" --check "$name" 2>/dev/null; then
  echo "serve-example $name: installing the pinned packages into .deps/venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-dev.txt"
fi
exec "$venv/bin/python" "$here/serve.py" "$name"
