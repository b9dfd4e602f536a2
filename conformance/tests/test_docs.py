"""The cases as data: each is written in the format conformance/README.md
gives (a runner fails on what it does not know, so a typo cannot make a
step silently check nothing), names are unique, and each case docs/http.md
names exists, so a renamed or dropped case cannot leave the contract
pointing at nothing."""

from __future__ import annotations

import re

import pytest

from contract import ROOT, Case, load_cases, load_pending, load_vectors
from examples import FRAMEWORKS
from steps import case_problems

# A case name as the page writes it: `word-word-word...` in backticks (the
# schema's x-librl- keywords are not cases).
CASE_NAME = re.compile(r"`((?!x-librl-)[a-z0-9]+(?:-[a-z0-9]+){2,})`")


def test_every_case_docs_http_names_exists() -> None:
    named = set(CASE_NAME.findall((ROOT / "docs" / "http.md").read_text(encoding="utf-8")))
    assert named, "docs/http.md names no case"
    assert named - {c["name"] for c in load_cases()} == set()


CASES = load_cases()


def test_case_names_are_unique() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_is_in_the_format(case: Case) -> None:
    assert case_problems(case) == []


def test_pending_names_frameworks_cases_and_vectors_that_exist() -> None:
    """A typo in conformance/pending.json would hide nothing and pass
    silently: every framework, case, language, file and vector it names
    exists, and none twice."""
    pending = load_pending()
    assert set(pending) == {"description", "cases", "vectors"}
    assert set(pending["cases"]) <= set(FRAMEWORKS)
    names = {c["name"] for c in CASES}
    for framework, cases in pending["cases"].items():
        assert len(cases) == len(set(cases)), framework
        assert set(cases) <= names, (framework, sorted(set(cases) - names))
    assert set(pending["vectors"]) <= {"go", "java", "node", "python", "rust"}
    for language, files in pending["vectors"].items():
        for file, vectors in files.items():
            known = {v["name"] for v in load_vectors(file)}
            assert len(vectors) == len(set(vectors)), (language, file)
            assert set(vectors) <= known, (language, file, sorted(set(vectors) - known))
