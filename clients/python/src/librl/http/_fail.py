"""The fail modes (docs/http.md, Fail modes): what a request gets when
Redis cannot answer, or not within ``timeout``. ``open`` serves it (a
warning at most every 10 seconds), ``closed`` refuses it with the 503,
``local`` decides it in the process (``decide_locally``, on _local's
limiter); what Redis admitted before it failed is refunded only when the
request is refused (_decide.Exchange.failure_refunds). The breaker spares
requests the wait on a Redis that is down or hangs."""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable, List, Optional, Sequence

import redis.exceptions

from .._types import Decision
from ._configuration import FAIL_DENY, Refusal
from ._decide import Release, Verdict
from ._local import LocalLimiter
from ._plan import Check
from ._refusals import Reply, unavailable

log = logging.getLogger("librl.http")

#: Fail open warns at most once in this many seconds.
WARN_EVERY_S = 10.0


class FailMode:
    """One configuration's fail mode, with the time fail open last warned."""

    def __init__(self, mode: str, refusal: Refusal = FAIL_DENY) -> None:
        self.mode = mode
        #: fail_deny: what a request refused here gets.
        self.refusal = refusal
        self._warned_at = -math.inf

    @property
    def refuses(self) -> bool:
        """Whether a request Redis could not decide is refused (closed)."""
        return self.mode == "closed"

    @property
    def local(self) -> bool:
        """Whether a request Redis could not decide is decided in the process."""
        return self.mode == "local"

    def failed(self, error: BaseException) -> Optional[Reply]:
        """The request's answer: None serves it (open; local: decided in the
        process), else fail_deny's refusal (the 503)."""
        if not self.refuses:
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                how = "decided in the process (fail local)" if self.local else "skipped (fail open)"
                log.warning("librl: rate limiting %s: %s", how, reason(error))
            return None
        if not isinstance(error, BreakerOpen):  # logged when it opened
            log.error("librl: request refused (fail closed): %s", reason(error))
        return unavailable(self.refusal)


def reason(error: BaseException) -> str:
    """An error as the hook's ``error`` and the logs give it."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


#: The breaker's first back-off, and its cap (docs/http.md, Fail modes).
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0

#: Error replies that say the server cannot serve now (not that the call
#: was wrong): they open the breaker as a failure on the way does.
_UNAVAILABLE_REPLIES = ("LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN")


class BreakerOpen(Exception):
    """The breaker decided without asking Redis."""

    def __init__(self) -> None:
        super().__init__(
            "Redis failed lately; the fail mode applies without waiting on it until the next probe"
        )


def unavailable_error(error: BaseException) -> bool:
    """Whether ``error`` says Redis could not answer (a connection refused
    or reset, no answer in time, a server loading or down), rather than
    answering that the call was wrong."""
    if isinstance(error, (ConnectionError, TimeoutError, OSError)):
        return True
    if isinstance(error, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return True
    if isinstance(error, redis.exceptions.ResponseError):
        return str(error).startswith(_UNAVAILABLE_REPLIES)
    return not isinstance(error, redis.exceptions.RedisError)


class Breaker:
    """After an exchange fails on the way or times out, requests apply the
    fail mode at once for a back-off (1 s, doubled after each failed
    probe, capped at 30 s), while one request at a time asks Redis (the
    probe); a probe that gets an answer closes it. ``clock``: seconds, for
    tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        #: When the next probe may go; None while Redis answers.
        self._until: Optional[float] = None
        self._backoff = BACKOFF_FIRST_S
        self._probing = False

    def asks(self) -> bool:
        """Whether this request asks Redis (normally, or as the probe)."""
        if self._until is None:
            return True
        with self._lock:
            if self._until is None:
                return True
            if self._probing or self._clock() < self._until:
                return False
            self._probing = True
            return True

    def answered(self) -> None:
        """Redis answered (or answered that the call was wrong)."""
        if self._until is not None:
            with self._lock:
                self._until, self._backoff, self._probing = None, BACKOFF_FIRST_S, False

    def failed(self) -> None:
        """An exchange failed on the way or timed out."""
        with self._lock:
            if self._probing:
                self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            elif self._until is not None:
                return  # a request sent before the breaker opened: no probe
            self._probing = False
            self._until = self._clock() + self._backoff

    def ended(self, error: BaseException) -> None:
        """An exchange ended with ``error``: a failure, or an answer."""
        if unavailable_error(error):
            self.failed()
        else:
            self.answered()


def decide_locally(local: LocalLimiter, checks: Sequence[Check]) -> Verdict:
    """The request's checks decided by the process's own limiters, as
    librl-core decides them (docs/http.md, Fail modes: local): the
    enforced policies in one all-or-nothing call (in the process one call
    spans every subject, so a refused request is counted by none), the
    shadow ones in another whatever it answered; slots a refused request
    took are freed at once. Overrides, BLOCK and RESERVE are not read."""
    enforced = [i for i, check in enumerate(checks) if not check.shadow]
    shadow = [i for i, check in enumerate(checks) if check.shadow]
    replies: List[Optional[Decision]] = [None] * len(checks)
    admitted = True
    for group in (enforced, shadow):
        if group:
            answer = local.check([checks[i].clause() for i in group])
            for i, decision in zip(group, answer.decisions):
                replies[i] = decision
            if group is enforced:
                admitted = answer.allowed
    decided = [reply for reply in replies if reply is not None]
    leases = []
    for check, reply in zip(checks, decided):
        if check.takes_slots and reply.allowed and reply.lease_id > 0:
            held = Release(check.slots(override=False), reply.lease_id)
            if admitted:
                leases.append(held)
            else:
                local.release(held.clause, held.lease_id)
    shadow_denied = any(not decided[i].allowed for i in shadow)
    return Verdict(admitted, decided, leases, shadow_denied)
