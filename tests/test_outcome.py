"""Outcome taxonomy: run facts and grades become a cell state; states become an exit bucket."""

from __future__ import annotations

from typing import Any

import pytest

from brigade.core.taxonomy import (
    COUNT_KEYS,
    STATES,
    TERMINAL,
    RunFacts,
    Verdict,
    cell_score,
    classify_grades,
    classify_run,
    exit_bucket,
    fault_reason,
    is_measurement_failure,
    is_real_failure,
    outcome_name,
)


def facts(
    *,
    launched: bool = True,
    timed_out: bool = False,
    exit_code: int | None = 0,
    fault_detail: str | None = None,
) -> RunFacts:
    return RunFacts(
        launched=launched, timed_out=timed_out, exit_code=exit_code, fault_detail=fault_detail
    )


def result(status: str = "scored", score: float | None = 1.0, index: int = 0) -> dict[str, Any]:
    return {
        "grader_id": f"regex_output:{index}",
        "status": status,
        "score": score,
        "score_min": 0,
        "score_max": 1,
        "detail": "bad regular expression '('" if status == "grader_error" else "ok",
    }


def test_state_sets() -> None:
    assert STATES == (
        "accepted",
        "rejected",
        "unscored",
        "execution_error",
        "adapter_error",
        "grader_error",
        "running",
    )
    assert TERMINAL == set(STATES) - {"running"}
    assert COUNT_KEYS == STATES + ("missing",)


# --- classify_run ------------------------------------------------------------


def test_not_launched() -> None:
    assert classify_run(facts(launched=False, exit_code=None)) == Verdict(
        "adapter_error", "transport_drop", "the seat command could not be launched"
    )


def test_not_launched_with_detail() -> None:
    detail = "codex: executable not found on PATH"
    assert classify_run(facts(launched=False, exit_code=None, fault_detail=detail)) == Verdict(
        "adapter_error", "transport_drop", detail
    )


def test_timed_out() -> None:
    assert classify_run(facts(timed_out=True, exit_code=-9)) == Verdict(
        "execution_error", "timeout", "the seat hit its time limit"
    )


def test_timeout_wins_over_a_fault() -> None:
    verdict = classify_run(facts(timed_out=True, exit_code=75, fault_detail="HTTP 503"))
    assert verdict == Verdict("execution_error", "timeout", "the seat hit its time limit")


@pytest.mark.parametrize(
    "detail",
    [
        "HTTP 503",
        "provider returned 500",
        "upstream: 502 Bad Gateway",
        "server error",
        "Internal Server Error",
        "internal error from provider",
        "model overloaded, try later",
        "bad gateway",
    ],
)
def test_fault_with_5xx_text(detail: str) -> None:
    assert classify_run(facts(exit_code=75, fault_detail=detail)) == Verdict(
        "adapter_error", "provider_5xx", detail
    )
    assert fault_reason(detail) == "provider_5xx"


@pytest.mark.parametrize(
    "detail",
    [
        "connection reset by peer",
        "HTTP 429 too many requests",
        "stream closed before the final message",
        "HTTP 5030",
        "status 404",
        "",
    ],
)
def test_fault_without_5xx_text(detail: str) -> None:
    assert classify_run(facts(exit_code=75, fault_detail=detail)) == Verdict(
        "adapter_error", "transport_drop", detail
    )
    assert fault_reason(detail) == "transport_drop"


def test_byte_count_is_not_a_5xx_status() -> None:
    assert fault_reason("connection reset after 512 bytes") == "transport_drop"


def test_fault_with_exit_zero_is_still_an_adapter_error() -> None:
    verdict = classify_run(facts(exit_code=0, fault_detail="stream dropped"))
    assert verdict == Verdict("adapter_error", "transport_drop", "stream dropped")


@pytest.mark.parametrize("code", [1, 2, 3, 75, 127, -15])
def test_non_zero_exit(code: int) -> None:
    assert classify_run(facts(exit_code=code)) == Verdict(
        "execution_error", None, f"the seat exited with status {code}"
    )


def test_exit_zero_goes_to_the_graders() -> None:
    assert classify_run(facts(exit_code=0)) is None


# --- classify_grades ---------------------------------------------------------


def test_no_graders_is_unscored() -> None:
    assert classify_grades([]) == Verdict("unscored")


def test_all_at_max_is_accepted() -> None:
    assert classify_grades([result(), result(index=1)]) == Verdict("accepted")


def test_any_below_max_is_rejected() -> None:
    assert classify_grades([result(), result(score=0.0, index=1)]) == Verdict("rejected")
    assert classify_grades([result(score=0.5)]) == Verdict("rejected")


def test_any_grader_error_is_grader_error() -> None:
    grades = [result(score=0.0), result("grader_error", None, index=1), result(index=2)]
    assert classify_grades(grades) == Verdict(
        "grader_error", None, "regex_output:1: bad regular expression '('"
    )


def test_grader_error_dominates_all_passing() -> None:
    grades = [result(), result("grader_error", None, index=1)]
    assert classify_grades(grades).state == "grader_error"


# --- cell_score --------------------------------------------------------------


def test_cell_score() -> None:
    assert cell_score([result(), result(score=0.0), result(), result()]) == 0.75
    assert cell_score([result(score=1)]) == 1.0
    assert cell_score([]) is None
    assert cell_score([result(), result("grader_error", None)]) is None


# --- measurement failures and exit buckets -----------------------------------


@pytest.mark.parametrize(
    "state, reason, measurement, real",
    [
        ("accepted", None, False, False),
        ("unscored", None, False, False),
        ("rejected", None, False, True),
        ("execution_error", None, False, True),
        ("execution_error", "timeout", True, False),
        ("adapter_error", "transport_drop", True, False),
        ("adapter_error", "provider_5xx", True, False),
        ("grader_error", None, True, False),
        ("running", None, False, False),
        (None, None, False, False),
    ],
)
def test_failure_classes(
    state: str | None, reason: str | None, measurement: bool, real: bool
) -> None:
    assert is_measurement_failure(state, reason) is measurement
    assert is_real_failure(state, reason) is real


# the exit bucket column of seeds/outcome-taxonomy.md
BUCKETS = [
    ("accepted", None, 0),
    ("unscored", None, 0),
    ("rejected", None, 1),
    ("execution_error", None, 1),
    ("execution_error", "timeout", 3),
    ("adapter_error", "transport_drop", 3),
    ("adapter_error", "provider_5xx", 3),
    ("grader_error", None, 3),
    ("running", None, 3),
    (None, None, 3),
]


@pytest.mark.parametrize("state, reason, bucket", BUCKETS)
def test_exit_bucket_of_one_cell(state: str | None, reason: str | None, bucket: int) -> None:
    assert exit_bucket([(state, reason)]) == bucket


@pytest.mark.parametrize("state, reason, bucket", BUCKETS)
def test_exit_bucket_with_clean_cells(state: str | None, reason: str | None, bucket: int) -> None:
    cells = [("accepted", None), (state, reason), ("unscored", None)]
    assert exit_bucket(cells) == bucket


def test_exit_bucket_empty_is_clean() -> None:
    assert exit_bucket([]) == 0


@pytest.mark.parametrize(
    "failure", [("grader_error", None), ("adapter_error", "provider_5xx"), (None, None)]
)
def test_measurement_failure_dominates_real_failure(failure: tuple[str | None, None]) -> None:
    assert exit_bucket([("rejected", None), failure]) == 3
    assert exit_bucket([failure, ("rejected", None)]) == 3
    assert exit_bucket([("execution_error", None), failure, ("accepted", None)]) == 3


def test_timeout_dominates_non_timeout_execution_error() -> None:
    assert exit_bucket([("execution_error", None), ("execution_error", "timeout")]) == 3


def test_exit_bucket_accepts_a_generator() -> None:
    assert exit_bucket((s, None) for s in ["accepted", "rejected"]) == 1


def test_outcome_name() -> None:
    assert outcome_name(0, False) == "clean"
    assert outcome_name(1, False) == "rejected"
    assert outcome_name(3, False) == "measurement_failure"
    assert outcome_name(3, True) == "incomplete"
    assert outcome_name(0, True) == "incomplete"


def test_fault_kinds() -> None:
    from brigade.core.taxonomy import FAULT_KINDS, PERSISTENT_FAULTS, TRANSIENT_FAULTS

    assert FAULT_KINDS == (
        "rate_limited",
        "overloaded",
        "provider_5xx",
        "auth",
        "quota",
        "binary_missing",
        "transport_drop",
        "timeout",
        "workspace_untrusted",
        "empty_output",
        "worktree_failed",
        "cluster_lost",
    )
    # waiting cures the transient ones only; a timeout is retried only when asked
    assert PERSISTENT_FAULTS == {"auth", "quota", "binary_missing"}
    assert TRANSIENT_FAULTS == {"rate_limited", "overloaded", "provider_5xx", "transport_drop"}
