#!/usr/bin/env bash
# Installs what `make bench` and `make bench-profile` need beyond
# scripts/install-deps.sh, and only what is missing:
#   - redis-benchmark (Debian's redis-tools, which comes with redis-server)
#     and valgrind, for callgrind's instruction counts (both targets), as
#     `scripts/install-deps.sh bench` installs Debian's packages;
#   - matplotlib from PyPI into .deps/bench-py (no root, not system-wide,
#     apart from the project's venv) for the chart.
# The floor module (bench/floor) and redis-cell 0.2.2 (from crates.io) are
# built by bench/bench.py itself, with cargo, under target/.
#
# `install-bench-deps.sh http`: what `make bench-http` needs instead
# (bench/README.md, "make bench-http"): Debian's wrk (`install-deps.sh
# bench-http`), matplotlib as above, and each framework's bench app with
# its peers at the versions pinned under bench/http/: the Python peers of
# bench/http/python/requirements.txt (--no-deps, into .deps/bench-http/py,
# beside the project's venv, which has the frameworks), the Node.js apps'
# packages (npm ci, bench/http/node/package-lock.json), the Go app
# (bench/http/go/go.sum, built into .deps/bench-http/go-app) and the axum
# app (bench/http/axum/Cargo.lock, built into target/release/), the Spring
# app (bench/http/java, with Bucket4j, built by Maven into
# .deps/bench-http/java from .deps/m2); and py-spy
# 0.4.3 (PyPI) for make bench-http-profile's Python rows.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
matplotlib_version=3.9.2
pydeps="$root/.deps/bench-py"

if [ "${1:-}" = http ]; then
  "$root/scripts/install-deps.sh" bench-http
else
  "$root/scripts/install-deps.sh" bench
fi

if ! PYTHONPATH="$pydeps" python3 -c "import matplotlib" >/dev/null 2>&1; then
  echo "librl bench: installing matplotlib $matplotlib_version (PyPI) into .deps/bench-py"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore --upgrade \
    --target "$pydeps" "matplotlib==$matplotlib_version"
fi
[ "${1:-}" = http ] || exit 0

http="$root/bench/http"
out="$root/.deps/bench-http"
mkdir -p "$out"
# Each step runs again when its pin file is newer than what it left.
if [ ! -f "$out/py/.installed" ] || [ "$http/python/requirements.txt" -nt "$out/py/.installed" ]; then
  echo "librl bench-http: installing the Python peers (bench/http/python/requirements.txt) into .deps/bench-http/py"
  rm -rf "$out/py"
  "$root/.deps/venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$out/py" \
    -r "$http/python/requirements.txt"
  touch "$out/py/.installed"
fi
if [ ! -d "$http/node/node_modules" ] || [ "$http/node/package-lock.json" -nt "$http/node/node_modules/.package-lock.json" ]; then
  echo "librl bench-http: installing the Node.js apps' packages (npm ci in bench/http/node)"
  (cd "$http/node" && npm ci --no-audit --no-fund --loglevel=error)
fi
# The Node.js apps load librl from clients/node/dist, which its prepare script builds;
# built again when a source is newer than it (a tree that has moved on since).
if [ ! -f "$root/clients/node/dist/express.js" ] || [ ! -d "$root/clients/node/node_modules" ]; then
  (cd "$root/clients/node" && npm ci --no-audit --no-fund --loglevel=error)
elif [ -n "$(find "$root/clients/node/src" -newer "$root/clients/node/dist/express.js" -print -quit)" ]; then
  (cd "$root/clients/node" && npm run --silent build)
fi
command -v go >/dev/null 2>&1 || [ ! -x /usr/local/go/bin/go ] || PATH="$PATH:/usr/local/go/bin"
if [ ! -x "$out/go-app" ] || [ -n "$(find "$http/go" "$root/clients/go" -name '*.go' -newer "$out/go-app" -print -quit)" ] ||
   [ "$http/go/go.sum" -nt "$out/go-app" ]; then
  echo "librl bench-http: building the Go app (bench/http/go)"
  (cd "$http/go" && go build -o "$out/go-app" .)
fi
# The Spring app (bench/http/java), one Maven reactor with the librl modules it runs from source
# (the client package, librl-http, the Spring Boot starter), from .deps/m2 (Maven fetches what is
# missing there: Bucket4j, the first time); into .deps/bench-http/java, with its classpath.
java_sources=("$http/java" "$root/clients/java/pom.xml" "$root/clients/java/src/main" "$root/clients/java/integrations/pom.xml"
  "$root/clients/java/integrations/http/pom.xml" "$root/clients/java/integrations/http/src/main"
  "$root/clients/java/integrations/spring-boot/pom.xml" "$root/clients/java/integrations/spring-boot/src/main")
if [ ! -f "$out/java/.built" ] || [ -n "$(find "${java_sources[@]}" -type f -newer "$out/java/.built" -print -quit)" ]; then
  echo "librl bench-http: building the Spring app (bench/http/java)"
  mvn -B -q --no-transfer-progress -Dstyle.color=never -Dmaven.repo.local="$root/.deps/m2" \
    -f "$http/java/pom.xml" -DskipTests package
  touch "$out/java/.built"
fi
# make bench-http-profile's Python sampler (a binary inside its PyPI wheel).
pyspy_version=0.4.3
if [ ! -x "$out/py-spy/bin/py-spy" ]; then
  echo "librl bench-http: installing py-spy $pyspy_version (PyPI) into .deps/bench-http/py-spy"
  "$root/.deps/venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$out/py-spy" \
    "py-spy==$pyspy_version"
fi
# cargo rebuilds only what changed (librl-tower included).
cargo build --release --locked --quiet --manifest-path "$http/axum/Cargo.toml" --target-dir "$root/target"
