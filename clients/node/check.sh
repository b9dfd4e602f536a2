#!/usr/bin/env bash
# The Node client's checks: strict type check, build, then the tests against
# real servers (node's built-in test runner; its summary ends the output).
# Env: LIBRL_MODULE (default target/release/librl.so of this repo);
# REDIS_SERVER (default redis-server on PATH), REDIS8_SERVER, VALKEY8_SERVER,
# VALKEY_SERVER (defaults: where scripts/servers.env says
# scripts/install-deps.sh puts them); LIBRL_SERVERS (e.g. redis7,valkey9: only those standalone servers).
set -euo pipefail
cd "$(dirname "$0")"

# Installs the pinned packages when missing or older than the lockfile.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

TMP_BASE="$(mktemp -d "${TMPDIR:-/tmp}/librl-node-check.XXXXXX")"
export LIBRL_NODE_TEST_TMP="$TMP_BASE"
cleanup() {
  # Servers are killed by the tests; this catches any a crashed run left.
  local pidfile
  while IFS= read -r -d '' pidfile; do
    kill -9 "$(cat "$pidfile")" 2>/dev/null || true
  done < <(find "$TMP_BASE" -name server.pid -print0 2>/dev/null)
  rm -rf "$TMP_BASE"
}
trap cleanup EXIT

echo "== tsc --noEmit (strict: sources and tests)"
node_modules/.bin/tsc --noEmit -p tsconfig.json
# The two emits below compile what the line above has just checked with the
# same options, so they skip checking (--noCheck: same output, less time).
echo "== build (dist/)"
node_modules/.bin/tsc -p tsconfig.build.json --noCheck
echo "== tests"
rm -rf build
node_modules/.bin/tsc -p tsconfig.json --noCheck
# spec for people; TAP to a file, whose closing summary ends the output.
set +e
node --test --test-concurrency=2 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$TMP_BASE/tap.txt" \
  build/test/*.test.js 2>&1
rc=$?
set -e
echo "== summary (node --test)"
sed -n '/^# tests /,$p' "$TMP_BASE/tap.txt"
exit $rc
