"""Descriptive statistics over numbers (pure)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any


def describe(values: Iterable[float]) -> dict[str, Any]:
    """values, count, mean, median, min, max and population stdev (nulls when empty)."""
    numbers = [float(v) for v in values]
    if not numbers:
        return {
            "values": [],
            "count": 0,
            "mean": None,
            "median": None,
            "min": None,
            "max": None,
            "stdev": None,
        }
    return {
        "values": numbers,
        "count": len(numbers),
        "mean": _round(statistics.fmean(numbers)),
        "median": _round(statistics.median(numbers)),
        "min": min(numbers),
        "max": max(numbers),
        "stdev": _round(statistics.pstdev(numbers)),
    }


def _round(value: float) -> float:
    # enough precision for scores and seconds; keeps summaries stable across runs
    return round(value, 9)
