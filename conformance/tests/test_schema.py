"""The configuration schema is the one source (docs/http.md, Start-up
validation): every behaviour case's configuration is valid under it; every
start-up case is refused by it or names the cross-field rule, listed in
its description, that refuses it; its librl keywords mean what the vectors
say; and scripts/gen-schema.py refuses what it does not know and names a
stale generated file.

The schema is read with the `jsonschema` package (pinned in
scripts/requirements-dev.txt) and librl's own meanings (librl_schema.py)."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List

import pytest
import yaml
from jsonschema import Draft202012Validator

from contract import CONFORMANCE, ROOT, Case, load_cases, load_schema, load_vectors
from librl_schema import (
    LibrlValidator,
    duration_ms,
    field_path,
    pattern_keyword,
    rate,
    rate_keyword,
)

SCHEMA = load_schema()
VALIDATOR = LibrlValidator(SCHEMA)
RULES = SCHEMA["x-librl-cross-field"]
CASES = load_cases()
BEHAVIOUR = [c for c in CASES if "startup_error" not in c]
STARTUP = [c for c in CASES if "startup_error" in c]


def encloses(outer: str, inner: str) -> bool:
    return outer == "" or inner == outer or inner.startswith((outer + ".", outer + "["))


def test_schema_is_json_schema_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)


def test_description_lists_every_cross_field_rule() -> None:
    for rule, text in RULES.items():
        assert f"{rule}: {text}" in SCHEMA["description"], rule


@pytest.mark.parametrize("case", BEHAVIOUR, ids=[c["name"] for c in BEHAVIOUR])
def test_behaviour_case_configuration_is_valid(case: Case) -> None:
    problems = [f"{field_path(e)}: {e.message}" for e in VALIDATOR.iter_errors(case["config"])]
    assert not problems, problems


@pytest.mark.parametrize("case", STARTUP, ids=[c["name"] for c in STARTUP])
def test_startup_case_fails_the_schema_or_names_its_cross_field_rule(case: Case) -> None:
    errors = list(VALIDATOR.iter_errors(case["config"]))
    rule = case.get("cross_field")
    if rule is not None:
        assert rule in RULES, f"cross_field {rule!r} is not a rule of the schema's description"
    if not errors:
        assert rule is not None, "valid under the schema, and names no cross-field rule"
    if rule is not None:
        return  # the schema may state the rule for validators, at another field
    # Refused for the field the case names (or an object holding it).
    paths = [field_path(e) for e in errors]
    assert any(encloses(p, case["startup_error"]) for p in paths), paths


def test_startup_cases_cover_every_cross_field_rule_an_integration_checks() -> None:
    named = {c["cross_field"] for c in STARTUP if "cross_field" in c}
    assert set(RULES) - {"fail-local-where-supported"} <= named


# The texts of conformance/README.md's cross-field table: the only
# configuration errors the schema may let through.
CROSS_FIELD_TEXTS = re.compile(
    r'"[^"]*" is used by an earlier policy|no policy is named "[^"]*"'
    r"|give rate, or limit and window, not both|missing \(give limit and window, or rate\)"
    r"|aligned is for fixed policies, not \w+|burst is for token policies, not \w+"
    r"|must be an IP address or a CIDR network"
    r"|a concurrency policy has no (window|rate|block); give limit and lease"
    r"|queue is for token policies, not \w+"
    r"|missing \(a concurrency policy gives limit and lease\)"
    r"|must be all on a concurrency policy \(its slots are freed when the response is finished\)"
    r"|lease is for concurrency policies, not \w+"
    r"|local is the Rust integration's mode; use open or closed"
    r"|a policy whose limit is code:\S+ has no (window|rate|burst|overridable)"
    r"|ip and global are reserved|a source after ip is never read"
    r'|no identity is named "[^"]*"|no (mode|cost|limit) resolver is registered as "[^"]*"'
    r"|missing \(body: json sends it\)|json is sent only with body: json"
    r'|the integration sets this header itself|"[^"]*" is given twice'
)
ERRORS = load_vectors("config-errors.json")


@pytest.mark.parametrize("vector", ERRORS, ids=[v["name"] for v in ERRORS])
def test_config_error_vector_fails_the_schema_or_is_cross_field(vector: Dict[str, Any]) -> None:
    if list(VALIDATOR.iter_errors(vector["input"]["config"])):
        return
    text = vector["expect"].split(": ", 3)[3]
    assert CROSS_FIELD_TEXTS.fullmatch(text), f"valid under the schema: {vector['expect']}"


def _bounds(field: str) -> Dict[str, int]:
    if field == "timeout":
        bounds: Dict[str, int] = SCHEMA["properties"]["timeout"]["x-librl-duration"]
    else:
        bounds = SCHEMA["$defs"]["policy"]["properties"]["window"]["x-librl-duration"]
    return bounds


DURATIONS = load_vectors("durations.json")


@pytest.mark.parametrize("vector", DURATIONS, ids=[v["name"] for v in DURATIONS])
def test_duration_keyword_reads_as_the_vectors(vector: Dict[str, Any]) -> None:
    """The suite's reading of durations and x-librl-duration agrees with
    the vectors, so the schema test judges cases as the integrations do."""
    bounds = _bounds(vector["input"]["field"])
    ms = duration_ms(vector["input"]["value"])
    got = (
        {"ms": ms}
        if ms is not None and bounds["min_ms"] <= ms <= bounds["max_ms"]
        else {"error": True}
    )
    assert got == vector["expect"]


RATES = load_vectors("rates.json")
RATE_BOUNDS: Dict[str, int] = SCHEMA["$defs"]["policy"]["properties"]["rate"]["x-librl-rate"]
RATE_PATTERN: str = SCHEMA["$defs"]["policy"]["properties"]["rate"]["pattern"]


@pytest.mark.parametrize("vector", RATES, ids=[v["name"] for v in RATES])
def test_rate_keyword_and_pattern_read_as_the_vectors(vector: Dict[str, Any]) -> None:
    value = vector["input"]["value"]
    errors = list(rate_keyword(None, RATE_BOUNDS, value, None))
    parsed = rate(value)
    got = (
        {"error": True}
        if errors or parsed is None
        else {"limit": parsed[0], "window_ms": parsed[1]}
    )
    assert got == vector["expect"]
    # The pattern is the grammar: it takes every rate, bounds aside.
    if parsed is not None:
        assert list(pattern_keyword(None, RATE_PATTERN, value, None)) == []
    elif isinstance(value, str):
        assert list(pattern_keyword(None, RATE_PATTERN, value, None)) != [], value


def test_example_policy_file_is_valid() -> None:
    doc = yaml.safe_load((CONFORMANCE / "examples" / "policies.yaml").read_text())
    assert [f"{field_path(e)}: {e.message}" for e in VALIDATOR.iter_errors(doc)] == []


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_schema", ROOT / "scripts" / "gen-schema.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_fresh() -> None:
    assert _generator().main(["gen-schema.py", "--check"]) == 0


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("an unknown keyword", lambda s: s["properties"]["prefix"].update(format="hostname")),
        ("an unknown $defs keyword", lambda s: s["$defs"]["policy"].update(dependentRequired={})),
        (
            "an unlisted cross-field rule",
            lambda s: s["$defs"]["policy"]["allOf"].append(
                {"x-librl-rule": "nope", "required": []}
            ),
        ),
        ("a combination not marked as a rule", lambda s: s["$defs"]["route"].update(allOf=[{}])),
        ("a duration without bounds", lambda s: s["properties"]["timeout"].pop("x-librl-duration")),
    ],
)
def test_generator_refuses_what_it_does_not_know(where: str, change: Any) -> None:
    gen = _generator()
    schema = copy.deepcopy(SCHEMA)
    change(schema)
    with pytest.raises(gen.SchemaError):
        gen.Reader(schema).read()


def test_check_names_each_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = _generator()
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    stale: List[str] = list(gen.OUTPUTS.values())
    assert gen.main(["gen-schema.py", "--check"]) == 1
    err = capsys.readouterr().err
    for path in stale:
        assert f"{path} is stale" in err
    assert not any((tmp_path / p).exists() for p in stale)
