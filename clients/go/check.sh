#!/usr/bin/env bash
# The Go client's and middleware's checks, as `make lint` and `make test`
# run them:
#   check.sh lint        gofmt -l (must list nothing) and go vet
#   check.sh test [...]  go test -race ./... (extra arguments go to go test)
# The tests start their own servers (the four of docs/commands.md with
# target/release/librl.so or $LIBRL_MODULE; the Makefile exports the
# binaries' paths), standalone, with a replica, and as 3-primary clusters.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
command -v go >/dev/null 2>&1 || [ ! -x /usr/local/go/bin/go ] || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "clients/go: no Go toolchain (go) on PATH: run scripts/install-deps.sh test" >&2; exit 1; }
mode=${1:-test}
shift || true
case "$mode" in
  lint)
    unformatted=$(gofmt -l .)
    if [ -n "$unformatted" ]; then
      echo "clients/go: gofmt would change these files (run gofmt -w .):" >&2
      echo "$unformatted" >&2
      exit 1
    fi
    # -race: the same build as the tests, so a cold build cache compiles
    # go-redis once for both.
    go vet -race ./...
    ;;
  test)
    go test -race -count=1 "$@" ./...
    ;;
  *)
    echo "usage: clients/go/check.sh lint|test [go test arguments]" >&2
    exit 2
    ;;
esac
