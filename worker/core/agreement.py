"""Whether a candidate's answer agrees with the live one: what shadow scoring counts per pair. Pure.

Both answered ok: they agree when every label (a string or boolean output) is
the same, and every probability (a number in [0, 1]) falls on the same side
of 0.5; the difference is the largest |candidate - live| of their numbers.
Outputs of different shapes disagree. Either one failed: ``error`` (both
failed alike: ``agree``). ``python -m worker compare`` reports the details.
"""

from __future__ import annotations

from typing import Any

THRESHOLD = 0.5


def agreement(live: Any, candidate: Any) -> tuple[str, float | None]:
    """``live`` and ``candidate``: Outcomes (``ok``, ``output``, ``error_code``). Returns (agree | disagree |
    error, the largest numeric difference or None)."""
    if not (live.ok and candidate.ok):
        same_failure = not live.ok and not candidate.ok and live.error_code == candidate.error_code
        return ("agree" if same_failure else "error"), None
    pairs = _leaves(live.output, candidate.output)
    if pairs is None:
        return "disagree", None
    differences = [abs(b - a) for a, b in pairs if _number(a) and _number(b)]
    agreed = all(_same(a, b) for a, b in pairs)
    return ("agree" if agreed else "disagree"), max(differences, default=None)


def _leaves(live: Any, candidate: Any) -> list[tuple[Any, Any]] | None:
    """The outputs' leaves side by side, or None when their shapes differ."""
    if isinstance(live, dict) and isinstance(candidate, dict):
        if live.keys() != candidate.keys():
            return None
        pairs: list[tuple[Any, Any]] = []
        for key in live:
            inner = _leaves(live[key], candidate[key])
            if inner is None:
                return None
            pairs += inner
        return pairs
    if isinstance(live, list) and isinstance(candidate, list):
        if len(live) != len(candidate):
            return None
        pairs = []
        for a, b in zip(live, candidate, strict=True):
            inner = _leaves(a, b)
            if inner is None:
                return None
            pairs += inner
        return pairs
    if isinstance(live, dict | list) or isinstance(candidate, dict | list):
        return None
    return [(live, candidate)]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    if _number(a) and _number(b):
        if 0.0 <= a <= 1.0 and 0.0 <= b <= 1.0:
            return bool(a >= THRESHOLD) == bool(b >= THRESHOLD)
        return True  # a regression output: its difference is measured, not judged
    return bool(a == b)
