#!/usr/bin/env bash
# scripts/serve-example fastify: the same Node.js example app as express.sh,
# behind librl's Fastify plugin.
set -euo pipefail
exec bash "$(dirname "$0")/express.sh" fastify
