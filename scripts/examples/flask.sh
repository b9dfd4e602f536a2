#!/usr/bin/env bash
# scripts/serve-example flask: examples/python/flask_app.py behind waitress, with
# librl's flask integration applying $LIBRL_POLICIES against $REDIS_URL or
# $REDIS_CLUSTER_NODES, on 127.0.0.1:$PORT (HOST to bind elsewhere).
# Installs the pinned frameworks into the project's virtualenv (.deps/venv)
# when they are missing; librl itself runs from clients/python/src.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.deps/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import redis, flask, waitress, yaml" 2>/dev/null; then
  echo "serve-example flask: installing the pinned packages into .deps/venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-dev.txt"
fi
export PYTHONPATH="$root/clients/python/src:$root/examples/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" "$root/examples/python/flask_app.py"
