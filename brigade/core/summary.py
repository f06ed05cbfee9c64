"""summary.json: counts, measurement failures, scores and durations of the current plan (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brigade.core.accounting import Spending, attempts_of, grader_spending
from brigade.core.plan import Plan
from brigade.core.receipts import ReceiptView
from brigade.core.sequential import Rule, discordant, stops
from brigade.core.specs import SeatSpec
from brigade.core.stats import describe
from brigade.core.taxonomy import (
    COUNT_KEYS,
    MEASUREMENT_KINDS,
    TERMINAL,
    exit_bucket,
    fault_kind_of,
    measurement_kind,
    outcome_name,
)
from brigade.core.trials import trial_kind, trial_stats

SUMMARY_SCHEMA = "brigade.eval_summary.v1"
PARTIAL_LABEL = (
    "partial: scores of the graders that ran in grader_error cells; not part of the headline scores"
)

# cell_id -> the view of its trusted receipt (None: no receipt)
Receipts = Mapping[str, ReceiptView | None]


def empty_counts() -> dict[str, int]:
    """Every count key at zero."""
    return {key: 0 for key in COUNT_KEYS}


def _state(receipt: ReceiptView | None) -> str:
    return receipt.state if receipt is not None else "missing"


def count_states(receipts: Receipts) -> dict[str, int]:
    """How many cells are in each state ("missing" for no receipt)."""
    counts = empty_counts()
    for receipt in receipts.values():
        counts[_state(receipt)] += 1
    return counts


def build_summary(
    plan: Plan, receipts: Receipts, stale_receipts: Receipts, generated_at: str
) -> dict[str, Any]:
    """The summary document for the current plan; stale cells only in stale_counts.

    The keys of the original eval_summary.v1 keep its shapes (readers rely on
    them): `counts`/`stale_counts` map state -> int, `measurement_failures` is
    an int, `scores`/`partial_scores`/`durations` are flat statistics. Richer
    views go under further keys (`by_seat` holds one object per seat).
    """
    counts = empty_counts()
    by_seat: dict[str, _SeatTally] = {}
    failures = _failure_kinds()
    reasons: dict[str, int] = {}
    faults: dict[str, int] = {}  # fault kind -> cells that met it (adapter_error, timeout)
    spending = Spending()
    judged: list[Any] = []  # what every grader that ran a model used (None: unknown)
    for cell in plan.cells:
        seat = by_seat.get(cell.seat.name)
        if seat is None:
            seat = by_seat[cell.seat.name] = _SeatTally(cell.seat)
        receipt = receipts.get(cell.cell_id)
        state = _state(receipt)
        counts[state] += 1
        seat.counts[state] += 1
        if receipt is None or state not in TERMINAL:
            continue
        # every attempt's usage, priced with the plan's prices as they are now
        attempts = attempts_of(receipt.usage, plan.prices, cell.seat.model)
        seat.spending.add(attempts, accepted=state == "accepted")
        spending.add(attempts, accepted=state == "accepted")
        seat.seen(receipt)
        graded = attempts_of(receipt.grader_usage, plan.prices, None) or ()
        seat.grader_usage.extend(graded)
        judged.extend(graded)
        reason = receipt.failure_reason
        if reason:
            reasons[reason] = reasons.get(reason, 0) + 1
        kind = measurement_kind(state, reason)
        if kind is not None:
            failures[kind] += 1
            seat.failures[kind] += 1
        fault = fault_kind_of(state, reason, receipt.fault_kind)
        if fault is not None:
            faults[fault] = faults.get(fault, 0) + 1
            seat.faults[fault] = seat.faults.get(fault, 0) + 1
        if receipt.duration_seconds is not None:
            seat.durations.append(receipt.duration_seconds)
        if state == "grader_error":
            seat.partial.extend(
                score  # type: ignore[misc]  # a scored grader result has a score
                for status, score in receipt.graders
                if status == "scored"
            )
        elif receipt.score is not None:
            seat.scores.append(receipt.score)
    bucket = exit_bucket(_exit_facts(receipts.get(c.cell_id)) for c in plan.cells)
    incomplete = counts["running"] + counts["missing"] > 0
    tallies = by_seat.values()
    extra = {"adaptive": adaptive_document(plan, receipts)} if plan.rules else {}
    return {
        "schema": SUMMARY_SCHEMA,
        # the original eval_summary.v1 keys, in their original shapes
        "counts": counts,
        "stale_counts": count_states(stale_receipts),
        "measurement_failures": sum(failures.values()),
        "scores": describe(v for t in tallies for v in t.scores),
        "partial_scores": describe(v for t in tallies for v in t.partial),
        "durations": describe(v for t in tallies for v in t.durations),
        # additional keys
        "name": plan.name,
        "manifest_digest": plan.manifest_digest,
        "generated_at": generated_at,
        "total_cells": len(plan.cells),
        "measurement_failure_kinds": failures,
        "failure_reasons": reasons,
        "fault_kinds": dict(sorted(faults.items())),
        "partial_scores_label": PARTIAL_LABEL,
        "by_seat": {name: tally.document() for name, tally in by_seat.items()},
        "usage_all_attempts": spending.document(),
        "grader_usage": grader_spending(judged),
        "trial_stats": trial_stats(
            (c.seat.name, c.case_id, receipts.get(c.cell_id)) for c in plan.cells
        ),
        "exit_code": bucket,
        "outcome": outcome_name(bucket, incomplete),
        **extra,
    }


def adaptive_document(plan: Plan, receipts: Receipts) -> list[dict[str, Any]]:
    """summary.json's `adaptive`: each rule of the plan with its cases, where each case's seat
    stopped and why (core/sequential), and for a `decided` rule the comparison."""
    seats = list(dict.fromkeys(cell.seat.name for cell in plan.cells))
    results: dict[str, dict[str, list[str]]] = {}
    cut: set[tuple[str, str]] = set()  # (the trials up to the first unfinished one count)
    for cell in plan.cells:
        if cell.case_id not in plan.rules:
            continue
        kinds = results.setdefault(cell.case_id, {}).setdefault(cell.seat.name, [])
        kind = trial_kind(receipts.get(cell.cell_id))
        if kind == "unfinished" or (cell.case_id, cell.seat.name) in cut:
            cut.add((cell.case_id, cell.seat.name))
        else:
            kinds.append(kind)
    groups: dict[Rule, list[str]] = {}
    for case_id, rule in plan.rules.items():
        groups.setdefault(rule, []).append(case_id)
    documents = []
    for rule, cases in groups.items():
        found = {case: results.get(case, {}) for case in cases}
        entry: dict[str, Any] = {
            "rule": rule.document(),
            "cases": cases,
            "stops": [stop.document() for stop in stops(rule, found, seats)],
        }
        if rule.decided is not None:
            entry["comparison"] = discordant(rule, found).document(rule)
        documents.append(entry)
    return documents


def _exit_facts(receipt: ReceiptView | None) -> tuple[str | None, str | None]:
    return (receipt.state, receipt.failure_reason) if receipt is not None else (None, None)


def _failure_kinds() -> dict[str, int]:
    return dict.fromkeys(MEASUREMENT_KINDS, 0)


class _SeatTally:
    """What one seat's cells add up to (becomes its `by_seat` object)."""

    def __init__(self, spec: SeatSpec) -> None:
        self.spec = spec
        self.counts = empty_counts()
        self.failures = _failure_kinds()
        self.faults: dict[str, int] = {}
        self.scores: list[float] = []
        self.partial: list[float] = []
        self.durations: list[float] = []
        self.spending = Spending()
        self.grader_usage: list[Any] = []
        self.versions: dict[str, None] = {}
        self.first_started: str | None = None
        self.last_finished: str | None = None

    def seen(self, receipt: ReceiptView) -> None:
        """Note the CLI version and the times of a finished cell."""
        if receipt.cli_version is not None:
            self.versions[receipt.cli_version] = None
        # UTC timestamps of one format: their text orders as their times do
        if receipt.started_at is not None and (
            self.first_started is None or receipt.started_at < self.first_started
        ):
            self.first_started = receipt.started_at
        if receipt.finished_at is not None and (
            self.last_finished is None or receipt.finished_at > self.last_finished
        ):
            self.last_finished = receipt.finished_at

    def document(self) -> dict[str, Any]:
        # the values are listed once, in the flat statistics at the top level
        usage = self.spending.document()
        return {
            "counts": self.counts,
            "measurement_failures": sum(self.failures.values()),
            "measurement_failure_kinds": self.failures,
            "fault_kinds": dict(sorted(self.faults.items())),
            "scores": describe(self.scores, keep_values=False),
            "partial_scores": describe(self.partial, keep_values=False),
            "durations": describe(self.durations, keep_values=False),
            "agent": {
                "cli": self.spec.cli,
                "model": self.spec.model,
                "models_used": usage["models"],
                "cli_versions": sorted(self.versions),
                "first_started_at": self.first_started,
                "last_finished_at": self.last_finished,
            },
            "usage_all_attempts": usage,
            "grader_usage": grader_spending(self.grader_usage),
        }
