"""The HTTP contract for one configuration, without a framework and
without I/O (docs/http.md): the plan of a request's checks (_plan), the
decision once Redis has answered (_decide's verdict) with its headers
(_headers), refusal (_refusals) and hook event (_hook), and the fail mode
when Redis could not answer (_fail). The guards (_guard.py) run the Redis
exchanges; the framework adapters only move requests and responses."""

from __future__ import annotations

import logging
import time
from typing import Any, List, Optional, Sequence, Tuple, Union

from .._types import Decision
from ._configuration import Config, Policy, Route
from ._decide import Call, Verdict, settlement
from ._fail import FailMode, reason
from ._headers import rate_limit_headers, response_headers
from ._hook import Hook, Outcome, event_of, outcome, report
from ._identity import subject_of_value
from ._keys import policy_keys
from ._plan import Check, Plan, Quick, costs, named, plan, resolved
from ._refusals import Reply, denied
from ._request import Request

log = logging.getLogger("librl.http")


class Engine:
    """The contract for one configuration; one per middleware."""

    def __init__(self, config: Config, hook: Optional[Hook] = None) -> None:
        self.config = config
        self.hook = hook
        self.fail = FailMode(config.fail, config.fail_deny)

    def plan(
        self, request: Request, names: Optional[Sequence[str]] = None
    ) -> Union[Plan, Reply, None]:
        """The request's checks (_plan.plan): a Plan, a refusal made before
        any check, or None when no policy applies."""
        return plan(self.config, request, names)  # type: ignore[return-value] # not quick

    def quick_plan(
        self, request: Request, names: Optional[Sequence[str]] = None
    ) -> Union[Plan, Reply, Tuple[Quick, str], None]:
        """plan(), or the route's Quick plan and the request's subject
        where it has one and no decision hook waits for the whole plan."""
        return plan(self.config, request, names, self.hook is None)

    def quick_decided(
        self, quick: Quick, allowed: bool, reply: Decision
    ) -> Tuple[List[Tuple[str, str]], Optional[Reply]]:
        """decided() of a request on a Quick plan (enforced, no hook): the
        rate-limit headers, and the refusal if Redis refused it."""
        config = self.config
        # response_headers of one enforced policy (a Quick plan's): it is
        # the most restrictive, and a denial is a refusal.
        unix_now_ms = time.time_ns() // 1_000_000 if config.legacy_reset == "unix" else None
        headers = rate_limit_headers(
            config.headers, quick.policies, (reply,), 0, not allowed, unix_now_ms
        )
        if allowed:
            return headers, None
        policy = quick.policy
        return headers, self._refusal(quick.route, policy, reply, policy.cost, headers)  # type: ignore[arg-type]

    def resolved(self, planned: Plan, values: Sequence[Any]) -> Union[Plan, Reply, None]:
        """A plan once its resolvers gave ``values`` (_plan.resolved)."""
        return resolved(self.config, planned, values)

    def costs(self, planned: Plan, body_length: Optional[int]) -> Union[Plan, Reply]:
        """A plan that needed the body, once its length is known."""
        return costs(self.config, planned, body_length)

    def keys(self, policy: str, value: Union[str, bytes, None] = None) -> Tuple[str, str]:
        """The key and override key the middleware uses for ``policy`` and
        the subject whose raw value (for the policy's key) is ``value``."""
        (found,) = named(self.config, [policy])
        return policy_keys(self.config.prefix, subject_of_value(found, value, self.config), found)

    def named(self, names: Sequence[str]) -> Tuple[Policy, ...]:
        """The policies of these names; a ValueError for one not defined."""
        return named(self.config, names)

    def decided(
        self, planned: Plan, verdict: Verdict, local: bool = False
    ) -> Tuple[bool, List[Tuple[str, str]], Optional[Reply]]:
        """(pass the request on?, the rate-limit headers, the refusal if
        not); reports to the hook (``local``: decided in the process)."""
        checks, replies = planned.checks, verdict.replies
        policies = [check.policy for check in checks]
        worst, headers = response_headers(
            self.config, policies, replies, not verdict.admitted, mode=planned.mode
        )
        shadow = planned.mode == "shadow"
        refused = not verdict.admitted and not shadow
        result: Outcome
        if refused:
            result = "denied"
        elif verdict.admitted and not verdict.shadow_denied:
            result = "allowed"  # nothing denied: outcome() would say so too
        else:
            result = outcome(planned.mode, policies, replies)
        if result == "would_deny":
            log.warning(
                "librl shadow mode: %s %s would be denied by policy %r",
                planned.request.method,
                planned.request.path,
                policies[worst].name,
            )
        if self.hook is not None:
            report(self.hook, event_of(planned, result, replies, local=local))
        if not refused:
            return True, headers, None
        refusal = self._refusal(
            planned.route, policies[worst], replies[worst], checks[worst].cost, headers
        )
        return False, headers, refusal

    def _refusal(
        self,
        route: Optional[Route],
        policy: Policy,
        reply: Decision,
        cost: int,
        headers: List[Tuple[str, str]],
    ) -> Reply:
        """The refusal by ``policy`` (the route's ``deny``, else the
        top-level one), with the rate-limit ``headers``."""
        denial = denied(self.config, policy, reply, cost, route.deny if route is not None else None)
        # A Reply denied() made for this request alone: its list is ours.
        denial.headers.extend(headers)
        return denial

    def failed(self, planned: Plan, error: BaseException) -> Optional[Reply]:
        """Redis did not answer: None serves the request (fail open), else
        the 503; reports to the hook."""
        reply = self.fail.failed(error)
        result: Outcome = "fail_closed" if reply is not None else "fail_open"
        if self.hook is not None:
            report(self.hook, event_of(planned, result, None, reason(error)))
        return reply

    def settlement(self, checks: List[Check], verdict: Verdict, status: int) -> List[Call]:
        """After the handler: the `count: failed`/`succeeded` refunds."""
        return settlement(checks, status, verdict.replies) if verdict.admitted else []
