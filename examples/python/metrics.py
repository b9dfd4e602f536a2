"""A decision hook feeding Prometheus (docs/http/python.md, Decision hook):
pass ``on_decision=record`` to any of librl's Python integrations and
expose prometheus_client's registry as usual (``make_asgi_app()``,
``start_http_server(9100)``, ...)."""

from __future__ import annotations

from prometheus_client import Counter

from librl.http import DecisionEvent

DECISIONS = Counter(
    "librl_http_decisions",
    "Requests checked by librl, by outcome (allowed, denied, would_deny, fail_open, fail_closed)",
    ["outcome"],
)
DENIALS = Counter(
    "librl_http_policy_denials",
    "Policy replies that said no (in shadow mode too), by policy",
    ["policy"],
)


def record(event: DecisionEvent) -> None:
    DECISIONS.labels(event.outcome).inc()
    for check in event.checks:
        if check.decision is not None and not check.decision.allowed:
            DENIALS.labels(check.policy).inc()
