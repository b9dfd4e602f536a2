"""The opt-in denial cache.

After a call is denied with retry_after_ms > 0, the same call (same command,
same arguments) is answered locally until that time has passed, or the
cache's max age has (1 s by default), whichever comes first. The local
answer is the server's reply with retry_after_ms and reset_after_ms reduced
by the time elapsed since the reply arrived, in whole milliseconds rounded
down, so the reported wait is never shorter than the server's. The entry
itself expires counted from when the request was sent, so it never outlives
the server's denial.

Exact only while nobody else refunds, deletes or overrides the key in the
meantime: calls admitted for others can only lengthen a denial, never
shorten it, but a REFUND, DEL or override change made elsewhere can end it
early, and the cache will not know before the max age: that bounds how long
such a change takes to reach a running process (a BLOCK of an hour
included). A REFUND made through the same Limiter forgets every entry on
that key; override_set and override_delete through it forget everything;
forget_keys() and clear() are the way to apply a change made elsewhere at
once. count and remaining are as of the server's reply.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from time import monotonic
from typing import Dict, Hashable, Iterable, Optional, Set, Tuple, Union

from ._types import AllDecision, Decision, KeyT

Reply = Union[Decision, AllDecision]


def _norm(key: KeyT) -> bytes:
    return key if isinstance(key, bytes) else key.encode()


def _older(decision: Decision, elapsed_ms: int) -> Decision:
    return replace(
        decision,
        retry_after_ms=decision.retry_after_ms - elapsed_ms if decision.retry_after_ms > 0 else 0,
        reset_after_ms=max(0, decision.reset_after_ms - elapsed_ms),
    )


class DenialCache:
    __slots__ = ("_by_key", "_entries", "_forgets", "_lock", "_max", "_max_age")

    def __init__(self, max_entries: int, max_age_s: float = 1.0) -> None:
        if max_entries < 1:
            raise ValueError("denial_cache_size must be at least 1")
        self._max = max_entries
        self._max_age = max_age_s
        # argv -> (reply, valid until (monotonic s), reply received at, keys)
        self._entries: Dict[Hashable, Tuple[Reply, float, float, Tuple[bytes, ...]]] = {}
        self._by_key: Dict[bytes, Set[Hashable]] = {}
        self._lock = threading.Lock()
        # Counts forget_keys() and clear() calls: a denial whose request was
        # sent before one of them may predate a refund or an override change.
        self._forgets = 0

    @property
    def generation(self) -> int:
        """Read before sending a call whose denial may be put()."""
        return self._forgets

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, argv: Hashable) -> Optional[Reply]:
        entry = self._entries.get(argv)
        if entry is None:
            return None
        reply, valid_until, received_at, _ = entry
        now = monotonic()
        if now >= valid_until:
            with self._lock:
                if self._entries.get(argv) is entry:
                    self._drop(argv)
            return None
        elapsed_ms = max(0, int((now - received_at) * 1000))
        if elapsed_ms == 0:
            return reply
        if isinstance(reply, Decision):
            return _older(reply, elapsed_ms)
        return AllDecision(
            reply.allowed,
            reply.retry_after_ms - elapsed_ms,
            tuple(_older(d, elapsed_ms) for d in reply.decisions),
        )

    def put(
        self,
        argv: Hashable,
        keys: Iterable[KeyT],
        reply: Reply,
        sent_at: float,
        received_at: float,
        generation: int,
    ) -> None:
        """Remember a denial. The caller checks it is one (allowed false,
        retry_after_ms > 0) and that the call was no REFUND, and passes the
        generation it read before sending."""
        if isinstance(reply, Decision):
            wait_ms = reply.retry_after_ms
        else:
            # Every denying clause's own reply stays true until the first of
            # them could change: cache the call until then.
            waits = [d.retry_after_ms for d in reply.decisions if not d.allowed]
            if any(w <= 0 for w in waits):
                return
            wait_ms = min(waits, default=reply.retry_after_ms)
        if wait_ms <= 0 or self._max_age <= 0:
            return
        normalized = tuple(_norm(k) for k in keys)
        with self._lock:
            if generation != self._forgets:
                return  # a refund or override change came in meanwhile
            if argv in self._entries:
                self._drop(argv)
            if len(self._entries) >= self._max:
                self._make_room(received_at)
            valid_until = sent_at + min(wait_ms / 1000, self._max_age)
            self._entries[argv] = (reply, valid_until, received_at, normalized)
            for key in normalized:
                self._by_key.setdefault(key, set()).add(argv)

    def forget_keys(self, keys: Iterable[KeyT]) -> None:
        with self._lock:
            self._forgets += 1
            for key in keys:
                for argv in self._by_key.pop(_norm(key), ()):
                    self._drop(argv)

    def clear(self) -> None:
        with self._lock:
            self._forgets += 1
            self._entries.clear()
            self._by_key.clear()

    def _drop(self, argv: Hashable) -> None:
        entry = self._entries.pop(argv, None)
        if entry is None:
            return
        for key in entry[3]:
            argvs = self._by_key.get(key)
            if argvs is not None:
                argvs.discard(argv)
                if not argvs:
                    del self._by_key[key]

    def _make_room(self, now: float) -> None:
        for argv in [a for a, e in self._entries.items() if e[1] <= now]:
            self._drop(argv)
        while len(self._entries) >= self._max:
            self._drop(next(iter(self._entries)))
