"""Descriptive statistics over numbers (pure)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any


def describe(values: Iterable[float], *, keep_values: bool = True) -> dict[str, Any]:
    """values, count, mean, median, min, max and population stdev (nulls when empty).

    `keep_values=False` leaves the list of values out (for per-seat breakdowns,
    whose values are already listed once in the overall statistics).
    """
    numbers = [float(v) for v in values]
    head: dict[str, Any] = {"values": numbers} if keep_values else {}
    if not numbers:
        return {
            **head,
            "count": 0,
            "mean": None,
            "median": None,
            "min": None,
            "max": None,
            "stdev": None,
        }
    return {
        **head,
        "count": len(numbers),
        "mean": stable_round(statistics.fmean(numbers)),
        "median": stable_round(statistics.median(numbers)),
        "min": min(numbers),
        "max": max(numbers),
        "stdev": stable_round(statistics.pstdev(numbers)),
    }


def stable_round(value: float) -> float:
    """Enough precision for scores and seconds; keeps summaries stable across runs."""
    return round(value, 9)
