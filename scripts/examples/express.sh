#!/usr/bin/env bash
# scripts/serve-example express (and, through fastify.sh, fastify): the
# Node.js example app (clients/node/examples/) behind librl's Express
# middleware or Fastify plugin. Installs clients/node's pinned packages
# when missing or older than the lockfile, compiles the example, then
# serves on PORT with the configuration file LIBRL_POLICIES against
# REDIS_URL or REDIS_CLUSTER_NODES (docs/http.md, Conformance and examples).
set -euo pipefail
framework=${1:-express}
node_dir=$(cd "$(dirname "$0")/../../clients/node" && pwd)
command -v npm >/dev/null 2>&1 || { echo "serve-example: npm (Node.js 18+) is required" >&2; exit 1; }
if [ ! -d "$node_dir/node_modules" ] || [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
# Compiled (tests and examples, into build/) only when a source is newer than the example.
if [ ! -f "$node_dir/build/examples/serve.js" ] || [ -n "$(find "$node_dir/src" "$node_dir/examples" "$node_dir/test" -newer "$node_dir/build/examples/serve.js" -print -quit)" ]; then
  (cd "$node_dir" && node_modules/.bin/tsc -p tsconfig.json --noCheck)
fi
exec node "$node_dir/build/examples/serve.js" "$framework"
