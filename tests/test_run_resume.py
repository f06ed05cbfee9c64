"""End to end: every row of the resume table, through the real doit."""

from __future__ import annotations

import json

from conftest import BATTERY, FAKE_CLI, Project

from brigade.outdir import caches

CASES = BATTERY


def finished(project: Project) -> Project:
    project.write_manifest(CASES)
    assert project.doit().returncode == 3
    return project


def write_receipt(project: Project, coordinate: str, receipt: dict) -> None:
    (project.cell_dir(coordinate) / "cell.json").write_text(json.dumps(receipt))


def test_terminal_states_are_up_to_date(project: Project) -> None:
    finished(project)
    assert project.launches() == 5
    before = {c: r["attempt"] for c, r in project.receipts().items()}
    done = project.doit()
    assert done.returncode == 3
    assert project.launches() == 5  # accepted, rejected, unscored, execution_error, adapter_error
    assert {c: r["attempt"] for c, r in project.receipts().items()} == before


def test_running_cell_reruns_as_next_attempt_keeping_started_at(project: Project) -> None:
    finished(project)
    receipt = project.receipt("ok:agent:1")
    crashed = {
        k: receipt[k]
        for k in (
            "schema",
            "cell_id",
            "coordinate",
            "case_id",
            "case",
            "prompt",
            "seat",
            "trial",
            "grader_specs",
            "execution_mode",
            "attempt",
            "manifest_digest",
        )
    }
    crashed.update(state="running", started_at="2020-01-02T03:04:05.000Z")
    write_receipt(project, "ok:agent:1", crashed)
    # killed while the seat ran: its run was never recorded as finished
    (project.cell_dir("ok:agent:1") / "attempts/attempt-001/run/seat_run.json").unlink(
        missing_ok=True
    )
    assert project.doit().returncode == 3
    after = project.receipt("ok:agent:1")
    assert (after["state"], after["attempt"]) == ("accepted", 2)
    assert after["started_at"] == "2020-01-02T03:04:05.000Z"
    assert project.attempts("ok:agent:1") == ["attempt-001", "attempt-002"]
    assert project.launches() == 6


def test_corrupt_and_truncated_receipts_rerun(project: Project) -> None:
    finished(project)
    (project.cell_dir("ok:agent:1") / "cell.json").write_text('{"schema": "brigade.eval_ce')
    (project.cell_dir("no:agent:1") / "cell.json").write_text("not json at all")
    # nested past any parser's recursion (issue 27, item 3): read as corrupt, no traceback
    (project.cell_dir("free:agent:1") / "cell.json").write_text("[" * 200_000)
    done = project.doit()
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert project.launches() == 8
    assert project.receipt("ok:agent:1")["attempt"] == 2
    assert project.receipt("no:agent:1")["attempt"] == 2
    assert project.receipt("free:agent:1")["attempt"] == 2
    assert project.states()["ok:agent:1"] == "accepted"


def test_unknown_state_and_foreign_cell_id_rerun(project: Project) -> None:
    finished(project)
    odd = project.receipt("ok:agent:1")
    odd["state"] = "finished-ish"
    write_receipt(project, "ok:agent:1", odd)
    foreign = project.receipt("no:agent:1")
    foreign["cell_id"] = "0" * 64  # a receipt that names another cell is never trusted
    write_receipt(project, "no:agent:1", foreign)
    project.doit()
    assert project.launches() == 7


def test_missing_receipt_with_attempt_dirs_never_reuses_a_number(project: Project) -> None:
    finished(project)
    cell = project.cell_dir("ok:agent:1")
    (cell / "cell.json").unlink()
    (cell / "attempts" / "attempt-007").mkdir()
    (cell / "attempts" / "notes").mkdir()
    project.doit()
    assert project.receipt("ok:agent:1")["attempt"] == 8


def test_recorded_attempt_counts_when_attempt_dirs_are_gone(project: Project) -> None:
    finished(project)
    receipt = project.receipt("ok:agent:1")
    receipt["state"] = "running"
    receipt["attempt"] = 5
    write_receipt(project, "ok:agent:1", receipt)
    project.doit()
    assert project.receipt("ok:agent:1")["attempt"] == 6


def test_deleting_doit_db_reruns_nothing(project: Project) -> None:
    finished(project)
    (project.out / ".doit.db").unlink()
    assert project.doit().returncode == 3
    assert project.launches() == 5


def test_truncated_doit_db_is_dropped_not_a_traceback(project: Project) -> None:
    finished(project)
    db = project.out / ".doit.db"
    db.write_text(db.read_text()[:20])
    done = project.doit()
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert project.launches() == 5


def test_parallel_equals_serial(project: Project, tmp_path) -> None:
    cases = CASES + [{"id": f"n{i}", "prompt": f"sleep: 0.2\nanswer: {i}"} for i in range(6)]
    project.write_manifest(cases, trials=2)
    serial = project.doit()
    serial_states = project.states()
    serial_summary = project.summary()
    parallel = Project(tmp_path / "p")
    parallel.write_manifest(cases, trials=2)
    done = parallel.doit("jobs=4")
    assert (serial.returncode, done.returncode) == (3, 3)
    assert parallel.states() == serial_states
    for key in ("counts", "measurement_failures", "total_cells", "exit_code", "scores"):
        assert parallel.summary()[key] == serial_summary[key]


def test_retry_transient_reruns_only_transient_faults(project: Project) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "timeout_seconds": 1}})
    cases = CASES + [{"id": "slow", "prompt": "sleep: 20"}]
    project.write_manifest(cases)
    project.doit()
    assert project.launches() == 6
    project.doit()
    assert project.launches() == 6  # without the flag transient faults stay terminal
    done = project.doit("retry_transient=1")
    assert done.returncode == 3
    assert project.launches() == 8  # fault and slow only
    for coordinate in ("fault:agent:1", "slow:agent:1"):
        assert project.attempts(coordinate) == ["attempt-001", "attempt-002"]
        assert project.receipt(coordinate)["attempt"] == 2
    for coordinate in ("ok:agent:1", "no:agent:1", "free:agent:1", "crash:agent:1"):
        assert project.receipt(coordinate)["attempt"] == 1
    project.run("--retry-transient")
    assert project.launches() == 10
    assert project.attempts("fault:agent:1") == ["attempt-001", "attempt-002", "attempt-003"]


def test_always_runs_every_cell_again(project: Project) -> None:
    finished(project)
    project.run("--always")
    assert project.launches() == 10
    assert {r["attempt"] for r in project.receipts().values()} == {2}


def test_stale_cells_are_kept_reported_and_not_counted(project: Project) -> None:
    finished(project)
    old_ok = project.cell_dir("ok:agent:1")
    edited = [dict(c) for c in CASES]
    edited[0]["prompt"] = "answer: hello\nstderr: edited"
    project.write_manifest(edited)
    done = project.doit()
    assert "1 stale cell" in done.stderr
    assert project.launches() == 6  # only the edited case ran
    plan = project.plan()
    assert plan["stale_cells"] == [
        {
            "coordinate": "ok:agent:1",
            "previous_cell_id": old_ok.name,
            "cell_id": project.cell_dir("ok:agent:1").name,
        }
    ]
    assert old_ok.exists() and (old_ok / "cell.json").exists()
    summary = project.summary()
    assert summary["counts"]["accepted"] == 1
    assert summary["stale_counts"]["accepted"] == 1
    assert summary["total_cells"] == 5
    # a no-op re-run keeps reporting the stale cells of this generation
    project.doit()
    assert project.summary()["stale_counts"]["accepted"] == 1


def test_plan_index_keeps_cell_ids_but_is_never_trusted_blindly(project: Project) -> None:
    finished(project)
    index_path = project.out / ".plan-index.json"
    sidecar = json.loads(index_path.read_text())
    index = sidecar["entries"]["plan.json"][caches.VALUE]
    plan = json.loads((project.out / "plan.json").read_text())
    assert [pair[0] for pair in index["ids"]] == [c["cell_id"] for c in plan["cells"]]
    # a corrupted id list does not add up to the recorded key: the cells are hashed again
    index["ids"][0][0] = "0" * 64
    index_path.write_text(json.dumps(sidecar))
    assert project.doit().returncode == 3
    assert project.launches() == 5
    assert json.loads((project.out / "plan.json").read_text()) == plan
    # an index without ids is rebuilt once
    sidecar["entries"]["plan.json"][caches.VALUE] = {
        k: v for k, v in index.items() if k not in ("ids", "inputs")
    }
    index_path.write_text(json.dumps(sidecar))
    assert project.doit().returncode == 3
    assert project.launches() == 5
    rebuilt = json.loads(index_path.read_text())["entries"]["plan.json"][caches.VALUE]
    assert rebuilt["ids"][0][0] == plan["cells"][0]["cell_id"]


def test_temp_files_of_interrupted_writes_are_cleaned_up(project: Project) -> None:
    project.write_manifest([{"id": "c", "prompt": "answer: x"}, {"id": "d", "prompt": "answer: y"}])
    assert project.doit().returncode == 0
    # as a kill -9 in the middle of atomic writes would leave them
    crashed = project.cell_dir("c:agent:1")
    receipt = json.loads((crashed / "cell.json").read_text())
    receipt["state"] = "running"
    (crashed / "cell.json").write_text(json.dumps(receipt))
    attempt = crashed / "attempts" / "attempt-001"
    (attempt / "run" / "seat_run.json").unlink(missing_ok=True)  # killed while the seat ran
    export = project.out / "export"
    leftovers = [
        crashed / ".cell.json.k2j3h7qa.tmp",
        attempt / ".run.json.a8d7_x0b.tmp",
        attempt / "run" / ".final.txt.zz1ab2cd.tmp",
        project.out / ".summary.json.q9w8e7r6.tmp",
        project.out / ".receipt-index.json.x1y2z3w4.tmp",
        export / ".summary.json.mn0pq1rs.tmp",
        export / "cells" / f".{receipt['cell_id']}.json.tt5uu6vv.tmp",
    ]
    for path in leftovers:
        path.write_text("half")
    kept = [
        project.out / "notes.tmp",
        project.out / ".notes.tmp",
        project.cell_dir("d:agent:1") / ".cell.json.p0p0p0p0.tmp",
    ]
    for path in kept:
        path.write_text("not ours to remove")
    assert project.doit().returncode == 0
    assert project.receipt("c:agent:1")["attempt"] == 2
    assert [p for p in leftovers if p.exists()] == []
    # only the crashed cell's folders, the top folder and the export are swept, and
    # only names an atomic write makes (.<name>.<8 random characters>.tmp)
    assert all(p.exists() for p in kept)
    state = json.loads(next((project.out / ".export-state").glob("*.json")).read_text())
    assert not [name for name in state["entries"] if name.endswith(".tmp")]
