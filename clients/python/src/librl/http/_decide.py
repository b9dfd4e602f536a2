"""The Redis exchange of one request (docs/http.md, One decision per
request), without I/O: one RL.ALL per subject in order; after a denial the
later groups PEEKed and the earlier, admitted ones refunded; after a
failure, what Redis admitted refunded or kept as the fail mode says; and
the `count: failed`/`succeeded` refunds after the handler. The guards
(_guard.py) send the calls and hand back Redis's answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .._args import Clause
from .._types import AllDecision, Decision
from ._plan import Check

#: One RL.ALL: its clauses, and whether it is sent with PEEK.
Call = Tuple[Tuple[Clause, ...], bool]


@dataclass
class Verdict:
    """The outcome of a request's exchange with Redis."""

    admitted: bool
    #: One per check, in check order.
    replies: List[Decision]


class Exchange:
    """One request's calls, one at a time: ``next_call()`` is the call to
    send (None once the exchange is over), ``answer()`` takes Redis's reply
    to it, and ``verdict()`` is the result. When Redis fails or the time
    runs out part-way, ``failure_refunds()`` are the calls that give back
    what Redis admitted (fail closed)."""

    def __init__(self, checks: Sequence[Check]) -> None:
        self._checks = checks
        groups: Dict[str, List[int]] = {}
        for i, check in enumerate(checks):
            groups.setdefault(check.subject, []).append(i)
        self._groups = list(groups.values())
        self._sent = 0
        self._denied = False
        self._replies: List[Optional[Decision]] = [None] * len(checks)
        #: Groups Redis admitted for which no refund was sent yet.
        self._admitted: List[List[int]] = []

    def next_call(self) -> Optional[Call]:
        if self._sent < len(self._groups):
            return self._call(self._groups[self._sent], peek=self._denied)
        if self._denied and self._admitted:
            # Refunded the moment it is sent: a refund whose reply never
            # comes may have been applied, and must not be sent twice.
            return self._refund(self._admitted.pop(0))
        return None

    def answer(self, reply: AllDecision) -> None:
        if self._sent >= len(self._groups):
            return  # a denial's refund: nothing to record
        group = self._groups[self._sent]
        self._sent += 1
        for i, decision in zip(group, reply.decisions):
            self._replies[i] = decision
        if self._denied:
            return  # a PEEK, for the headers
        if reply.allowed:
            self._admitted.append(group)
        else:
            self._denied = True

    def verdict(self) -> Verdict:
        return Verdict(not self._denied, [r for r in self._replies if r is not None])

    def failure_refunds(self) -> List[Call]:
        """The refunds of the groups Redis admitted before it failed, one
        RL.ALL per group; a group whose reply never came is not refunded
        (Redis may not have recorded it)."""
        admitted, self._admitted = self._admitted, []
        return [self._refund(group) for group in admitted]

    def _call(self, group: List[int], peek: bool) -> Call:
        return tuple(self._checks[i].clause() for i in group), peek

    def _refund(self, group: List[int]) -> Call:
        return tuple(self._checks[i].clause(refund=True) for i in group), False


def settlement(checks: Sequence[Check], status: int) -> List[Call]:
    """After the handler (docs/http.md, Counting after the response): the
    `count: failed` policies' refunds when ``status`` is below 400, the
    `count: succeeded` ones' when it is 400 or above, one RL.ALL per
    subject."""
    groups: Dict[str, List[Clause]] = {}
    for check in checks:
        count = check.policy.count
        if (count == "failed" and status < 400) or (count == "succeeded" and status >= 400):
            groups.setdefault(check.subject, []).append(check.clause(refund=True))
    return [(tuple(clauses), False) for clauses in groups.values()]
