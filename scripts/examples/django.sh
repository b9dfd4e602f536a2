#!/usr/bin/env bash
# scripts/serve-example django: examples/python/django_app.py behind waitress, with
# librl's django integration applying $LIBRL_POLICIES against $REDIS_URL or
# $REDIS_CLUSTER_NODES, on 127.0.0.1:$PORT (HOST to bind elsewhere).
# Installs the pinned frameworks into the project's virtualenv (.deps/venv)
# when they are missing; librl itself runs from clients/python/src.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.deps/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import redis, django, waitress, yaml" 2>/dev/null; then
  echo "serve-example django: installing the pinned packages into .deps/venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-dev.txt"
fi
export PYTHONPATH="$root/clients/python/src:$root/examples/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" "$root/examples/python/django_app.py"
