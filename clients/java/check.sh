#!/usr/bin/env bash
# The Java package's checks, as `make lint` and `make test` run them:
#   check.sh lint        compiles the package and its tests with javac -Xlint:all -Werror
#   check.sh test [...]  the same, then every JUnit suite (extra arguments go to mvn,
#                        e.g. -Dtest=ClusterTest)
# The tests start their own servers (the four of docs/commands.md with
# target/release/librl.so or $LIBRL_MODULE; the Makefile exports the
# binaries' paths), standalone, with a replica, and as 3-primary clusters.
# Maven's downloads live in .deps/m2, fetched by scripts/install-deps.sh test;
# while the pom is the one they were fetched for, Maven runs offline.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"
command -v mvn >/dev/null 2>&1 || { echo "clients/java: no Maven (mvn) on PATH: run scripts/install-deps.sh test" >&2; exit 1; }
m2="$root/.deps/m2"
offline=()
if cmp -s pom.xml "$m2/.librl-pom"; then offline=(-o); fi
mvn=(mvn -B --no-transfer-progress -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$m2")
mode=${1:-test}
shift || true
case "$mode" in
  lint)
    "${mvn[@]}" -q test-compile
    ;;
  test)
    "${mvn[@]}" "$@" verify
    ;;
  *)
    echo "usage: clients/java/check.sh lint|test [mvn arguments]" >&2
    exit 2
    ;;
esac
