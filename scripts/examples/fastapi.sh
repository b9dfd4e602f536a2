#!/usr/bin/env bash
# scripts/serve-example fastapi: examples/python/fastapi_app.py behind uvicorn, with
# librl's fastapi integration applying $LIBRL_POLICIES against $REDIS_URL or
# $REDIS_CLUSTER_NODES, on 127.0.0.1:$PORT (HOST to bind elsewhere).
# Installs the pinned frameworks into the project's virtualenv (.deps/venv)
# when they are missing; librl itself runs from clients/python/src.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.deps/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import redis, fastapi, uvicorn, yaml" 2>/dev/null; then
  echo "serve-example fastapi: installing the pinned packages into .deps/venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-dev.txt"
fi
export PYTHONPATH="$root/clients/python/src:$root/examples/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" "$root/examples/python/fastapi_app.py"
