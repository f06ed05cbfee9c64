"""End to end: incremental builds down to the grader. A grader whose spec and inputs are
unchanged reuses its stored result (a judge is not paid again); one whose spec or inputs
changed (the command, its test files, the expected file, the manifest's folder) runs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from conftest import FAKE_CLI, REPO, Project, git
from test_command_verdicts import FIXIT, SEAT

FAKE_JUDGE = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'fake_judge.py'}"
JUDGE = {"type": "judge", "seat": "critic", "rubric": "The code is fixed."}
PYTEST = ["{python}", "-m", "pytest", "-p", "no:cacheprovider", "--junitxml={grader_dir}/j.xml"]


def log(project: Project) -> dict[str, str]:
    return {"FAKE_JUDGE_LOG": str(project.root / "judge.log")}


def judge_runs(project: Project) -> int:
    path = project.root / "judge.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def fixit(project: Project, *flags: str, extra: dict[str, Any] | None = None) -> None:
    """The fixit fixture, a seat that fixes it, graded by pytest (with `flags`) and a judge."""
    if not (project.workspace / ".git").exists():
        shutil.copytree(FIXIT, project.workspace, dirs_exist_ok=True)
        git(project.workspace, "init", "-q")
        git(project.workspace, "add", "-A")
        git(project.workspace, "commit", "-qm", "fixture")
        (project.root / "seat.py").write_text(SEAT)
    project.write_roster(
        {
            "agent": {"cli": f"exec:{{python}} {project.root / 'seat.py'}"},
            "critic": {"cli": FAKE_JUDGE, "model": "pass"},
        }
    )
    command = {
        "type": "command",
        "command": [*PYTEST, *flags],
        "score_from": "junit:{grader_dir}/j.xml",
        **(extra or {}),
    }
    command = {key: value for key, value in command.items() if value is not None}
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [command, JUDGE]}],
        execution={"mode": "writable-worktree"},
    )


def test_editing_a_command_reruns_it_and_reuses_the_judge(project: Project) -> None:
    fixit(project, "-q")
    assert project.run(**log(project)).returncode == 0
    before = project.receipt("fix:agent:1")
    assert len(before["grader_keys"]) == 2 and "reused_grades" not in before
    fixit(project, "-q", "-x")  # the command changed: new cell ids, the seat run is reused
    done = project.run(**log(project))
    assert done.returncode == 0, done.stderr
    after = project.receipt("fix:agent:1")
    assert after["cell_id"] != before["cell_id"]
    assert (project.launches(), judge_runs(project)) == (1, 1)  # no agent, no judge again
    assert after["reused_grades"] == [
        {
            "grader_id": "judge:1",
            "cell_id": before["cell_id"],
            "attempt": 1,
            "source_grader_id": "judge:1",
            "graded_at": before["graded_at"],
        }
    ]
    command, judge = after["graders"]
    assert command["duration_seconds"] != before["graders"][0]["duration_seconds"]  # it ran
    assert after["grader_keys"][0] != before["grader_keys"][0]
    assert after["grader_keys"][1] == before["grader_keys"][1]
    # the reused result is this cell's own: its id, and its logs copied into its folder
    assert (judge["cell_id"], judge["grader_id"]) == (after["cell_id"], "judge:1")
    folder = f"cells/{after['cell_id']}/attempts/attempt-001/graders/judge-1"
    assert judge["logs"]["answer"] == f"{folder}/final.txt"
    assert (project.out / folder / "final.txt").read_text().endswith("SCORE: 0.9\n")
    summary = project.summary()["grader_usage"]
    assert summary["results"] == 1  # the judge's verdict, counted once
    # brigade show and the cell's page say what was reused, and the seat run's own start
    shown = project.brigade("show", str(project.out), "fix:agent:1").stdout
    said = (
        "reused: not run again (its spec and inputs are unchanged); the result of judge:1 of "
        f"cell {before['cell_id'][:12]}, attempt 1, graded {before['graded_at']}"
    )
    assert f"    {said}\n" in shown
    attempt = shown.split("attempts:\n", 1)[1].splitlines()[0]
    source_run = json.loads(Path(before["run_dir"], "run.json").read_text())
    assert after["reused_run"]["started_at"] == source_run["started_at"]
    assert after["started_at"] > source_run["started_at"]  # (this attempt's own start)
    assert attempt.startswith(f"    1  accepted  {source_run['started_at']}  ")
    assert attempt.endswith(
        f"(reused run of cell {before['cell_id'][:12]}, attempt 1; started then)"
    )
    page = project.out / "report" / "index_files" / "cells" / f"{after['cell_id'][:2]}.html"
    text = page.read_text()
    assert f'<p class="note reused">{said}</p>' in text
    assert f"(reused run of cell {before['cell_id'][:12]}, attempt 1)</span>" in text
    assert f"<td>{source_run['started_at']}</td>" in text


def test_a_new_judge_rubric_runs_the_judge_and_reuses_the_tests(project: Project) -> None:
    fixit(project, "-q")
    assert project.run(**log(project)).returncode == 0
    before = project.receipt("fix:agent:1")
    JUDGE_EDIT = {**JUDGE, "rubric": "The code is fixed, and nothing else changed."}
    command = before["grader_specs"][0]
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [command, JUDGE_EDIT]}],
        execution={"mode": "writable-worktree"},
    )
    assert project.run(**log(project)).returncode == 0
    after = project.receipt("fix:agent:1")
    assert judge_runs(project) == 2
    assert [entry["grader_id"] for entry in after["reused_grades"]] == ["command:0"]
    # the reused command's logs (and its base run, if any) are this cell's own copies
    logs = after["graders"][0]["logs"]
    assert all(path.startswith(f"cells/{after['cell_id']}/") for path in logs.values())
    assert after["graders"][0]["output_refs"][1] == (
        f"cells/{after['cell_id']}/attempts/attempt-001/run/changes.patch"
    )


# a test the agent never sees, beside the manifest: it imports calc from where it runs
TEST = "import sys; sys.path.insert(0, '.'); import calc; sys.exit(calc.add(2, 2) != {})\n"


def test_a_changed_test_file_named_by_the_command_runs_it_again(project: Project) -> None:
    check = project.root / "check.py"
    check.write_text(TEST.format(4))
    fixit(project, extra={"command": [sys.executable, str(check)], "score_from": None})
    assert project.run(**log(project)).returncode == 0
    before = project.receipt("fix:agent:1")
    check.write_text(TEST.format(5))
    project.write_manifest(  # and an edit of the judge, for new cells
        [
            {
                "id": "fix",
                "prompt": "fix it",
                "graders": [before["grader_specs"][0], {**JUDGE, "pass_score": 0.6}],
            }
        ],
        execution={"mode": "writable-worktree"},
    )
    assert project.run(**log(project)).returncode == 1
    after = project.receipt("fix:agent:1")
    assert after["graders"][0]["score"] == 0.0  # the test ran again: its file changed
    assert "reused_grades" not in after


def test_files_of_the_manifest_folder_are_inputs(project: Project) -> None:
    hidden = project.root / "hidden_test.py"  # beside the manifest: {manifest_dir}
    hidden.write_text("from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    flags = ["{manifest_dir}/hidden_test.py", "--rootdir=."]
    fixit(project, *flags)
    assert project.run(**log(project)).returncode == 0
    hidden.write_text("from calc import add\n\ndef test_add():\n    assert add(2, 2) == 5\n")
    spec = project.receipt("fix:agent:1")["grader_specs"][0]
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [spec, {**JUDGE, "pass_score": 0.6}]}],
        execution={"mode": "writable-worktree"},
    )
    assert project.run(**log(project)).returncode == 1
    assert project.receipt("fix:agent:1")["graders"][0]["score"] == 0.0


def test_an_expected_file_that_changed_is_read_again(project: Project) -> None:
    expected = project.root / "expected.txt"
    expected.write_text("hello\n")
    project.write_roster(
        {"agent": {"cli": FAKE_CLI}, "critic": {"cli": FAKE_JUDGE, "model": "pass"}}
    )
    graders = [{"type": "expected_file", "path": "expected.txt"}, JUDGE]
    project.write_manifest([{"id": "hi", "prompt": "answer: hello"}], graders=graders)
    assert project.run(**log(project)).returncode == 0
    # an edit of the judge only: the expected file is unchanged, its result reused
    project.write_manifest(
        [{"id": "hi", "prompt": "answer: hello"}], graders=[graders[0], {**JUDGE, "rubric": "r2"}]
    )
    assert project.run(**log(project)).returncode == 0
    assert [e["grader_id"] for e in project.receipt("hi:agent:1")["reused_grades"]] == [
        "expected_file:0"
    ]
    expected.write_text("goodbye\n")  # and the judge again
    project.write_manifest(
        [{"id": "hi", "prompt": "answer: hello"}], graders=[graders[0], {**JUDGE, "rubric": "r3"}]
    )
    assert project.run(**log(project)).returncode == 1
    receipt = project.receipt("hi:agent:1")
    assert receipt["graders"][0]["score"] == 0.0
    assert "reused_grades" not in receipt


def test_a_grader_error_cell_regrades_only_its_broken_grader(project: Project) -> None:
    script = project.root / "later.sh"  # not there yet: the command cannot start
    fixit(project, extra={"command": [str(script)], "score_from": None})
    assert project.run(**log(project)).returncode == 3
    broken = project.receipt("fix:agent:1")
    assert broken["state"] == "grader_error" and judge_runs(project) == 1
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    done = project.run(**log(project))
    assert done.returncode == 0, done.stderr
    fixed = project.receipt("fix:agent:1")
    assert (fixed["state"], fixed["attempt"], judge_runs(project)) == ("accepted", 1, 1)
    assert fixed["reused_grades"] == [
        {
            "grader_id": "judge:1",
            "cell_id": broken["cell_id"],
            "attempt": 1,
            "source_grader_id": "judge:1",
            "graded_at": broken["graded_at"],
        }
    ]
    shown = project.brigade("show", str(project.out), "fix:agent:1").stdout
    assert "the result of judge:1 of this cell, attempt 1, graded " in shown
    # brigade regrade runs every grader again, the judge too (the same verdicts: the receipt
    # stays as it was)
    assert project.brigade("regrade", str(project.out), **log(project)).returncode == 0
    assert judge_runs(project) == 2
    assert project.receipt("fix:agent:1") == fixed


def test_a_command_of_a_read_only_run_always_runs(project: Project) -> None:
    """It runs in the live workspace, whose state no key can name."""
    (project.workspace / "status").write_text("green\n")
    code = "import sys; sys.exit(0 if open('status').read() == 'green\\n' else 1)"
    project.write_roster(
        {"agent": {"cli": FAKE_CLI}, "critic": {"cli": FAKE_JUDGE, "model": "pass"}}
    )
    command = {"type": "command", "command": [sys.executable, "-c", code]}
    project.write_manifest([{"id": "look", "prompt": "answer: ok"}], graders=[command, JUDGE])
    assert project.run(**log(project)).returncode == 0
    assert project.receipt("look:agent:1")["grader_keys"][0] is None
    (project.workspace / "status").write_text("red\n")
    project.write_manifest(
        [{"id": "look", "prompt": "answer: ok"}], graders=[command, {**JUDGE, "rubric": "r2"}]
    )
    assert project.run(**log(project)).returncode == 1
    receipt = project.receipt("look:agent:1")
    assert receipt["graders"][0]["score"] == 0.0


def test_a_receipt_without_keys_reuses_nothing(project: Project) -> None:
    """Cells graded before grader keys were recorded grade again in full."""
    fixit(project, "-q")
    assert project.run(**log(project)).returncode == 0
    receipt_file = project.cell_dir("fix:agent:1") / "cell.json"
    receipt = json.loads(receipt_file.read_text())
    del receipt["grader_keys"]
    receipt_file.write_text(json.dumps(receipt))
    fixit(project, "-q", "-x")
    assert project.run(**log(project)).returncode == 0
    assert judge_runs(project) == 2
    assert "reused_grades" not in project.receipt("fix:agent:1")


def test_the_key_changes_with_the_code(tmp_path: Path) -> None:
    from test_command_grader import context

    from brigade.run import graders

    ctx = context(tmp_path)
    spec = {"type": "exact_output", "expected": "hello"}
    key = graders.key_of(0, spec, ctx)
    assert key is not None and key == graders.key_of(3, spec, ctx)  # not its place
    assert graders.key_of(0, {**spec, "expected": "hi"}, ctx) != key
    import unittest.mock

    with unittest.mock.patch("brigade.run.reuse.code_digest", lambda: "other code"):
        assert graders.key_of(0, spec, ctx) != key


def test_what_a_command_left_in_its_folder_is_copied_without_being_followed(
    project: Project,
) -> None:
    """The attack: the code under test leaves a FIFO (a copy reading it would block) and a
    link to a file outside in the grader's folder; reusing the result copies neither's
    contents."""
    script = project.root / "plant.py"
    script.write_text(
        "import os\n"
        "folder = os.environ['BRIGADE_GRADER_DIR']\n"
        "os.mkfifo(os.path.join(folder, 'pipe'))\n"
        f"os.symlink({str(project.root / 'secret.txt')!r}, os.path.join(folder, 'link'))\n"
    )
    (project.root / "secret.txt").write_text("not to be copied\n")
    fixit(project, extra={"command": [sys.executable, str(script)], "score_from": None})
    assert project.run(**log(project)).returncode == 0
    spec = project.receipt("fix:agent:1")["grader_specs"][0]
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [spec, {**JUDGE, "rubric": "r2"}]}],
        execution={"mode": "writable-worktree"},
    )
    done = project.run(**log(project))
    assert done.returncode == 0, done.stderr
    after = project.receipt("fix:agent:1")
    assert [entry["grader_id"] for entry in after["reused_grades"]] == ["command:0"]
    folder = project.cell_dir("fix:agent:1") / "attempts" / "attempt-001" / "graders" / "command-0"
    # (what the command writes is in its own folder there, beside brigade's logs)
    assert not (folder / "work" / "pipe").exists()
    assert (folder / "work" / "link").is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == ["stderr.log", "stdout.log", "work"]
    assert sorted(p.name for p in (folder / "work").iterdir()) == ["link"]


def test_a_folder_too_deep_to_copy_is_graded_again_not_a_crash(project: Project) -> None:
    """The attack: the code under test nests folders in the grader's folder deeper than a
    copy can follow; the result is then graded again instead of reused."""
    script = project.root / "nest.py"
    script.write_text(
        "import os\n"
        "os.chdir(os.environ['BRIGADE_GRADER_DIR'])\n"
        "for _ in range(700):\n"
        "    os.mkdir('d')\n"
        "    os.chdir('d')\n"
    )
    fixit(project, extra={"command": [sys.executable, str(script)], "score_from": None})
    assert project.run(**log(project)).returncode == 0
    spec = project.receipt("fix:agent:1")["grader_specs"][0]
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [spec, {**JUDGE, "rubric": "r2"}]}],
        execution={"mode": "writable-worktree"},
    )
    done = project.run(**log(project))
    assert done.returncode == 0, done.stderr
    assert "reused_grades" not in project.receipt("fix:agent:1")
