"""front/session.py: loading, planning against disk, and the scan that decides every cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import BATTERY, BATTERY_STATES, Project

from brigade.core.receipts import ReceiptView
from brigade.core.specs import ExecutorSpec
from brigade.errors import InputError
from brigade.front import session as sessions
from brigade.front.session import Options, Session, open_session
from brigade.outdir import caches, store


def options_of(project: Project, **extra: object) -> Options:
    return Options(
        manifest=project.manifest,
        roster=project.roster,
        out=project.out,
        workspace=project.workspace,
        **extra,  # type: ignore[arg-type]
    )


def opened(project: Project, **extra: object) -> Session:
    return open_session(options_of(project, **extra))


def actions(session: Session) -> dict[str, str]:
    return {cell.coordinate: session.actions[cell.cell_id] for cell in session.plan.cells}


def edit_receipt(project: Project, coordinate: str, **fields: object) -> None:
    path = project.cell_dir(coordinate) / "cell.json"
    receipt = json.loads(path.read_text())
    receipt.update(fields)
    path.write_text(json.dumps(receipt))


def test_a_new_output_directory_runs_every_cell(battery: Project) -> None:
    session = opened(battery)
    assert actions(session) == dict.fromkeys(BATTERY_STATES, "run")
    assert set(session.recorded.values()) == {None}
    assert (session.resumed, session.plan_is_current) == (False, False)
    assert session.out == battery.out
    assert not battery.out.exists()  # opening a session writes nothing


def test_finished_cells_are_skipped_from_their_views(finished_battery: Project) -> None:
    session = opened(finished_battery)
    assert actions(session) == dict.fromkeys(BATTERY_STATES, "skip")
    states = {c.coordinate: session.recorded[c.cell_id] for c in session.plan.cells}
    assert {k: v.state for k, v in states.items() if v is not None} == BATTERY_STATES
    assert all(type(view) is ReceiptView for view in states.values())
    assert session.resumed and session.plan_is_current


def test_the_resume_table_row_by_row(finished_battery: Project) -> None:
    edit_receipt(finished_battery, "ok:agent:1", state="running")
    edit_receipt(finished_battery, "no:agent:1", state="grader_error")
    edit_receipt(finished_battery, "free:agent:1", cell_id="0" * 64)  # another cell's
    (finished_battery.cell_dir("crash:agent:1") / "cell.json").write_text("{")
    assert actions(opened(finished_battery)) == {
        "ok:agent:1": "run",
        "no:agent:1": "regrade",
        "free:agent:1": "run",
        "crash:agent:1": "run",
        "fault:agent:1": "skip",
    }
    retried = actions(opened(finished_battery, retry_transient=True))
    assert retried["fault:agent:1"] == "run"


def test_a_tampered_output_sends_its_cell_to_the_grade_task(finished_battery: Project) -> None:
    receipt = finished_battery.receipt("ok:agent:1")
    final = Path(receipt["run_dir"]) / "final.txt"
    final.write_text("tampered")
    assert actions(opened(finished_battery))["ok:agent:1"] == "regrade"


def test_the_receipt_index_vouches_only_for_unchanged_files(finished_battery: Project) -> None:
    assert finished_battery.doit().returncode == 3  # writes the receipt index
    index_path = finished_battery.out / store.RECEIPT_INDEX
    session = opened(finished_battery)
    assert sessions.indexes_changed(session) is False
    # an index entry that lies is not believed once the file's stat moved on
    sidecar = json.loads(index_path.read_text())
    cell_id = finished_battery.receipt("ok:agent:1")["cell_id"]
    entry = sidecar["entries"][cell_id]
    entry[-1][1] = "rejected"  # what the index claims; cell.json still says accepted
    index_path.write_text(json.dumps(sidecar))
    assert opened(finished_battery).recorded[cell_id].state == "rejected"  # stat unchanged
    edit_receipt(finished_battery, "ok:agent:1")  # rewritten as it was: a new inode
    fresh = opened(finished_battery)
    assert fresh.recorded[cell_id].state == "accepted"
    assert sessions.indexes_changed(fresh) is True


def test_read_receipt_indexed_records_untrusted_receipts_as_none(tmp_path: Path) -> None:
    cell_id = "a" * 64
    folder = store.cell_dir(tmp_path, cell_id)
    folder.mkdir(parents=True)
    (folder / "cell.json").write_text('{"schema": "brigade.eval_cell.v1"}')
    index = caches.Sidecar(tmp_path / store.RECEIPT_INDEX, caches.cache_key())
    assert sessions.read_receipt_indexed(tmp_path, cell_id, index) is None
    assert index.fresh(cell_id, caches.stat_of(folder / "cell.json")) is None
    assert sessions.read_receipt_indexed(tmp_path, cell_id, index) is None
    assert sessions.read_receipt_indexed(tmp_path, "b" * 64, index) is None


def test_reuse_needs_a_verified_source_differing_only_in_graders(
    finished_battery: Project,
) -> None:
    edited = [dict(case) for case in BATTERY]
    edited[0]["graders"] = [{"type": "exit_status"}]
    finished_battery.write_manifest(edited)
    session = opened(finished_battery)
    assert actions(session)["ok:agent:1"] == "reuse"
    source = session.reuse[next(c.cell_id for c in session.plan.cells if c.case_id == "ok")]
    assert len(session.plan.stale_cells) == 1
    assert session.plan.stale_cells[0]["previous_cell_id"] == source


def test_plan_only_writes_nothing(battery: Project) -> None:
    plan, out = sessions.plan_only(options_of(battery))
    assert [cell.coordinate for cell in plan.cells] == list(BATTERY_STATES)
    assert out == battery.out and not out.exists()


def test_a_workspace_that_is_not_a_folder_is_refused_before_anything_is_made(
    battery: Project,
) -> None:
    missing = battery.root / "no" / "such"
    options = Options(manifest=battery.manifest, roster=battery.roster, workspace=missing)
    manifest = sessions.load_inputs(battery.manifest, battery.roster)[0]
    with pytest.raises(InputError, match="workspace is not a folder"):
        sessions.output_dir(options, manifest)
    assert not missing.exists()
    defaulted = Options(manifest=battery.manifest, workspace=battery.workspace)
    assert sessions.output_dir(defaulted, manifest) == battery.workspace / ".brigade/evals/t"


def test_an_output_path_that_is_a_file_is_refused(battery: Project) -> None:
    battery.out.write_text("mine")
    with pytest.raises(InputError, match="output path exists and is not a folder"):
        opened(battery)
    assert battery.out.read_text() == "mine"


def test_resolve_executor(battery: Project) -> None:
    roster = sessions.load_inputs(battery.manifest, battery.roster)[1]
    local = Options(manifest=battery.manifest)
    assert sessions.resolve_executor(local, roster) == ExecutorSpec()
    dask = Options(manifest=battery.manifest, executor="dask", scheduler="tcp://h:8786")
    assert sessions.resolve_executor(dask, roster) == ExecutorSpec("dask", "tcp://h:8786")
    with pytest.raises(InputError, match="only the dask executor uses a scheduler"):
        sessions.resolve_executor(Options(manifest=battery.manifest, scheduler="tcp://h:1"), roster)
    with pytest.raises(InputError, match="needs a scheduler address"):
        sessions.resolve_executor(Options(manifest=battery.manifest, executor="dask"), roster)
    with pytest.raises(InputError, match="not a scheduler address"):
        sessions.resolve_executor(
            Options(manifest=battery.manifest, executor="dask", scheduler="h:1"), roster
        )


def test_grader_warnings_name_each_broken_grader_once(project: Project) -> None:
    broken = {"type": "regex_output", "pattern": "("}
    project.write_manifest(
        [
            {"id": "a", "prompt": "x", "graders": [broken]},
            {"id": "b", "prompt": "y", "graders": [{"type": "exit_status"}]},
        ]
    )
    manifest = sessions.load_inputs(project.manifest, project.roster)[0]
    warnings = sessions.grader_warnings(manifest)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{project.manifest}: cases[0] (a) graders[0]: ")
    assert warnings[0].endswith("— this grader will record grader_error until fixed")
