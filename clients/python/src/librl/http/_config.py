"""The configuration (docs/http.md, Configuration reference): loaded from a
YAML or JSON file or a dict, validated completely before any request, each
error naming the field by its path (``policies[0].burst``)."""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple, Union

from ._routes import route_key

MAX_UNITS = 2**50
_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d)?")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}
_RATE_UNITS = {
    "s": 1000,
    "second": 1000,
    "m": 60_000,
    "minute": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
}
_POLICY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_METHOD = re.compile(r"[A-Z][A-Z_-]*")
_PREFIX = re.compile(r"[\x21-\x7a\x7c\x7e]{0,64}")  # printable ASCII but { } and space


class ConfigError(ValueError):
    """A configuration refused at start-up; the message names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"librl: configuration: {path}: {message}")
        self.path = path


IpNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


@dataclass(frozen=True)
class Policy:
    name: str
    #: fixed, sliding, approx or token.
    algorithm: str
    #: The limit per window (token: the rate).
    limit: int
    window_ms: int
    aligned: bool = False
    burst: Optional[int] = None
    #: ip, api-key, user, header or global.
    key: str = "ip"
    #: The header of ``key: header:<Name>``, lower case.
    key_header: Optional[str] = None
    #: An integer, or "body-bytes", or "header" (then ``cost_header``).
    cost: Union[int, str] = 1
    #: The cost header's name as the configuration writes it.
    cost_header: Optional[str] = None
    #: all, failed or succeeded.
    count: str = "all"
    overridable: bool = False

    @property
    def window_s(self) -> int:
        return math.ceil(self.window_ms / 1000)


@dataclass(frozen=True)
class Route:
    #: As the configuration writes it (the decision hook reports it).
    path: str
    methods: Optional[FrozenSet[str]]
    policies: Tuple[Policy, ...]
    #: The path requests are compared with: canonical, in lower case.
    key: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", route_key(self.path))


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
    exempt_loopback: bool = True
    api_key_header: str = "x-api-key"
    max_body_bytes: int = 8_388_608
    deny_status: int = 429
    deny_body: str = "problem"
    deny_message: str = "Too Many Requests"
    #: The unparsed document, for logs.
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def load(source: Union[Config, Mapping[str, Any], str, os.PathLike[str]]) -> Config:
    """A Config from a Config (as is), a dict, or the path of a YAML or JSON
    file (``.json`` is read as JSON, anything else as YAML, which JSON also
    is)."""
    if isinstance(source, Config):
        return source
    if isinstance(source, Mapping):
        return parse(source)
    path = os.fspath(source)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError("file", f"cannot read {path}: {e.strerror}") from None
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ConfigError("file", f"{path} is not JSON: {e}") from None
    else:
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                "file",
                f"{path}: reading YAML needs PyYAML (pip install 'librl[asgi]', or any of "
                "the framework extras); a .json file needs nothing",
            ) from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError("file", f"{path} is not YAML: {e}") from None
    return parse(doc)


def parse(doc: object) -> Config:
    if not isinstance(doc, Mapping):
        raise ConfigError("(document)", f"must be a mapping, not {_kind(doc)}")
    _known(
        "",
        doc,
        {
            "prefix",
            "mode",
            "fail",
            "timeout",
            "headers",
            "trusted_proxies",
            "exempt_loopback",
            "api_key_header",
            "max_body_bytes",
            "local_max_keys",
            "deny",
            "policies",
            "routes",
        },
    )
    prefix = doc.get("prefix", "rl:")
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ConfigError(
            "prefix",
            f"{prefix!r}: up to 64 printable ASCII characters without braces or spaces "
            "(braces would break the cluster hash tag)",
        )
    mode = _choice("mode", doc.get("mode", "enforce"), ("enforce", "shadow"))
    fail = _choice("fail", doc.get("fail", "open"), ("open", "closed", "local"))
    if fail == "local":
        raise ConfigError(
            "fail", "local is the Rust integration's mode; in Python use open or closed"
        )
    timeout_ms = duration_ms("timeout", doc.get("timeout", "250ms"))
    if timeout_ms > 60_000:
        raise ConfigError("timeout", f"{doc.get('timeout')!r} is over the 60 s maximum")
    headers = _choice("headers", doc.get("headers", "both"), ("both", "ietf", "legacy", "none"))
    proxies = doc.get("trusted_proxies", [])
    if not isinstance(proxies, list):
        raise ConfigError("trusted_proxies", f"must be a list, not {_kind(proxies)}")
    trusted: List[IpNetwork] = []
    for i, net in enumerate(proxies):
        try:
            if not isinstance(net, str):
                raise ValueError
            trusted.append(ipaddress.ip_network(net, strict=False))
        except ValueError:
            raise ConfigError(
                f"trusted_proxies[{i}]", f"{net!r} is not an address or a network"
            ) from None
    exempt = _bool("exempt_loopback", doc.get("exempt_loopback", True))
    api_key_header = doc.get("api_key_header", "X-Api-Key")
    if not isinstance(api_key_header, str) or not _HEADER_NAME.fullmatch(api_key_header):
        raise ConfigError("api_key_header", f"{api_key_header!r} is not a header name")
    max_body = _int("max_body_bytes", doc.get("max_body_bytes", 8_388_608), 1, MAX_UNITS)
    _int("local_max_keys", doc.get("local_max_keys", 100_000), 1, 2**32)
    deny = doc.get("deny", {})
    if not isinstance(deny, Mapping):
        raise ConfigError("deny", f"must be a mapping, not {_kind(deny)}")
    _known("deny.", deny, {"status", "body", "message"})
    status = _int("deny.status", deny.get("status", 429), 400, 599)
    body = _choice("deny.body", deny.get("body", "problem"), ("problem", "text"))
    message = deny.get("message", "Too Many Requests")
    if not isinstance(message, str) or not 1 <= len(message.encode()) <= 1024:
        raise ConfigError("deny.message", "must be a string of 1 to 1024 bytes")
    if "policies" not in doc:
        raise ConfigError("policies", "missing: the configuration needs at least one policy")
    raw_policies = doc["policies"]
    if not isinstance(raw_policies, list):
        raise ConfigError("policies", f"must be a list, not {_kind(raw_policies)}")
    policies: Dict[str, Policy] = {}
    for i, raw in enumerate(raw_policies):
        policy = _policy(f"policies[{i}]", raw)
        if policy.name in policies:
            raise ConfigError(f"policies[{i}].name", f"{policy.name!r} is used twice")
        policies[policy.name] = policy
    routes = doc.get("routes")
    if routes is None:
        routes = []
    if not isinstance(routes, list):
        raise ConfigError("routes", f"must be a list, not {_kind(routes)}")
    return Config(
        policies=tuple(policies.values()),
        routes=tuple(_route(f"routes[{i}]", r, policies) for i, r in enumerate(routes)),
        prefix=prefix,
        mode=mode,
        fail=fail,
        timeout_ms=timeout_ms,
        headers=headers,
        trusted_proxies=tuple(trusted),
        exempt_loopback=exempt,
        api_key_header=api_key_header.lower(),
        max_body_bytes=max_body,
        deny_status=status,
        deny_body=body,
        deny_message=message,
        source=doc,
    )


def _policy(path: str, raw: object) -> Policy:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"must be a mapping, not {_kind(raw)}")
    _known(
        path + ".",
        raw,
        {
            "name",
            "algorithm",
            "limit",
            "window",
            "rate",
            "aligned",
            "burst",
            "key",
            "cost",
            "count",
            "overridable",
        },
    )
    name = raw.get("name")
    if name is None:
        raise ConfigError(f"{path}.name", "missing")
    if not isinstance(name, str) or not _POLICY_NAME.fullmatch(name):
        raise ConfigError(f"{path}.name", f"{name!r}: 1 to 64 of A-Z a-z 0-9 - _ .")
    if "algorithm" not in raw:
        raise ConfigError(f"{path}.algorithm", "missing: fixed, sliding, approx or token")
    algorithm = _choice(
        f"{path}.algorithm", raw["algorithm"], ("fixed", "sliding", "approx", "token")
    )
    if "rate" in raw:
        for other in ("limit", "window"):
            if other in raw:
                raise ConfigError(f"{path}.rate", f"rate replaces limit and window: drop {other}")
        limit, window_ms = _rate(f"{path}.rate", raw["rate"])
    else:
        if "limit" not in raw:
            raise ConfigError(f"{path}.limit", "missing (or give rate, e.g. 100/minute)")
        limit = _int(f"{path}.limit", raw["limit"], 1, MAX_UNITS)
        if "window" not in raw:
            raise ConfigError(f"{path}.window", "missing (or give rate, e.g. 100/minute)")
        window_ms = _window(f"{path}.window", raw["window"])
    aligned = _bool(f"{path}.aligned", raw.get("aligned", False))
    if "aligned" in raw and algorithm != "fixed":
        raise ConfigError(f"{path}.aligned", f"aligned is for fixed policies, not {algorithm}")
    burst = None
    if "burst" in raw:
        if algorithm != "token":
            raise ConfigError(f"{path}.burst", f"burst is for token policies, not {algorithm}")
        burst = _int(f"{path}.burst", raw["burst"], 1, MAX_UNITS)
    key, key_header = _key(f"{path}.key", raw.get("key", "ip"))
    cost: Union[int, str]
    cost_header = None
    raw_cost = raw.get("cost", 1)
    if isinstance(raw_cost, str):
        if raw_cost == "body-bytes":
            cost = raw_cost
        elif raw_cost.startswith("header:") and _HEADER_NAME.fullmatch(raw_cost[7:]):
            cost, cost_header = "header", raw_cost[7:]
        else:
            raise ConfigError(
                f"{path}.cost", f"{raw_cost!r}: an integer, body-bytes or header:<Name>"
            )
    else:
        cost = _int(f"{path}.cost", raw_cost, 1, MAX_UNITS)
    count = _choice(f"{path}.count", raw.get("count", "all"), ("all", "failed", "succeeded"))
    return Policy(
        name=name,
        algorithm=algorithm,
        limit=limit,
        window_ms=window_ms,
        aligned=aligned,
        burst=burst,
        key=key,
        key_header=key_header,
        cost=cost,
        cost_header=cost_header,
        count=count,
        overridable=_bool(f"{path}.overridable", raw.get("overridable", False)),
    )


def _key(path: str, raw: object) -> Tuple[str, Optional[str]]:
    if raw in ("ip", "api-key", "user", "global"):
        return str(raw), None
    if isinstance(raw, str) and raw.startswith("header:"):
        name = raw[7:]
        if _HEADER_NAME.fullmatch(name):
            return "header", name.lower()
        raise ConfigError(path, f"{raw!r}: header:<Name> needs a header name")
    raise ConfigError(path, f"{raw!r}: ip, api-key, user, header:<Name> or global")


def _route(path: str, raw: object, policies: Mapping[str, Policy]) -> Route:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"must be a mapping, not {_kind(raw)}")
    _known(path + ".", raw, {"path", "methods", "policies"})
    prefix = raw.get("path")
    if prefix is None:
        raise ConfigError(f"{path}.path", "missing")
    if not isinstance(prefix, str) or not prefix.startswith("/"):
        raise ConfigError(f"{path}.path", f"{prefix!r} must start with /")
    methods = raw.get("methods")
    if methods is not None:
        if not isinstance(methods, list):
            raise ConfigError(f"{path}.methods", f"must be a list, not {_kind(methods)}")
        for j, method in enumerate(methods):
            if not isinstance(method, str) or not _METHOD.fullmatch(method):
                raise ConfigError(
                    f"{path}.methods[{j}]", f"{method!r} is not an upper-case method name"
                )
    names = raw.get("policies")
    if not isinstance(names, list):
        raise ConfigError(f"{path}.policies", "missing or not a list of policy names")
    chosen = []
    for j, name in enumerate(names):
        if not isinstance(name, str) or name not in policies:
            raise ConfigError(f"{path}.policies[{j}]", f"{name!r} is not a defined policy")
        chosen.append(policies[name])
    return Route(prefix, None if methods is None else frozenset(methods), tuple(chosen))


def duration_ms(path: str, raw: object) -> int:
    """``250ms``, ``1s``, ``15m``, ``24h``, ``7d``, or an integer of seconds;
    positive."""
    text = str(raw) if type(raw) is int else raw
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigError(
            path, f"{raw!r} is not a duration: an integer and ms, s, m, h or d (1500ms, not 1.5s)"
        )
    ms = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if ms == 0:
        raise ConfigError(path, f"{raw!r} must be positive")
    return ms


def _window(path: str, raw: object) -> int:
    ms = duration_ms(path, raw)
    if ms > 3650 * 86_400_000:
        raise ConfigError(path, f"{raw!r} is over the 3650 days maximum")
    return ms


def _rate(path: str, raw: object) -> Tuple[int, int]:
    """``100/minute``, ``5/10s``, ``3/1500ms``."""
    if isinstance(raw, str) and "/" in raw:
        count, unit = raw.split("/", 1)
        if count.strip().isdigit():
            limit = int(count)
            unit = unit.strip()
            if 1 <= limit <= MAX_UNITS:
                if unit in _RATE_UNITS:
                    return limit, _RATE_UNITS[unit]
                try:
                    return limit, _window(path, unit)
                except ConfigError:
                    pass
    raise ConfigError(path, f"{raw!r}: N/unit, unit s, m, h, d (or their names) or a duration")


def _int(path: str, raw: object, lo: int, hi: int) -> int:
    if type(raw) is not int or not lo <= raw <= hi:
        raise ConfigError(path, f"{raw!r}: an integer from {lo} to {_show(hi)}")
    return raw


def _show(n: int) -> str:
    return "2^50" if n == MAX_UNITS else "2^32" if n == 2**32 else str(n)


def _bool(path: str, raw: object) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(path, f"{raw!r}: true or false")
    return raw


def _choice(path: str, raw: object, choices: Tuple[str, ...]) -> str:
    if raw not in choices:
        raise ConfigError(path, f"{raw!r}: one of {', '.join(choices)}")
    return str(raw)


def _known(path: str, raw: Mapping[Any, Any], fields: set[str]) -> None:
    for name in raw:
        if name not in fields:
            raise ConfigError(
                f"{path}{name}", f"unknown field (known: {', '.join(sorted(fields))})"
            )


def _kind(value: object) -> str:
    return type(value).__name__
