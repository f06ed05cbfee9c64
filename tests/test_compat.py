"""Carrying over what users of the original `brigade model trial` have: its summary readers."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAKE_CLI, Project

STATS_KEYS = ["values", "count", "mean", "median", "min", "max", "stdev"]


def seed_exit_bucket(summary: dict[str, Any]) -> int:
    """The exit bucket as the original tool's readers compute it (seeds/outcome-taxonomy.md):
    from `measurement_failures` and `counts` alone."""
    if int(summary.get("measurement_failures", 0) or 0) > 0:
        return 3
    counts = summary["counts"]
    if counts.get("rejected", 0) > 0 or counts.get("execution_error", 0) > 0:
        return 1
    return 0


def assert_original_shapes(summary: dict[str, Any]) -> None:
    """The original eval_summary.v1 keys keep their shapes."""
    assert summary["schema"] == "brigade.eval_summary.v1"
    for key in ("counts", "stale_counts"):
        assert all(type(n) is int for n in summary[key].values()), key
    assert type(summary["measurement_failures"]) is int
    for key in ("scores", "partial_scores", "durations"):
        assert list(summary[key]) == STATS_KEYS, key
        assert summary[key]["count"] == len(summary[key]["values"])


BATTERIES: dict[str, tuple[list[dict[str, Any]], int]] = {
    "clean": (
        [
            {
                "id": "ok",
                "prompt": "answer: hi",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {"id": "free", "prompt": "answer: anything", "graders": []},
        ],
        0,
    ),
    "rejected": (
        [
            {
                "id": "ok",
                "prompt": "answer: hi",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {
                "id": "no",
                "prompt": "answer: ho",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {"id": "crash", "prompt": "exit: 4", "graders": []},
        ],
        1,
    ),
    "apparatus": (
        [
            {
                "id": "no",
                "prompt": "answer: ho",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {"id": "drop", "prompt": "tempfail: connection reset by peer", "graders": []},
            {
                "id": "broken",
                "prompt": "answer: x",
                "graders": [{"type": "regex_output", "pattern": "("}],
            },
        ],
        3,
    ),
    "timeout": (
        [
            {"id": "ok", "prompt": "answer: hi", "graders": []},
            {"id": "slow", "prompt": "sleep: 30", "graders": []},
        ],
        3,
    ),
}


@pytest.mark.parametrize("front", ["doit", "brigade"])
@pytest.mark.parametrize("battery", list(BATTERIES))
def test_seed_readers_get_the_process_exit_code(project: Project, front: str, battery: str) -> None:
    cases, expected = BATTERIES[battery]
    project.write_roster({"agent": {"cli": FAKE_CLI, "timeout_seconds": 1}})
    project.write_manifest(cases)
    done = project.doit() if front == "doit" else project.run()
    assert done.returncode == expected, done.stderr
    summary = project.summary()
    assert_original_shapes(summary)
    assert seed_exit_bucket(summary) == done.returncode
    assert summary["exit_code"] == done.returncode
