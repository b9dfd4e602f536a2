"""The Redis exchange of one request (docs/http.md, One decision per
request), without I/O: one RL.ALL per subject in order; after a denial the
later groups PEEKed and the earlier, admitted ones given back (refunded,
and their concurrency slots released); after a failure, what Redis
admitted given back or kept as the fail mode says; the `count:
failed`/`succeeded` refunds after the handler; and the slots a served
request holds until its response is finished (docs/http.md, Concurrency
limits). The guards (_guard.py) send the calls and hand back Redis's
answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .._args import Clause, Concurrent
from .._types import AllDecision, Decision
from ._plan import Check

#: One RL.ALL: its clauses, and whether it is sent with PEEK.
Call = Tuple[Tuple[Clause, ...], bool]


@dataclass(frozen=True)
class Release:
    """``RL.CONCURRENT key limit lease RELEASE id``, without OVERRIDE: the
    slots of a concurrency policy that a request took."""

    clause: Concurrent
    lease_id: int


#: What the guards send: an RL.ALL, or a release.
Step = Union[Call, Release]


@dataclass
class Verdict:
    """The outcome of a request's exchange with Redis."""

    admitted: bool
    #: One per check, in check order.
    replies: List[Decision]
    #: The slots the request holds (admitted only), to release when its
    #: response is finished.
    leases: List[Release] = field(default_factory=list)
    #: A shadow policy denied: a would-be refusal (docs/http.md, Shadow mode).
    shadow_denied: bool = False


class Exchange:
    """One request's calls, one at a time: ``next_call()`` is the call to
    send (None once the exchange is over), ``answer()`` takes Redis's reply
    to it, and ``verdict()`` is the result. When Redis fails or the time
    runs out part-way, ``failure_refunds()`` are the calls that give back
    what Redis admitted (fail closed), and ``held()`` the slots it gave
    (fail open: the served request holds them)."""

    def __init__(self, checks: Sequence[Check]) -> None:
        self._checks = checks
        first = checks[0].subject if checks else ""
        #: A shadow check: a denial may be a would-be refusal.
        self._shadows = False
        if len(checks) == 1 and not checks[0].shadow:
            self._groups = [[0]]  # one policy: the commonest case
            self._enforced = 1
        elif all(check.subject == first and not check.shadow for check in checks):
            self._groups = [list(range(len(checks)))]  # one subject: the common case
            self._enforced = 1
        else:
            self._shadows = any(check.shadow for check in checks)
            self._groups = _by_subject(checks, False)
            self._enforced = len(self._groups)
            # Shadow policies: RL.ALLs of their own, after the enforced ones.
            self._groups += _by_subject(checks, True)
        self._slots = any(check.takes_slots for check in checks)
        self._sent = 0
        self._denied = False
        self._replies: List[Optional[Decision]] = [None] * len(checks)
        #: Groups Redis admitted that were not given back.
        self._admitted: List[List[int]] = []
        #: Shadow groups Redis admitted (their slots are held, never refunded).
        self._shadow_admitted: List[List[int]] = []
        #: After a denial: what gives back the admitted groups, not sent yet.
        self._undo: List[Step] = []

    def next_call(self) -> Optional[Step]:
        if self._sent < len(self._groups):
            # A shadow group is sent as it is whatever the enforced ones said.
            peek = self._denied and self._sent < self._enforced
            return self._call(self._groups[self._sent], peek=peek)
        if self._undo:
            # Given back the moment it is sent: a refund whose reply never
            # comes may have been applied, and must not be sent twice.
            return self._undo.pop(0)
        return None

    def answer(self, reply: Union[AllDecision, Decision, None]) -> None:
        if self._sent >= len(self._groups) or not isinstance(reply, AllDecision):
            return  # a denial's refund or release: nothing to record
        group = self._groups[self._sent]
        shadow = self._sent >= self._enforced
        self._sent += 1
        for i, decision in zip(group, reply.decisions):
            self._replies[i] = decision
        if shadow:
            if reply.allowed:
                if self._denied:  # a refused request holds no slot
                    self._undo.extend(self._leases(group))
                else:
                    self._shadow_admitted.append(group)
            return
        if self._denied:
            return  # a PEEK, for the headers
        if reply.allowed:
            self._admitted.append(group)
        else:
            self._denied = True
            admitted, self._admitted = self._admitted, []
            self._undo = [step for g in admitted for step in self._give_back(g)]

    @property
    def shadow_denied(self) -> bool:
        """A shadow policy's group was denied (a would-be refusal)."""
        return self._shadows and any(
            reply is not None and not reply.allowed and check.shadow
            for check, reply in zip(self._checks, self._replies)
        )

    def verdict(self) -> Verdict:
        replies = [r for r in self._replies if r is not None]
        held = [] if self._denied else self.held()
        return Verdict(not self._denied, replies, held, self.shadow_denied)

    def failure_refunds(self) -> List[Step]:
        """What gives back the groups Redis admitted before it failed: one
        RL.ALL of refunds per group, and a release per slot taken; a group
        whose reply never came is not given back (Redis may not have
        recorded it)."""
        undo, self._undo = self._undo, []
        admitted, self._admitted = self._admitted, []
        shadow, self._shadow_admitted = self._shadow_admitted, []
        return (
            undo
            + [step for group in admitted for step in self._give_back(group)]
            + [release for group in shadow for release in self._leases(group)]
        )

    def held(self) -> List[Release]:
        """The slots Redis gave that were not given back, one release each:
        a served request's, released when its response is finished."""
        if not self._slots:
            return []
        pending = [step for step in self._undo if isinstance(step, Release)]
        groups = self._admitted + self._shadow_admitted
        return pending + [release for group in groups for release in self._leases(group)]

    def _call(self, group: List[int], peek: bool) -> Call:
        checks = self._checks
        if len(group) == 1:  # one policy: the commonest case, without a generator
            return (checks[group[0]].clause(),), peek
        return tuple(checks[i].clause() for i in group), peek

    def _give_back(self, group: List[int]) -> List[Step]:
        refunds = tuple(
            self._checks[i].clause(refund=True) for i in group if not self._checks[i].takes_slots
        )
        steps: List[Step] = [(refunds, False)] if refunds else []
        steps.extend(self._leases(group))
        return steps

    def _leases(self, group: List[int]) -> List[Release]:
        out = []
        for i in group:
            check, reply = self._checks[i], self._replies[i]
            # 0: admitted without a lease (the module's off or monitor mode).
            if check.takes_slots and reply is not None and reply.lease_id > 0:
                out.append(Release(check.slots(override=False), reply.lease_id))
        return out


def _by_subject(checks: Sequence[Check], shadow: bool) -> List[List[int]]:
    """The indexes of the (shadow or enforced) checks, grouped by subject
    in the order each subject first appears."""
    groups: Dict[str, List[int]] = {}
    for i, check in enumerate(checks):
        if check.shadow == shadow:
            groups.setdefault(check.subject, []).append(i)
    return list(groups.values())


def settlement(
    checks: Sequence[Check], status: int, replies: Optional[Sequence[Decision]] = None
) -> List[Call]:
    """After the handler (docs/http.md, Counting after the response): the
    `count: failed` policies' refunds when ``status`` is below 400, the
    `count: succeeded` ones' when it is 400 or above, one RL.ALL per
    subject; a check whose reply (``replies``, in check order) denied
    counted nothing, and gives nothing back (a shadow policy's)."""
    groups: Dict[str, List[Clause]] = {}
    for i, check in enumerate(checks):
        if replies is not None and not replies[i].allowed:
            continue
        count = check.policy.count
        if (count == "failed" and status < 400) or (count == "succeeded" and status >= 400):
            groups.setdefault(check.subject, []).append(check.clause(refund=True))
    return [(tuple(clauses), False) for clauses in groups.values()]


def turn_ms(checks: Sequence[Check], replies: Sequence[Decision]) -> int:
    """How long an admitted request waits for its turn (docs/http.md,
    Lockouts and queues): the latest turn its enforced ``queue`` policies
    booked with RESERVE (an admitted reply's retry_after), 0 for none."""
    wait = 0
    for check, reply in zip(checks, replies):
        if check.policy.queue_ms is not None and not check.shadow and reply.allowed:
            wait = max(wait, reply.retry_after_ms)
    return wait
