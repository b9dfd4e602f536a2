#!/usr/bin/env bash
# scripts/serve-example go: clients/go/cmd/librl-example, the net/http app
# behind librl's middleware (clients/go/nethttp), applying $LIBRL_POLICIES
# against $REDIS_URL or $REDIS_CLUSTER_NODES, on 127.0.0.1:$PORT (HOST to
# bind elsewhere). Downloads the pinned modules (go.sum) and builds the app
# into .deps/go/ when it is missing or older than its sources.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src="$root/clients/go"
bin="$root/.deps/go/librl-example"
command -v go >/dev/null 2>&1 || [ ! -x /usr/local/go/bin/go ] || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "serve-example go: Go (1.21 or later) is required: https://go.dev/dl" >&2; exit 1; }
if [ ! -x "$bin" ] || [ -n "$(find "$src" -name '*.go' -newer "$bin" -print -quit)" ] || [ "$src/go.sum" -nt "$bin" ]; then
  echo "serve-example go: building clients/go/cmd/librl-example" >&2
  mkdir -p "$(dirname "$bin")"
  (cd "$src" && go build -o "$bin" ./cmd/librl-example)
fi
exec "$bin"
