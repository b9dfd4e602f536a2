"""Leases of a concurrency limit (RL.CONCURRENT): what ``acquire`` returns,
the scope ``concurrent`` opens, and the background renewal.

What a lease is and the rules it follows (whether it is held, when to
renew, when a failing renewal means the lease is lost) are written once, in
``LeaseBase``; ``Lease`` performs the sends and the waiting with the calling
thread and a renewal thread, ``AsyncLease`` with asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from time import monotonic
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Type

from . import _args
from ._args import Concurrent, Duration
from ._types import Decision, DurabilityError, LeaseLost, LeaseRefused

if TYPE_CHECKING:
    from ._async import AsyncLimiter
    from ._sync import Limiter

log = logging.getLogger("librl")

#: What ``on_lost`` is given: the LeaseLost the server answered, or the
#: error of the renewals that failed until too little of the lease was left.
OnLost = Callable[[BaseException], Any]


class LeaseBase:
    """The state of a lease and the rules both kinds follow."""

    __slots__ = ("_released", "_renewal", "_result", "_taken", "clause", "decision", "lost")

    def __init__(self, clause: Concurrent, decision: Decision, taken: Optional[float]) -> None:
        #: The concurrency limit the lease belongs to: its key, limit, length
        #: and override, which RELEASE and RENEW repeat.
        self.clause = clause
        #: The reply of the call that took the lease: ``allowed`` and
        #: ``lease_id`` > 0 when it is held; when refused, ``retry_after_ms``
        #: is the least wait after which enough leases end by themselves.
        #: ``allowed`` with ``lease_id`` 0: admitted without a lease (PEEK,
        #: ``cost=0``, ``rl.mode`` off or monitor): nothing to release.
        self.decision = decision
        #: Set when the lease is known lost: the LeaseLost, or the error of
        #: the renewals that failed (see ``keep_alive``).
        self.lost: Optional[BaseException] = None
        self._taken = taken  # monotonic time the taking call was sent, if known
        self._released = False
        self._result: Optional[Decision] = None
        self._renewal: Any = None

    @property
    def id(self) -> int:
        """The lease id (``decision.lease_id``): 0 when it holds none."""
        return self.decision.lease_id

    @property
    def held(self) -> bool:
        """Admitted, and neither released nor known lost."""
        return self.decision.allowed and not self._released and self.lost is None

    def __bool__(self) -> bool:
        return self.decision.allowed

    def __repr__(self) -> str:
        state = (
            "held"
            if self.held
            else "lost"
            if self.lost
            else "released"
            if self._released
            else "refused"
        )
        return f"<{type(self).__name__} {self.id} {state} {self.clause!r}>"

    def _renews(self) -> bool:
        """What ``renew`` does first: raises LeaseLost when the lease is not
        held; False when there is nothing to renew (no lease id)."""
        if not self.held:
            raise LeaseLost()
        return self.id != 0

    def _renewed(self, decision: Decision) -> Decision:
        """A RENEW's answer: refused means the lease has ended."""
        if not decision.allowed:
            self.lost = LeaseLost(decision)
            raise self.lost
        return decision

    def _period_s(self) -> float:
        """The time between renewals: a third of the lease's length, or of
        the acquire's reset_after_ms when an override made it shorter."""
        length = self.clause.lease_ms or 0
        reset = self.decision.reset_after_ms
        if 0 < reset < length or not length:
            length = reset
        return max(length / 3, 1) / 1000

    def _lose(self, error: BaseException, on_lost: Optional[OnLost]) -> None:
        if self.lost is None:
            self.lost = error
        if on_lost is not None:
            try:
                on_lost(error)
            except Exception:
                log.exception("librl: on_lost raised")
        else:
            log.warning("librl: lease %s of %r lost: %s", self.id, self.clause.key, error)

    def _keep_alive_first(self) -> bool:
        """What ``keep_alive`` checks: LeaseLost when the lease is not held;
        ValueError when it is kept alive already; False when there is
        nothing to renew."""
        if not self._renews():
            return False
        if self._renewal is not None:
            raise ValueError("this lease is kept alive already: one keep_alive per lease")
        return True


class _Schedule:
    """When a keep_alive renews (the shared loop of both kinds): every
    period from the last success; a failure is retried a period later while
    the lease still lasts until then, else the lease is lost."""

    __slots__ = ("every", "last", "length", "next_at")

    def __init__(self, lease: LeaseBase) -> None:
        self.every = lease._period_s()
        self.length = min((lease.clause.lease_ms or 0) / 1000, self.every * 3) or self.every * 3
        now = monotonic()
        # A lease handed over (held_lease) was taken at an unknown time:
        # renew it at once.
        self.last = now - self.length if lease._taken is None else lease._taken
        self.next_at = now if lease._taken is None else self.last + self.every

    def delay(self) -> float:
        return max(0.0, self.next_at - monotonic())

    def succeeded(self, sent: float) -> None:
        self.last, self.next_at = sent, sent + self.every

    def failed(self, sent: float) -> bool:
        """True when the next try would come after the lease's end."""
        self.next_at = sent + self.every
        return self.next_at >= self.last + self.length


def held_decision(clause: Concurrent, lease_id: object) -> Decision:
    checked = _args.check_lease_id(lease_id)
    limit = clause.args()[2]
    return Decision(True, 0, 0, limit if isinstance(limit, int) else 0, 0, 0, checked)


def check_clause(clause: object) -> Concurrent:
    if not isinstance(clause, Concurrent):
        raise TypeError(
            "held_lease() takes the librl.Concurrent clause that names the lease "
            f"(key, limit, lease, override), not {type(clause).__name__}"
        )
    return clause


# -- blocking ------------------------------------------------------------------


class Lease(LeaseBase):
    """Slots of a concurrency limit taken by ``Limiter.acquire`` (or handed
    over: ``Limiter.held_lease``): held until ``release()``, or until its
    length has passed since it was taken or last renewed, so a holder that
    crashes never keeps them. ``with lease:`` releases it at the end.
    Thread-safe; release and renew do nothing harmful on a lease that holds
    nothing."""

    __slots__ = ("_limiter", "_lock")

    def __init__(
        self, limiter: Limiter, clause: Concurrent, decision: Decision, taken: Optional[float]
    ) -> None:
        super().__init__(clause, decision, taken)
        self._limiter = limiter
        self._lock = threading.Lock()

    def release(self) -> Optional[Decision]:
        """Gives the slots back at once (``RELEASE id``) and stops the
        background renewal. Returns the server's answer: ``allowed`` whether
        the lease was still held (one that had ended is not an error), and
        ``count`` the slots held after it. Only the first release is sent;
        later ones return its answer. None when nothing was sent (the lease
        holds no id). A connection error leaves the lease to a later
        release, or to its own end."""
        if not self.id:
            return None
        with self._lock:
            if self._released:
                return self._result
            self._stop_renewal()
            try:
                result = self._limiter._run(
                    self._limiter._commands.lease_call(self.clause, "RELEASE", self.id)
                )
            except DurabilityError as e:  # released on the primary
                self._released, self._result = True, e.reply
                raise
            self._released, self._result = True, result
            return result

    def renew(self) -> Optional[Decision]:
        """Makes the lease last its length from now (``RENEW id``; never
        shorter than it already lasts): the heartbeat of work that may
        outlast it. Raises LeaseLost when the lease is not held (it ended:
        its slots may be someone else's; the work should stop). None when
        there is nothing to renew (admitted without a lease id)."""
        if not self._renews():
            return None
        return self._renewed(
            self._limiter._run(self._limiter._commands.lease_call(self.clause, "RENEW", self.id))
        )

    def keep_alive(self, on_lost: Optional[OnLost] = None) -> Lease:
        """Renews the lease in a background thread every third of its length
        until ``release()``. When it is lost (the server answers it has
        ended, or renewals fail until too little of it is left for another
        try) the renewals stop, ``lease.lost`` says why, and ``on_lost(error)``
        is called from that thread (without one, a warning is logged).
        Returns the lease. Raises LeaseLost for a lease not held, ValueError
        for a second keep_alive. Each renewal waits at most the client's
        ``socket_timeout``: set one shorter than a third of the lease."""
        if not self._keep_alive_first():
            return self
        stop = threading.Event()
        thread = threading.Thread(
            target=self._renew_loop,
            args=(stop, on_lost),
            name=f"librl-lease-{self.id}",
            daemon=True,
        )
        self._renewal = (stop, thread)
        thread.start()
        return self

    def _renew_loop(self, stop: threading.Event, on_lost: Optional[OnLost]) -> None:
        schedule = _Schedule(self)
        while not stop.wait(schedule.delay()):
            sent = monotonic()
            try:
                self.renew()
            except Exception as e:
                if stop.is_set():
                    return  # released meanwhile
                if isinstance(e, LeaseLost) or schedule.failed(sent):
                    self._lose(e, on_lost)
                    return
            else:
                schedule.succeeded(sent)

    def _stop_renewal(self) -> None:
        if self._renewal is None:
            return
        stop, thread = self._renewal
        stop.set()
        if thread is not threading.current_thread():  # on_lost may release
            thread.join()

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        _release_at_exit(self.release, exc)


def _release_at_exit(release: Callable[[], Any], exc: Optional[BaseException]) -> None:
    """A scope's release: its error propagates unless the body's does (the
    lease then ends by itself at its end)."""
    if exc is None:
        release()
        return
    try:
        release()
    except Exception as e:
        log.warning("librl: releasing a lease after %r failed: %s", exc, e)


class _Scope:
    """What LeaseScope and AsyncLeaseScope hold: the acquire to make on
    entry, and its lease once made."""

    __slots__ = ("_clause", "_keep_alive", "_lease", "_limiter", "_on_lost", "_wait")

    def __init__(
        self,
        limiter: Any,
        clause: Concurrent,
        wait: Optional[Duration],
        keep_alive: bool,
        on_lost: Optional[OnLost],
    ) -> None:
        self._limiter = limiter
        self._clause = clause
        self._wait = wait
        self._keep_alive = keep_alive
        self._on_lost = on_lost
        self._lease: Any = None


class LeaseScope(_Scope):
    """``with limiter.concurrent(...) as lease:``: acquires on entry (raising
    LeaseRefused when refused), releases on exit, renews meanwhile with
    ``keep_alive=True``."""

    __slots__ = ()

    def __enter__(self) -> Lease:
        try:
            lease: Lease = self._limiter._acquire(self._clause, self._wait, False)
        except DurabilityError as e:
            # Not durable: not taken, as far as the scope goes (the release
            # is not durable either; the acquire's error is the one raised).
            with contextlib.suppress(Exception):
                e.reply.release()
            raise
        if not lease:
            raise LeaseRefused(lease.decision)
        if self._keep_alive:
            lease.keep_alive(self._on_lost)
        self._lease = lease
        return lease

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.__exit__(exc_type, exc, tb)


# -- asyncio -------------------------------------------------------------------


class AsyncLease(LeaseBase):
    """``Lease`` for ``AsyncLimiter``: ``await lease.release()``,
    ``await lease.renew()``, ``async with lease:``; ``keep_alive`` renews
    in an asyncio task of the running loop."""

    __slots__ = ("_limiter", "_lock")

    def __init__(
        self,
        limiter: AsyncLimiter,
        clause: Concurrent,
        decision: Decision,
        taken: Optional[float],
    ) -> None:
        super().__init__(clause, decision, taken)
        self._limiter = limiter
        self._lock: Optional[asyncio.Lock] = None

    async def release(self) -> Optional[Decision]:
        """``Lease.release``."""
        if not self.id:
            return None
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._released:
                return self._result
            await self._stop_renewal()
            try:
                result = await self._limiter._run(
                    self._limiter._commands.lease_call(self.clause, "RELEASE", self.id)
                )
            except DurabilityError as e:
                self._released, self._result = True, e.reply
                raise
            self._released, self._result = True, result
            return result

    async def renew(self) -> Optional[Decision]:
        """``Lease.renew``."""
        if not self._renews():
            return None
        return self._renewed(
            await self._limiter._run(
                self._limiter._commands.lease_call(self.clause, "RENEW", self.id)
            )
        )

    def keep_alive(self, on_lost: Optional[OnLost] = None) -> AsyncLease:
        """``Lease.keep_alive``, in a task of the running loop; ``on_lost``
        is called in that task (cancel the work's task from it to stop the
        work: ``on_lost=lambda e: task.cancel()``)."""
        if not self._keep_alive_first():
            return self
        stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._renew_loop(stop, on_lost))
        self._renewal = (stop, task)
        return self

    async def _renew_loop(self, stop: asyncio.Event, on_lost: Optional[OnLost]) -> None:
        schedule = _Schedule(self)
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), schedule.delay())
            if stop.is_set():
                return
            sent = monotonic()
            try:
                await self.renew()
            except Exception as e:
                if stop.is_set():
                    return
                if isinstance(e, LeaseLost) or schedule.failed(sent):
                    self._lose(e, on_lost)
                    return
            else:
                schedule.succeeded(sent)

    async def _stop_renewal(self) -> None:
        if self._renewal is None:
            return
        stop, task = self._renewal
        stop.set()
        if task is not asyncio.current_task():
            # An in-flight RENEW ends first: none is sent after the RELEASE.
            await asyncio.gather(task, return_exceptions=True)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc is None:
            await self.release()
            return
        try:
            await self.release()
        except Exception as e:
            log.warning("librl: releasing a lease after %r failed: %s", exc, e)


class AsyncLeaseScope(_Scope):
    """``LeaseScope`` for ``AsyncLimiter``: ``async with limiter.concurrent(...)``."""

    __slots__ = ()

    async def __aenter__(self) -> AsyncLease:
        try:
            lease: AsyncLease = await self._limiter._acquire(self._clause, self._wait, False)
        except DurabilityError as e:
            with contextlib.suppress(Exception):
                await e.reply.release()
            raise
        if not lease:
            raise LeaseRefused(lease.decision)
        if self._keep_alive:
            lease.keep_alive(self._on_lost)
        self._lease = lease
        return lease

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            await lease.__aexit__(exc_type, exc, tb)
