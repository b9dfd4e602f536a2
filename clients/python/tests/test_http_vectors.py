"""conformance/vectors/*.json, without Redis (conformance/vectors/README.md):
every vector of every file through the functions the integrations call on
requests, each file's function by a thin adapter below. A file this runner
does not list, or a function it does not know, fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from librl import Decision
from librl.http import Config, ConfigError, Engine, Request, parse
from librl.http._configuration import read_field
from librl.http._headers import response_headers, retry_after_s, shown_limit
from librl.http._hook import outcome
from librl.http._identity import client_ip
from librl.http._keys import limiter_key, override_key
from librl.http._plan import cost_header, route_policies, subject_of
from librl.http._refusals import (
    Reply,
    _denial_problem_of,
    bad_cost,
    denied,
    too_large,
    unavailable,
)
from librl.http._request import header_value
from librl.http._routes import canonical_path
from librl.http._sources import source_value
from librl.http._substitution import substitute
from servers import ROOT
from test_http_local import algorithm

VECTORS = ROOT / "conformance" / "vectors"

#: A policy for the documents a vector gives without one.
ANY_POLICY = {"name": "any", "algorithm": "fixed", "limit": 1, "window": "1s"}


def as_bytes(value: Any) -> bytes:
    """A vector's bytes: a JSON string's UTF-8, or ``{"hex": ...}``."""
    if isinstance(value, dict):
        return bytes.fromhex(value["hex"])
    assert isinstance(value, str), value
    return value.encode()


def request(
    headers: List[List[Any]],
    peer: Optional[str] = None,
    user: Any = None,
    latin1: bool = False,
    query: Optional[str] = None,
    attributes: Optional[Dict[str, Any]] = None,
) -> Request:
    """A request with these header lines: bytes, as an ASGI server gives
    them, or (``latin1``) Latin-1 text, as a WSGI server does; and the
    attributes the application's code left on it."""
    lines: Dict[str, List[Any]] = {}
    for name, value in headers:
        raw = as_bytes(value)
        lines.setdefault(name.lower(), []).append(raw.decode("latin-1") if latin1 else raw)
    name = as_bytes(user).decode() if user is not None else None
    raw_query = query.encode() if query is not None else None
    return Request("GET", "/", lines, peer, name, query=raw_query, attributes=attributes)


def decision(reply: List[int]) -> Decision:
    """A limiter's six integers, and a concurrency clause's seventh, the lease."""
    allowed, count, retry_after, limit, remaining, reset_after, *lease = reply
    return Decision(bool(allowed), count, retry_after, limit, remaining, reset_after, *lease)


def _unused(request: Any) -> Any:
    raise AssertionError("a vector's resolver is never called")


#: The resolvers config-errors.json has registered (its README).
CONFORMANCE_RESOLVERS = {
    "cost": {"conformance-cost": _unused},
    "limit": {"conformance-limit": _unused},
    "mode": {"conformance-mode": _unused},
}


def config_with(policies: List[Any], resolvers: Any = None, **fields: Any) -> Config:
    return parse({**fields, "policies": policies}, resolvers)


# -- one adapter per function ---------------------------------------------------


def duration(given: Dict[str, Any]) -> Any:
    where = "config" if given["field"] == "timeout" else "policy"
    try:
        return {"ms": read_field(where, given["field"], given["value"])}
    except ConfigError:
        return {"error": True}


def rate(given: Dict[str, Any]) -> Any:
    try:
        limit, window_ms = read_field("policy", "rate", given["value"])
    except ConfigError:
        return {"error": True}
    return {"limit": limit, "window_ms": window_ms}


def cost(given: Dict[str, Any]) -> Any:
    lines = [as_bytes(line) for line in given["lines"]]
    # ASGI hands the lines over as bytes, WSGI as Latin-1 text: one answer.
    answers = {cost_header(header_value(lines)), cost_header(header_value(_latin1(lines)))}
    assert len(answers) == 1, answers
    found = answers.pop()
    return {"cost": found} if found is not None else {"error": "bad-cost"}


def _latin1(lines: List[bytes]) -> List[str]:
    return [line.decode("latin-1") for line in lines]


def path(given: Dict[str, Any]) -> bytes:
    return canonical_path(as_bytes(given["path"]))


def route(given: Dict[str, Any]) -> Any:
    config = config_with(
        [{**ANY_POLICY, "name": name} for name in given["policies"]], routes=given["routes"]
    )
    raw = Request(given["method"], "/", {}, None, raw_path=as_bytes(given["path"]))
    found = route_policies(config, raw)
    if found is None:
        return None
    chosen, policies = found
    index = next((i for i, r in enumerate(config.routes) if r is chosen), None)
    return {"route": index, "policies": [p.name for p in policies]}


def client(given: Dict[str, Any]) -> Any:
    trusted = config_with([ANY_POLICY], trusted_proxies=given["trusted_proxies"]).trusted_proxies
    answers = {
        str(ip) if ip is not None else None
        for ip in (
            client_ip(given["peer"], request(given["headers"], latin1=latin1), trusted)
            for latin1 in (False, True)
        )
    }
    assert len(answers) == 1, answers
    return answers.pop()


def key(given: Dict[str, Any]) -> Any:
    config = config_with([given["policy"]], **given["config"])
    policy = config.policies[0]
    asked = given["request"]
    answers = []
    for latin1 in (False, True):
        req = request(
            asked["headers"],
            asked["peer"],
            asked["user"],
            latin1,
            asked.get("query"),
            asked.get("attributes"),
        )
        ip = client_ip(req.peer, req, config.trusted_proxies)
        who, exempt = subject_of(config, req, policy, ip)
        answers.append(
            {
                "subject": who,
                "key": limiter_key(config.prefix, who, policy),
                "override_key": override_key(config.prefix, who, policy),
                "exempt": exempt,
            }
        )
    assert answers[0] == answers[1], answers
    return answers[0]


def source(given: Dict[str, Any]) -> Any:
    kind, _, name = given["source"].partition(":")
    asked = given["request"]
    answers = {
        source_value(
            kind,
            name.lower() if kind == "header" else name,
            request(
                asked["headers"],
                None,
                asked["user"],
                latin1,
                asked["query"],
                asked.get("attributes"),
            ),
        )
        for latin1 in (False, True)
    }
    assert len(answers) == 1, answers
    return answers.pop()


def headers(given: Dict[str, Any]) -> Any:
    config = config_with(
        given["policies"],
        headers=given["headers"],
        mode=given["mode"],
        legacy_reset=given.get("legacy_reset", "seconds"),
    )
    replies = [decision(r) for r in given["replies"]]
    worst, sent = response_headers(
        config, list(config.policies), replies, given["denied"], given.get("now_ms")
    )
    six = (
        "RateLimit-Policy",
        "RateLimit",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "Retry-After",
    )
    draft6 = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
    named = {name.lower(): name for name in six + draft6}
    values = {named.get(name.lower(), name): value for name, value in sent}
    assert len(values) == len(sent), sent  # each header once
    return {
        "most_restrictive": worst,
        "headers": values,
        "absent": [name for name in six if name not in values],
    }


def test_a_denials_body_is_the_problem_its_fields_make_byte_for_byte() -> None:
    """A denial with a wait is made from a template cut around its numbers
    (made once per policy and limit); its bytes are those of the problem
    built field by field, key order and separators included."""
    document = json.loads((VECTORS / "refusals.json").read_text())
    made = 0
    for vector in document["vectors"]:
        given = vector["input"]
        if given["kind"] != "denied" or "route_deny" in given or "body" not in vector["expect"]:
            continue
        policy = given.get("policy", ANY_POLICY)
        config = config_with([policy], None, deny=given["deny"], routes=[])
        if config.deny.body in ("text", "json"):
            continue  # the configuration's own body
        found, reply = config.policies[0], decision(given["reply"])
        limit, retry_s = shown_limit(found, reply), retry_after_s(reply)
        for _ in range(2):  # the template's first use makes it, the second reuses it
            body = denied(config, found, reply, given["cost"]).body
            status = config.deny.status
            assert (
                body == _denial_problem_of(status, found, reply, given["cost"], limit, retry_s).body
            )
        made += 1
    assert made > 0


def refusal(given: Dict[str, Any]) -> Any:
    kind = given["kind"]
    policy = given.get("policy", ANY_POLICY)
    route: Dict[str, Any] = {"path": "/", "policies": [policy["name"]]}
    if "route_deny" in given:
        route["deny"] = given["route_deny"]
    resolvers = {"cost": {given["resolver"]: _unused}} if "resolver" in given else None
    config = config_with(
        [policy],
        resolvers,
        deny=given["deny"],
        fail_deny=given.get("fail_deny", {}),
        routes=[route],
    )
    reply: Reply
    text = False
    if kind == "denied":
        shape = config.routes[0].deny
        reply = denied(config, config.policies[0], decision(given["reply"]), given["cost"], shape)
        text = (shape or config.deny).body == "text"
    elif kind == "bad-cost":
        if "header" in given:
            assert config.policies[0].cost_header == given["header"]
        reply = bad_cost(config.policies[0])
    elif kind == "too-large":
        reply = too_large(given["max_body_bytes"])
    elif kind == "unavailable":
        reply = unavailable(config.fail_deny)
        text = config.fail_deny.body == "text"
    else:
        raise AssertionError(f"unknown refusal kind {kind!r}")
    content_type = dict(reply.headers)["Content-Type"]
    out: Dict[str, Any] = {"status": reply.status, "content_type": content_type}
    if text:
        out["body_text"] = reply.body.decode()
    else:
        out["body"] = json.loads(reply.body)
    extra = {name: value for name, value in reply.headers if name != "Content-Type"}
    if extra:
        out["headers"] = extra
    return out


def outcome_of(given: Dict[str, Any]) -> Any:
    config = config_with(given["policies"])
    replies = [decision(r) for r in given["replies"]]
    return {"outcome": outcome(given["mode"], config.policies, replies)}


def config_error(given: Dict[str, Any]) -> Any:
    try:
        parse(given["config"], CONFORMANCE_RESOLVERS)
    except ConfigError as e:
        return str(e)
    return None


def substitution(given: Dict[str, Any]) -> Any:
    try:
        return {"text": substitute(given["text"], given["env"])}
    except ConfigError as e:
        message = str(e)
        # A malformed reference's message is not pinned; an unset variable's is.
        return {"error": message if message.endswith(": not set") else True}


def override_keys(given: Dict[str, Any]) -> Any:
    engine = Engine(parse(given["config"]))
    value = given["value"]
    try:
        key, okey = engine.keys(given["policy"], as_bytes(value) if value is not None else None)
    except ValueError:
        return {"error": True}
    return {"key": key, "override_key": okey}


#: Each file this runner runs, with its function's name and adapter.
FILES: Dict[str, Tuple[str, Callable[[Dict[str, Any]], Any]]] = {
    "durations.json": ("duration", duration),
    "rates.json": ("rate", rate),
    "cost-headers.json": ("cost_header", cost),
    "paths.json": ("canonical_path", path),
    "routes.json": ("route", route),
    "client-ip.json": ("client_ip", client),
    "keys.json": ("key", key),
    "sources.json": ("source", source),
    "headers.json": ("response_headers", headers),
    "refusals.json": ("refusal", refusal),
    "config-errors.json": ("config_error", config_error),
    "substitution.json": ("substitute", substitution),
    "override-keys.json": ("override_key", override_keys),
    "outcomes.json": ("outcome", outcome_of),
    "algorithms.json": ("algorithm", algorithm),
}


def expected(file: str, value: Any) -> Any:
    """The expectation, with bytes where the function answers bytes."""
    if file == "sources.json" and value is None:
        return None
    return as_bytes(value) if file in ("paths.json", "sources.json") else value


def vectors() -> List[Any]:
    out = []
    for file in sorted(FILES):
        document = json.loads((VECTORS / file).read_text())
        for vector in document["vectors"]:
            out.append(
                pytest.param(file, document["function"], vector, id=f"{file}:{vector['name']}")
            )
    return out


def wholly_pending(file: str) -> bool:
    """A file of a function not implemented yet: every vector pending."""
    names = {v["name"] for v in json.loads((VECTORS / file).read_text())["vectors"]}
    return names <= set(PENDING.get(file, []))


def test_the_runner_runs_every_vector_file() -> None:
    on_disk = {p.name for p in Path(VECTORS).glob("*.json")}
    not_run = {f for f in on_disk - set(FILES) if not wholly_pending(f)}
    assert not not_run, f"not run: {sorted(not_run)}"
    assert set(FILES) <= on_disk, f"missing: {sorted(set(FILES) - on_disk)}"


def test_vector_names_are_unique_per_file() -> None:
    for file in FILES:
        names = [v["name"] for v in json.loads((VECTORS / file).read_text())["vectors"]]
        assert len(names) == len(set(names)), file


#: Per file, the vectors Python does not pass yet (conformance/README.md,
#: Pending): reported as PENDING, and a failure once one passes.
PENDING: Dict[str, List[str]] = json.loads((VECTORS.parent / "pending.json").read_text())[
    "vectors"
].get("python", {})


@pytest.mark.parametrize(("file", "function", "vector"), vectors())
def test_vector(file: str, function: str, vector: Dict[str, Any]) -> None:
    name, run = FILES[file]
    assert function == name, f"{file}: unknown function {function!r} (this runner has {name!r})"
    want = expected(file, vector["expect"])
    if vector["name"] in PENDING.get(file, []):
        try:
            got = run(vector["input"])
        except Exception:
            got = None
        assert got != want, (
            f"{file} {vector['name']} passes: remove it from conformance/pending.json"
        )
        pytest.skip(f"PENDING: {file} {vector['name']} (conformance/pending.json)")
    got = run(vector["input"])
    assert got == want, f"{file} {vector['name']}: got {got!r}, expected {want!r}"
