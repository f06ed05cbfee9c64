"""End to end: fail-safe grading, regrade from stored output, grader edits re-run graders only."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Project


def expected_file_battery(project: Project) -> None:
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": "answer: hello",
                "graders": [
                    {"type": "exit_status"},
                    {"type": "expected_file", "path": "expected/hello.txt"},
                ],
            },
            {"id": "d", "prompt": "answer: fine", "graders": [{"type": "exit_status"}]},
        ]
    )


def test_grader_fault_is_grader_error_with_partial_scores(project: Project) -> None:
    expected_file_battery(project)
    done = project.doit()
    assert done.returncode == 3
    receipt = project.receipt("c:agent:1")
    assert receipt["state"] == "grader_error"
    assert [g["status"] for g in receipt["graders"]] == ["scored", "grader_error"]
    assert receipt["graders"][1]["score"] is None
    assert receipt["score"] is None
    summary = project.summary()
    assert summary["measurement_failures"] == 1
    assert summary["measurement_failure_kinds"]["grader_error"] == 1
    assert summary["scores"]["values"] == [1.0]  # only cell d
    assert summary["partial_scores"]["values"] == [1.0]  # c's exit_status, labelled
    assert "partial" in summary["partial_scores_label"]


def test_brigade_regrade_fixes_grader_error_without_running_the_seat(project: Project) -> None:
    expected_file_battery(project)
    project.doit()
    assert project.launches() == 2
    (project.root / "expected").mkdir()
    (project.root / "expected" / "hello.txt").write_text("hello\n")
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 0, done.stderr
    assert project.launches() == 2
    receipt = project.receipt("c:agent:1")
    assert (receipt["state"], receipt["attempt"]) == ("accepted", 1)
    assert project.summary()["counts"]["accepted"] == 2


def test_doit_regrades_grader_error_cells_from_stored_output(project: Project) -> None:
    expected_file_battery(project)
    project.doit()
    (project.root / "expected").mkdir()
    (project.root / "expected" / "hello.txt").write_text("goodbye\n")
    done = project.doit()
    assert done.returncode == 1, done.stderr
    assert project.launches() == 2
    assert project.states()["c:agent:1"] == "rejected"


def test_tampered_output_is_refused_and_the_receipt_untouched(project: Project) -> None:
    expected_file_battery(project)
    project.doit()
    cell = project.cell_dir("c:agent:1")
    before = (cell / "cell.json").read_bytes()
    final = Path(project.receipt("c:agent:1")["run_dir"]) / "final.txt"
    final.write_text("hello, edited\n")
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 2
    assert "output digest mismatch" in done.stderr
    assert done.stderr.count("\n") == 1
    assert (cell / "cell.json").read_bytes() == before
    # resume refuses the same way
    again = project.doit()
    assert again.returncode == 2
    assert "output digest mismatch" in again.stderr
    assert (cell / "cell.json").read_bytes() == before
    assert project.launches() == 2


def test_grader_edits_rerun_graders_only(project: Project) -> None:
    project.write_manifest(
        [
            {
                "id": "a",
                "prompt": "answer: alpha",
                "graders": [{"type": "regex_output", "pattern": "^beta$"}],
            },
            {"id": "b", "prompt": "answer: beta"},
            {"id": "c", "prompt": "exit: 4"},
        ],
        graders=[{"type": "exit_status"}],
        trials=2,
    )
    assert project.doit().returncode == 1
    assert project.launches() == 6
    old = {coord: r["cell_id"] for coord, r in project.receipts().items()}
    # edit a pattern, add a grader, change the default list: graders only
    project.write_manifest(
        [
            {
                "id": "a",
                "prompt": "answer: alpha",
                "graders": [{"type": "regex_output", "pattern": "^alpha$"}],
            },
            {"id": "b", "prompt": "answer: beta"},
            {"id": "c", "prompt": "exit: 4"},
        ],
        graders=[{"type": "exit_status"}, {"type": "regex_output", "pattern": "beta"}],
        trials=2,
    )
    done = project.doit()
    assert project.launches() == 6, done.stderr
    states = project.states()
    assert states["a:agent:1"] == "accepted"
    assert states["b:agent:2"] == "accepted"
    assert states["c:agent:1"] == "execution_error"
    for coord, receipt in project.receipts().items():
        assert receipt["cell_id"] != old[coord]
        assert receipt["reused_run"]["cell_id"] == old[coord]
        assert receipt["attempt"] == 1
    assert len(project.plan()["stale_cells"]) == 6
    assert done.returncode == 1
    reused = Path(project.receipt("a:agent:1")["run_dir"])
    assert (reused / "final.txt").read_text() == "alpha\n"
    run = json.loads((reused / "run.json").read_text())
    assert run["reused_from"]["cell_id"] == old["a:agent:1"]


def test_prompt_edit_runs_exactly_the_edited_case(project: Project) -> None:
    cases = [
        {"id": "a", "prompt": "answer: one"},
        {"id": "b", "prompt": "answer: two"},
    ]
    project.write_manifest(cases, trials=2)
    project.doit()
    cases[1] = {"id": "b", "prompt": "answer: three"}
    project.write_manifest(cases, trials=2)
    project.doit()
    assert project.launches() == 6
    log = project.log.read_text().split()
    assert sorted(log[8::2]) == ["b:agent:1", "b:agent:2"]


def test_tampered_source_is_not_reused(project: Project) -> None:
    project.write_manifest(
        [{"id": "a", "prompt": "answer: alpha", "graders": [{"type": "exit_status"}]}]
    )
    project.doit()
    Path(project.receipt("a:agent:1")["run_dir"], "final.txt").write_text("forged\n")
    project.write_manifest([{"id": "a", "prompt": "answer: alpha", "graders": []}])
    done = project.doit()
    assert project.launches() == 2
    assert "not reusing a seat run" in done.stderr
    assert "reused_run" not in project.receipt("a:agent:1")


def test_doit_refuses_a_tampered_output_of_an_accepted_cell(project: Project) -> None:
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": "answer: hello",
                "graders": [{"type": "exact_output", "expected": "hello"}],
            }
        ]
    )
    assert project.doit().returncode == 0
    receipt_file = project.cell_dir("c:agent:1") / "cell.json"
    before = receipt_file.read_bytes()
    Path(project.receipt("c:agent:1")["run_dir"], "final.txt").write_text("hello\n")  # same bytes
    assert project.doit().returncode == 0  # a touched but unchanged output is fine
    Path(project.receipt("c:agent:1")["run_dir"], "final.txt").write_text("hellO\n")
    done = project.doit()
    assert done.returncode == 2
    assert "output digest mismatch" in done.stderr
    assert receipt_file.read_bytes() == before
    assert project.launches() == 1
