"""The decision hook (docs/http.md, Decision hook): one DecisionEvent per
checked request, after the decision and before the handler or the
refusal; a hook that raises is logged and ignored."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, List, Literal, Optional, Sequence

from .._types import Decision
from ._configuration import Policy
from ._plan import Plan

log = logging.getLogger("librl.http")

#: What became of a checked request: ``would_deny`` in shadow mode,
#: ``fail_open``/``fail_closed`` when Redis could not answer.
Outcome = Literal["allowed", "denied", "would_deny", "fail_open", "fail_closed"]


@dataclass
class CheckReport:
    """One checked policy in a decision hook's event."""

    policy: str
    subject: str
    key: str
    cost: int
    #: The module's reply for this policy; None when Redis did not answer.
    decision: Optional[Decision] = None


@dataclass
class DecisionEvent:
    """What the decision hook receives, once per checked request."""

    outcome: Outcome
    method: str
    path: str
    #: The matched route's path, or None.
    route: Optional[str]
    checks: List[CheckReport]
    #: Why Redis could not answer, when it could not.
    error: Optional[str] = None
    #: Decided in the process (the `local` fail mode).
    local: bool = False


#: The decision hook: any callable taking a DecisionEvent.
Hook = Callable[[DecisionEvent], Any]


def event_of(
    planned: Plan,
    outcome: Outcome,
    replies: Optional[Sequence[Decision]],
    error: Optional[str] = None,
    local: bool = False,
) -> DecisionEvent:
    """The event of a request's checks; ``replies`` one per check, or None
    when Redis did not answer; ``local``: decided in the process."""
    request, route = planned.request, planned.route
    return DecisionEvent(
        outcome=outcome,
        method=request.method,
        path=request.path,
        route=route.path if route is not None else None,
        checks=[
            CheckReport(c.policy.name, c.subject, c.key, c.cost, replies[i] if replies else None)
            for i, c in enumerate(planned.checks)
        ],
        error=error,
        local=local,
    )


def outcome(mode: str, policies: Sequence[Policy], replies: Sequence[Decision]) -> Outcome:
    """A checked request's outcome (docs/http.md, Shadow mode): ``denied``
    when an enforced policy denied it, ``would_deny`` when only shadow
    policies did (or any did, in a shadow request), else ``allowed``.
    ``mode``: the request's, enforce or shadow."""
    would = False
    for policy, reply in zip(policies, replies):
        if not reply.allowed:
            if mode != "shadow" and policy.mode != "shadow":
                return "denied"
            would = True
    return "would_deny" if would else "allowed"


def report(hook: Optional[Hook], event: DecisionEvent) -> None:
    """Calls the hook, if any; an exception in it is logged, not raised:
    a hook must not fail the request."""
    if hook is None:
        return
    try:
        hook(event)
    except Exception:
        log.exception("librl: the decision hook failed (ignored)")
