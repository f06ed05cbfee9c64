"""summary.json: counts of the current plan, measurement failures, scores and durations."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from brigade.core.plan import Plan, build_plan
from brigade.core.receipts import views_of
from brigade.core.stats import describe
from brigade.core.summary import PARTIAL_LABEL, build_summary, count_states, empty_counts
from brigade.inputs import schemas
from brigade.inputs.manifest import manifest_from_document
from brigade.inputs.roster import roster_from_document

NOW = "2025-01-02T03:04:05.678Z"
EMPTY_STATS = {
    "values": [],
    "count": 0,
    "mean": None,
    "median": None,
    "min": None,
    "max": None,
    "stdev": None,
}
# per-seat statistics leave the list of values to the overall ones
EMPTY_BRIEF = {k: v for k, v in EMPTY_STATS.items() if k != "values"}


def make_plan(tmp_path: Path, cases: list[str], seats: tuple[str, ...] = ("alpha", "beta")) -> Plan:
    roster = roster_from_document(
        {
            "schema": "brigade.roster.v1",
            "seats": {name: {"cli": "exec:{python} -c pass"} for name in seats},
        },
        tmp_path / "roster.yaml",
        "roster.yaml",
    )
    manifest = manifest_from_document(
        {
            "schema": "brigade.eval_manifest.v1",
            "name": "summary",
            "seats": list(seats),
            "cases": [{"id": case, "prompt": f"prompt {case}"} for case in cases],
        },
        tmp_path / "manifest.yaml",
        "manifest.yaml",
    )
    return build_plan(manifest, roster, "roster.yaml", None)


def ids(plan: Plan) -> dict[str, str]:
    return {cell.coordinate: cell.cell_id for cell in plan.cells}


def grade(status: str, score: float | None) -> dict[str, Any]:
    return {"status": status, "score": score, "score_max": 1}


def terminal(
    state: str,
    *,
    score: float | None = None,
    duration: float | None = 1.0,
    reason: str | None = None,
    graders: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    receipt: dict[str, Any] = {
        "state": state,
        "score": score,
        "duration_seconds": duration,
        "graders": graders or [],
    }
    if reason is not None:
        receipt["failure_reason"] = reason
    return receipt


def summarize(
    plan: Plan,
    receipts: dict[str, dict[str, Any] | None],
    stale: dict[str, dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    summary = build_summary(plan, views_of(receipts), views_of(stale or {}), NOW)
    assert schemas.problems(summary, "brigade.eval_summary.v1") == []
    return summary


def counts(**values: int) -> dict[str, int]:
    return {**empty_counts(), **values}


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Plan, dict[str, Any]]:
    plan = make_plan(tmp_path, ["c1", "c2", "c3", "c4"])
    cell = ids(plan)
    receipts: dict[str, Any] = {
        cell["c1:alpha:1"]: terminal("accepted", score=1.0, duration=2.0),
        cell["c2:alpha:1"]: terminal("rejected", score=0.5, duration=4.0),
        cell["c3:alpha:1"]: terminal(
            "grader_error",
            score=0.25,  # never in the headline, even when a receipt carries one
            duration=6.0,
            graders=[grade("scored", 1.0), grade("grader_error", None), grade("scored", 0.0)],
        ),
        cell["c4:alpha:1"]: terminal("execution_error", duration=10.0, reason="timeout"),
        cell["c1:beta:1"]: terminal("adapter_error", duration=None, reason="provider_5xx"),
        cell["c2:beta:1"]: terminal("unscored", duration=1.0),
        cell["c3:beta:1"]: {"state": "running", "duration_seconds": 99.0},
        cell["c4:beta:1"]: None,
    }
    return plan, receipts


def test_counts(mixed: tuple[Plan, dict[str, Any]]) -> None:
    plan, receipts = mixed
    summary = summarize(plan, receipts)
    one_each = counts(
        accepted=1,
        rejected=1,
        unscored=1,
        execution_error=1,
        adapter_error=1,
        grader_error=1,
        running=1,
        missing=1,
    )
    assert summary["total_cells"] == 8
    assert summary["counts"] == one_each
    assert {seat: doc["counts"] for seat, doc in summary["by_seat"].items()} == {
        "alpha": counts(accepted=1, rejected=1, grader_error=1, execution_error=1),
        "beta": counts(adapter_error=1, unscored=1, running=1, missing=1),
    }
    assert summary["stale_counts"] == empty_counts()


def test_measurement_failures(mixed: tuple[Plan, dict[str, Any]]) -> None:
    plan, receipts = mixed
    summary = summarize(plan, receipts)
    assert summary["measurement_failures"] == 3
    assert summary["measurement_failure_kinds"] == {
        "adapter_error": 1,
        "grader_error": 1,
        "timeout": 1,
    }
    assert summary["failure_reasons"] == {"timeout": 1, "provider_5xx": 1}
    alpha, beta = summary["by_seat"]["alpha"], summary["by_seat"]["beta"]
    assert (alpha["measurement_failures"], beta["measurement_failures"]) == (2, 1)
    assert alpha["measurement_failure_kinds"] == {
        "adapter_error": 0,
        "grader_error": 1,
        "timeout": 1,
    }


def test_scores_and_partial_scores(mixed: tuple[Plan, dict[str, Any]]) -> None:
    plan, receipts = mixed
    summary = summarize(plan, receipts)
    assert summary["scores"] == {
        "values": [1.0, 0.5],
        "count": 2,
        "mean": 0.75,
        "median": 0.75,
        "min": 0.5,
        "max": 1.0,
        "stdev": 0.25,
    }
    assert summary["by_seat"]["alpha"]["scores"] == {
        "count": 2,
        "mean": 0.75,
        "median": 0.75,
        "min": 0.5,
        "max": 1.0,
        "stdev": 0.25,
    }
    assert summary["by_seat"]["beta"]["scores"] == EMPTY_BRIEF
    assert summary["partial_scores"] == {
        "values": [1.0, 0.0],
        "count": 2,
        "mean": 0.5,
        "median": 0.5,
        "min": 0.0,
        "max": 1.0,
        "stdev": 0.5,
    }
    assert summary["by_seat"]["alpha"]["partial_scores"] == {
        "count": 2,
        "mean": 0.5,
        "median": 0.5,
        "min": 0.0,
        "max": 1.0,
        "stdev": 0.5,
    }
    assert summary["by_seat"]["beta"]["partial_scores"] == EMPTY_BRIEF
    assert summary["partial_scores_label"] == PARTIAL_LABEL
    assert summary["partial_scores_label"].startswith("partial: ")


def test_durations(mixed: tuple[Plan, dict[str, Any]]) -> None:
    plan, receipts = mixed
    summary = summarize(plan, receipts)
    durations = summary["durations"]
    # finished cells only: the running cell's 99 s and the adapter_error's null are left out
    assert summary["by_seat"]["alpha"]["durations"] == {
        "count": 4,
        "mean": 5.5,
        "median": 5.0,
        "min": 2.0,
        "max": 10.0,
        "stdev": 2.958039892,
    }
    assert summary["by_seat"]["beta"]["durations"]["count"] == 1
    assert summary["by_seat"]["beta"]["durations"]["mean"] == 1.0
    assert durations["values"] == [2.0, 4.0, 6.0, 10.0, 1.0]
    assert durations["stdev"] == round(statistics.pstdev([2, 4, 6, 10, 1]), 9)


def test_exit_code_and_outcome_incomplete(mixed: tuple[Plan, dict[str, Any]]) -> None:
    plan, receipts = mixed
    summary = summarize(plan, receipts)
    assert (summary["exit_code"], summary["outcome"]) == (3, "incomplete")


def test_header(mixed: tuple[Plan, dict[str, Any]]) -> None:
    plan, receipts = mixed
    summary = summarize(plan, receipts)
    assert summary["schema"] == "brigade.eval_summary.v1"
    assert summary["name"] == "summary"
    assert summary["manifest_digest"] == plan.manifest_digest
    assert summary["generated_at"] == NOW


@pytest.mark.parametrize(
    "states, exit_code, outcome",
    [
        (["accepted", "unscored"], 0, "clean"),
        (["accepted", "rejected"], 1, "rejected"),
        (["execution_error", "accepted"], 1, "rejected"),
        (["rejected", "grader_error"], 3, "measurement_failure"),
        (["adapter_error", "accepted"], 3, "measurement_failure"),
        (["accepted", "running"], 3, "incomplete"),
        (["accepted", None], 3, "incomplete"),
    ],
)
def test_exit_code_and_outcome(
    tmp_path: Path, states: list[str | None], exit_code: int, outcome: str
) -> None:
    plan = make_plan(tmp_path, ["c1", "c2"], seats=("alpha",))
    receipts = {
        cell.cell_id: None if state is None else terminal(state, score=1.0)
        for cell, state in zip(plan.cells, states, strict=True)
    }
    summary = summarize(plan, receipts)
    assert (summary["exit_code"], summary["outcome"]) == (exit_code, outcome)


def test_timeout_is_a_measurement_failure_non_timeout_is_not(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, ["c1", "c2"], seats=("alpha",))
    first, second = (cell.cell_id for cell in plan.cells)
    plain = summarize(plan, {first: terminal("execution_error"), second: terminal("accepted")})
    assert plain["measurement_failures"] == 0
    assert (plain["exit_code"], plain["outcome"]) == (1, "rejected")
    timed = summarize(
        plan,
        {first: terminal("execution_error", reason="timeout"), second: terminal("accepted")},
    )
    assert timed["measurement_failures"] == 1
    assert timed["measurement_failure_kinds"] == {
        "adapter_error": 0,
        "grader_error": 0,
        "timeout": 1,
    }
    assert (timed["exit_code"], timed["outcome"]) == (3, "measurement_failure")


def test_stale_cells_only_in_stale_counts(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, ["c1"], seats=("alpha",))
    [cell] = plan.cells
    stale = {
        "1" * 64: terminal("rejected", score=0.0),
        "2" * 64: terminal("grader_error", graders=[grade("grader_error", None)]),
        "3" * 64: None,
    }
    # receipts of cells outside the plan are not counted either
    receipts = {cell.cell_id: terminal("accepted", score=1.0), **stale}
    summary = summarize(plan, receipts, stale)
    assert summary["counts"] == counts(accepted=1)
    assert summary["stale_counts"] == counts(rejected=1, grader_error=1, missing=1)
    assert summary["measurement_failures"] == 0
    assert summary["scores"]["values"] == [1.0]
    assert summary["partial_scores"]["values"] == []
    assert (summary["exit_code"], summary["outcome"]) == (0, "clean")


def test_empty_receipts(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, ["c1"])
    summary = summarize(plan, {})
    assert summary["counts"] == counts(missing=2)
    assert summary["scores"] == EMPTY_STATS
    assert summary["partial_scores"] == EMPTY_STATS
    assert summary["durations"] == EMPTY_STATS
    assert [doc["scores"] for doc in summary["by_seat"].values()] == [EMPTY_BRIEF, EMPTY_BRIEF]
    assert (summary["exit_code"], summary["outcome"]) == (3, "incomplete")


def test_count_states() -> None:
    accepted = {"state": "accepted"}
    assert count_states(views_of({"a": accepted, "b": None, "c": accepted})) == (
        counts(accepted=2, missing=1)
    )
    assert count_states({}) == empty_counts()


# --- stats.describe ----------------------------------------------------------


def test_describe_population_stdev() -> None:
    stats = describe([2, 4, 4, 4, 5, 5, 7, 9])
    assert stats == {
        "values": [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0],
        "count": 8,
        "mean": 5.0,
        "median": 4.5,
        "min": 2.0,
        "max": 9.0,
        "stdev": 2.0,  # the sample stdev would be 2.138...
    }


def test_describe_one_value() -> None:
    assert describe([3]) == {
        "values": [3.0],
        "count": 1,
        "mean": 3.0,
        "median": 3.0,
        "min": 3.0,
        "max": 3.0,
        "stdev": 0.0,
    }


def test_describe_empty() -> None:
    assert describe([]) == EMPTY_STATS


def test_describe_rounds_to_nine_places() -> None:
    stats = describe([0.1, 0.2, 0.4])
    assert stats["mean"] == 0.233333333
    assert stats["stdev"] == 0.124721913
    assert math.isclose(stats["stdev"], statistics.pstdev([0.1, 0.2, 0.4]), abs_tol=1e-9)
