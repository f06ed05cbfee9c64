"""engine/engine.py: the run engine as a library object, in process (end to end, through
`brigade run` and doit: test_run, test_subsets, test_signals, test_progress, ...)."""

from __future__ import annotations

import dataclasses
import io
import signal
from pathlib import Path

import pytest
from conftest import BATTERY_STATES, Project, opened

from brigade.core.selection import CellFilter
from brigade.engine.engine import Engine, locked
from brigade.errors import InputError
from brigade.outdir import lock, store


def test_a_session_is_frozen(battery: Project) -> None:
    session = opened(battery)
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.planned.written = True  # type: ignore[misc]


def test_a_run_in_process_ends_with_its_exit_code_and_lets_go(finished_battery: Project) -> None:
    """A resumed run with nothing to do: the final line, the exit code of the whole plan
    (a measurement failure: the battery has an adapter_error cell), the lock let go and
    the signal handlers put back."""
    before = signal.getsignal(signal.SIGINT)
    stream = io.StringIO()
    engine = Engine(opened(finished_battery), stream=stream)
    assert engine.scheduler is None  # nothing may run: no scheduler is built
    assert engine.run() == 3
    assert engine.tally.exit_code == 3
    final, note = stream.getvalue().splitlines()
    assert final.startswith("brigade: 5 cells: ") and "(exit 3)" in final, final
    assert note == (
        "brigade: 1 cell with apparatus faults kept; re-run it with --retry-transient "
        "(doit: retry_transient=1)"
    )
    assert not lock.held(finished_battery.out)
    assert signal.getsignal(signal.SIGINT) is before
    assert finished_battery.states() == BATTERY_STATES


def test_the_engine_counts_a_subset_alone(finished_battery: Project) -> None:
    """A subset's final line and exit code come from its own receipts."""
    stream = io.StringIO()
    engine = Engine(opened(finished_battery, cells=CellFilter(cases=("ok",))), stream=stream)
    assert engine.scope.total == 1
    assert engine.run() == 0
    assert stream.getvalue().splitlines()[-1].startswith("brigade: 1 of 5 cells (subset: "), (
        stream.getvalue()
    )


def test_locked_lets_a_refused_run_leave_nothing(tmp_path: Path) -> None:
    out = tmp_path / "new" / "out"
    with pytest.raises(InputError), locked(out, wait=False):
        assert lock.held(out)
        raise InputError("refused")
    assert not lock.held(out)
    assert not (tmp_path / "new").exists()  # the folders taking the lock made are gone


def test_locked_lets_a_run_stopped_before_it_wrote_leave_nothing(tmp_path: Path) -> None:
    """Ctrl-C while `brigade run` loads its battery (before the engine's handlers are in):
    the new output folder and its lock go, as under plain doit; a folder with anything
    else in it stays."""
    out = tmp_path / "new" / "out"
    with pytest.raises(KeyboardInterrupt), locked(out, wait=False):
        raise KeyboardInterrupt
    assert not lock.held(out)
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    with pytest.raises(KeyboardInterrupt), locked(kept, wait=False):
        (kept / "plan.json").write_text("{}")
        raise KeyboardInterrupt
    assert (kept / "plan.json").exists()


def test_locked_keeps_what_a_run_wrote(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with locked(out, wait=False):
        (out / "plan.json").write_text("{}")
    assert not lock.held(out)
    assert (out / "plan.json").exists()


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_refused_step_stops_the_run_with_exit_2(finished_battery: Project, jobs: int) -> None:
    """A graded cell's stored output edited: its regrade step refuses the run (one line,
    exit 2), one step at a time or several at once; no receipt and no summary changes."""
    receipt = finished_battery.receipt("ok:agent:1")
    final = store.run_dir(finished_battery.out, receipt["cell_id"], receipt["attempt"])
    (final / "final.txt").write_text("forged\n")
    receipts = {p: p.read_bytes() for p in finished_battery.out.glob("cells/**/cell.json")}
    summary = (finished_battery.out / "summary.json").read_bytes()
    stream = io.StringIO()
    engine = Engine(opened(finished_battery, jobs=jobs), stream=stream)
    assert engine.run() == 2
    lines = stream.getvalue().splitlines()
    assert any("output digest mismatch" in line for line in lines), lines
    assert not engine.tally.summary_ran
    assert {p: p.read_bytes() for p in finished_battery.out.glob("cells/**/cell.json")} == receipts
    assert (finished_battery.out / "summary.json").read_bytes() == summary


def test_the_scope_of_a_run_and_of_its_next_round(battery: Project) -> None:
    """What a run is about, as its selection makes it; an adaptive round's cells join it
    (a new scope: the one before is frozen)."""
    session = opened(battery)
    scope = Engine(session).scope
    assert (scope.total, scope.done_at_start, scope.subset) == (5, 0, None)
    assert sorted(task.cell.coordinate for task in scope.own.values()) == sorted(BATTERY_STATES)
    assert set(scope.launching) == {"agent"}
    cell = session.planned.plan.cells[0]
    assert (scope.grown([cell]).total, scope.total) == (6, 5)
    chosen = dataclasses.replace(scope, subset=frozenset({"other"}))
    assert chosen.grown([cell]).subset == {"other", cell.cell_id}
    with pytest.raises(dataclasses.FrozenInstanceError):
        scope.total = 0  # type: ignore[misc]


CRASH = """\
import brigade.report.finish as finish


def broken(*args, **kwargs):
    raise RuntimeError("the finish broke")


finish.finish_run = broken
"""


@pytest.mark.parametrize("front", ["brigade run", "doit", "brigade doit"])
def test_a_crash_of_brigade_ends_on_one_line_naming_it(
    battery: Project, tmp_path: Path, front: str
) -> None:
    """brigade's own code raising in a step (here the finish): the traceback, for the bug
    report, then one line naming the step and the error, the same through every front
    door; exit 3; the receipts written stay."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(CRASH)
    env = {"PYTHONPATH": str(hook)}
    if front == "brigade run":
        done = battery.run(**env)
    elif front == "doit":
        done = battery.doit(**env)
    else:
        done = battery.brigade_doit(**env)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1] == "brigade: task summary failed: RuntimeError: the finish broke", lines
    # one traceback, once (doit's "PythonAction Error" header left out)
    assert lines.count("Traceback (most recent call last):") == 1
    assert lines.count("RuntimeError: the finish broke") == 1
    assert "PythonAction Error" not in done.stderr
    assert battery.states() == BATTERY_STATES
