"""The fail modes (docs/http.md, Fail modes): what a request gets when
Redis cannot answer, or not within ``timeout``. ``open`` serves it (a
warning at most every 10 seconds), ``closed`` refuses it with the 503;
what Redis admitted before it failed is refunded only when the request
is refused (_decide.Exchange.failure_refunds)."""

from __future__ import annotations

import logging
import math
import time
from typing import Optional

from ._refusals import Reply, unavailable

log = logging.getLogger("librl.http")

#: Fail open warns at most once in this many seconds.
WARN_EVERY_S = 10.0


class FailMode:
    """One configuration's fail mode, with the time fail open last warned."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._warned_at = -math.inf

    @property
    def refuses(self) -> bool:
        """Whether a request Redis could not decide is refused (closed)."""
        return self.mode == "closed"

    def failed(self, error: BaseException) -> Optional[Reply]:
        """The request's answer: None serves it (open), else the 503."""
        if not self.refuses:
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                log.warning("librl: rate limiting skipped (fail open): %s", reason(error))
            return None
        log.error("librl: request refused (fail closed): %s", reason(error))
        return unavailable()


def reason(error: BaseException) -> str:
    """An error as the hook's ``error`` and the logs give it."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
