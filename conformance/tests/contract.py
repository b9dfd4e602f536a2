"""The conformance data as the suite's tests read it: the cases, the
vectors and the configuration schema (conformance/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "conformance"
SCHEMA_PATH = CONFORMANCE / "schema" / "config.schema.json"

Case = Dict[str, Any]


def load_cases() -> List[Case]:
    """Every case of conformance/cases/*.json, in file order."""
    cases: List[Case] = []
    for path in sorted((CONFORMANCE / "cases").glob("*.json")):
        cases.extend(json.loads(path.read_text(encoding="utf-8"))["cases"])
    return cases


def load_vectors(name: str) -> List[Dict[str, Any]]:
    vectors: List[Dict[str, Any]] = json.loads(
        (CONFORMANCE / "vectors" / name).read_text(encoding="utf-8")
    )["vectors"]
    return vectors


def load_pending() -> Dict[str, Any]:
    """conformance/pending.json: per framework the cases, per language the
    vectors (file -> names) not passed yet (conformance/README.md, Pending)."""
    pending: Dict[str, Any] = json.loads((CONFORMANCE / "pending.json").read_text(encoding="utf-8"))
    return pending


def load_schema() -> Dict[str, Any]:
    schema: Dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema
