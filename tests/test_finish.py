"""One way to finish a run (report/finish.py), and the lock taken before the output
directory is read by both front doors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import Project, wait_for

from brigade.core.plan import plan_from_document, plan_key
from brigade.front.cli import main
from brigade.outdir import caches, lock

# accepted once the workspace holds marker.txt: a regrade changes the cell's state
MARKER_CASE = {
    "id": "marked",
    "prompt": "answer: done",
    "graders": [{"type": "file_exists", "path": "marker.txt"}],
}


def finished_rejected(project: Project) -> None:
    project.write_manifest([MARKER_CASE])
    assert project.doit().returncode == 1
    assert project.states() == {"marked:agent:1": "rejected"}


def test_doit_that_waited_while_a_regrade_changed_a_cell_reports_the_new_state(
    project: Project, tmp_path: Path
) -> None:
    finished_rejected(project)
    lock.acquire(project.out, wait=False)  # this test plays the regrade holding the lock
    try:
        err = tmp_path / "doit.err"
        with open(err, "w") as stderr:
            waiting = subprocess.Popen(
                [*project.doit_popen_args(), "wait=1"],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=project.env(),
                text=True,
            )
        try:
            wait_for(lambda: "waiting for pid" in err.read_text(), what="doit waiting for the lock")
            (project.workspace / "marker.txt").write_text("here")
            assert main(["regrade", str(project.out)]) == 0  # takes the lock this process holds
            assert project.states() == {"marked:agent:1": "accepted"}
        finally:
            lock.release(project.out)
        assert waiting.wait(timeout=120) == 0, err.read_text()
    finally:
        lock.release(project.out)
    assert project.summary()["counts"]["accepted"] == 1
    assert (
        '<testsuites name="t" tests="1" failures="0"'
        in (project.out / "report" / "junit.xml").read_text()
    )
    assert "-> clean (exit 0)" in err.read_text()


def test_a_doit_run_refuses_a_held_output_directory_before_reading_it(project: Project) -> None:
    finished_rejected(project)
    lock.acquire(project.out, wait=False)
    try:
        done = project.doit()
        assert done.returncode == 2
        assert done.stderr.splitlines()[-1].startswith(
            f"brigade: {project.out}: another brigade run (pid "
        )
        # read-only doit commands need no lock: brigade doit knows them (plain doit does not
        # tell the dodo its command, so it takes the lock for every one)
        listed = project.brigade_doit("list")
        assert listed.returncode == 0, listed.stderr
        assert "cell:marked:agent:1" in listed.stdout
        info = project.brigade_doit("info", "cell:marked:agent:1")
        assert info.returncode == 0, info.stderr
        assert project.doit("list").returncode == 2
    finally:
        lock.release(project.out)


def test_regrade_finishes_the_run_like_the_final_task(project: Project) -> None:
    finished_rejected(project)
    junit = project.out / "report" / "junit.xml"
    assert 'failures="1"' in junit.read_text()
    (project.workspace / "marker.txt").write_text("here")
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "regraded 1 cell(s) from stored output (1 changed state); accepted 1\n"
    assert project.summary()["counts"]["accepted"] == 1
    assert 'failures="0"' in junit.read_text()  # the report too, not only the summary
    cell_id = project.receipt("marked:agent:1")["cell_id"]
    exported = json.loads((project.out / "export" / "cells" / f"{cell_id}.json").read_text())
    assert exported["state"] == "accepted"
    # the summary key was recorded for the plan's key, as the final task records it
    key = json.loads((project.out / ".summary-key.json").read_text())
    assert key["entries"]["summary.json"][caches.VALUE]["plan"] == plan_key(
        plan_from_document(project.plan())
    )
    assert project.doit().returncode == 0
    before = (project.out / "summary.json").read_bytes()
    assert project.doit().returncode == 0
    assert (project.out / "summary.json").read_bytes() == before


def test_export_and_report_write_their_part_under_the_lock(project: Project) -> None:
    finished_rejected(project)
    summary = (project.out / "summary.json").read_bytes()
    for name in ("report/junit.xml", "report/index.html", "export/summary.json"):
        (project.out / name).unlink()
    done = project.brigade("report", str(project.out))
    assert done.returncode == 1, done.stderr  # the results' bucket
    assert done.stdout == (
        f"wrote {project.out / 'report' / 'junit.xml'}\n"
        f"wrote {project.out / 'report' / 'index.html'}\n"
    )
    assert 'failures="1"' in (project.out / "report" / "junit.xml").read_text()
    assert not (project.out / "export" / "summary.json").exists()  # only its own part
    exported = project.brigade("export", str(project.out))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == f"exported 3 file(s) to {project.out / 'export'}\n"
    assert (project.out / "export" / "summary.json").exists()
    assert (project.out / "summary.json").read_bytes() == summary  # left as it is
    lock.acquire(project.out, wait=False)
    try:
        for command in ("report", "export"):
            held = project.brigade(command, str(project.out))
            assert held.returncode == 2
            assert "another brigade run" in held.stderr
        # printing the report's data writes nothing: no lock needed
        printed = project.brigade("report", str(project.out), "--json")
        assert printed.returncode == 1, printed.stderr
    finally:
        lock.release(project.out)
