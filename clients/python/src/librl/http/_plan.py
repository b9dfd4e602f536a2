"""Which checks a request needs (docs/http.md, One decision per request,
step 1): its policies (the route's, or a view's own), each one's subject
(none for an exempt client), key and cost; a bad cost header or a body
too large refuses the request here, before any Redis call."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .._args import Arg, Clause, Concurrent, Fixed, Sliding, Token
from ._configuration import MAX_UNITS, Config, Policy, Route, decimal
from ._identity import IpAddress, client_ip, is_exempt, subject
from ._keys import limiter_key, override_key
from ._refusals import Reply, bad_cost, too_large
from ._request import Request
from ._resolvers import FAILED, Resolving, cost_value, limit_value, mode_value
from ._routes import select

_DIGITS = re.compile(rb"[0-9]+")

#: The routes chosen for this many (method, path) pairs are remembered:
#: the canonical path of a path seen before is not worked out again.
ROUTE_CACHE_SIZE = 4096


class Check:
    """One policy checked for one request."""

    __slots__ = ("cost", "key", "override_key", "policy", "shadow", "subject")

    def __init__(
        self,
        policy: Policy,
        subject: str,
        key: str,
        override_key: Optional[str],
        cost: int,
        shadow: bool = False,
    ) -> None:
        self.policy = policy
        self.subject = subject
        self.key = key
        self.override_key = override_key
        self.cost = cost
        #: A policy of its own `mode: shadow`: checked in RL.ALLs of its
        #: own, never enforced (docs/http.md, Shadow mode).
        self.shadow = shadow

    def __repr__(self) -> str:
        return f"Check({self.policy.name!r}, {self.subject!r}, {self.key!r}, cost={self.cost})"

    def clause(self, refund: bool = False) -> Clause:
        """The policy's clause of RL.ALL: ``COST n``, or ``REFUND n`` (not
        for a concurrency policy, whose slots are released instead)."""
        p = self.policy
        algorithm = p.algorithm
        cost, back = (1, self.cost) if refund else (self.cost, None)
        # A refund gives units back: it books no turn and starts no block.
        block = p.block_arg if not refund else None
        if algorithm == "fixed":
            return Fixed(
                self.key,
                p.limit,
                p.window_arg,
                aligned=p.aligned,
                cost=cost,
                refund=back,
                block=block,
                override=self.override_key,
            )
        if algorithm == "concurrency":
            if refund:
                raise ValueError("a concurrency policy's slots are released, not refunded")
            return self.slots(override=True)
        if algorithm == "token":
            return Token(
                self.key,
                p.limit,
                p.window_arg,
                burst=p.burst,
                cost=cost,
                refund=back,
                reserve=p.queue_arg if not refund else None,
                block=block,
                override=self.override_key,
            )
        return Sliding(
            self.key,
            p.limit,
            p.window_arg,
            approx=algorithm == "approx",
            cost=cost,
            refund=back,
            block=block,
            override=self.override_key,
        )

    def slots(self, override: bool) -> Concurrent:
        """A concurrency policy's ``CONCURRENT key limit lease [COST n]``,
        with ``OVERRIDE okey`` when it takes slots; without, it names the
        lease a release gives back (docs/http.md, Concurrency limits: a
        release frees the same slot either way, and names one key)."""
        p = self.policy
        return Concurrent(
            self.key,
            p.limit,
            f"{p.lease_ms}ms",
            cost=self.cost,
            override=self.override_key if override else None,
        )

    @property
    def takes_slots(self) -> bool:
        return self.policy.algorithm == "concurrency"


@dataclass
class Plan:
    """A request's checks, before Redis: ``needs_body`` when a body-bytes
    policy applies and the request has no Content-Length (the adapter reads
    the body, up to max_body_bytes + 1 bytes, and ``costs`` follows)."""

    request: Request
    route: Optional[Route]
    #: Each applying policy with its subject, in check order.
    applying: List[Tuple[Policy, str]]
    needs_body: bool = False
    checks: List[Check] = field(default_factory=list)
    #: A policy counts after the response (`count: failed`/`succeeded`).
    settles: bool = False
    #: The request's mode: enforce or shadow (a mode resolver's, else the
    #: configuration's).
    mode: str = "enforce"
    #: The resolvers to call before the checks are made (``resolved``);
    #: nothing is made per request for a configuration without them.
    resolving: Sequence[Resolving] = ()
    #: The costs the cost resolvers gave, by policy name (None: a 400).
    resolved_costs: Optional[Dict[str, Optional[int]]] = None


class Quick:
    """The plan of a route (or a view's own policies) made once, for the
    commonest check: one policy that needs nothing of a request but its
    subject (a constant cost, counted on every request, enforced, no
    resolver, queue or slots). A request on it sends these words around
    its keys, and no Plan, Check, clause or Exchange is made for it; the
    guards make the whole plan only when Redis fails (docs/http.md, One
    decision per request)."""

    __slots__ = (
        "head",
        "key_head",
        "key_tail",
        "middle",
        "okey_tail",
        "policies",
        "policy",
        "route",
    )

    def __init__(self, config: Config, route: Optional[Route], policy: Policy) -> None:
        self.route = route
        self.policy = policy
        #: For the headers, which take every checked policy.
        self.policies = (policy,)
        key, okey = "\0key", "\0override"
        check = Check(policy, "", key, okey if policy.overridable else None, policy.cost)  # type: ignore[arg-type]
        # The words all_args sends for this one clause: the key third,
        # OVERRIDE's key (Clause puts it) last.
        words: List[Arg] = ["RL.ALL", *check.clause().args()]
        assert words[2] is key
        assert not policy.overridable or words[-1] is okey
        self.head = tuple(words[:2])
        self.middle = tuple(words[3:-1] if policy.overridable else words[3:])
        self.key_head = f"{config.prefix}{{"
        self.key_tail = f"}}:{policy.name}"
        self.okey_tail = f"}}:override:{policy.name}" if policy.overridable else None

    def key(self, subject: str) -> str:
        """limiter_key's key for ``subject``."""
        return self.key_head + subject + self.key_tail

    def words(self, subject: str) -> List[Arg]:
        """The RL.ALL of a request whose subject is ``subject``."""
        key_head = self.key_head
        words: List[Arg] = [*self.head, key_head + subject + self.key_tail, *self.middle]
        if self.okey_tail is not None:
            words.append(key_head + subject + self.okey_tail)
        return words

    def plan(self, config: Config, request: Request, subject: str) -> Plan:
        """The whole plan of this request, as ``plan`` makes it."""
        planned = Plan(request, self.route, [(self.policy, subject)], mode=config.mode)
        return costs(config, planned, None)  # type: ignore[return-value] # a constant cost


def quick_of(
    config: Config,
    route: Optional[Route],
    names: Optional[Sequence[str]],
    policies: Sequence[Policy],
) -> Optional[Quick]:
    """The Quick plan of a route (or of a view's ``names``), made the first
    time a request asks, or None when its requests need the whole plan."""
    cache = config.quick_cache
    at: Any = (tuple(names) if names is not None else None) if route is None else id(route)
    try:
        found: Optional[Quick] = cache[at]
    except KeyError:
        found = Quick(config, route, policies[0]) if _quick(config, policies) else None
        if len(cache) >= ROUTE_CACHE_SIZE:
            cache.clear()  # views' names made per call: start again rather than grow
        cache[at] = found
    return found


def _quick(config: Config, policies: Sequence[Policy]) -> bool:
    """Whether a request with these policies needs nothing but its subject."""
    if len(policies) != 1 or config.mode != "enforce" or config.resolving:
        return False
    policy = policies[0]
    return (
        policy.algorithm != "concurrency"
        and type(policy.cost) is int
        and policy.count == "all"
        and policy.mode == "enforce"
        and policy.queue_ms is None
        and policy.limit_resolver is None
        and policy.cost_resolver is None
    )


def plan(
    config: Config, request: Request, names: Optional[Sequence[str]] = None, quick: bool = False
) -> Union[Plan, Reply, Tuple[Quick, str], None]:
    """The request's checks, or a refusal made before any check (400, 413),
    or None when no policy applies (no check, no headers). ``names``: a
    view's own policies (a decorator, a dependency), in place of the
    routes. ``quick``: a route's Quick plan and the request's subject
    instead of its Plan, where the route has one."""
    found = route_policies(config, request, names)
    if found is None or not found[1]:
        return None
    route, policies = found
    ip = client_ip(request.peer, request, config.trusted_proxies)
    if is_exempt(ip, config):
        return None
    if quick:
        fast = quick_of(config, route, names, policies)
        if fast is not None:
            return fast, subject(fast.policy, request, ip, config)
    applying = [(policy, subject(policy, request, ip, config)) for policy in policies]
    planned = Plan(request, route, applying, mode=config.mode)
    if config.resolving:
        planned.resolving = resolvers_to_call(config, policies)
        if planned.resolving:
            return planned
    return sized(config, planned)


def resolvers_to_call(config: Config, policies: Sequence[Policy]) -> List[Resolving]:
    """The resolvers a request with these policies calls: the mode's,
    then each policy's limit and cost ones, in check order."""
    calls = []
    if config.mode_resolver is not None:
        calls.append(Resolving("mode", None, *config.mode_resolver))
    for policy in policies:
        if policy.limit_resolver is not None:
            calls.append(Resolving("limit", policy.name, *policy.limit_resolver))
        if policy.cost_resolver is not None:
            calls.append(Resolving("cost", policy.name, *policy.cost_resolver))
    return calls


def resolved(config: Config, planned: Plan, values: Sequence[Any]) -> Union[Plan, Reply, None]:
    """The plan once its resolvers gave ``values`` (docs/http.md,
    Resolvers): None when the mode is off or no policy applies any more
    (no check, no headers); a limit resolver's nothing drops its policy, a
    limit replaces the policy's for this request."""
    dropped = set()
    limits: Dict[str, Tuple[int, int, Optional[int]]] = {}
    costs: Dict[str, Optional[int]] = {}
    for call, value in zip(planned.resolving, values):
        if call.kind == "mode":
            mode = mode_value(call.name, value)
            if mode == "off":
                return None
            planned.mode = mode
        elif call.kind == "limit":
            assert call.policy is not None
            given = limit_value(call.name, value)
            if given is None:
                dropped.add(call.policy)
            else:
                limits[call.policy] = given
        else:
            assert call.policy is not None
            costs[call.policy] = None if value is FAILED else cost_value(value)
    planned.resolving = ()
    planned.resolved_costs = costs
    if dropped or limits:
        applying = []
        for policy, who in planned.applying:
            if policy.name in dropped:
                continue
            given = limits.get(policy.name)
            if given is not None:
                limit, window_ms, burst = given
                policy = dataclasses.replace(
                    policy,
                    limit=limit,
                    window_ms=window_ms if policy.algorithm != "concurrency" else 0,
                    burst=burst,
                    limit_resolver=None,
                )
            applying.append((policy, who))
        if not applying:
            return None
        planned.applying = applying
    return sized(config, planned)


def sized(config: Config, planned: Plan) -> Union[Plan, Reply]:
    """The plan's costs, once the body's size is known: from its
    Content-Length, or ``needs_body`` when a body-bytes policy applies to
    a body without one."""
    length = None
    if config.body_costs and any(p.cost == "body-bytes" for p, _ in planned.applying):
        request = planned.request
        declared = request.header("content-length")
        if declared is not None and _DIGITS.fullmatch(declared):
            length = decimal(declared)
        elif request.header("transfer-encoding") is not None or declared is None:
            planned.needs_body = True
            return planned
    return costs(config, planned, length)


def route_policies(
    config: Config, request: Request, names: Optional[Sequence[str]] = None
) -> Optional[Tuple[Optional[Route], Sequence[Policy]]]:
    """The route a request gets (None without routes or with ``names``)
    and its policies in check order; None when routes exist and none
    matches: the request is not checked (docs/http.md, Routes)."""
    if names is not None:
        cached = config.named_cache
        key = tuple(names)
        policies = cached.get(key)
        if policies is None:
            policies = named(config, key)  # a name not defined raises, and is not kept
            if len(cached) >= ROUTE_CACHE_SIZE:
                cached.clear()
            cached[key] = policies
        return None, policies
    if not config.routes:
        return None, config.policies
    cache = config.route_cache
    path = request.route_path()
    try:
        route = cache[request.method, path]
    except KeyError:
        route = select(config.routes, request.method, path)
        if len(cache) >= ROUTE_CACHE_SIZE:
            cache.clear()  # paths with ids in them: start again rather than grow
        cache[request.method, path] = route
    return (route, route.policies) if route is not None else None


def subject_of(
    config: Config, request: Request, policy: Policy, ip: Optional[IpAddress]
) -> Tuple[str, bool]:
    """The subject ``policy`` counts for ``request`` (whose client is
    ``ip``), and whether the client is exempt (docs/http.md, Exemptions:
    then no policy is checked)."""
    return subject(policy, request, ip, config), is_exempt(ip, config)


def costs(config: Config, planned: Plan, body_length: Optional[int]) -> Union[Plan, Reply]:
    """Each check's cost and keys; a body over max_body_bytes is 413, a bad
    cost header 400 (docs/http.md, Cost)."""
    if body_length is not None and body_length > config.max_body_bytes:
        return too_large(config.max_body_bytes)
    planned.needs_body = False
    checks = []
    settles = False
    for policy, who in planned.applying:
        if policy.count != "all":
            settles = True
        if policy.cost == "body-bytes":
            cost = min(max(1, body_length or 0), MAX_UNITS)
        elif policy.cost == "header":
            assert policy.cost_header is not None
            header_cost = cost_header(planned.request.header(policy.cost_header.lower()))
            if header_cost is None:
                return bad_cost(policy)
            cost = header_cost
        elif policy.cost == "code":
            resolved_cost = (planned.resolved_costs or {}).get(policy.name)
            if resolved_cost is None:
                return bad_cost(policy)
            cost = resolved_cost
        else:
            cost = policy.cost  # type: ignore[assignment]
        checks.append(
            Check(
                policy,
                who,
                limiter_key(config.prefix, who, policy),
                override_key(config.prefix, who, policy) if policy.overridable else None,
                cost,
                # Under the top-level shadow the whole exchange is on trial.
                policy.mode == "shadow" and planned.mode == "enforce",
            )
        )
    planned.checks = checks
    planned.settles = settles
    return planned


def cost_header(value: Optional[bytes]) -> Optional[int]:
    """A ``header:<Name>`` cost: 1 when the header is absent; its value
    (all its lines joined, trimmed) when it is ASCII digits, leading zeros
    allowed, making 1 to 2^50; None, a 400, for anything else."""
    if value is None:
        return 1
    if not _DIGITS.fullmatch(value):
        return None
    cost = decimal(value)
    return cost if 1 <= cost <= MAX_UNITS else None


def named(config: Config, names: Sequence[str]) -> Tuple[Policy, ...]:
    """The policies of these names; a name not defined is a ValueError
    (raised where a decorator or dependency is written, at import)."""
    by_name = {p.name: p for p in config.policies}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(
            f"librl: no policy named {', '.join(map(repr, missing))} in the configuration "
            f"(defined: {', '.join(by_name)})"
        )
    return tuple(by_name[n] for n in names)
