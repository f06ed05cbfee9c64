"""Wire a session into doit: a plan task, a task per cell, a grade task per cell, a summary task.

Up-to-date is decided at load time from the output directory (the source of
truth), never from doit's DB; every action decides again from disk when it
runs, so a stale decision can only cost a no-op.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from doit import create_after
from doit.exceptions import TaskFailed

from brigade.core.plan import Cell, Plan
from brigade.core.specs import ExecutorKind
from brigade.errors import BrigadeError, EnvironmentProblem
from brigade.front.reporter import REFUSED, RunInfo, make_reporter
from brigade.front.session import (
    Options,
    Session,
    indexes_changed,
    load_inputs,
    lock_output,
    open_session,
    save_indexes,
)
from brigade.outdir import store
from brigade.outdir.planfile import write_plan
from brigade.report.finish import finish_run, leak_lines
from brigade.run.runner import bring_up_to_date, regrade_if_needed

DOIT_BACKEND = "json"
# Up to this many cells every cell is its own task (`doit list` shows each);
# above it, finished cells are collected in one task so a no-op resume of a
# large battery stays close to the cost of reading its receipts.
SINGLE_TASKS_UP_TO = 1000
FINISHED_TASK = "cell:finished"
CELLS_GROUP = "cell"  # the delayed creator of the cell tasks, and a task needing them all


def _states_line(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))


def guarded(function: Callable[..., Any], *args: Any) -> TaskFailed | None:
    """Run an action; bad input, tampering or unwritable storage fails the task on one line
    (a TaskFailed the action returns is passed on)."""
    try:
        result = function(*args)
    except BrigadeError as exc:
        return TaskFailed(REFUSED + str(exc))
    except OSError as exc:
        problem = store.storage_problem(exc)
        if problem is None:
            raise
        return TaskFailed(REFUSED + problem)
    return result if isinstance(result, TaskFailed) else None


def finalize(
    out: Path,
    plan: Plan,
    workspace: Path,
    known: Mapping[str, Mapping[str, Any] | None],
    plan_key: str = "",
    untouched: bool = False,
) -> TaskFailed | None:
    """The summary task: finish the run (report.finish); fail when anything leaked."""
    finished = finish_run(
        out, plan, workspace, known=known, key=plan_key or None, untouched=untouched
    )
    if finished.leaks:
        return TaskFailed(f"export leak check failed: {leak_lines(finished.leaks)}")
    return None


def dep_file(out: Path) -> str:
    """doit's DB file. A truncated one (a killed doit) is dropped: it is only a cache."""
    path = out / store.DEP_FILE
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise EnvironmentProblem(
            f"{path}: is a folder where doit keeps its DB (move it away)"
        ) from None
    except PermissionError:
        try:  # unreadable: it is only a cache, made again
            path.unlink()
        except OSError as exc:
            raise EnvironmentProblem(
                f"{path}: doit's DB cannot be read or removed ({exc.strerror}); it is only "
                "a cache: delete it"
            ) from None
        return str(path)
    except OSError:
        return str(path)  # missing: doit starts a fresh one
    try:
        json.loads(data)  # a truncated DB may well end in "}", or be empty
    except ValueError:
        path.unlink(missing_ok=True)
    return str(path)


def cell_task_name(coordinate: str) -> str:
    """`cell:<case>:<seat>:<trial>`."""
    return f"cell:{coordinate}"


def run_info(session: Session) -> RunInfo:
    """The reporter's view of the session."""
    notes = list(session.warnings)
    stale = len(session.plan.stale_cells)
    if stale and session.resumed:
        notes.append(
            f"{stale} stale cell{'s' if stale != 1 else ''} from an earlier manifest "
            "(kept on disk, not counted; listed in plan.json stale_cells)"
        )
    return RunInfo(
        out=session.out,
        plan=session.plan,
        total=len(session.plan.cells),
        wait=session.options.wait,
        notes=notes,
        start=session.cluster.start if session.cluster is not None else None,
    )


def namespace(session: Session, info: RunInfo | None = None) -> dict[str, Any]:
    """DOIT_CONFIG and task generators for a session (what dodo.py exposes)."""
    info = info or run_info(session)
    plan, ctx, out = session.plan, session.ctx, session.out
    always = session.options.always
    cluster = session.cluster
    submit = cluster.submit if cluster is not None else None
    collect = cluster.collect if cluster is not None else None
    # large plans: finished cells share one task (doit spends ~50 us per task)
    share = len(plan.cells) > SINGLE_TASKS_UP_TO and not always
    unchanged: dict[str, Any] = {}  # cell_id -> receipt of the cells up to date
    own_cells: list[Cell] = []  # cells with a task of their own
    for cell in plan.cells:
        cell_id = cell.cell_id
        seen = session.recorded[cell_id]
        if session.actions[cell_id] == "skip" and not always:
            unchanged[cell_id] = seen.receipt
            if share:
                info.collected[seen.state or "missing"] += 1
                continue
        own_cells.append(cell)
        info.cell_tasks[cell_task_name(cell.coordinate)] = cell_id
        info.loaded_states[cell_id] = seen.state
    collected = sum(info.collected.values())
    own_tasks = list(info.cell_tasks)
    # nothing to run and no receipt changed since the last run: its summary still holds
    untouched = (
        session.plan_is_current
        and not indexes_changed(session)
        and not always
        and len(unchanged) == len(plan.cells)
    )

    def task_plan() -> dict[str, Any]:
        """Write plan.json for the current manifest."""
        return {
            "actions": [(guarded, [write_plan, out, plan, session.plan_key, session.plan_inputs])],
            "uptodate": [session.plan_is_current and not always],
        }

    # Created only once `plan` has run, and only when something needs them (a
    # default run, `doit cell:...`, the summary): `doit plan` of a big battery
    # never builds a doit task per cell. `doit list` still creates and lists all.
    @create_after(executed="plan")
    def task_cell() -> Iterator[dict[str, Any]]:
        """Every cell (each one is its own task below)."""
        yield {
            "basename": CELLS_GROUP,
            "doc": "every cell of the plan",
            "actions": None,
            "task_dep": [*own_tasks, *([FINISHED_TASK] if collected else [])],
        }
        if collected:
            yield {
                "basename": FINISHED_TASK,
                "doc": f"{collected} finished cells ({_states_line(info.collected)}); "
                "brigade show lists them",
                "actions": [],
                "uptodate": [True],
            }
        for cell in own_cells:
            action = "run" if always else session.actions[cell.cell_id]
            state = info.loaded_states[cell.cell_id] or "not run"
            yield {
                "basename": cell_task_name(cell.coordinate),
                "doc": f"{state}: {cell.case_id} on {cell.seat.name}, trial {cell.trial}",
                "actions": [
                    (
                        guarded,
                        [
                            bring_up_to_date,
                            ctx,
                            cell,
                            session.reuse.get(cell.cell_id),
                            always,
                            submit,
                        ],
                    )
                ],
                "task_dep": ["plan"],
                "uptodate": [action in ("skip", "regrade")],
            }

    def task_grade() -> Iterator[dict[str, Any]]:
        """Re-grade cells whose grader broke, from stored output (no seat run)."""
        yield {"basename": "grade", "name": None, "doc": task_grade.__doc__}
        for cell in plan.cells:
            if session.actions[cell.cell_id] != "regrade" or always:
                continue  # cells that run are graded by their own task
            yield {
                "name": cell.coordinate,
                "actions": [(guarded, [regrade_if_needed, ctx, cell])],
                # its cell task is up to date (it only grades): no need to wait for it
                "task_dep": ["plan"],
                "uptodate": [session.actions[cell.cell_id] != "regrade" and not always],
            }

    def task_collect() -> dict[str, Any]:
        """Wait for the seat runs on the Dask cluster and record each as it finishes."""
        return {
            "actions": [(guarded, [collect, _progress(info)])],
            # cell tasks only submit (and write `running`); one task waits for them all,
            # so a thousand cells in flight need no thousand local threads
            "task_dep": [CELLS_GROUP],
            "uptodate": [False],
        }

    def task_summary() -> dict[str, Any]:
        """Write summary.json and the export, and check the export leaks nothing."""
        return {
            "actions": [
                (
                    guarded,
                    [
                        finalize,
                        out,
                        plan,
                        session.workspace,
                        unchanged,
                        session.plan_key,
                        untouched,
                    ],
                ),
                (guarded, [save_indexes, session]),
            ],
            # after every cell task and every regrade (doit -n runs tasks as soon as
            # their own dependencies are done)
            "task_dep": ["plan", "grade", CELLS_GROUP, *(["collect"] if cluster else [])],
            "uptodate": [False],
        }

    config = {
        "backend": DOIT_BACKEND,
        "dep_file": dep_file(out),
        "reporter": make_reporter(info),
        # seats are subprocesses: threads are enough and need no pickling or fork
        "par_type": "thread",
    }
    generators = {
        "DOIT_CONFIG": config,
        "task_plan": task_plan,
        "task_cell": task_cell,
        "task_grade": task_grade,
        "task_summary": task_summary,
    }
    if cluster is not None:
        generators["task_collect"] = task_collect
    return generators


def _progress(info: RunInfo) -> Callable[[str | None], None]:
    """Counts a cell recorded by the collect task on the reporter's progress line."""

    def count(state: str | None) -> None:
        if info.count is not None:
            info.count(state)

    return count


# doit command-line variables (`doit manifest=PATH ...`) and what they mean
DOIT_VARIABLES = (
    "manifest",
    "roster",
    "out",
    "workspace",
    "retry_transient",
    "wait",
    "always",
    "executor",
    "scheduler",
)
EXECUTORS: tuple[ExecutorKind, ...] = ("local", "dask")
DEFAULT_MANIFEST = "manifests/demo.yaml"


def _flag(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise BrigadeError(f"doit variable {name}={value!r}: use 1 or 0")


def options_from_variables(variables: dict[str, str]) -> Options:
    """Options from doit command-line variables; unknown names are refused."""
    unknown = sorted(set(variables) - set(DOIT_VARIABLES))
    if unknown:
        raise BrigadeError(
            f"unknown doit variable {unknown[0]!r} (known: {', '.join(DOIT_VARIABLES)})"
        )

    def path(name: str) -> Path | None:
        value = variables.get(name)
        return Path(value) if value else None

    return Options(
        manifest=path("manifest") or Path(DEFAULT_MANIFEST),
        roster=path("roster"),
        out=path("out"),
        workspace=path("workspace"),
        retry_transient=_flag("retry_transient", variables.get("retry_transient", "0")),
        wait=_flag("wait", variables.get("wait", "0")),
        always=_flag("always", variables.get("always", "0")),
        executor=_executor(variables.get("executor")),
        scheduler=variables.get("scheduler") or None,
    )


def _executor(value: str | None) -> ExecutorKind | None:
    if not value:
        return None
    for kind in EXECUTORS:
        if value.strip().lower() == kind:
            return kind
    raise BrigadeError(f"doit variable executor={value!r}: use local or dask")


def doit_command() -> Any | None:
    """The doit command importing the dodo right now (run, list, info, ...), None when the
    dodo is not being imported by doit (doit passes it nothing that says so)."""
    from doit.cmd_base import DoitCmdBase

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is DoitCmdBase.execute.__code__:
            return frame.f_locals.get("self")
        frame = frame.f_back
    return None


def writes(command: Any | None) -> bool:
    """Whether a doit command runs tasks (and so writes to the output directory).
    `list`, `info`, `help` and the like only read; when unsure, assume it writes."""
    return command is None or bool(getattr(command, "execute_tasks", True))


def dodo_namespace(variables: dict[str, str]) -> dict[str, Any]:
    """Everything dodo.py exposes; bad input prints one line and exits 2.

    A doit command that runs tasks takes the output directory's lock first
    (waiting for it with wait=1), before the output directory is read: what
    the tasks are built from is what the run finds, whoever wrote there before.
    """
    try:
        options = options_from_variables(variables)
        inputs = load_inputs(options.manifest, options.roster, options.workspace)
        if writes(doit_command()):
            lock_output(options, inputs[0])
        session = open_session(options, inputs)
        info = run_info(session)
        info.end_process = True
        return namespace(session, info)
    except BrigadeError as exc:
        sys.stderr.write(f"brigade: {exc}\n")
        raise SystemExit(exc.exit_code) from None
