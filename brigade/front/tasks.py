"""The doit adapter: a session's run (engine/engine) as doit tasks: a plan task, a task per
cell, a grade task per cell, the collect and summary tasks, each calling a step of the
engine.

Up-to-date is decided at load time from the output directory (the source of
truth), never from doit's DB; every action decides again from disk when it
runs, so a stale decision can only cost a no-op.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doit import create_after
from doit.exceptions import TaskFailed

from brigade.core.plan import Cell, Plan
from brigade.core.terminal import printable
from brigade.engine import names
from brigade.engine.engine import Engine
from brigade.engine.names import cell_task_name, grade_task_name
from brigade.engine.options import DEFAULT_MANIFEST as DEFAULT_MANIFEST
from brigade.engine.options import DOIT_VARIABLES, from_variables
from brigade.engine.selection import Choice, Named, Selection, choose
from brigade.engine.session import Options, Session, load_inputs, lock_output, open_session
from brigade.errors import BrigadeError, EnvironmentProblem, InputError
from brigade.front.reporter import CACHE_BACKEND, REFUSED, make_reporter
from brigade.outdir import lock, store

DOIT_BACKEND = "json"
# a run collects the cells already finished in this one task (see `select`)
FINISHED_TASK = "cell:finished"
CELLS_GROUP = "cell"  # the delayed creator of the cell tasks, and a task needing them all


def _states_line(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))


# the process that loaded the tasks: under `doit -n N -P process` doit forks processes
# that run the actions, whose steps would change copies of the run, not the run itself
LOADED_IN = os.getpid()
FORKED = (
    "doit -P process: brigade runs the seats in threads of doit's own process; drop "
    "-P process (jobs=N runs N seats at once)"
)


def guarded(function: Callable[..., Any], *args: Any) -> TaskFailed | None:
    """Run an action; bad input, tampering or unwritable storage fails the task on one line
    (a TaskFailed the action returns is passed on)."""
    if os.getpid() != LOADED_IN:
        return TaskFailed(REFUSED + FORKED)
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


def dep_file(out: Path) -> str:
    """doit's DB file. A truncated one (a killed doit) is dropped: it is only a cache."""
    path = out / store.DEP_FILE
    try:
        data = store.read_regular(path)
    except IsADirectoryError:
        raise EnvironmentProblem(
            f"{path}: is a folder where doit keeps its DB (move it away)"
        ) from None
    except (PermissionError, store.NotRegularFile):
        try:  # unreadable (or a FIFO doit would hang on): it is only a cache, made again
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
    except (ValueError, RecursionError):
        path.unlink(missing_ok=True)
    return str(path)


# -- task builders (doit task dicts) ---------------------------------------------


def plan_task(engine: Engine) -> dict[str, Any]:
    """`plan`: write plan.json for the current manifest (up to date when it holds it)."""
    return {
        "doc": "Write plan.json for the current manifest.",
        "actions": [(guarded, [engine.write_plan])],
        "uptodate": [engine.plan_current()],
    }


def cell_tasks(chosen: Selection, engine: Engine, hand: bool) -> Iterator[dict[str, Any]]:
    """`cell` (every cell), `cell:finished` (the collected ones) and one task per own cell.

    A cell whose seat must run is handed to the scheduler (`hand`): its task
    returns at once and the `collect` task waits for the seat runs.
    """
    collected = sum(chosen.collected.values())
    yield {
        "basename": CELLS_GROUP,
        "doc": "every cell of the plan",
        "actions": None,
        "task_dep": [
            *(cell_task_name(task.cell.coordinate) for task in chosen.own),
            *([FINISHED_TASK] if collected else []),
        ],
    }
    if collected:
        yield {
            "basename": FINISHED_TASK,
            "doc": f"{collected} finished cells ({_states_line(chosen.collected)}); "
            "brigade show DIR --cells lists them",
            "actions": [],
            "uptodate": [True],
        }
    cells_folder = f"{engine.out}/{store.CELLS_DIR}/"
    for task in chosen.own:
        cell = task.cell
        yield {
            "basename": cell_task_name(cell.coordinate),
            "doc": f"{task.state or 'not run'}: {cell.case_id} on {cell.seat.name}, "
            f"trial {cell.trial}",
            # `doit info cell:<coordinate>` shows it: where the cell's files are
            "meta": {"cell_id": cell.cell_id, "folder": cells_folder + cell.cell_id},
            "actions": [(guarded, [engine.bring, task, hand])],
            "task_dep": ["plan", *_setup_dep(cell)],
            "uptodate": [task.action in ("skip", "regrade")],
        }


SETUP_GROUP = "setup"


def setup_task_name(case_id: str) -> str:
    """`setup:<case>`: the task that builds a case's own workspace (its setup run once)."""
    return f"{SETUP_GROUP}:{names.escape(case_id)}"


def worlds(plan: Plan) -> dict[str, Cell]:
    """A cell of each case that has a workspace of its own, by case id."""
    found: dict[str, Cell] = {}
    for cell in plan.cells:
        if cell.workspace is not None and cell.case_id not in found:
            found[cell.case_id] = cell
    return found


def setup_tasks(engine: Engine, chosen: Selection, listing: bool) -> Iterator[dict[str, Any]]:
    """`setup:<case>`: build a case's workspace (its files, its setup) once for every seat
    and trial; up to date when it is built with this key (a failed setup too, but under
    --retry-transient), or when no cell of the case needs it in this run."""
    yield {"basename": SETUP_GROUP, "name": None, "doc": setup_tasks.__doc__}
    needed = {task.cell.case_id for task in chosen.own if task.action != "skip"}
    for case_id, cell in worlds(engine.loaded.planned.plan).items():
        yield {
            "name": names.escape(case_id),
            "doc": f"build {case_id}'s workspace"
            + (" and run its setup" if cell.setup is not None else ""),
            "actions": [(guarded, [engine.build_setup, cell])],
            "task_dep": ["plan"],
            "uptodate": [engine.setup_current(cell) or (case_id not in needed and not listing)],
        }


def _setup_dep(cell: Cell) -> list[str]:
    return [setup_task_name(cell.case_id)] if cell.workspace is not None else []


def grade_tasks(chosen: Selection, engine: Engine) -> Iterator[dict[str, Any]]:
    """`grade:<coordinate>`: re-grade a cell whose grader broke, from stored output."""
    yield {"basename": "grade", "name": None, "doc": grade_tasks.__doc__}
    for cell in chosen.regrade:
        yield {
            "name": names.escape(cell.coordinate),
            "actions": [(guarded, [engine.regrade, cell])],
            # its cell task is up to date (it only grades): no need to wait for it
            "task_dep": ["plan", *_setup_dep(cell)],
            "uptodate": [False],
        }


def collect_task(engine: Engine) -> dict[str, Any]:
    """`collect`: wait for the seat runs the cell tasks handed over, recording each (and,
    with adaptive trials, hand over each further round the rules ask for)."""
    return {
        "doc": "Wait for the seat runs the cell tasks handed over; record each as it finishes.",
        "actions": [(guarded, [engine.drain])],
        # cell tasks only hand their cells over; one task waits for them all, so the
        # seats' own caps decide what runs when, not doit's threads
        "task_dep": [CELLS_GROUP],
        "uptodate": [False],
    }


def summary_task(engine: Engine, collecting: bool) -> dict[str, Any]:
    """`summary`: finish the run (summary.json, export, report, leak checks), keep the caches."""
    return {
        "doc": "Write summary.json, the export and the report; check they leak nothing.",
        "actions": [(guarded, [finish, engine])],
        # after every cell task and every regrade (doit -n runs tasks as soon as
        # their own dependencies are done)
        "task_dep": [
            "plan",
            SETUP_GROUP,
            "grade",
            CELLS_GROUP,
            *(["collect"] if collecting else []),
        ],
        "uptodate": [False],
    }


def finish(engine: Engine) -> TaskFailed | None:
    """The summary task's action: the engine's finish; a leak fails the task."""
    problem = engine.finish()
    return TaskFailed(problem) if problem is not None else None


class Wiring:
    """Which cells get which task, as the run finally has it: the engine's selection, and
    under plain doit every cell's own task when a command lists them before any run."""

    def __init__(self, engine: Engine, listing: bool, late: bool) -> None:
        self.engine = engine
        self.listing = listing
        self.late = late  # plain doit: the command is known only once the run starts

    def for_creators(self) -> Selection:
        """What the delayed task creators build: a command that lists tasks calls them
        before any run started (plain doit): every cell gets a task of its own then."""
        engine = self.engine
        if not self.late or self.listing or engine.tally.started:
            return engine.chosen
        return engine.selection(engine.choice, listing=True)


def namespace(
    session: Session,
    *,
    listing: bool = False,
    choice: Choice | None = None,
    late_names: bool = False,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """DOIT_CONFIG and task generators for a session (what dodo.py exposes).

    `listing`: for a doit command that runs nothing (`list`, `info`): every
    cell gets a task of its own. `choice`: the subset, the cells forced to run
    and those named on the command line (default: the options' subset).
    `late_names`: the task names on the command line are not known yet (plain
    doit): the reporter resolves them when the run starts, before any task runs.
    """
    engine = engine or Engine(session, choice, listing=listing, check=not late_names)
    wiring = Wiring(engine, listing, late_names)
    if late_names and engine.scheduler is not None:
        engine.on_hand = _jobs_note(session.inputs.options.jobs)

    def prepare(tasks: Mapping[str, Any], selected: Sequence[str]) -> None:
        named = names_of_run(session, tasks, selected)
        if named.cells is not None:
            engine.rechoose(named)
        engine.check_programs()

    def cells() -> Iterator[dict[str, Any]]:
        """Every cell (each one is its own task below)."""
        # under another reporter (plain doit -r NAME) nothing waits for cells handed over
        # (brigade's reporter does when no collect task runs): each task runs its seat
        handing = not late_names or engine.tally.started
        return cell_tasks(wiring.for_creators(), engine, handing)

    def grades() -> Iterator[dict[str, Any]]:
        """Re-grade a cell whose grader broke, from stored output."""
        return grade_tasks(wiring.for_creators(), engine)

    # Created only once `plan` has run, and only when something needs them (a
    # default run, `doit cell:...`, the summary): `doit plan` of a big battery
    # never builds a doit task per cell. `doit list` still creates and lists all.
    # A task name with a wildcard needs them at load time: doit matches it then.
    # Under plain doit a name that names no task is handed to the cell tasks' creator
    # (its `target_regex`), so that brigade's reporter, not doit, refuses it (exit 2).
    if engine.choice.eager:
        task_cell, task_grade = cells, grades
    else:
        later = create_after(executed="plan", target_regex=".*" if late_names else None)
        task_cell, task_grade = later(cells), create_after(executed="plan")(grades)

    fresh_db = _fresh_db(session.inputs.out)
    generators: dict[str, Any] = {
        "DOIT_CONFIG": {
            # brigade's own doit runs register a guarded one (reporter.CacheDB)
            "backend": DOIT_BACKEND if late_names else CACHE_BACKEND,
            "dep_file": dep_file(session.inputs.out),
            "reporter": make_reporter(
                engine,
                prepare=prepare if late_names else None,
                fresh_db=fresh_db,
                end_process=late_names,
            ),
            # seats are subprocesses: threads are enough and need no pickling or fork
            "par_type": "thread",
        },
        "task_plan": lambda: plan_task(engine),
        "task_setup": lambda: setup_tasks(engine, wiring.for_creators(), listing),
        "task_cell": task_cell,
        "task_grade": task_grade,
        "task_summary": lambda: summary_task(engine, engine.scheduler is not None),
    }
    if engine.scheduler is not None:
        generators["task_collect"] = lambda: collect_task(engine)
    return generators


def _fresh_db(out: Path) -> bool:
    """Whether doit's DB is not there yet (as the tasks are loaded, before doit opens it)."""
    return not (out / store.DEP_FILE).exists()


def names_of_run(session: Session, tasks: Mapping[str, Any], selected: Sequence[str]) -> Named:
    """The task names a plain doit run was given, resolved against the plan (NoSuchTask,
    exit 2, for one that names nothing), from the tasks doit selected: every task when it
    was given none; a cell's or a grade's placeholder (created later) by its name; a name
    of no task by what doit handed the cell tasks' creator (its `target_regex` task, whose
    file_dep is the name as given)."""
    if not selected:
        raise InputError(
            "no task is selected: doit matches a pattern such as 'cell:greet:*' only against "
            "the tasks it has before the plan runs; choose cells with cases=, seats=, trials= "
            "or rerun=, or run the pattern through brigade doit 'cell:greet:*'"
        )
    loaded = [name for name, task in tasks.items() if not _stands_for_a_name(task)]
    if list(selected) == loaded:
        return Named(None)
    words: list[str] = []
    for name in selected:
        task = tasks.get(name)
        if task is not None and _stands_for_a_name(task) and task.file_dep:
            words.extend(sorted(task.file_dep))
        else:
            words.append(name)
    return names.resolve(
        words, session.planned.plan.cells, other_tasks(session), command="run", patterns=False
    )


def _stands_for_a_name(task: Any) -> bool:
    """Whether doit made this task for a name on the command line that names no task (a
    delayed creator's `target_regex` matched it): it has no actions and a loader."""
    return getattr(task, "loader", None) is not None and bool(getattr(task, "file_dep", None))


def _jobs_note(jobs: int) -> Callable[[Cell], None]:
    """Under plain doit, `doit -n N` sizes doit's own threads, which only hand cells over:
    a dodo cannot read doit's options, so the cap of seat runs is `jobs=N`. A hand-over
    from one of doit's threads while that cap is 1 says so once."""
    said: list[bool] = []

    def note(cell: Cell) -> None:
        if jobs == 1 and not said and threading.current_thread() is not MAIN_THREAD:
            said.append(True)
            sys.stderr.write(printable(f"brigade: {JOBS_NOTE}") + "\n")

    return note


MAIN_THREAD = threading.main_thread()
JOBS_NOTE = (
    "doit -n N sizes doit's own threads, which only hand the cells over: one seat runs at a "
    "time; jobs=N runs N at once (or brigade doit -n N)"
)


def other_tasks(session: Session) -> list[str]:
    """The task names besides the cells' own (for resolving names on the command line)."""
    found = ["plan", SETUP_GROUP, CELLS_GROUP, FINISHED_TASK, "grade", "summary"]
    found.extend(setup_task_name(case_id) for case_id in worlds(session.planned.plan))
    if session.inputs.executor.kind == "dask":
        found.append("collect")
    found.extend(
        grade_task_name(cell.coordinate)
        for cell in session.planned.plan.cells
        if session.scan.actions[cell.cell_id] == "regrade"
    )
    return found


# doit commands that neither run tasks nor write doit's DB: they take no lock
READING_COMMANDS = frozenset({"list", "info", "help", "dumpdb", "tabcompletion"})
# doit commands that expand `*` in task names (doit's run and clean; brigade's forget)
EXPANDING_COMMANDS = frozenset({"run", "forget", "clean"})


@dataclass(frozen=True)
class Invocation:
    """The doit command a namespace is built for, as far as brigade can know it.

    Under plain `doit` the dodo is imported before doit says which command runs
    (`command` None): doit's public API gives a dodo its variables (`get_var`)
    and nothing else, so brigade's reporter learns the task names when the run
    starts. `brigade doit` and `brigade run` load the tasks themselves (a
    `TaskLoader2`, front/doitcmd) and know all of it.
    """

    command: str | None = None  # run, list, info, forget, ... (None: plain doit)
    args: tuple[str, ...] = ()  # the task names on the command line
    jobs: int | None = None  # doit's -n, when brigade parsed it (brigade doit)
    always: bool = False  # doit's -a (brigade doit)

    @property
    def known(self) -> bool:
        """Whether the command is known (brigade doit, brigade run)."""
        return self.command is not None

    def writes(self) -> bool:
        """Whether the command writes to the output directory: it runs tasks, or changes
        doit's DB there (`forget`, `ignore`, `reset-dep`, `clean`). Unknown (plain doit):
        assume it does, so the lock is taken before the output directory is read."""
        return self.command is None or self.command not in READING_COMMANDS

    def runs(self) -> bool:
        """Whether the command runs tasks (`run`; unknown: a run is assumed, and a listing
        command is told apart when it asks for the cell tasks before any run started)."""
        return self.command is None or self.command == "run"


def command_line_variables() -> dict[str, str]:
    """The doit variables of this process's command line, under plain doit.

    doit gives a dodo its variables one by one (`get_var`), not their names, so a
    misspelt one would pass unseen. doit reads every argument that does not start
    with `-` and holds a `=` as a variable; each such argument of this process
    that `get_var` confirms is one, known or not (unknown ones are refused).
    """
    from doit import get_var

    found: dict[str, str] = {}
    for name in DOIT_VARIABLES:
        value = get_var(name)
        if value is not None:
            found[name] = str(value)
    for arg in sys.argv[1:]:
        if arg[:1] != "-" and "=" in arg:
            name, value = arg.split("=", 1)
            if name not in found and get_var(name) == value:
                found[name] = value
    return found


@dataclass
class Loaded:
    """What a namespace was built from (for brigade's own doit commands, front/doitcmd)."""

    session: Session
    engine: Engine  # the run the tasks drive
    namespace: dict[str, Any]
    fresh_db: bool  # doit's DB did not exist when the tasks were loaded


def dodo_namespace(
    variables: Mapping[str, str], invocation: Invocation | None = None, **paths: Any
) -> dict[str, Any]:
    """Everything a dodo exposes for these variables (see `load_namespace`)."""
    return load_namespace(variables, invocation, **paths).namespace


def load_namespace(
    variables: Mapping[str, str],
    invocation: Invocation | None = None,
    *,
    base: Path | None = None,
    default_manifest: str | None = None,
) -> Loaded:
    """Everything a dodo exposes for these variables; bad input prints one line and exits 2.

    A doit command that writes (runs tasks, or changes doit's DB; under plain
    doit, any command) takes the output directory's lock first (waiting for it
    with wait=1), before the output directory is read and before doit opens its
    DB there: what the tasks are built from is what the run finds, whoever wrote
    there before, and a refused command leaves doit's DB untouched. Task names
    are resolved against the plan: a name that names nothing exits 2 with the
    closest names, as a bad invocation does (under plain doit when the run
    starts: `front/reporter`).
    """
    invocation = invocation or Invocation()
    try:
        options = from_variables(variables, base=base, default_manifest=default_manifest)
        return _namespace_for(options, invocation, here=base)
    except BrigadeError as exc:
        for line in str(exc).splitlines():
            sys.stderr.write(printable(f"brigade: {line}\n"))
        lock.discard_refused()
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        # Ctrl-C before any run started (waiting for the lock with wait=1, loading a big
        # battery): what `brigade run` says then, not a traceback out of doit's loader
        sys.stderr.write(printable("brigade: interrupted\n"))
        lock.discard_refused()
        raise SystemExit(INTERRUPTED) from None


# the exit code of a run stopped by Ctrl-C (128 + SIGINT), as the engine's
INTERRUPTED = 128 + signal.SIGINT


def _namespace_for(options: Options, invocation: Invocation, *, here: Path | None) -> Loaded:
    if invocation.jobs is not None:
        options = dataclasses.replace(options, jobs=max(1, invocation.jobs))
    if invocation.always and invocation.runs():
        options = dataclasses.replace(options, always=True)  # doit -a: new attempts
    inputs = load_inputs(options.manifest, options.roster, options.workspace)
    if invocation.writes():
        lock_output(options, inputs[0])
        if not invocation.known:
            # plain doit may be listing: a lock that nothing used (no run released it) goes
            # with what taking it made (`doit list` in a fresh project leaves no folder)
            atexit.register(lock.discard_refused)
    # (a listing takes no lock and finishes nothing: no helper reads ahead for it)
    session = open_session(options, inputs, finishing=invocation.writes())
    if invocation.known:
        named = names.resolve(
            invocation.args,
            session.planned.plan.cells,
            other_tasks(session),
            command=invocation.command or "run",
            patterns=invocation.command in EXPANDING_COMMANDS,
        )
        listing = not invocation.runs()
        engine = Engine(session, choose(session, named), listing=listing, here=here)
        built = namespace(session, listing=listing, engine=engine)
    else:
        # plain doit: the process ends right after the run; the task names come with it
        engine = Engine(session, check=False, here=here)
        built = namespace(session, late_names=True, engine=engine)
    return Loaded(session, engine, built, fresh_db=_fresh_db(session.inputs.out))


# set while `brigade doit` runs a project's dodo to learn the manifest its `battery(...)`
# names (front/doitcmd.named_manifest): brigade.dodo then builds nothing
asked_manifests: list[str | None] | None = None


def plain_doit_namespace(default_manifest: str | None = None) -> dict[str, Any]:
    """What `brigade.dodo` gives a dodo run by plain `doit`: the paths of its variables are
    relative to the folder doit was run from (doit changes into the dodo's folder before
    importing it, and says where it was: `get_initial_workdir`)."""
    from doit import get_initial_workdir

    started = get_initial_workdir()
    return dodo_namespace(
        command_line_variables(),
        base=Path(started) if started else None,
        default_manifest=default_manifest,
    )


options_from_variables = from_variables  # (the doit side of engine/options' table)
