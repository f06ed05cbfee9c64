"""engine/session.py: loading, planning against disk, and the session both front doors share
(the scan itself: test_scan)."""

from __future__ import annotations

import pytest
from conftest import BATTERY_STATES, Project

from brigade.core.receipts import ReceiptView
from brigade.core.specs import ExecutorSpec
from brigade.engine import session as sessions
from brigade.engine.session import Options, Session, open_session
from brigade.errors import InputError


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
    cells = session.planned.plan.cells
    return {cell.coordinate: session.scan.actions[cell.cell_id] for cell in cells}


def test_a_new_output_directory_runs_every_cell(battery: Project) -> None:
    session = opened(battery)
    assert actions(session) == dict.fromkeys(BATTERY_STATES, "run")
    assert set(session.scan.recorded.values()) == {None}
    assert (session.planned.resumed, session.planned.written) == (False, False)
    assert session.inputs.out == battery.out
    assert not battery.out.exists()  # opening a session writes nothing


def test_finished_cells_are_skipped_from_their_views(finished_battery: Project) -> None:
    session = opened(finished_battery)
    assert actions(session) == dict.fromkeys(BATTERY_STATES, "skip")
    states = {c.coordinate: session.scan.recorded[c.cell_id] for c in session.planned.plan.cells}
    assert {k: v.state for k, v in states.items() if v is not None} == BATTERY_STATES
    assert all(type(view) is ReceiptView for view in states.values())
    assert session.planned.resumed and session.planned.written


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
