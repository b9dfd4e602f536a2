"""Every case against `scripts/serve-example NAME` as a black box, for each
NAME of LIBRL_EXAMPLES (comma-separated, or `all`; none: nothing runs).
A framework added later passes the suite by adding its example:
`scripts/examples/NAME.sh`."""

from __future__ import annotations

import json
import os
import warnings

import pytest
from servers import Server

from blackbox import Clusters, examples, run_case
from contract import Case, load_cases, load_pending, load_schema
from examples import CAPABILITIES
from librl_schema import duration_ms
from steps import Mismatch, load_average

#: The schema's default `timeout` (docs/http.md, Fail modes).
DEFAULT_TIMEOUT = load_schema()["properties"]["timeout"]["default"]
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
    try:
        run_case(name, case, standalone, clusters)
    except (Mismatch, AssertionError) as first:
        if not ((judges_time(case) or out_of_time(first, case)) and loaded()):
            raise
        # A case that judges time meets a machine with more runnable work
        # than cores (make test's other lane): it runs once more, from a
        # fresh app, and must pass then (conformance/README.md, The
        # black-box runner). So does one whose failing request took the
        # case's whole Redis timeout: the app met its fail mode, which is
        # time judged too. On a machine not that loaded a failure is final.
        # A warning, so that the run's summary says so even when it passes.
        warnings.warn(f"{first}; run once more ({load_average()})", stacklevel=1)
        run_case(name, case, standalone, clusters)


def judges_time(case: Case) -> bool:
    """A time budget, an elapsed range, a sleep, a pause or a hanging Redis."""
    text = json.dumps(case)
    timed = ('"within_ms"', '"elapsed_ms"', '"sleep_ms"', '"redis_pause_ms"')
    return case.get("redis") == "hang" or any(word in text for word in timed)


def out_of_time(failure: AssertionError, case: Case) -> bool:
    """The failing request took at least the case's Redis timeout."""
    took = getattr(failure, "took_ms", None)
    timeout = duration_ms(case.get("config", {}).get("timeout", DEFAULT_TIMEOUT))
    return took is not None and timeout is not None and took >= timeout


def loaded() -> bool:
    return os.getloadavg()[0] > (os.cpu_count() or 1)
