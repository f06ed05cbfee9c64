"""front/tasks.py: the pure selection of cell tasks, the task builders, doit's variables."""

from __future__ import annotations

import errno
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import BATTERY_STATES, Project
from doit.exceptions import TaskFailed

from brigade.engine.engine import Engine
from brigade.engine.selection import Selection
from brigade.engine.selection import select as select_cells
from brigade.engine.session import Options, Session, open_session
from brigade.errors import BrigadeError, InputError
from brigade.front import tasks
from brigade.outdir import lock


def session_of(project: Project, **options: object) -> Session:
    session = open_session(
        Options(
            manifest=project.manifest,
            roster=project.roster,
            out=project.out,
            workspace=project.workspace,
            **options,  # type: ignore[arg-type]
        )
    )
    return session


def coordinates(chosen: Selection) -> list[str]:
    return [task.cell.coordinate for task in chosen.own]


def select(session: Session, **overrides: object) -> Selection:
    arguments: dict[str, object] = {
        "always": False,
        "share": True,
        "plan_is_current": session.planned.written,
        "receipts_changed": session.scan.changed,
    }
    arguments.update(overrides)
    scanned = session.scan
    return select_cells(session.planned.plan, scanned.recorded, scanned.actions, **arguments)  # type: ignore[arg-type]


def test_a_fresh_plan_gives_every_cell_its_own_task(battery: Project) -> None:
    session = session_of(battery)
    chosen = select(session)
    assert coordinates(chosen) == list(BATTERY_STATES)
    assert [task.action for task in chosen.own] == ["run"] * 5
    assert [task.state for task in chosen.own] == [None] * 5
    assert (chosen.collected, chosen.unchanged, chosen.regrade) == (Counter(), {}, [])
    assert not chosen.untouched


def test_a_run_collects_finished_cells_and_a_listing_shows_each(
    finished_battery: Project,
) -> None:
    session = session_of(finished_battery)
    shared = select(session)
    assert shared.own == []
    assert shared.collected == Counter(BATTERY_STATES.values())
    assert sorted(shared.unchanged) == sorted(c.cell_id for c in session.planned.plan.cells)
    listed = select(session, share=False)
    assert coordinates(listed) == list(BATTERY_STATES)
    assert [task.action for task in listed.own] == ["skip"] * 5
    assert [task.state for task in listed.own] == list(BATTERY_STATES.values())
    assert listed.collected == Counter()
    no = next(c.cell_id for c in session.planned.plan.cells if c.coordinate == "no:agent:1")
    named = select(session, named=frozenset({no}))
    assert coordinates(named) == ["no:agent:1"]
    assert sum(named.collected.values()) == 4


def test_always_runs_every_cell_and_is_never_untouched(finished_battery: Project) -> None:
    session = session_of(finished_battery)
    chosen = select(session, always=True, plan_is_current=True, receipts_changed=False)
    assert [task.action for task in chosen.own] == ["run"] * 5
    assert (chosen.unchanged, chosen.untouched) == ({}, False)


def test_untouched_needs_a_current_plan_and_no_changed_receipt(
    finished_battery: Project,
) -> None:
    session = session_of(finished_battery)
    assert select(session, plan_is_current=True, receipts_changed=False).untouched
    assert not select(session, plan_is_current=False, receipts_changed=False).untouched
    assert not select(session, plan_is_current=True, receipts_changed=True).untouched


def test_a_grader_error_cell_gets_a_grade_task(finished_battery: Project) -> None:
    receipt_path = finished_battery.cell_dir("ok:agent:1") / "cell.json"
    receipt = json.loads(receipt_path.read_text())
    receipt["state"] = "grader_error"
    receipt_path.write_text(json.dumps(receipt))
    session = session_of(finished_battery)
    chosen = select(session)
    assert [cell.coordinate for cell in chosen.regrade] == ["ok:agent:1"]
    assert coordinates(chosen) == ["ok:agent:1"]
    grade = list(tasks.grade_tasks(chosen, Engine(session)))
    assert [task.get("name") for task in grade] == [None, "ok:agent:1"]


def test_the_namespace_wires_every_task(finished_battery: Project) -> None:
    session = session_of(finished_battery)
    names = tasks.namespace(session)
    assert sorted(names) == [
        "DOIT_CONFIG",
        "task_cell",
        "task_grade",
        "task_plan",
        "task_setup",
        "task_summary",
    ]
    config = names["DOIT_CONFIG"]
    # brigade's own doit runs: its backend plugin (reporter.CacheDB); plain doit: doit's json
    assert (config["backend"], config["par_type"]) == ("brigade-json", "thread")
    plain = tasks.namespace(session_of(finished_battery), late_names=True)["DOIT_CONFIG"]
    assert plain["backend"] == "json"
    assert config["dep_file"] == str(finished_battery.out / ".doit.db")
    plan = names["task_plan"]()
    assert plan["uptodate"] == [True]  # plan.json and its index hold this plan
    cells = list(names["task_cell"]())
    assert [task["basename"] for task in cells] == ["cell", tasks.FINISHED_TASK]
    assert cells[0]["task_dep"] == [tasks.FINISHED_TASK]
    assert cells[1]["doc"] == (
        "5 finished cells (accepted 1, adapter_error 1, execution_error 1, rejected 1, "
        "unscored 1); brigade show DIR --cells lists them"
    )
    summary = names["task_summary"]()
    assert summary["task_dep"] == ["plan", "setup", "grade", "cell"]
    assert summary["uptodate"] == [False]
    listing = tasks.namespace(session_of(finished_battery), listing=True)
    listed = [task["basename"] for task in listing["task_cell"]()]
    assert listed == ["cell", *(f"cell:{c}" for c in BATTERY_STATES)]


def test_guarded_turns_refusals_and_storage_faults_into_one_line() -> None:
    def refuse() -> None:
        raise InputError("bad input")

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/out/cell.json")

    def bug() -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    refused = tasks.guarded(refuse)
    assert isinstance(refused, TaskFailed)
    assert refused.message == "brigade-refused: bad input"
    no_space = tasks.guarded(full)
    assert isinstance(no_space, TaskFailed)
    assert no_space.message == (
        "brigade-refused: cannot write /out/cell.json: No space left on device"
    )
    with pytest.raises(OSError):
        tasks.guarded(bug)
    passed = TaskFailed("leak")
    assert tasks.guarded(lambda: passed) is passed
    assert tasks.guarded(lambda: "done") is None


def test_a_truncated_doit_db_is_dropped(tmp_path: Path) -> None:
    db = tmp_path / ".doit.db"
    assert tasks.dep_file(tmp_path) == str(db)
    db.write_text('{"plan": {')
    tasks.dep_file(tmp_path)
    assert not db.exists()
    db.write_text("{}")
    tasks.dep_file(tmp_path)
    assert db.read_text() == "{}"


def test_doit_variables() -> None:
    options = tasks.options_from_variables(
        {"manifest": "m.yaml", "wait": "yes", "always": "0", "executor": " Dask "}
    )
    assert options == Options(manifest=Path("m.yaml"), wait=True, always=False, executor="dask")
    assert tasks.options_from_variables({}).manifest == Path(tasks.DEFAULT_MANIFEST).absolute()
    based = tasks.options_from_variables({"manifest": "m.yaml", "out": "/o"}, base=Path("/w"))
    assert (based.manifest, based.out) == (Path("/w/m.yaml"), Path("/o"))
    with pytest.raises(BrigadeError, match="unknown doit variable 'manifests'"):
        tasks.options_from_variables({"manifests": "m.yaml"})
    with pytest.raises(BrigadeError, match=r"doit variable wait='maybe': use 1 or 0"):
        tasks.options_from_variables({"wait": "maybe"})
    with pytest.raises(BrigadeError, match="use local or dask"):
        tasks.options_from_variables({"executor": "k8s"})


def test_commands_that_run_tasks_or_change_the_db_write() -> None:
    run = tasks.Invocation(command="run")
    assert run.writes() and run.runs()
    for name in ("forget", "ignore", "reset-dep", "clean"):
        invocation = tasks.Invocation(command=name)
        assert invocation.writes() and not invocation.runs()
    for name in ("list", "info", "help"):
        invocation = tasks.Invocation(command=name)
        assert not invocation.writes() and not invocation.runs()
    plain = tasks.Invocation()  # plain doit: the dodo is not told the command
    assert plain.writes() and plain.runs() and not plain.known


def test_the_dodo_locks_before_reading_unless_the_command_only_reads(
    finished_battery: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = {
        "manifest": str(finished_battery.manifest),
        "roster": str(finished_battery.roster),
        "out": str(finished_battery.out),
        "workspace": str(finished_battery.workspace),
    }
    seen: list[bool] = []
    finishing: list[bool] = []  # whether the session may digest a copy ahead (run/ahead)
    original = tasks.open_session

    def opened(options: Options, inputs: object = None, **given: bool) -> Session:
        seen.append(lock.held(finished_battery.out))
        finishing.append(given.get("finishing", False))
        return original(options, inputs, **given)  # type: ignore[arg-type]

    monkeypatch.setattr(tasks, "open_session", opened)
    tasks.dodo_namespace(variables, tasks.Invocation(command="list"))
    try:
        tasks.dodo_namespace(variables, tasks.Invocation(command="run", args=("cell",)))
    finally:
        lock.release(finished_battery.out)
    try:
        tasks.dodo_namespace(variables)  # plain doit: whatever its command
    finally:
        lock.release(finished_battery.out)
    assert seen == [False, True, True]
    assert finishing == seen  # a listing reads nothing ahead without the lock


def test_plain_doit_variables_are_read_through_get_var(monkeypatch: pytest.MonkeyPatch) -> None:
    from doit import doit_cmd

    doit_cmd.reset_vars()
    for name, value in (("manifest", "m.yaml"), ("retry_transiet", "1"), ("other", "x")):
        doit_cmd.set_var(name, value)
    # doit took these from its command line; `other=y` differs from what doit holds
    monkeypatch.setattr(sys, "argv", ["doit", "manifest=m.yaml", "retry_transiet=1", "other=y"])
    try:
        assert tasks.command_line_variables() == {"manifest": "m.yaml", "retry_transiet": "1"}
    finally:
        doit_cmd.reset_vars()
