#!/usr/bin/env bash
# scripts/serve-example fastapi: examples/python/fastapi_app.py behind uvicorn, with
# librl's fastapi integration applying $LIBRL_POLICIES against $REDIS_URL or
# $REDIS_CLUSTER_NODES, on 127.0.0.1:$PORT (HOST to bind elsewhere).
# examples/python/serve.sh installs what is missing and serves it.
exec bash "$(dirname "$0")/../../examples/python/serve.sh" fastapi
