"""Redis Cluster routing without COMMAND GETKEYS, and the retries of a
cluster call.

The limiters and RL.ALL are flagged ``movablekeys`` (their keys are found
through the module's getkeys API), so redis-py's RedisCluster would ask the
server ``COMMAND GETKEYS`` before every call to learn the key. The Limiter
knows where its key is: it computes the slot itself, looks up the primary
that owns it in the client's own slot map, and sends the call there on a
connection of that node's pool. It follows redirections itself: ASK with
ASKING on the same connection, MOVED by recording the new owner in the
client's slot map (patch_slot_map, as redis-py does) and resending there;
the next call routes with the patched map. (redis-py's own redirect loop
is not used: on TRYAGAIN after an ASK it resends to the target without
ASKING and meets MOVED, it reloads the whole map every few MOVEDs, and
redis.asyncio sends ASKING and the call on two different connections.)

``hint_key_positions`` records in redis-py's commands table that the single
limiters keep their key at position 1, as ordinary commands are described,
so that the client's own ``execute_command("RL.FIXED", ...)`` routes
without COMMAND GETKEYS too. The hint is an optimisation: if a redis-py
version keeps its table differently, it is skipped and nothing else
changes. RL.ALL is not hinted (its first key is the word after the first
clause name, and a raw RL.ALL too short to have one would then fail inside
redis-py).

The Limiter retries what RedisCluster would (connection errors, timeouts,
CLUSTERDOWN, an uncovered slot) as many times as the client's retry
setting says, re-reading the slot map each time.

While a slot migrates, a call whose keys are partly on each node (an
override key never set, an RL.ALL whose per-second key expired while its
per-hour key lives on) gets TRYAGAIN from both nodes until the whole slot
has moved. A call that can be split into calls of one key each is split
on its first TRYAGAIN (Send.split: the command does it, _commands._write);
any other is retried with a growing backoff (5 ms to 100 ms) until it runs
or its retry window (``try_again_wait``, 5 s) closes. TRYAGAIN, ASK and
MOVED all mean that the server ran nothing, so a retry never counts a call
twice.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Dict, Iterable, Tuple

from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MovedError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
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

#: What a cluster send may retry: RedisCluster's own retries, a slot in
#: motion (TRYAGAIN, and redis-py's ClusterError once a redirect loop of
#: its own ran out), and a MOVED or ASK.
RETRY_OR_REDIRECT: Tuple[type[Exception], ...] = (*RETRY_ERRORS, ResponseError, ClusterError)

#: The backoff between retries while a slot moves: short at first (most
#: TRYAGAINs clear as soon as the next batch of keys has moved), growing so
#: that a long migration is not polled hard.
FIRST_BACKOFF_S = 0.005
MAX_BACKOFF_S = 0.1


def slot_moving(error: BaseException) -> bool:
    """The cluster ran nothing because the call's slot is migrating: a
    TRYAGAIN, or redis-py's redirect loop run out (its only ClusterError
    that is not CLUSTERDOWN)."""
    return isinstance(error, TryAgainError) or type(error) is ClusterError


class Retrying:
    """One cluster send's retries (see the module docstring). ``after`` is
    called with each failure: it raises the error when it is final, else
    says how long to pause and whether the slot map must be reloaded before
    the next try. ``resend`` False: a connection error or timeout is final
    (a held call may have run; resending it could take a second lease).
    ``split``: a TRYAGAIN is final too, for the command to split the call."""

    __slots__ = ("attempt", "backoff", "deadline", "resend", "retries", "split", "window")

    def __init__(
        self, retries: int, window_s: float, resend: bool = True, split: bool = False
    ) -> None:
        self.retries = retries
        self.window = window_s
        self.resend = resend
        self.split = split
        self.attempt = 0
        self.deadline = 0.0
        self.backoff = 0.0

    def after(self, error: Exception) -> Tuple[float, bool]:
        """(the pause, whether the slot map must be reloaded): after a
        connection error, CLUSTERDOWN or an uncovered slot it is stale; a
        MOVED is recorded in it by the driver (patch_slot_map) instead."""
        if self.split and slot_moving(error):
            raise error  # the command splits the call instead
        if slot_moving(error) or isinstance(error, AskError):  # MovedError is an AskError
            return self._in_window(error), False
        if isinstance(error, ResponseError) and not isinstance(error, ClusterDownError):
            raise error
        if not isinstance(error, RETRY_ERRORS) or not self.resend:
            raise error
        self.attempt += 1
        if self.attempt > self.retries:
            raise error
        if isinstance(error, ClusterDownError):
            return 0.25, True  # as RedisCluster waits before its retry
        return 0.0, True

    def _in_window(self, error: Exception) -> float:
        """The pause before the next try while the slot moves, or raises
        ``error`` once the window has closed (or would, before the pause)."""
        if self.window <= 0:
            raise error
        now = monotonic()
        if not self.deadline:
            self.deadline = now + self.window
            self.backoff = FIRST_BACKOFF_S
        if isinstance(error, AskError) and not isinstance(error, MovedError):
            if now > self.deadline:
                raise error
            return 0.0  # followed at once, to the node it names
        pause = self.backoff
        if now + pause > self.deadline:
            raise error
        self.backoff = min(2 * pause, MAX_BACKOFF_S)
        return pause


def asked_node(client: Any, error: Exception) -> Any:
    """The node an ASK (not a MOVED) names, as ``client`` knows it, or None."""
    if not isinstance(error, AskError) or isinstance(error, MovedError):
        return None
    return client.get_node(host=error.host, port=error.port)


def patch_slot_map(client: Any, moved: MovedError) -> Any:
    """Record in ``client``'s slot map the owner a MOVED read off a send's
    own connection names, as redis-py does for its own sends (reloading the
    whole map instead would close connections other calls are using).
    redis-py 8 has ``move_slot`` (a coroutine in redis.asyncio); earlier
    versions note the MOVED and apply it at the next look-up. Returns what
    ``move_slot`` returned, for the async driver to await."""
    manager = client.nodes_manager
    move = getattr(manager, "move_slot", None)
    if callable(move):
        return move(moved)
    update = getattr(manager, "update_moved_exception", None)
    if callable(update):
        return update(moved)
    manager._moved_exception = moved  # redis.asyncio 5 and 6 do this themselves
    return None


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
