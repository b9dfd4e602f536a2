#!/usr/bin/env bash
# The Java package's and HTTP integrations' checks, as `make lint` and `make test` run them
# (make test runs only `test`: its compile is lint's, with the same -Werror):
#   check.sh lint        compiles the package, the integrations (integrations/) and their tests
#                        with javac -Xlint:all -Werror
#   check.sh test [...]  the same, then every JUnit suite (extra arguments go to mvn, e.g.
#                        -Dtest=ClusterTest); the conformance cases run against
#                        scripts/serve-example java in make test's black-box step, beside the
#                        other languages' examples (conformance/README.md, The black-box runner)
#   check.sh build       the jars, no tests, and the example app's classpath
#                        (.deps/java-example/classpath, what scripts/serve-example java runs)
# One Maven build does it all: integrations/pom.xml's reactor holds the package too.
# The tests start their own servers (the four of docs/commands.md with
# target/release/librl.so or $LIBRL_MODULE; the Makefile exports the
# binaries' paths), standalone, with a replica, and as 3-primary clusters.
# Maven's downloads live in .deps/m2, fetched by scripts/install-deps.sh test;
# while the poms are the ones they were fetched for, Maven runs offline.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"
command -v mvn >/dev/null 2>&1 || { echo "clients/java: no Maven (mvn) on PATH: run scripts/install-deps.sh test" >&2; exit 1; }
m2="$root/.deps/m2"
offline=()
if cmp -s pom.xml "$m2/.librl-pom" && cat integrations/pom.xml integrations/*/pom.xml | cmp -s - "$m2/.librl-integrations-poms"; then
  offline=(-o)
fi
mvn=(mvn -B --no-transfer-progress -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$m2"
  -f integrations/pom.xml -Dsurefire.failIfNoSpecifiedTests=false)

# The example's classpath (its own jar first: a class-data archive takes jars only), where
# scripts/examples/java.sh finds it, and an archive per web stack (.deps/java-example/
# app-servlet.jsa, app-reactive.jsa): the classes the app loads to start and to serve its first
# requests, from a run that serves a few and is stopped. With it a start takes about half the CPU
# time, which the black-box runner pays once per case, and a case's first request is not the one
# that loads the request path's classes. The run's Redis is a redis-server with the module when
# both are here (so the archive holds the path of a decision Redis answered: Lettuce's replies,
# the headers, a concurrency lease and its release), else an address where nothing listens (the
# fail-open path only).
publish() {
  local out="$root/.deps/java-example" web redis="" redis_pid=""
  mkdir -p "$out"
  { printf '%s:' "$here"/integrations/example/target/librl-example-*.jar; cat integrations/example/target/classpath; } >"$out/classpath.new"
  rm -f "$out"/*.jsa
  mv "$out/classpath.new" "$out/classpath"
  local module=${LIBRL_MODULE:-$root/target/release/librl.so}
  if command -v redis-server >/dev/null 2>&1 && [ -f "$module" ]; then
    local rport
    rport=$(free_port)
    redis-server --bind 127.0.0.1 --port "$rport" --save "" --appendonly no --loadmodule "$module" \
      >/dev/null 2>&1 &
    redis_pid=$!
    redis=redis://127.0.0.1:$rport
  fi
  for web in servlet reactive; do
    train "$out" "$web" "${redis:-redis://127.0.0.1:1}"
  done
  if [ -n "$redis_pid" ]; then
    kill -TERM "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

train() {
  local out=$1 web=$2 redis=$3 port pid i
  port=$(free_port)
  LIBRL_WEB=$web LIBRL_POLICIES="$here/integrations/example/training.yaml" PORT=$port REDIS_URL=$redis \
    java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xlog:cds=off -Xlog:cds+dynamic=off \
    -XX:ArchiveClassesAtExit="$out/app-$web.jsa" -cp "$(cat "$out/classpath")" \
    io.librl.example.ExampleApplication >/dev/null 2>&1 &
  pid=$!
  for i in $(seq 1 600); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
      # Admitted, denied (limit 2 per ip), a user's, a counted body, a failing handler.
      curl -s -o /dev/null -H 'X-Conformance-User: alice' "http://127.0.0.1:$port/limited"
      curl -s -o /dev/null "http://127.0.0.1:$port/limited"
      curl -s -o /dev/null -X POST -d x "http://127.0.0.1:$port/upload"
      curl -s -o /dev/null -H 'X-Conformance-Fail: 1' "http://127.0.0.1:$port/upload"
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -f "$out/app-$web.jsa" ] || echo "clients/java: no class-data archive for the $web example (it starts without)" >&2
}

mode=${1:-test}
shift || true
case "$mode" in
  lint)
    "${mvn[@]}" -q test-compile
    ;;
  test)
    "${mvn[@]}" "$@" install
    ;;
  build)
    "${mvn[@]}" -q -DskipTests install
    publish
    ;;
  *)
    echo "usage: clients/java/check.sh lint|test|build [mvn arguments]" >&2
    exit 2
    ;;
esac
