"""summary.json: counts, measurement failures, scores and durations of the current plan (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brigade.core.plan import Plan
from brigade.core.stats import describe
from brigade.core.taxonomy import (
    COUNT_KEYS,
    TERMINAL,
    exit_bucket,
    is_measurement_failure,
    outcome_name,
)
from brigade.core.trials import trial_stats

SUMMARY_SCHEMA = "brigade.eval_summary.v1"
PARTIAL_LABEL = (
    "partial: scores of the graders that ran in grader_error cells; not part of the headline scores"
)

Receipts = Mapping[str, Mapping[str, Any] | None]


def empty_counts() -> dict[str, int]:
    """Every count key at zero."""
    return {key: 0 for key in COUNT_KEYS}


def _state(receipt: Mapping[str, Any] | None) -> str:
    return receipt["state"] if receipt is not None else "missing"


def count_states(receipts: Receipts) -> dict[str, int]:
    """How many cells are in each state ("missing" for no receipt)."""
    counts = empty_counts()
    for receipt in receipts.values():
        counts[_state(receipt)] += 1
    return counts


def build_summary(
    plan: Plan, receipts: Receipts, stale_receipts: Receipts, generated_at: str
) -> dict[str, Any]:
    """The summary document for the current plan; stale cells only in stale_counts."""
    counts = empty_counts()
    by_seat: dict[str, dict[str, Any]] = {}
    scores: dict[str, list[float]] = {}
    partial: dict[str, list[float]] = {}
    durations: dict[str, list[float]] = {}
    failures = {"adapter_error": 0, "grader_error": 0, "timeout": 0}
    reasons: dict[str, int] = {}
    for cell in plan.cells:
        seat = cell.seat.name
        seat_counts = by_seat.setdefault(seat, {"counts": empty_counts()})["counts"]
        for group in (scores, partial, durations):
            group.setdefault(seat, [])
        receipt = receipts.get(cell.cell_id)
        state = _state(receipt)
        counts[state] += 1
        seat_counts[state] += 1
        if receipt is None or state not in TERMINAL:
            continue
        reason = receipt.get("failure_reason")
        if reason:
            reasons[reason] = reasons.get(reason, 0) + 1
        if is_measurement_failure(state, reason):
            failures["timeout" if reason == "timeout" else state] += 1
        if receipt.get("duration_seconds") is not None:
            durations[seat].append(receipt["duration_seconds"])
        if state == "grader_error":
            partial[seat].extend(
                g["score"] for g in receipt.get("graders", []) if g["status"] == "scored"
            )
        elif receipt.get("score") is not None:
            scores[seat].append(receipt["score"])
    bucket = exit_bucket(
        (_state(receipts.get(c.cell_id)), (receipts.get(c.cell_id) or {}).get("failure_reason"))
        for c in plan.cells
    )
    incomplete = counts["running"] + counts["missing"] > 0
    return {
        "schema": SUMMARY_SCHEMA,
        "name": plan.name,
        "manifest_digest": plan.manifest_digest,
        "generated_at": generated_at,
        "total_cells": len(plan.cells),
        "counts": counts,
        "stale_counts": count_states(stale_receipts),
        "measurement_failures": {"total": sum(failures.values()), **failures},
        "failure_reasons": reasons,
        "scores": _grouped(scores),
        "partial_scores": {"label": PARTIAL_LABEL, **_grouped(partial)},
        "durations": _grouped(durations),
        "by_seat": by_seat,
        "trial_stats": trial_stats(
            (c.seat.name, c.case_id, receipts.get(c.cell_id)) for c in plan.cells
        ),
        "exit_code": bucket,
        "outcome": outcome_name(bucket, incomplete),
    }


def _grouped(values: dict[str, list[float]]) -> dict[str, Any]:
    every = [v for seat_values in values.values() for v in seat_values]
    return {
        "all": describe(every),
        "by_seat": {
            seat: describe(seat_values, keep_values=False) for seat, seat_values in values.items()
        },
    }
