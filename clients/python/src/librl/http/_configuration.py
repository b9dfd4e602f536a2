"""The configuration (docs/http.md, Configuration reference and Start-up
validation): loaded from a YAML or JSON file or a dict, then read in two
steps. A walker over the schema's generated tree (_schema.py) checks every
field's name, kind, enum, bounds, pattern and duration and fills in the
defaults; then code checks the cross-field rules the schema lists, and
builds the Config. Every error names the field by its path, with the
messages of conformance/README.md, Configuration errors."""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple, Union

from . import _schema
from ._resolvers import NONE, Resolver, Resolvers, ResolversSource, resolvers_of
from ._routes import folded

MAX_UNITS = 2**50

#: The keys that need no ``identities`` entry (docs/http.md, Identity).
_BUILT_IN_KEYS = ("ip", "global", "api-key", "user")

_DURATION = re.compile(r"([1-9][0-9]*)(ms|s|m|h|d)?", re.IGNORECASE | re.ASCII)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: rate = OWS count OWS ("/" / "per") OWS period OWS; "per" needs
#: whitespace after it only where a letter follows (docs/http.md, Rates).
_RATE = re.compile(
    r"[ \t]*([0-9]+)[ \t]*(?:/[ \t]*|per(?:[ \t]+|(?=[0-9])))(.*?)[ \t]*",
    re.IGNORECASE | re.ASCII | re.DOTALL,
)
_RATE_PERIOD = re.compile(
    r"(?:([0-9]+)[ \t]*)?(s|m|h|d|seconds?|minutes?|hours?|days?)",
    re.IGNORECASE | re.ASCII,
)


class ConfigError(ValueError):
    """A configuration refused at start-up; the message names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"librl: configuration: {path}: {message}")
        self.path = path


IpNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


@dataclass(frozen=True)
class Identity:
    """A subject made of sources, tried in order (docs/http.md, Named
    identities): a named identity, or one source inline as a policy's key."""

    #: What the subject starts with: the identity's name, or an inline
    #: source's kind and name (``cookie:sid``, ``authorization:bearer``).
    label: str
    #: (kind, name): header (its name in lower case), cookie, query,
    #: authorization, user (no name) or ip (last).
    sources: Tuple[Tuple[str, str], ...]
    #: The value is always hashed: api-key, and any identity with an
    #: authorization source.
    hashed: bool


@dataclass(frozen=True)
class Policy:
    name: str
    #: fixed, sliding, approx, token or concurrency.
    algorithm: str
    #: The limit per window (token: the rate; concurrency: the slots).
    limit: int
    #: The window; 0 for a concurrency policy, which has none.
    window_ms: int
    aligned: bool = False
    burst: Optional[int] = None
    #: ip, api-key, user, header or global; an identity's name; or an
    #: inline source's kind (cookie, query, authorization).
    key: str = "ip"
    #: The header of ``key: header:<Name>``, lower case.
    key_header: Optional[str] = None
    #: An integer, or "body-bytes", or "header" (then ``cost_header``), or
    #: "code" (then ``cost_resolver``).
    cost: Union[int, str] = 1
    #: The cost header's name as the configuration writes it.
    cost_header: Optional[str] = None
    #: all, failed or succeeded.
    count: str = "all"
    overridable: bool = False
    #: A named identity, or an inline cookie:, query: or authorization:
    #: source: the subject is read from it; None: ``key``'s built-in way.
    identity: Optional[Identity] = None
    #: concurrency only: how long a slot is held at most.
    lease_ms: Optional[int] = None
    #: enforce or shadow: the policy's own mode, else the top-level one.
    mode: str = "enforce"
    #: ``cost: code:<name>``: the name and the resolver.
    cost_resolver: Optional[Tuple[str, Resolver]] = field(default=None, compare=False)
    #: ``limit: code:<name>``: the name and the resolver, which gives each
    #: request's limit and window (``limit`` and ``window_ms`` are 0 here).
    limit_resolver: Optional[Tuple[str, Resolver]] = field(default=None, compare=False)
    #: ``block``: once this policy denies a subject, it is locked out
    #: that long (docs/http.md, Lockouts and queues).
    block_ms: Optional[int] = None
    #: ``queue`` (token only): a request over the rate waits up to that
    #: long for its turn instead of being refused.
    queue_ms: Optional[int] = None
    #: The window as the clause sends it (``60000ms``), made once.
    window_arg: str = field(init=False, repr=False, compare=False)
    #: BLOCK's and RESERVE's durations as the clause sends them, or None.
    block_arg: Optional[str] = field(init=False, repr=False, compare=False)
    queue_arg: Optional[str] = field(init=False, repr=False, compare=False)
    #: The policy's item of RateLimit-Policy before and after its limit
    #: (docs/http.md, Headers), made once.
    item_head: str = field(init=False, repr=False, compare=False)
    item_tail: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "window_arg", f"{self.window_ms}ms")
        object.__setattr__(self, "item_head", f'"{self.name}";q=')
        # A concurrency policy has no window: slots held at once.
        window = "" if self.algorithm == "concurrency" else f";w={self.window_s}"
        unit = ';qu="content-bytes"' if self.cost == "body-bytes" else ""
        object.__setattr__(self, "item_tail", f"{window}{unit}")
        block, queue = self.block_ms, self.queue_ms
        object.__setattr__(self, "block_arg", None if block is None else f"{block}ms")
        object.__setattr__(self, "queue_arg", None if queue is None else f"{queue}ms")

    @property
    def window_s(self) -> int:
        return math.ceil(self.window_ms / 1000)

    @property
    def shadow(self) -> bool:
        return self.mode == "shadow"


#: The headers the integration sets itself, which a refusal's ``headers``
#: may not name (docs/http.md, Configuration reference: deny).
_OWN_HEADERS = frozenset(
    (
        "ratelimit",
        "ratelimit-policy",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "retry-after",
        "content-type",
        "content-length",
    )
)


@dataclass(frozen=True)
class Refusal:
    """A refusal's shape (docs/http.md, Refusals): ``deny``, a route's
    ``deny`` over it, or ``fail_deny``."""

    status: int
    #: problem, text or json.
    body: str
    #: The text body.
    message: str
    #: The text body's Content-Type.
    content_type: str = "text/plain; charset=utf-8"
    #: The json body, as given.
    json: Any = None
    #: Sent on this refusal besides the integration's own.
    headers: Tuple[Tuple[str, str], ...] = ()
    #: The text or json body, encoded once.
    payload: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.body == "json":
            payload = json.dumps(self.json, separators=(",", ":"), ensure_ascii=False).encode()
        else:
            payload = self.message.encode()
        object.__setattr__(self, "payload", payload)


DENY = Refusal(429, "problem", "Too Many Requests")
FAIL_DENY = Refusal(503, "problem", "Service Unavailable")


@dataclass(frozen=True)
class Route:
    #: As the configuration writes it (the decision hook reports it).
    path: str
    methods: Optional[FrozenSet[str]]
    policies: Tuple[Policy, ...]
    #: The refusal of this route's denials: its ``deny`` over the
    #: top-level one; None: the top-level one.
    deny: Optional[Refusal] = None
    #: The path requests are compared with: canonical, in lower case.
    folded: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", folded(self.path))


@dataclass(frozen=True)
class Config:
    policies: Tuple[Policy, ...]
    routes: Tuple[Route, ...] = ()
    prefix: str = "rl:"
    mode: str = "enforce"
    fail: str = "open"
    timeout_ms: int = 250
    headers: str = "both"
    trusted_proxies: Tuple[IpNetwork, ...] = ()
    #: The clients no policy limits (exempt_loopback's networks included).
    exempt: Tuple[IpNetwork, ...] = ()
    exempt_loopback: bool = False
    ipv6_prefix: int = 56
    #: seconds or unix: what X-RateLimit-Reset holds.
    legacy_reset: str = "seconds"
    api_key_header: str = "x-api-key"
    max_body_bytes: int = 8_388_608
    #: The most limiter keys the `local` fail mode holds.
    local_max_keys: int = 100_000
    #: ``mode: code:<name>``: the name and the resolver of each request's mode.
    mode_resolver: Optional[Tuple[str, Resolver]] = field(default=None, compare=False)
    #: Some request calls a resolver (a cost, limit or mode one).
    resolving: bool = False
    #: Some policy has ``queue``: an admitted request may wait for its turn.
    queues: bool = False
    #: Some policy costs ``body-bytes``: a request's size may be needed.
    body_costs: bool = False
    #: The refusal of a denied request (a route's own ``deny`` aside).
    deny: Refusal = DENY
    #: The refusal of ``fail: closed``.
    fail_deny: Refusal = FAIL_DENY
    #: The unparsed document, for logs.
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: Whether each client address seen is exempt (_identity.is_exempt).
    exempt_cache: Dict[Any, bool] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    #: The route chosen for each (method, path) seen (_plan.route_policies).
    route_cache: Dict[Tuple[str, bytes], Optional[Route]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    #: A view's own policies by their names (_plan.route_policies).
    named_cache: Dict[Tuple[str, ...], Tuple[Policy, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    #: Each route's (by id), each view's names' and the route-less
    #: policies' (None) quick plan, or None where a request needs the
    #: whole one (_plan.quick_of).
    quick_cache: Dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)


def load(
    source: Union[Config, Mapping[str, Any], str, os.PathLike[str]],
    resolvers: ResolversSource = None,
) -> Config:
    """A Config from a Config (as is), a dict, or the path of a YAML or JSON
    file (``.json`` is read as JSON, anything else as YAML, which JSON also
    is), whose ``${VAR}`` references are replaced from the environment
    first (a dict is used as given); ``code:<name>`` values name
    ``resolvers`` (docs/http.md, Resolvers)."""
    from ._substitution import substitute  # it raises this module's ConfigError

    if isinstance(source, Config):
        return source
    if isinstance(source, Mapping):
        return parse(source, resolvers)
    path = os.fspath(source)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError("(file)", f"cannot read {path}: {e.strerror}") from None
    text = substitute(text, os.environ)
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ConfigError("(file)", f"{path} is not JSON: {e}") from None
    else:
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                "(file)",
                f"{path}: reading YAML needs PyYAML (pip install 'librl[asgi]', or any of "
                "the framework extras); a .json file needs nothing",
            ) from None
        try:
            doc = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError) as e:  # ValueError: an integer of 5000 digits
            raise ConfigError("(file)", f"{path} is not YAML: {e}") from None
    return parse(doc, resolvers)


def parse(doc: object, resolvers: ResolversSource = None) -> Config:
    """The Config of a document (a dict as JSON or YAML gives it), whose
    ``code:<name>`` values name ``resolvers``."""
    tree = _object(_schema.ROOT, doc, "")
    return _build(tree, doc if isinstance(doc, Mapping) else {}, resolvers_of(resolvers))


# -- the walker: the schema's tree, field by field ------------------------------


def _object(name: str, value: object, path: str) -> Dict[str, Any]:
    """An object of the schema: unknown fields refused, each field read by
    its kind, absent ones given their default; the values as the walker
    reads them (durations in ms, rates as (count, ms))."""
    if not isinstance(value, Mapping):
        raise ConfigError(path or "(document)", "must be an object")
    fields = _schema.OBJECTS[name]
    known = {f.name for f in fields}
    for key in value:
        if key not in known:
            raise ConfigError(_join(path, str(key)), "unknown field")
    out: Dict[str, Any] = {}
    for f in fields:
        where = _join(path, f.name)
        if f.name in value:
            out[f.name] = _value(f, value[f.name], where)
        elif f.required:
            raise ConfigError(where, "missing")
        elif f.default is not None:
            out[f.name] = _value(f, json.loads(f.default), where)
    return out


def read_field(object_name: str, name: str, value: object) -> Any:
    """One field of one of the schema's objects, read as the walker reads
    it (a duration in ms, a rate as (count, ms)); a ConfigError naming the
    field when it is refused."""
    (f,) = [f for f in _schema.OBJECTS[object_name] if f.name == name]
    return _value(f, value, name)


def _value(f: _schema.Field, value: object, path: str) -> Any:
    kind = f.kind
    if kind == "object":
        assert f.object is not None
        return _object(f.object, value, path)
    if kind == "list":
        if not isinstance(value, list):
            raise ConfigError(path, "must be a list")
        if f.min_items is not None and len(value) < f.min_items:
            raise ConfigError(path, "must not be empty")
        assert f.items is not None
        return [_value(f.items, item, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind == "string":
        return _string(f, value, path)
    if kind == "integer":
        number = _whole(value)
        if number is None or not _in_bounds(f, number):
            raise ConfigError(path, f"must be an integer from {f.minimum} to {f.maximum}")
        return number
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConfigError(path, "must be true or false")
        return value
    if kind == "duration":
        ms = duration_ms(value)
        if ms is None or not _in_duration_bounds(f, ms):
            raise ConfigError(
                path,
                f"must be a duration from {f.duration_min_ms} ms to {f.duration_max_ms} ms "
                "(an integer and ms, s, m, h or d; seconds without a unit)",
            )
        return ms
    if kind == "rate":
        parsed = rate(value) if isinstance(value, str) else None
        if parsed is None or not _in_bounds(f, parsed[0]) or not _in_duration_bounds(f, parsed[1]):
            raise ConfigError(
                path,
                f"must be a rate: a count from {f.minimum} to {f.maximum} per a period from "
                f"{f.duration_min_ms} ms to {f.duration_max_ms} ms "
                "(100/minute, 5 per 10s, 3/1500ms)",
            )
        return parsed
    if kind == "int-or-string":
        number = _whole(value)
        if (number is not None and _in_bounds(f, number)) or (
            isinstance(value, str) and _fits(f, value)
        ):
            return number if number is not None else value
        raise ConfigError(path, f"must be {f.expected}")
    if kind == "map":
        # An object whose names the document chooses (identities, a
        # refusal's headers): each name matches key_pattern, each value
        # is read as items.
        if not isinstance(value, Mapping):
            raise ConfigError(path, "must be an object")
        assert f.key_pattern is not None
        assert f.items is not None
        out: Dict[str, Any] = {}
        for name, item in value.items():
            where = f"{path}.{name}"
            if not isinstance(name, str) or re.search(f.key_pattern, name) is None:
                raise ConfigError(where, f"must be {f.key_expected}")
            out[name] = _value(f.items, item, where)
        return out
    if kind == "json":
        if value is None:
            raise ConfigError(path, f"must be {f.expected}")
        return value
    raise AssertionError(f"the schema has a kind this reader lacks: {kind}")


def _string(f: _schema.Field, value: object, path: str) -> str:
    if f.choices:
        if value not in f.choices or not isinstance(value, str):
            raise ConfigError(path, f"must be one of {', '.join(f.choices)}")
        return value
    if not isinstance(value, str) or not _fits(f, value):
        raise ConfigError(path, f"must be {f.expected or 'a string'}")
    return value


def _fits(f: _schema.Field, text: str) -> bool:
    """A string within the field's pattern and lengths (in UTF-8 bytes)."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return False  # a lone surrogate (JSON "\\ud800") is no text
    return (
        (f.pattern is None or re.search(f.pattern, text) is not None)
        and (f.min_length is None or size >= f.min_length)
        and (f.max_length is None or size <= f.max_length)
    )


def _whole(value: object) -> Optional[int]:
    """A number whose value is whole (``5`` and ``5.0`` alike), as JSON
    Schema's integer; a boolean is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _in_bounds(f: _schema.Field, number: int) -> bool:
    return (f.minimum is None or number >= f.minimum) and (f.maximum is None or number <= f.maximum)


def _in_duration_bounds(f: _schema.Field, ms: int) -> bool:
    return (f.duration_min_ms is None or ms >= f.duration_min_ms) and (
        f.duration_max_ms is None or ms <= f.duration_max_ms
    )


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# -- the grammars (docs/http.md, Durations and Rates) ---------------------------


def decimal(digits: Union[str, bytes]) -> int:
    """ASCII digits (leading zeros allowed) as an integer; past 18
    significant digits, 10^18, which every bound refuses (int() refuses
    texts of thousands of digits)."""
    text = digits.decode("ascii") if isinstance(digits, bytes) else digits
    text = text.lstrip("0")
    return int(text or "0") if len(text) <= 18 else 10**18


def duration_ms(value: object) -> Optional[int]:
    """A duration in ms, unbounded: the module's grammar (``250ms``, ``1S``,
    ``15m``, ``60`` seconds), or a whole number of seconds; None for
    anything else (``1.5s``, ``05s``, ``5 s``, ``true``)."""
    seconds = _whole(value)
    if seconds is not None:
        return seconds * 1000 if seconds > 0 else None
    if not isinstance(value, str):
        return None
    match = _DURATION.fullmatch(value)
    if match is None:
        return None
    unit = (match.group(2) or "s").lower()
    return decimal(match.group(1)) * _UNIT_MS[unit]


def rate(text: str) -> Optional[Tuple[int, int]]:
    """A rate's (count, period in ms), unbounded: ``100/minute``,
    ``5 per 2 minutes``, ``5/10s``, ``3/1500ms``; None when ``text`` is not
    one."""
    match = _RATE.fullmatch(text)
    if match is None:
        return None
    count, period = decimal(match.group(1)), match.group(2)
    words = _RATE_PERIOD.fullmatch(period)
    if words is not None:
        n = decimal(words.group(1)) if words.group(1) is not None else 1
        return count, n * _UNIT_MS[words.group(2)[0].lower()]  # n = 0: out of bounds
    ms = duration_ms(period)
    return (count, ms) if ms is not None else None


# -- the cross-field rules, and the Config --------------------------------------


def _code(value: Any) -> Optional[str]:
    """The name of a ``code:<name>`` value; None for another value."""
    if isinstance(value, str) and value.startswith("code:"):
        return value[len("code:") :]
    return None


def _registered(path: str, kind: str, name: str, resolvers: Resolvers) -> Tuple[str, Resolver]:
    """The resolver ``code:<name>`` names (rule resolvers-registered)."""
    found = resolvers.of(kind).get(name)
    if found is None:
        module = resolvers.module
        where = f" (the module {module} has no function {name})" if module else ""
        raise ConfigError(path, f'no {kind} resolver is registered as "{name}"{where}')
    return name, found


def _build(tree: Mapping[str, Any], doc: Mapping[str, Any], resolvers: Resolvers = NONE) -> Config:
    mode_name = _code(tree["mode"])
    mode_resolver = None if mode_name is None else _registered("mode", "mode", mode_name, resolvers)
    identities = _identities(tree.get("identities", {}))
    trusted = _networks("trusted_proxies", tree["trusted_proxies"])
    exempt = _networks("exempt", tree["exempt"])
    if tree["exempt_loopback"]:
        exempt += [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")]
    policies: Dict[str, Policy] = {}
    for i, raw in enumerate(tree["policies"]):
        policy = _policy(f"policies[{i}]", raw, tree["mode"], identities, resolvers)
        if policy.name in policies:
            raise ConfigError(
                f"policies[{i}].name", f'"{policy.name}" is used by an earlier policy'
            )
        policies[policy.name] = policy
    deny = _refusal("deny", tree["deny"], {})
    return Config(
        policies=tuple(policies.values()),
        routes=tuple(
            _route(f"routes[{i}]", r, policies, tree["deny"]) for i, r in enumerate(tree["routes"])
        ),
        prefix=tree["prefix"],
        mode=tree["mode"],
        fail=tree["fail"],
        timeout_ms=tree["timeout"],
        headers=tree["headers"],
        trusted_proxies=tuple(trusted),
        exempt=tuple(exempt),
        exempt_loopback=tree["exempt_loopback"],
        ipv6_prefix=tree["ipv6_prefix"],
        legacy_reset=tree["legacy_reset"],
        api_key_header=tree["api_key_header"].lower(),
        max_body_bytes=tree["max_body_bytes"],
        local_max_keys=tree["local_max_keys"],
        mode_resolver=mode_resolver,
        resolving=mode_resolver is not None
        or any(p.cost_resolver or p.limit_resolver for p in policies.values()),
        queues=any(p.queue_ms is not None for p in policies.values()),
        body_costs=any(p.cost == "body-bytes" for p in policies.values()),
        deny=deny,
        fail_deny=_refusal("fail_deny", tree["fail_deny"], {}),
        source=doc,
    )


def _networks(path: str, texts: List[str]) -> List[IpNetwork]:
    """Addresses and CIDR networks (an address is its /32 or /128)."""
    out: List[IpNetwork] = []
    for i, text in enumerate(texts):
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ConfigError(f"{path}[{i}]", "must be an IP address or a CIDR network") from None
    return out


def _identities(raw: Mapping[str, List[str]]) -> Dict[str, Identity]:
    """The named identities; the rules identity-names-not-reserved and
    ip-source-last."""
    out: Dict[str, Identity] = {}
    for name, texts in raw.items():
        if name in ("ip", "global"):
            raise ConfigError(f"identities.{name}", "ip and global are reserved")
        sources: List[Tuple[str, str]] = []
        for j, text in enumerate(texts):
            if sources and sources[-1][0] == "ip":
                raise ConfigError(f"identities.{name}[{j}]", "a source after ip is never read")
            sources.append(_source(text))
        hashed = name == "api-key" or any(kind == "authorization" for kind, _ in sources)
        out[name] = Identity(name, tuple(sources), hashed)
    return out


def _source(text: str) -> Tuple[str, str]:
    """A source as (kind, name): a header's name in lower case (headers
    are read so), a cookie's and a query parameter's as written."""
    kind, _, name = text.partition(":")
    return kind, name.lower() if kind == "header" else name


def _policy(
    path: str,
    raw: Mapping[str, Any],
    mode: str,
    identities: Mapping[str, Identity],
    resolvers: Resolvers,
) -> Policy:
    algorithm = raw["algorithm"]
    limit_name = _code(raw.get("limit"))
    if algorithm == "concurrency":
        slots = _slots(path, raw)
        limit, window_ms = (0 if limit_name is not None else slots), 0
    elif "lease" in raw:
        raise ConfigError(f"{path}.lease", f"lease is for concurrency policies, not {algorithm}")
    elif "rate" in raw:
        if "limit" in raw or "window" in raw:
            raise ConfigError(f"{path}.rate", "give rate, or limit and window, not both")
        limit, window_ms = raw["rate"]
    elif limit_name is not None:
        limit, window_ms = 0, 0  # each request's, from the resolver
    else:
        for name in ("limit", "window"):
            if name not in raw:
                raise ConfigError(f"{path}.{name}", "missing (give limit and window, or rate)")
        limit, window_ms = raw["limit"], raw["window"]
    if raw["aligned"] and algorithm != "fixed":
        raise ConfigError(f"{path}.aligned", f"aligned is for fixed policies, not {algorithm}")
    if "burst" in raw and algorithm != "token":
        raise ConfigError(f"{path}.burst", f"burst is for token policies, not {algorithm}")
    if "queue" in raw and algorithm != "token":
        raise ConfigError(f"{path}.queue", f"queue is for token policies, not {algorithm}")
    if limit_name is not None:
        # Rule code-limit-alone: the resolver gives the limit and window.
        for name in ("window", "rate", "burst", "overridable"):
            if name in raw and raw[name] is not False:
                raise ConfigError(
                    f"{path}.{name}", f"a policy whose limit is code:{limit_name} has no {name}"
                )
    key, colon, key_header = raw["key"].partition(":")
    identity = identities.get(key) if not colon else None
    if not colon and identity is None and key not in _BUILT_IN_KEYS:
        raise ConfigError(f"{path}.key", f'no identity is named "{key}"')
    if colon and key != "header":
        # One source inline: the subject keeps its kind and name.
        kind, name = _source(raw["key"])
        label = f"{kind}:{name.lower() if kind == 'authorization' else name}"
        identity = Identity(label, ((kind, name),), kind == "authorization")
        key_header = ""
    cost: Union[int, str] = raw["cost"]
    cost_header = None
    if isinstance(cost, str) and cost.startswith("header:"):
        cost, cost_header = "header", cost[len("header:") :]
    cost_name = _code(cost)
    cost_resolver = None
    if cost_name is not None:
        cost = "code"
        cost_resolver = _registered(f"{path}.cost", "cost", cost_name, resolvers)
    limit_resolver = None
    if limit_name is not None:
        limit_resolver = _registered(f"{path}.limit", "limit", limit_name, resolvers)
    return Policy(
        name=raw["name"],
        algorithm=algorithm,
        limit=limit,
        window_ms=window_ms,
        aligned=raw["aligned"],
        burst=raw.get("burst"),
        key=key,
        key_header=key_header.lower() or None,
        identity=identity,
        cost=cost,
        cost_header=cost_header,
        cost_resolver=cost_resolver,
        limit_resolver=limit_resolver,
        count=raw["count"],
        overridable=raw["overridable"],
        lease_ms=raw.get("lease"),
        block_ms=raw.get("block"),
        queue_ms=raw.get("queue"),
        # The top-level shadow puts every policy on trial (docs/http.md,
        # Shadow mode); a policy's own mode only matters under enforce (or
        # a mode resolver's enforce).
        mode=mode if mode == "shadow" else raw.get("mode", "enforce"),
    )


def _slots(path: str, raw: Mapping[str, Any]) -> int:
    """A concurrency policy's limit (docs/http.md, Concurrency limits):
    slots held at once, each for at most ``lease``; it has no window, and
    holds every request it admits until its response is finished."""
    for name in ("window", "rate", "block"):
        if name in raw:
            raise ConfigError(
                f"{path}.{name}", f"a concurrency policy has no {name}; give limit and lease"
            )
    for name in ("limit", "lease"):
        if name not in raw:
            raise ConfigError(
                f"{path}.{name}", "missing (a concurrency policy gives limit and lease)"
            )
    if raw["count"] != "all":
        raise ConfigError(
            f"{path}.count",
            "must be all on a concurrency policy (its slots are freed when the response is "
            "finished)",
        )
    limit: int = raw["limit"]
    return limit


def _route(
    path: str, raw: Mapping[str, Any], policies: Mapping[str, Policy], deny: Mapping[str, Any]
) -> Route:
    chosen = []
    for j, name in enumerate(raw["policies"]):
        if name not in policies:
            raise ConfigError(f"{path}.policies[{j}]", f'no policy is named "{name}"')
        chosen.append(policies[name])
    methods = raw.get("methods")
    own = raw.get("deny")
    return Route(
        raw["path"],
        None if methods is None else frozenset(methods),
        tuple(chosen),
        None if own is None else _refusal(f"{path}.deny", own, deny),
    )


def _refusal(path: str, own: Mapping[str, Any], base: Mapping[str, Any]) -> Refusal:
    """A refusal from its fields (``own``) over ``base``'s (a route's deny
    over the top-level one: each field it gives replaces, ``headers``
    whole); the rules deny-json-with-json-body and deny-headers-are-extra."""
    raw = {**base, **own}
    if raw["body"] == "json" and "json" not in raw:
        raise ConfigError(f"{path}.json", "missing (body: json sends it)")
    if "json" in own and raw["body"] != "json":
        raise ConfigError(f"{path}.json", "json is sent only with body: json")
    seen: Dict[str, str] = {}
    for name in raw.get("headers", {}) if "headers" in own else ():
        lower = name.lower()
        if lower in _OWN_HEADERS:
            raise ConfigError(f"{path}.headers.{name}", "the integration sets this header itself")
        if lower in seen:
            raise ConfigError(f"{path}.headers.{name}", f'"{name}" is given twice')
        seen[lower] = name
    return Refusal(
        status=raw["status"],
        body=raw["body"],
        message=raw["message"],
        content_type=raw["content_type"],
        json=raw.get("json"),
        headers=tuple(raw.get("headers", {}).items()),
    )
