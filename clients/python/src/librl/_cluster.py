"""Redis Cluster routing without COMMAND GETKEYS.

The limiters and RL.ALL are flagged ``movablekeys`` (their keys are found
through the module's getkeys API), so redis-py's RedisCluster would ask the
server ``COMMAND GETKEYS`` before every call to learn the key. The Limiter
knows where its key is: it computes the slot itself, looks up the primary
that owns it in the client's own slot map, and sends the call there with
``execute_command(..., target_nodes=node)``. redis-py then follows ASK
redirections itself, and on MOVED patches its slot map and resends to the
new owner; the next call routes with the patched map.

To resend after MOVED, redis-py recomputes the slot from the command line
with its commands table, which for movable-key commands means COMMAND
GETKEYS. ``hint_key_positions`` records in that table that the single
limiters keep their key at position 1, as ordinary commands are described,
so that path stays local for them too. The hint is an optimisation: if a
redis-py version keeps its table differently, it is skipped and MOVED costs
one GETKEYS, nothing else changes. RL.ALL is not hinted (its first key is
the word after the first clause name, and a raw RL.ALL too short to have
one would then fail inside redis-py): a MOVED on RL.ALL costs one GETKEYS.

Because ``target_nodes`` turns off redis-py's own retries, the Limiter
retries what RedisCluster would (connection errors, timeouts, CLUSTERDOWN,
an uncovered slot) as many times as the client's retry setting says,
re-reading the slot map each time.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
)

from ._types import KeyT

#: Where each single limiter has its key.
KEY_POSITIONS = {"rl.fixed": 1, "rl.sliding": 1, "rl.token": 1}

RETRY_ERRORS: Tuple[type[Exception], ...] = (
    ConnectionError,
    TimeoutError,
    ClusterDownError,
    SlotNotCoveredError,
)

#: What a cluster send retries: RedisCluster's own retries, and a MOVED or
#: ASK read off WAIT's raw connection.
RETRY_OR_REDIRECT: Tuple[type[Exception], ...] = (*RETRY_ERRORS, ResponseError)


def reload_or_raise(error: Exception, attempt: int, retries: int) -> bool:
    """After a cluster send's ``attempt``-th try (from 1) failed with
    ``error``, one of RETRY_OR_REDIRECT: raises it when it is final (a reply
    other than MOVED or ASK, or no retry left); else tells whether the slot
    map is stale and must be reloaded before the next try. redis-py reloads
    it itself on a connection error or CLUSTERDOWN; a slot missing from the
    map, or a redirection read off WAIT's raw connection, means it is
    stale."""
    redirected = str(error).startswith(("MOVED ", "ASK "))
    if (isinstance(error, ResponseError) and not redirected) or attempt > retries:
        raise error
    return isinstance(error, (SlotNotCoveredError, ResponseError))


def retries(client: Any) -> int:
    """How many times RedisCluster itself would retry a command."""
    attempts = getattr(client, "cluster_error_retry_attempts", None)  # redis-py 5, 6
    if isinstance(attempts, int):
        return max(0, attempts)
    retry = getattr(client, "retry", None)  # redis-py 7, 8
    get = getattr(retry, "get_retries", None)
    if callable(get):
        value = get()
        if isinstance(value, int):
            return max(0, value)
    return 3


def hint_key_positions(parser: Any) -> Any:
    """Describe the librl commands in redis-py's commands table as commands
    with their key at a fixed position. Returns the table it changed (to
    notice when redis-py rebuilds it), or None."""
    commands = getattr(parser, "commands", None)
    if not isinstance(commands, dict):
        return None
    for name, position in KEY_POSITIONS.items():
        entry = commands.get(name)
        if not isinstance(entry, dict):
            continue
        flags = entry.get("flags")
        if not isinstance(flags, (list, set, tuple)) or "movablekeys" not in flags:
            continue
        hinted: Dict[str, Any] = dict(entry)
        hinted["flags"] = type(flags)(f for f in flags if f != "movablekeys")
        hinted["first_key_pos"] = position
        hinted["last_key_pos"] = position
        hinted["step_count"] = 1
        commands[name] = hinted
    return commands


def one_slot(client: Any, command: str, keys: Iterable[KeyT]) -> None:
    """Raise RedisClusterException, with the hash-tag fix, unless every key
    hashes to one slot."""
    first: Any = None
    first_slot = -1
    for key in keys:
        slot = client.keyslot(key)
        if first is None:
            first, first_slot = key, slot
        elif slot != first_slot:
            raise RedisClusterException(
                f"{command}: every key and override key must hash to one cluster slot, but "
                f"{first!r} is in slot {first_slot} and {key!r} in slot {slot}. Give them a "
                "common hash tag, the part of the key in braces that alone decides the slot: "
                "use {user42}:min and {user42}:day instead of user42:min and user42:day."
            )
