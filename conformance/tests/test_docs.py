"""docs/http.md names the cases that check its rules: each name it gives
exists, so a renamed or dropped case cannot leave the contract pointing at
nothing."""

from __future__ import annotations

import re

from contract import ROOT, load_cases

# A case name as the page writes it: `word-word-word...` in backticks (the
# schema's x-librl- keywords are not cases).
CASE_NAME = re.compile(r"`((?!x-librl-)[a-z0-9]+(?:-[a-z0-9]+){2,})`")


def test_every_case_docs_http_names_exists() -> None:
    named = set(CASE_NAME.findall((ROOT / "docs" / "http.md").read_text(encoding="utf-8")))
    assert named, "docs/http.md names no case"
    assert named - {c["name"] for c in load_cases()} == set()
