"""Outcome taxonomy: classify a run and its grades into a cell state; map states to exit codes.

Frozen by seeds/outcome-taxonomy.md. Deterministic states are real statements
about the seat; environmental ones are faults of the measurement apparatus and
must never be read as seat performance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

State = Literal[
    "running",
    "accepted",
    "rejected",
    "unscored",
    "execution_error",
    "adapter_error",
    "grader_error",
]
FailureReason = Literal["timeout", "transport_drop", "provider_5xx"]

TERMINAL: frozenset[str] = frozenset(
    {"accepted", "rejected", "unscored", "execution_error", "adapter_error", "grader_error"}
)
STATES: tuple[str, ...] = (
    "accepted",
    "rejected",
    "unscored",
    "execution_error",
    "adapter_error",
    "grader_error",
    "running",
)
# summary count keys: every state plus cells with no receipt yet
COUNT_KEYS: tuple[str, ...] = STATES + ("missing",)

EXIT_CLEAN = 0
EXIT_REJECTED = 1
EXIT_UNUSABLE = 2
EXIT_MEASUREMENT = 3

# a 5xx status: a standalone 500-599 that is not a size, a duration or a count
_5XX = re.compile(
    r"\b5\d\d\b(?!\s*(?:bytes?|b\b|kib|kb|mib|mb|ms|s\b|secs?|seconds?|lines?|tokens?|chars?"
    r"|characters?|items?|files?|%))|server error|internal error|overloaded|bad gateway"
    r"|service unavailable|gateway time-?out",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Verdict:
    """A cell's state and, when it applies, why."""

    state: State
    failure_reason: FailureReason | None = None
    detail: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """What happened to the seat process, as seen by proc and the adapter."""

    launched: bool
    timed_out: bool
    exit_code: int | None
    fault_detail: str | None  # an apparatus fault the adapter recognised (or the launch error)


def fault_reason(detail: str) -> FailureReason:
    """provider_5xx when the detail names a 5xx status or a server error, else transport_drop."""
    return "provider_5xx" if _5XX.search(detail) else "transport_drop"


def classify_run(facts: RunFacts) -> Verdict | None:
    """The state decided by the run alone, or None when the output goes to the graders."""
    if not facts.launched:
        detail = facts.fault_detail or "the seat command could not be launched"
        return Verdict("adapter_error", fault_reason(detail), detail)
    if facts.timed_out:
        return Verdict("execution_error", "timeout", "the seat hit its time limit")
    if facts.fault_detail is not None:
        return Verdict("adapter_error", fault_reason(facts.fault_detail), facts.fault_detail)
    if facts.exit_code != 0:
        return Verdict("execution_error", None, f"the seat exited with status {facts.exit_code}")
    return None


def classify_grades(results: Sequence[dict[str, Any]]) -> Verdict:
    """accepted / rejected / unscored / grader_error from grader_result.v1 documents."""
    if not results:
        return Verdict("unscored")
    errors = [r for r in results if r["status"] == "grader_error"]
    if errors:
        first = errors[0]
        return Verdict("grader_error", None, f"{first['grader_id']}: {first['detail']}")
    if all(r["score"] >= r["score_max"] for r in results):
        return Verdict("accepted")
    return Verdict("rejected")


def cell_score(results: Sequence[dict[str, Any]]) -> float | None:
    """Mean grader score when every grader scored; None otherwise (no graders or an error)."""
    if not results or any(r["status"] != "scored" for r in results):
        return None
    return sum(float(r["score"]) for r in results) / len(results)


def is_measurement_failure(state: str | None, failure_reason: str | None) -> bool:
    """adapter_error, grader_error and timed-out execution_error are apparatus faults."""
    return state in ("adapter_error", "grader_error") or (
        state == "execution_error" and failure_reason == "timeout"
    )


def is_real_failure(state: str | None, failure_reason: str | None) -> bool:
    """rejected and non-timeout execution_error are real statements about the seat."""
    return state == "rejected" or (state == "execution_error" and failure_reason != "timeout")


def exit_bucket(cells: Iterable[tuple[str | None, str | None]]) -> int:
    """0 clean, 1 a real failure, 3 a measurement failure or unfinished cells (dominates 1)."""
    bucket = EXIT_CLEAN
    for state, reason in cells:
        if state not in TERMINAL or is_measurement_failure(state, reason):
            return EXIT_MEASUREMENT
        if is_real_failure(state, reason):
            bucket = EXIT_REJECTED
    return bucket


def outcome_name(bucket: int, incomplete: bool) -> str:
    """The summary's word for an exit bucket."""
    if incomplete:
        return "incomplete"
    return {EXIT_CLEAN: "clean", EXIT_REJECTED: "rejected"}.get(bucket, "measurement_failure")
