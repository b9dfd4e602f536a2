"""The HTTP contract without a framework and without I/O (docs/http.md):
which policies apply, who the subject is, the keys, the RL.ALL plan per
subject with refunds across subjects, the headers, the refusals and the
decision hook's event. The framework adapters translate requests and
responses; the guards (_guard.py) run the Redis exchanges this file
describes, with a blocking or an asyncio client.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

from .._args import Clause, Fixed, Sliding, Token
from .._types import Decision
from ._config import MAX_UNITS, Config, Policy, Route
from ._decide import Call, Verdict, settlement
from ._routes import decoded_path, select

log = logging.getLogger("librl.http")

_SAFE_VALUE = re.compile(rb"[A-Za-z0-9._~@+=:/-]{1,64}")
_DIGITS = re.compile(rb"[0-9]+")
IpAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


@dataclass
class Request:
    """What the contract reads of a request. ``headers`` maps lower-case
    names to every line of that name, as bytes (a ``str`` line is text a
    WSGI server decoded from Latin-1, and is encoded back so);
    ``raw_path`` is the path routes are matched on, as the adapter
    received it (raw, or decoded once by the server with ``?`` escaped:
    see ``decoded_path``; None: ``path`` encoded so); ``path`` is the
    path as the framework shows it, reported to the decision hook;
    ``user`` is the framework's authenticated user, as the adapter's
    resolver found it."""

    method: str
    path: str
    headers: Mapping[str, Sequence[Union[bytes, str]]]
    peer: Optional[str]
    user: Optional[str] = None
    raw_path: Optional[bytes] = None

    def header(self, name: str) -> Optional[bytes]:
        """Every line of the header ``name`` (lower case) joined by ``, ``,
        as HTTP combines them, trimmed of spaces and tabs; None when the
        request has no such line (docs/http.md, Identity: header values are
        bytes)."""
        lines = self.headers.get(name)
        if not lines:
            return None
        return b", ".join(_latin1(line) for line in lines).strip(b" \t")

    def route_path(self) -> bytes:
        if self.raw_path is not None:
            return self.raw_path
        return decoded_path(self.path.encode())


@dataclass(frozen=True)
class Check:
    """One policy checked for one request."""

    policy: Policy
    subject: str
    key: str
    override_key: Optional[str]
    cost: int

    def clause(self, refund: bool = False) -> Clause:
        p = self.policy
        window = f"{p.window_ms}ms"
        cost = {"refund": self.cost} if refund else {"cost": self.cost}
        if p.algorithm == "token":
            return Token(
                self.key, p.limit, window, burst=p.burst, override=self.override_key, **cost
            )
        if p.algorithm == "fixed":
            return Fixed(
                self.key, p.limit, window, aligned=p.aligned, override=self.override_key, **cost
            )
        return Sliding(
            self.key,
            p.limit,
            window,
            approx=p.algorithm == "approx",
            override=self.override_key,
            **cost,
        )


@dataclass(frozen=True)
class Reply:
    """A response the middleware makes itself (a refusal)."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes


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
    """What the decision hook receives, once per checked request
    (docs/http.md, Decision hook)."""

    #: allowed, denied, would_deny (shadow), fail_open or fail_closed.
    outcome: str
    method: str
    path: str
    #: The matched route's path, or None.
    route: Optional[str]
    checks: List[CheckReport]
    #: Why Redis could not answer, when it could not.
    error: Optional[str] = None
    #: Decided in the process: never, in Python (no `local` fail mode).
    local: bool = False


#: The decision hook: any callable taking a DecisionEvent.
Hook = Callable[[DecisionEvent], Any]


@dataclass
class Plan:
    """A request's checks, before Redis: ``needs_body`` when a body-bytes
    policy applies and the request has no Content-Length (the adapter reads
    the body, up to max_body_bytes + 1 bytes, and calls ``Engine.costs``)."""

    request: Request
    route: Optional[Route]
    applying: List[Tuple[Policy, str]]
    needs_body: bool = False
    checks: List[Check] = field(default_factory=list)


class Engine:
    """The contract for one configuration; one per middleware."""

    def __init__(self, config: Config, hook: Optional[Hook] = None) -> None:
        self.config = config
        self.hook = hook
        self._warned_at = -math.inf

    # -- which checks --------------------------------------------------------

    def plan(
        self, request: Request, names: Optional[Sequence[str]] = None
    ) -> Union[Plan, Reply, None]:
        """The request's checks, or a refusal made before any check (400,
        413), or None when no policy applies (no check, no headers).
        ``names``: a view's own policies (a decorator, a dependency), in
        place of the routes."""
        if names is not None:
            route, policies = None, self.named(names)
        else:
            route, policies = self._route(request)
        if not policies:
            return None
        ip = self._client_ip(request)
        applying = []
        for policy in policies:
            subject = self._subject(policy, request, ip)
            if self.config.exempt_loopback and subject.startswith("ip:") and _loopback(ip):
                continue
            applying.append((policy, subject))
        if not applying:
            return None
        plan = Plan(request, route, applying)
        length = None
        if any(p.cost == "body-bytes" for p, _ in applying):
            declared = request.header("content-length")
            if declared is not None and _DIGITS.fullmatch(declared):
                length = _bounded_int(declared)
            elif request.header("transfer-encoding") is not None or declared is None:
                plan.needs_body = True
                return plan
        return self.costs(plan, length)

    def costs(self, plan: Plan, body_length: Optional[int]) -> Union[Plan, Reply]:
        """Each check's cost; a body over max_body_bytes is 413, a bad cost
        header 400."""
        config = self.config
        if body_length is not None and body_length > config.max_body_bytes:
            return problem(413, f"The body may be at most {config.max_body_bytes} bytes.")
        plan.needs_body = False
        prefix = config.prefix
        checks = []
        for policy, subject in plan.applying:
            if policy.cost == "body-bytes":
                cost = min(max(1, body_length or 0), MAX_UNITS)
            elif policy.cost == "header":
                assert policy.cost_header is not None
                header_cost = cost_header(plan.request.header(policy.cost_header.lower()))
                if header_cost is None:
                    return problem(
                        400,
                        f"{policy.cost_header} must be an integer from 1 to 2^50.",
                        policy=policy.name,
                    )
                cost = header_cost
            else:
                cost = int(policy.cost)
            base = f"{prefix}{{{subject}}}"
            checks.append(
                Check(
                    policy,
                    subject,
                    f"{base}:{policy.name}",
                    f"{base}:override:{policy.name}" if policy.overridable else None,
                    cost,
                )
            )
        plan.checks = checks
        return plan

    def named(self, names: Sequence[str]) -> Tuple[Policy, ...]:
        """The policies of these names; a name not defined is a ValueError
        (raised where a decorator or dependency is written, at import)."""
        by_name = {p.name: p for p in self.config.policies}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ValueError(
                f"librl: no policy named {', '.join(map(repr, missing))} in the configuration "
                f"(defined: {', '.join(by_name)})"
            )
        return tuple(by_name[n] for n in names)

    def _route(self, request: Request) -> Tuple[Optional[Route], Tuple[Policy, ...]]:
        routes = self.config.routes
        if not routes:
            return None, self.config.policies
        best = select(routes, request.method, request.route_path())
        return (best, best.policies) if best is not None else (None, ())

    # -- who -----------------------------------------------------------------

    def _client_ip(self, request: Request) -> Optional[IpAddress]:
        peer = _parse_ip(request.peer) if request.peer else None
        if peer is None or not self._trusted(peer):
            return peer
        forwarded = request.header("x-forwarded-for") or b""
        # Empty list elements are skipped, as RFC 9110 reads a list.
        hops = [hop.strip(b" \t").decode("latin-1") for hop in forwarded.split(b",")]
        hops = [hop for hop in hops if hop]
        if not hops:
            real = request.header("x-real-ip")
            return (_parse_hop(real.decode("latin-1")) if real else None) or peer
        client = peer
        for hop in reversed(hops):
            ip = _parse_hop(hop)
            if ip is None:
                break  # past an unreadable hop nothing can be believed
            client = ip
            if not self._trusted(ip):
                break
        return client

    def _trusted(self, ip: IpAddress) -> bool:
        return any(ip in net for net in self.config.trusted_proxies)

    def _subject(self, policy: Policy, request: Request, ip: Optional[IpAddress]) -> str:
        kind = policy.key
        if kind == "global":
            return "global"
        if kind == "header":
            assert policy.key_header is not None
            value = request.header(policy.key_header)
            if value:
                return f"header:{policy.key_header}:{_safe(value)}"
        if kind == "user" and request.user:
            # A user name is text: its UTF-8 bytes.
            return f"user:{_safe(request.user.encode())}"
        if kind in ("api-key", "user"):
            api_key = request.header(self.config.api_key_header)
            if api_key:
                return f"api-key:{_hashed(api_key)}"
        return f"ip:{ip}" if ip is not None else "ip:unknown"

    # -- the exchange with Redis ----------------------------------------------

    def settlement(self, checks: List[Check], verdict: Verdict, status: int) -> List[Call]:
        """After the handler: the `count: failed`/`succeeded` refunds."""
        if not verdict.admitted:
            return []
        return settlement(checks, [c.policy.count for c in checks], status)

    def has_refunds(self, checks: List[Check]) -> bool:
        return any(check.policy.count != "all" for check in checks)

    # -- the answer -----------------------------------------------------------

    def decided(
        self, plan: Plan, verdict: Verdict
    ) -> Tuple[bool, List[Tuple[str, str]], Optional[Reply]]:
        """(pass the request on?, the rate-limit headers, the refusal if
        not); reports to the hook."""
        checks, replies = plan.checks, verdict.replies
        shadow = self.config.mode == "shadow"
        worst = most_restrictive(replies)
        refused = not verdict.admitted and not shadow
        headers = self._headers(checks, replies, worst, refused)
        outcome = "allowed" if verdict.admitted else "would_deny" if shadow else "denied"
        if outcome == "would_deny":
            log.warning(
                "librl shadow mode: %s %s would be denied by policy %r",
                plan.request.method,
                plan.request.path,
                checks[worst].policy.name,
            )
        self._report(plan, outcome, replies)
        if not refused:
            return True, headers, None
        return False, headers, self._denial(checks[worst], replies[worst], headers)

    def failed(self, plan: Plan, error: BaseException) -> Optional[Reply]:
        """Redis did not answer: None passes the request (fail open), else
        the 503."""
        reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        if self.config.fail == "open":
            now = time.monotonic()
            if now - self._warned_at >= 10:
                self._warned_at = now
                log.warning("librl: rate limiting skipped (fail open): %s", reason)
            self._report(plan, "fail_open", None, reason)
            return None
        log.error("librl: request refused (fail closed): %s", reason)
        self._report(plan, "fail_closed", None, reason)
        return problem(
            503,
            "The rate limiter is unavailable, and this service does not admit unlimited requests.",
        )

    def _report(
        self,
        plan: Plan,
        outcome: str,
        replies: Optional[List[Decision]],
        error: Optional[str] = None,
    ) -> None:
        if self.hook is None:
            return
        event = DecisionEvent(
            outcome=outcome,
            method=plan.request.method,
            path=plan.request.path,
            route=plan.route.path if plan.route is not None else None,
            checks=[
                CheckReport(
                    c.policy.name, c.subject, c.key, c.cost, replies[i] if replies else None
                )
                for i, c in enumerate(plan.checks)
            ],
            error=error,
        )
        try:
            self.hook(event)
        except Exception:
            log.exception("librl: the decision hook failed (ignored)")

    def _headers(
        self, checks: List[Check], replies: List[Decision], worst: int, refused: bool
    ) -> List[Tuple[str, str]]:
        out: List[Tuple[str, str]] = []
        style = self.config.headers
        reply = replies[worst]
        name = checks[worst].policy.name
        reset = _ceil_s(reply.reset_after_ms)
        if style in ("both", "ietf"):
            items = []
            for check, r in zip(checks, replies):
                unit = ';qu="content-bytes"' if check.policy.cost == "body-bytes" else ""
                items.append(
                    f'"{check.policy.name}";q={shown_limit(check.policy, r)};'
                    f"w={check.policy.window_s}{unit}"
                )
            out.append(("RateLimit-Policy", ", ".join(items)))
            out.append(("RateLimit", f'"{name}";r={reply.remaining};t={reset}'))
        if style in ("both", "legacy"):
            out.append(("X-RateLimit-Limit", str(shown_limit(checks[worst].policy, reply))))
            out.append(("X-RateLimit-Remaining", str(reply.remaining)))
            out.append(("X-RateLimit-Reset", str(reset)))
        if refused and reply.retry_after_ms >= 0:
            out.append(("Retry-After", str(max(1, _ceil_s(reply.retry_after_ms)))))
        return out

    def _denial(self, check: Check, reply: Decision, headers: List[Tuple[str, str]]) -> Reply:
        config = self.config
        if config.deny_body == "text":
            return Reply(
                config.deny_status,
                [("Content-Type", "text/plain; charset=utf-8"), *headers],
                config.deny_message.encode(),
            )
        policy = check.policy
        limit = shown_limit(policy, reply)
        plan = f"{limit} per {_show_window(policy.window_ms)}"
        if reply.retry_after_ms >= 0:
            detail = (
                f'Rate limit "{policy.name}" ({plan}) exceeded; retry in '
                f"{max(1, _ceil_s(reply.retry_after_ms))} s."
            )
        else:
            detail = (
                f'This request costs {check.cost}, more than rate limit "{policy.name}" '
                f"({plan}) ever admits at once."
            )
        denial = problem(
            config.deny_status,
            detail,
            title="Too Many Requests",
            policy=policy.name,
            limit=limit,
            retry_after=reply.retry_after_ms if reply.retry_after_ms >= 0 else None,
        )
        return Reply(denial.status, denial.headers + headers, denial.body)


_TITLES = {
    400: "Bad Request",
    413: "Content Too Large",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


def problem(status: int, detail: str, title: Optional[str] = None, **extra: Any) -> Reply:
    """An RFC 9457 problem response."""
    body = {
        "type": "about:blank",
        "title": title or _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        **extra,
    }
    return Reply(
        status,
        [("Content-Type", "application/problem+json")],
        json.dumps(body, separators=(",", ":")).encode(),
    )


def shown_limit(policy: Policy, reply: Decision) -> int:
    """The limit the headers show: a token policy's rate per window (its
    reply's limit is the capacity), unless an override changed it."""
    if policy.algorithm == "token" and policy.burst is not None and reply.limit == policy.burst:
        return policy.limit
    return reply.limit


def most_restrictive(replies: List[Decision]) -> int:
    """The denying reply with the longest wait (-1, never, is the longest);
    else the smallest share of its limit left, then the later reset, then
    the first."""
    denied = [i for i, r in enumerate(replies) if not r.allowed]
    if denied:
        return max(
            denied,
            key=lambda i: (
                math.inf if replies[i].retry_after_ms < 0 else replies[i].retry_after_ms,
                -i,
            ),
        )
    best = 0
    for i in range(1, len(replies)):
        a, b = replies[i], replies[best]
        # remaining/limit compared without division.
        left_a, left_b = a.remaining * b.limit, b.remaining * a.limit
        if left_a < left_b or (left_a == left_b and a.reset_after_ms > b.reset_after_ms):
            best = i
    return best


def _ceil_s(ms: int) -> int:
    return -(-ms // 1000) if ms > 0 else 0


def _show_window(ms: int) -> str:
    """A window in a denial's detail: whole seconds, else milliseconds."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def cost_header(value: Optional[bytes]) -> Optional[int]:
    """A ``header:<Name>`` cost (docs/http.md, Cost): 1 when the header is
    absent; its digits (leading zeros allowed) when they make 1 to 2^50;
    None, a 400, for anything else."""
    if value is None:
        return 1
    if not _DIGITS.fullmatch(value):
        return None
    cost = _bounded_int(value)
    return cost if 1 <= cost <= MAX_UNITS else None


def _bounded_int(digits: bytes) -> int:
    """ASCII digits as an integer, capped past 2^50 (int() refuses texts of
    thousands of digits, and any such number is out of every bound)."""
    digits = digits.lstrip(b"0")
    return int(digits or b"0") if len(digits) <= 16 else MAX_UNITS + 1


def _latin1(line: Union[bytes, str]) -> bytes:
    return line if isinstance(line, bytes) else line.encode("latin-1")


def _hashed(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()[:32]


def _safe(value: bytes) -> str:
    """A user or header value as it appears in a key: verbatim when safe,
    else hashed (a brace must not break the hash tag)."""
    if _SAFE_VALUE.fullmatch(value):
        return value.decode("ascii")
    return "sha256-" + _hashed(value)


def _parse_ip(text: str) -> Optional[IpAddress]:
    """An address in canonical form, IPv4-mapped IPv6 as IPv4, an IPv6
    zone index dropped (docs/http.md, Identity)."""
    address, zone, _ = text.partition("%")
    if zone and ":" not in address:
        return None  # only an IPv6 address has a zone
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _parse_hop(hop: str) -> Optional[IpAddress]:
    """``203.0.113.7``, ``2001:db8::1``, ``203.0.113.7:4711`` or
    ``[2001:db8::1]:4711``."""
    hop = hop.strip()
    ip = _parse_ip(hop)
    if ip is not None:
        return ip
    if hop.startswith("["):
        end = hop.find("]")
        return _parse_ip(hop[1:end]) if end > 0 else None
    host, sep, port = hop.rpartition(":")
    if sep and port.isdigit() and "." in host:
        return _parse_ip(host)
    return None


def _loopback(ip: Optional[IpAddress]) -> bool:
    return ip is not None and ip.is_loopback
