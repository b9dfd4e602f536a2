"""Every case against `scripts/serve-example NAME` as a black box, for each
NAME of LIBRL_EXAMPLES (comma-separated, or `all`; none: nothing runs).
A framework added later passes the suite by adding its example:
`scripts/examples/NAME.sh`."""

from __future__ import annotations

import pytest
from servers import Server

from blackbox import Clusters, examples, run_case
from contract import Case, load_cases, load_pending
from examples import CAPABILITIES

CASES = load_cases()
PENDING = load_pending()["cases"]
PARAMS = [(name, case) for name in examples() for case in CASES]


@pytest.mark.parametrize(
    ("name", "case"), PARAMS, ids=[f"{name}:{case['name']}" for name, case in PARAMS]
)
def test_case(name: str, case: Case, standalone: Server, clusters: Clusters) -> None:
    if case["name"] in PENDING.get(name, []):
        pytest.skip(f"PENDING: {name} does not pass {case['name']} yet (conformance/pending.json)")
    lacking = set(case.get("requires", [])) - CAPABILITIES.get(name, frozenset())
    if lacking:
        pytest.skip(f"{name} lacks {', '.join(sorted(lacking))}")
    run_case(name, case, standalone, clusters)
