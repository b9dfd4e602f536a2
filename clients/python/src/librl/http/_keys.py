"""The keys a check uses (docs/http.md, Keys): the subject between braces,
the cluster hash tag, so one subject's keys share a slot."""

from __future__ import annotations

from typing import Optional, Tuple

from ._configuration import Policy


def limiter_key(prefix: str, subject: str, policy: Policy) -> str:
    """``<prefix>{<subject>}:<policy>``."""
    return f"{prefix}{{{subject}}}:{policy.name}"


def override_key(prefix: str, subject: str, policy: Policy) -> Optional[str]:
    """``<prefix>{<subject>}:override:<policy>`` for an overridable policy;
    None for another."""
    return f"{prefix}{{{subject}}}:override:{policy.name}" if policy.overridable else None


def policy_keys(prefix: str, subject: str, policy: Policy) -> Tuple[str, str]:
    """The key and the override key (whether the policy is overridable or
    not: one may be set before it is) of ``policy`` for ``subject``."""
    return limiter_key(prefix, subject, policy), f"{prefix}{{{subject}}}:override:{policy.name}"
