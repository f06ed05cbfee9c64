"""Outcome taxonomy: run facts and grades become a cell state; states become an exit bucket."""

from __future__ import annotations

from typing import Any

import pytest

from brigade.core.taxonomy import (
    COUNT_KEYS,
    FAILURE_REASONS,
    FAULT_KINDS,
    STATES,
    TERMINAL,
    RunFacts,
    Verdict,
    cell_score,
    classify_grades,
    classify_run,
    exit_bucket,
    is_measurement_failure,
    is_real_failure,
    outcome_name,
)


def facts(
    *,
    launched: bool = True,
    timed_out: bool = False,
    exit_code: int | None = 0,
    kind: str | None = None,
    detail: str | None = None,
    own: str | None = None,
) -> RunFacts:
    return RunFacts(
        launched=launched,
        timed_out=timed_out,
        exit_code=exit_code,
        fault_kind=kind,
        fault_detail=detail,
        own_failure=own,
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
        "adapter_error", None, "the seat command could not be launched", "launch_failed"
    )


def test_a_missing_program_is_an_adapter_error_without_a_canonical_reason() -> None:
    detail = "cannot launch codex: No such file or directory"
    verdict = classify_run(
        facts(launched=False, exit_code=None, kind="binary_missing", detail=detail)
    )
    assert verdict == Verdict("adapter_error", None, detail, "binary_missing")


def test_timed_out() -> None:
    assert classify_run(facts(timed_out=True, exit_code=-9)) == Verdict(
        "execution_error", "timeout", "the seat hit its time limit", "timeout"
    )


def test_timeout_wins_over_a_fault() -> None:
    verdict = classify_run(facts(timed_out=True, exit_code=75, kind="overloaded", detail="503"))
    assert verdict == Verdict(
        "execution_error", "timeout", "the seat hit its time limit", "timeout"
    )


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("rate_limited", None),
        ("overloaded", "provider_5xx"),
        ("provider_5xx", "provider_5xx"),
        ("auth", None),
        ("quota", None),
        ("binary_missing", None),
        ("transport_drop", "transport_drop"),
        ("workspace_untrusted", None),
        ("empty_output", None),
        ("worktree_failed", None),
        ("cluster_lost", "transport_drop"),
        ("launch_failed", None),
        ("cli_incompatible", None),
        ("model_unavailable", None),
        ("unknown", None),
        ("setup_failed", None),
    ],
)
def test_every_fault_is_an_adapter_error_its_reason_from_its_kind(
    kind: str, reason: str | None
) -> None:
    # the detail never decides: a quota message naming a 503 is still a quota fault
    detail = "usage limit reached (HTTP 503 from the gateway), try again in 4 days"
    assert classify_run(facts(exit_code=1, kind=kind, detail=detail)) == Verdict(
        "adapter_error", reason, detail, kind
    )
    assert set(FAILURE_REASONS) | {kind} <= set(FAULT_KINDS)


def test_fault_with_exit_zero_is_still_an_adapter_error() -> None:
    verdict = classify_run(facts(exit_code=0, kind="transport_drop", detail="stream dropped"))
    assert verdict == Verdict("adapter_error", "transport_drop", "stream dropped", "transport_drop")


@pytest.mark.parametrize("code", [0, 1])
def test_a_seat_that_stopped_itself_failed_with_its_reason(code: int) -> None:
    why = "the seat hit its turn limit: Reached maximum number of turns (1)"
    assert classify_run(facts(exit_code=code, own=why)) == Verdict("execution_error", None, why)


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


# the exit bucket column of docs/contracts/outcome-taxonomy.md
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
    from brigade.core.taxonomy import PERSISTENT_FAULTS, TRANSIENT_FAULTS

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
        "launch_failed",
        "cli_incompatible",
        "model_unavailable",
        "unknown",
        "setup_failed",
    )
    # waiting cures the transient ones only; a timeout is retried only when asked
    assert PERSISTENT_FAULTS == {
        "auth",
        "quota",
        "binary_missing",
        "cli_incompatible",
        "model_unavailable",
    }
    assert TRANSIENT_FAULTS == {"rate_limited", "overloaded", "provider_5xx", "transport_drop"}
