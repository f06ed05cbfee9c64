"""run/runner.py (the cell lifecycle) and run/seat.py (one seat run), in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import BATTERY_STATES, Project, opened

from brigade.adapters.base import SeatRequest
from brigade.core.plan import Cell
from brigade.core.receipts import Receipt
from brigade.engine.session import Session
from brigade.errors import TamperedOutput
from brigade.inputs import schemas
from brigade.outdir import store
from brigade.outdir.planfile import write_plan
from brigade.run import runner, seat


def cell_at(session: Session, coordinate: str) -> Cell:
    return next(cell for cell in session.planned.plan.cells if cell.coordinate == coordinate)


def test_bringing_cells_up_to_date_in_process(
    battery: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT_LOG", str(battery.log))  # the seats count their launches
    session = opened(battery)
    write_plan(session.inputs.out, session.planned.plan, session.planned.key)
    for cell in session.planned.plan.cells:
        assert runner.bring_up_to_date(session.ctx, cell) == "run"
    assert battery.states() == BATTERY_STATES
    # decided again from disk: finished cells are left alone
    assert runner.bring_up_to_date(session.ctx, cell_at(session, "ok:agent:1")) == "skip"
    assert battery.launches() == 5
    # always: a new attempt whatever the receipt says
    cell = cell_at(session, "ok:agent:1")
    assert runner.bring_up_to_date(session.ctx, cell, always=True) == "run"
    assert battery.receipt("ok:agent:1")["attempt"] == 2
    assert sorted(store.attempt_numbers(store.cell_dir(battery.out, cell.cell_id))) == [1, 2]


def test_a_crashed_cell_keeps_its_start_and_gets_a_new_attempt(finished_battery: Project) -> None:
    path = finished_battery.cell_dir("ok:agent:1") / "cell.json"
    receipt = json.loads(path.read_text())
    running = {**receipt, "state": "running"}  # as a run killed mid-way leaves it
    path.write_text(json.dumps(running))
    # killed while the seat ran: no record of a finished seat run
    (Path(receipt["run_dir"]) / runner.SEAT_RUN).unlink(missing_ok=True)
    session = opened(finished_battery)
    assert runner.bring_up_to_date(session.ctx, cell_at(session, "ok:agent:1")) == "run"
    again = finished_battery.receipt("ok:agent:1")
    assert (again["state"], again["attempt"]) == ("accepted", 2)
    assert again["started_at"] == receipt["started_at"]


def command_graded(project: Project) -> Project:
    """One cell graded by a command (a grader slow enough for a kill to land in it),
    finished."""
    project.write_manifest(
        [{"id": "ok", "prompt": "answer: x", "graders": [{"type": "command", "command": ["true"]}]}]
    )
    assert project.doit().returncode == 0
    return project


def test_a_cell_killed_while_grading_is_graded_from_its_finished_seat_run(
    project: Project,
) -> None:
    command_graded(project)
    path = project.cell_dir("ok:agent:1") / "cell.json"
    receipt = json.loads(path.read_text())
    assert (Path(receipt["run_dir"]) / runner.SEAT_RUN).is_file()
    path.write_text(json.dumps({**receipt, "state": "running"}))
    # killed while grading: the attempt has no receipt of its own yet
    (path.parent / "attempts" / "attempt-001" / "cell.json").unlink()
    launches = project.launches()
    session = opened(project)
    assert runner.bring_up_to_date(session.ctx, cell_at(session, "ok:agent:1")) == "regrade"
    again = project.receipt("ok:agent:1")
    # a new attempt, as for every running cell, from the killed attempt's seat run
    assert (again["state"], again["attempt"]) == ("accepted", 2)
    assert again["reused_run"]["attempt"] == 1
    assert again["started_at"] == receipt["started_at"]
    assert project.launches() == launches


def test_a_cell_killed_before_its_cell_json_keeps_its_attempts_receipt(
    project: Project,
) -> None:
    """Killed after the attempt's own receipt was written, before cell.json: that receipt,
    written once, stays as it is; the new attempt reuses its seat run."""
    command_graded(project)
    path = project.cell_dir("ok:agent:1") / "cell.json"
    copy = project.cell_dir("ok:agent:1") / "attempts" / "attempt-001" / "cell.json"
    written = copy.read_bytes()
    receipt = json.loads(path.read_text())
    path.write_text(json.dumps({**receipt, "state": "running"}))
    launches = project.launches()
    session = opened(project)
    assert runner.bring_up_to_date(session.ctx, cell_at(session, "ok:agent:1")) == "regrade"
    assert copy.read_bytes() == written
    again = project.receipt("ok:agent:1")
    assert (again["state"], again["attempt"]) == ("accepted", 2)
    assert again["reused_run"]["attempt"] == 1
    assert project.launches() == launches


def test_a_seat_run_graded_by_quick_graders_leaves_no_record(finished_battery: Project) -> None:
    """Only grading that runs a process (a command, a judge) is worth resuming from."""
    receipt = finished_battery.receipt("ok:agent:1")
    assert not (Path(receipt["run_dir"]) / runner.SEAT_RUN).exists()


def test_every_run_document_has_the_same_keys(finished_battery: Project) -> None:
    """One builder writes run.json, whether the seat ran or never launched."""
    ran = json.loads(
        (Path(finished_battery.receipt("ok:agent:1")["run_dir"]) / "run.json").read_text()
    )
    session = opened(finished_battery)
    cell = cell_at(session, "ok:agent:1")
    job = seat.seat_job(cell, 9)
    rdir = finished_battery.root / "scratch"
    rdir.mkdir()
    lost = seat.unlaunched_run(job, rdir, finished_battery.workspace, "lost", "cluster_lost")
    assert sorted(lost.run_doc) == sorted(ran)
    assert schemas.problems(lost.run_doc, seat.RUN_SCHEMA) == []
    assert (lost.run_doc["status"], lost.run_doc["failure_detail"]) == ("not_launched", "lost")
    assert (rdir / seat.STDERR).read_text() == "brigade: lost\n"
    written = seat.record_run(rdir, lost)
    assert json.loads((rdir / seat.RUN_RECORD).read_text()) == written
    results = json.loads((rdir / seat.WORKER_RESULTS).read_text())["results"]
    assert results[0]["ok"] is False


def test_the_seat_environment(finished_battery: Project) -> None:
    session = opened(finished_battery)
    cell = cell_at(session, "ok:agent:1")
    request = SeatRequest(
        seat=cell.seat,
        prompt=cell.prompt,
        cwd=finished_battery.workspace,
        run_dir=finished_battery.root / "run",
        writable=False,
        cell_id=cell.cell_id,
        coordinate=cell.coordinate,
    )
    env = seat.seat_environment(request, {"EXTRA": "1", seat.RUN_DIR_VARIABLE: "overridden"})
    assert env["EXTRA"] == "1"
    assert env[seat.RUN_DIR_VARIABLE] == str(finished_battery.root / "run")
    assert env["BRIGADE_CELL_ID"] == cell.cell_id
    assert env["BRIGADE_EXECUTION_MODE"] == "read-only"


def test_regrade_rewrites_a_receipt_only_when_the_verdict_changes(
    finished_battery: Project,
) -> None:
    session = opened(finished_battery)
    cell = cell_at(session, "no:agent:1")
    receipt = finished_battery.receipt("no:agent:1")
    read = Receipt.of(receipt)
    assert read is not None
    before = (finished_battery.cell_dir("no:agent:1") / "cell.json").stat()
    assert runner.regrade(session.ctx, cell, read) is read
    after = (finished_battery.cell_dir("no:agent:1") / "cell.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    graded = json.loads(json.dumps(receipt))
    graded["graders"][0]["status"] = "grader_error"
    graded["state"] = "grader_error"
    updated = runner.regrade(session.ctx, cell, Receipt.of(graded))  # type: ignore[arg-type]
    assert updated is not None and updated.state == "rejected"
    assert finished_battery.receipt("no:agent:1") == updated.document


def _without_timings(receipt: dict[str, object]) -> dict[str, object]:
    graders = [
        {k: v for k, v in result.items() if k != "duration_seconds"}
        for result in receipt["graders"]  # type: ignore[attr-defined]
    ]
    return {**receipt, "graded_at": None, "graders": graders}


@pytest.mark.parametrize("coordinate", ["ok:agent:1", "no:agent:1"])
def test_a_regrade_assembles_the_receipt_its_run_wrote(
    finished_battery: Project, coordinate: str
) -> None:
    """The same seat run and grades: a regrade writes the receipt the run wrote (one place
    assembles both), its grading time and graders' durations aside."""
    session = opened(finished_battery)
    cell = cell_at(session, coordinate)
    ran = finished_battery.receipt(coordinate)
    broken = json.loads(json.dumps(ran))  # what an earlier grading said, to be replaced
    broken["graders"][0]["status"] = "grader_error"
    broken["state"] = "grader_error"
    broken["failure_reason"] = "grader_error"
    broken["reused_grades"] = [0]
    regraded = runner.regrade(session.ctx, cell, Receipt.of(broken))  # type: ignore[arg-type]
    assert regraded is not None
    assert _without_timings(dict(regraded.document)) == _without_timings(ran)
    assert finished_battery.receipt(coordinate) == regraded.document


def test_a_changed_output_is_refused(finished_battery: Project) -> None:
    session = opened(finished_battery)
    doc = finished_battery.receipt("ok:agent:1")
    receipt = Receipt.of(doc)
    assert receipt is not None
    assert runner.verify_output(session.ctx, receipt) == Path(doc["run_dir"])
    (Path(doc["run_dir"]) / "final.txt").write_text("hellO\n")
    with pytest.raises(TamperedOutput, match="output digest mismatch"):
        runner.verify_output(session.ctx, receipt)
    with pytest.raises(TamperedOutput):
        runner.regrade_if_needed(session.ctx, cell_at(session, "ok:agent:1"))


def test_the_grade_task(finished_battery: Project) -> None:
    session = opened(finished_battery)
    grade = runner.regrade_if_needed
    assert grade(session.ctx, cell_at(session, "ok:agent:1")) == "verified"
    assert grade(session.ctx, cell_at(session, "crash:agent:1")) == "skip"
    path = finished_battery.cell_dir("no:agent:1") / "cell.json"
    receipt = json.loads(path.read_text())
    path.write_text(json.dumps({**receipt, "state": "grader_error"}))
    assert grade(session.ctx, cell_at(session, "no:agent:1")) == "regrade"
    assert finished_battery.receipt("no:agent:1")["state"] == "rejected"


def test_a_run_recorded_elsewhere_is_graded_here(finished_battery: Project) -> None:
    """What the dask executor calls with a run its worker made."""
    session = opened(finished_battery, always=True)
    cell = cell_at(session, "ok:agent:1")
    attempt = store.new_attempt(finished_battery.out, cell.cell_id, 1)
    rdir = store.run_dir(finished_battery.out, cell.cell_id, attempt)
    job = seat.seat_job(cell, attempt)
    sdir = store.seat_dir(finished_battery.out, cell.cell_id, attempt)
    run_doc = seat.record_run(rdir, seat.execute_seat(job, finished_battery.workspace, rdir, sdir))
    receipt = runner.record_seat_run(
        session.ctx, cell, attempt, "2026-01-01T00:00:00.000Z", run_doc
    )
    assert (receipt.state, receipt.attempt) == ("accepted", 2)
    assert finished_battery.receipt("ok:agent:1") == receipt.document


def test_every_earlier_attempt_s_usage_is_counted(finished_battery: Project) -> None:
    """attempts_usage: each attempt's run.json usage; unknown (null) for an attempt a killed
    run left without one; nothing for an attempt whose seat never launched."""
    session = opened(finished_battery)
    cell = cell_at(session, "ok:agent:1")
    first = Path(finished_battery.receipt("ok:agent:1")["run_dir"]) / "run.json"
    spent = {"input_tokens": 5, "output_tokens": 1, "cost_usd": 0.1, "cost_source": "reported"}
    run_doc = {**json.loads(first.read_text()), "usage": spent}
    store.write_json(first, run_doc, seat.RUN_SCHEMA)
    never = store.new_attempt(finished_battery.out, cell.cell_id, 1)
    store.write_json(
        store.run_dir(finished_battery.out, cell.cell_id, never) / "run.json",
        {**run_doc, "attempt": never, "status": "not_launched", "usage": None},
        seat.RUN_SCHEMA,
    )
    killed = store.new_attempt(finished_battery.out, cell.cell_id, never)
    receipt = finished_battery.receipt("ok:agent:1")
    running = runner.running_receipt(session.ctx, cell, killed, receipt["started_at"])
    store.write_receipt(finished_battery.out, running)
    assert runner.bring_up_to_date(session.ctx, cell) == "run"
    again = finished_battery.receipt("ok:agent:1")
    full = {
        "input_tokens": 5,
        "cached_input_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": 1,
        "reasoning_tokens": None,
        "turns": None,
        "cost_usd": 0.1,
        "cost_source": "reported",
        "model": None,
        "models": {},
        "session_id": None,
        "api_duration_seconds": None,
    }
    assert again["attempts_usage"] == [
        {"attempt": 1, "usage": full},
        {"attempt": 3, "usage": None},
        {"attempt": 4, "usage": None},
    ]
