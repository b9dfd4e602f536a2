"""The configuration schema as librl reads it: JSON Schema 2020-12 (the
`jsonschema` package) with librl's meanings: x-librl-duration and
x-librl-rate bound durations and rates (docs/http.md, Durations and
Rates), lengths count UTF-8 bytes, and a pattern's `$` is the end of the
text (not before a final newline, as Python's re has it)."""

from __future__ import annotations

import re
from typing import Any, Dict, Iterator, Optional, Tuple

from jsonschema import Draft202012Validator, ValidationError, validators

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
WORD_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
DURATION = re.compile(r"([1-9][0-9]*)([Mm][Ss]|[SsMmHhDd])?")
RATE = re.compile(r"[ \t]*([0-9]+)[ \t]*(/|[Pp][Ee][Rr])([ \t]*)(.*?)[ \t]*")
UNIT_PERIOD = re.compile(r"(?:([0-9]+)[ \t]*)?([A-Za-z]+)")


def duration_ms(value: object) -> Optional[int]:
    """docs/http.md, Durations, without bounds; None: not a duration."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value * 1000 if value >= 0 else None
    if not isinstance(value, str):
        return None
    m = DURATION.fullmatch(value)
    if m is None:
        return None
    return int(m.group(1)) * UNIT_MS[(m.group(2) or "s").lower()]


def unit_ms(word: str) -> Optional[int]:
    w = word.lower()
    if len(w) == 1:
        return UNIT_MS.get(w)
    return WORD_MS.get(w[:-1] if w.endswith("s") else w)


def rate(value: object) -> Optional[Tuple[int, int]]:
    """docs/http.md, Rates, without bounds: (count, period ms)."""
    m = RATE.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        return None
    count, separator, space, period = int(m.group(1)), m.group(2), m.group(3), m.group(4)
    ms = duration_ms(period) if DURATION.fullmatch(period) else None
    if ms is None:
        units = UNIT_PERIOD.fullmatch(period)
        size = unit_ms(units.group(2)) if units is not None else None
        if units is None or size is None:
            return None
        if units.group(1) is None and separator != "/" and not space:
            return None  # `per` touching the unit's letters
        ms = int(units.group(1) or 1) * size
    return count, ms


def duration_keyword(
    validator: Any, bounds: Dict[str, int], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    ms = duration_ms(instance)
    if ms is not None and not bounds["min_ms"] <= ms <= bounds["max_ms"]:
        yield ValidationError(
            f"{instance!r} is not from {bounds['min_ms']} to {bounds['max_ms']} ms"
        )


def rate_keyword(
    validator: Any, bounds: Dict[str, int], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    parsed = rate(instance)
    if parsed is None:
        yield ValidationError(f"{instance!r} is not a rate")
    elif not (
        bounds["min_count"] <= parsed[0] <= bounds["max_count"]
        and bounds["min_ms"] <= parsed[1] <= bounds["max_ms"]
    ):
        yield ValidationError(f"{instance!r} is outside the rate's bounds")


def min_length_keyword(
    validator: Any, n: int, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and len(instance.encode()) < n:
        yield ValidationError(f"{instance!r} is shorter than {n} bytes")


def max_length_keyword(
    validator: Any, n: int, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and len(instance.encode()) > n:
        yield ValidationError(f"{instance!r} is longer than {n} bytes")


def pattern_keyword(
    validator: Any, pattern: str, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    anchored = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    if isinstance(instance, str) and re.search(anchored, instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


LibrlValidator = validators.extend(
    Draft202012Validator,
    {
        "x-librl-duration": duration_keyword,
        "x-librl-rate": rate_keyword,
        "minLength": min_length_keyword,
        "maxLength": max_length_keyword,
        "pattern": pattern_keyword,
    },
)


def field_path(error: ValidationError) -> str:
    """The error's place as docs/http.md writes paths: policies[0].limit."""
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
