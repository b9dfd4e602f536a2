"""The fail modes (docs/http.md, Fail modes): what a request gets when
Redis cannot answer, or not within ``timeout``. ``open`` serves it (a
warning at most every 10 seconds), ``closed`` refuses it with the 503;
what Redis admitted before it failed is refunded only when the request
is refused (_decide.Exchange.failure_refunds). The breaker spares
requests the wait on a Redis that is down or hangs."""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable, Optional

import redis.exceptions

from ._configuration import FAIL_DENY, Refusal
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

    def failed(self, error: BaseException) -> Optional[Reply]:
        """The request's answer: None serves it (open), else fail_deny's
        refusal (the 503)."""
        if not self.refuses:
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                log.warning("librl: rate limiting skipped (fail open): %s", reason(error))
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
