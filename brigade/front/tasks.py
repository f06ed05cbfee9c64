"""Wire a session into doit: a plan task, a task per cell, a grade task per cell, a summary task.

Up-to-date is decided at load time from the output directory (the source of
truth), never from doit's DB; every action decides again from disk when it
runs, so a stale decision can only cost a no-op.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doit import create_after
from doit.exceptions import TaskFailed

from brigade.core.plan import Cell, Plan, judges_of
from brigade.core.receipts import ReceiptView
from brigade.core.selection import cells_at, filter_cells
from brigade.core.taxonomy import Action
from brigade.core.terminal import printable
from brigade.errors import BrigadeError, EnvironmentProblem, InputError
from brigade.front import names
from brigade.front.names import Named, cell_task_name, grade_task_name
from brigade.front.options import DEFAULT_MANIFEST as DEFAULT_MANIFEST
from brigade.front.options import DOIT_VARIABLES, from_variables
from brigade.front.reporter import CACHE_BACKEND, REFUSED, RunInfo, make_reporter
from brigade.front.session import (
    Options,
    Session,
    build_scheduler,
    confinement_check,
    load_inputs,
    lock_output,
    next_round,
    open_session,
)
from brigade.outdir import forgotten, lock, store
from brigade.outdir.planfile import write_plan
from brigade.outdir.scan import kept_fault
from brigade.report.finish import finish_run, leak_lines
from brigade.run.doctor import missing_programs
from brigade.run.runner import (
    Hand,
    RunContext,
    bring_up_to_date,
    build_workspace,
    regrade_if_needed,
)

if TYPE_CHECKING:
    from brigade.run.schedule import Scheduler

DOIT_BACKEND = "json"
# a run collects the cells already finished in this one task (see `select`)
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
    known: Mapping[str, ReceiptView | None],
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


def run_info(session: Session) -> RunInfo:
    """The reporter's view of the session."""
    notes = list(session.warnings)
    stale = len(session.plan.stale_cells)
    if stale and session.resumed and session.stale_changed:  # said once, when it changes
        notes.append(
            f"{stale} stale cell{'s' if stale != 1 else ''} from an earlier manifest "
            "(kept on disk, not counted; listed in plan.json stale_cells; brigade prune "
            "removes them)"
        )
    info = RunInfo(
        out=session.out,
        plan=session.plan,
        total=len(session.plan.cells),
        wait=session.options.wait,
        notes=notes,
        kept_faults=0 if session.options.always else session.scan.kept_faults,
        resumed=session.resumed,
        quiet=session.options.quiet,
        progress_rate=session.options.progress_rate,
        budget=session.ctx.budget,
    )

    def start() -> None:
        # before anything is written: a required sandbox that cannot run refuses the run
        # (its warnings are said with each seat's first launch: `launch_notes`)
        confinement_check(session)
        if session.cluster is not None:
            session.cluster.start()

    info.start = start
    return info


@dataclass(frozen=True)
class CellTask:
    """A cell with a doit task of its own, and what bringing it up to date needs."""

    cell: Cell
    action: Action
    state: str | None  # the recorded state at load time (None: no trustworthy receipt)
    forced: bool = False  # a new attempt whatever the receipt says (always, rerun, forget)


@dataclass(frozen=True)
class Choice:
    """What a run is about: a subset of the plan (the exit code covers it alone), the cells
    to run as new attempts whatever their receipts say, the cells named one by one."""

    subset: frozenset[str] | None = None  # cell ids (None: the whole plan)
    always: bool = False  # every cell of the subset runs as a new attempt
    forced: frozenset[str] = frozenset()  # these cells run as new attempts
    named: tuple[Cell, ...] = ()  # named on the command line: a task of their own each
    by_names: tuple[Cell, ...] = ()  # every cell the task names chose (patterns too)
    # a task name held a wildcard: doit must see every chosen cell's task at load time
    eager: bool = False
    how: str = ""  # how the subset was chosen (for the final line)


def choose(session: Session, named: Named | None = None, *, always: bool | None = None) -> Choice:
    """The run's subset from the options (cases/seats/trials, rerun) and the task names on
    doit's command line, intersected; InputError when a name chooses nothing."""
    options = session.options
    cells = session.plan.cells
    groups: list[tuple[str, list[Cell]]] = []
    if options.cells:
        groups.append((options.cells.describe(), filter_cells(cells, options.cells)))
    rerun = cells_at(cells, options.rerun) if options.rerun else []
    if rerun:
        groups.append(("rerun", rerun))
    if named is not None and named.cells is not None:
        groups.append(("task names", list(named.cells)))
    subset: frozenset[str] | None = None
    if groups:
        ids = set.intersection(*({cell.cell_id for cell in group} for _, group in groups))
        if not ids:
            raise InputError(
                " and ".join(how for how, _ in groups) + ": no cell is chosen by all of these"
            )
        subset = frozenset(ids) if len(ids) < len(cells) else None
    scope = subset if subset is not None else None
    forced = {cell.cell_id for cell in rerun}
    pending = session.scan.forgotten
    forced |= pending if scope is None else pending & scope
    return Choice(
        subset=subset,
        always=options.always if always is None else always,
        forced=frozenset(forced),
        named=named.exact if named is not None else (),
        by_names=named.cells or () if named is not None else (),
        eager=named is not None and named.patterns,
        how=" and ".join(how for how, _ in groups),
    )


@dataclass
class Selection:
    """Which cells get which task: the pure decision the task builders follow."""

    own: list[CellTask] = field(default_factory=list)
    # finished cells sharing the one `cell:finished` task: how many of each recorded state
    collected: Counter[str] = field(default_factory=Counter)
    # cell_id -> the view of the receipt (as read under the lock) of every cell up to date
    # or outside the subset (nothing of this run changes them)
    unchanged: dict[str, ReceiptView | None] = field(default_factory=dict)
    regrade: list[Cell] = field(default_factory=list)  # cells whose grade task re-grades
    outside: int = 0  # cells outside the run's subset: no task, not counted
    # no cell runs and no receipt changed since the last run: its summary still holds
    untouched: bool = False


def select(
    plan: Plan,
    recorded: Mapping[str, ReceiptView | None],
    actions: Mapping[str, Action],
    *,
    always: bool,
    share: bool,
    named: frozenset[str] = frozenset(),
    subset: frozenset[str] | None = None,
    forced: frozenset[str] = frozenset(),
    plan_is_current: bool = False,
    receipts_changed: bool = True,
) -> Selection:
    """Decide every cell's task (pure).

    `share`: finished cells are collected in one task (a run: doit spends about
    50 us per task, which a no-op resume of a big battery would notice) unless
    named on the command line (`named`, cell ids); otherwise (`doit list`, `doit
    info`) every cell has a task of its own. Cells outside the `subset` (cell
    ids; None: every cell) get no task. `always` runs every cell of the subset,
    `forced` these cells, as new attempts.
    """
    chosen = Selection()
    for cell in plan.cells:
        cell_id = cell.cell_id
        view = recorded[cell_id]
        if subset is not None and cell_id not in subset:
            chosen.unchanged[cell_id] = view
            chosen.outside += 1
            continue
        state = view.state if view is not None else None
        force = always or cell_id in forced
        action: Action = "run" if force else actions[cell_id]
        if action == "skip":
            chosen.unchanged[cell_id] = view
            if share and cell_id not in named:
                chosen.collected[state or "missing"] += 1
                continue
        elif action == "regrade":
            chosen.regrade.append(cell)
        chosen.own.append(CellTask(cell, action, state, force))
    chosen.untouched = (
        plan_is_current and not receipts_changed and len(chosen.unchanged) == len(plan.cells)
    )
    return chosen


# -- task builders (doit task dicts) ---------------------------------------------


def plan_task(session: Session) -> dict[str, Any]:
    """`plan`: write plan.json for the current manifest (up to date when it holds it)."""
    return {
        "doc": "Write plan.json for the current manifest.",
        "actions": [
            (
                guarded,
                [write_plan, session.out, session.plan, session.plan_key, session.plan_inputs],
            )
        ],
        "uptodate": [session.plan_is_current and not session.options.always],
    }


def cell_tasks(chosen: Selection, session: Session, hand: Hand | None) -> Iterator[dict[str, Any]]:
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
    cells_folder = f"{session.ctx.out}/{store.CELLS_DIR}/"
    for task in chosen.own:
        cell = task.cell
        yield {
            "basename": cell_task_name(cell.coordinate),
            "doc": f"{task.state or 'not run'}: {cell.case_id} on {cell.seat.name}, "
            f"trial {cell.trial}",
            # `doit info cell:<coordinate>` shows it: where the cell's files are
            "meta": {"cell_id": cell.cell_id, "folder": cells_folder + cell.cell_id},
            "actions": [
                (
                    guarded,
                    [
                        bring_up_to_date,
                        session.ctx,
                        cell,
                        session.scan.reuse.get(cell.cell_id),
                        task.forced,
                        hand,
                    ],
                )
            ],
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


def setup_tasks(session: Session, chosen: Selection, listing: bool) -> Iterator[dict[str, Any]]:
    """`setup:<case>`: build a case's workspace (its files, its setup) once for every seat
    and trial; up to date when it is built with this key (a failed setup too, but under
    --retry-transient), or when no cell of the case needs it in this run."""
    yield {"basename": SETUP_GROUP, "name": None, "doc": setup_tasks.__doc__}
    needed = {task.cell.case_id for task in chosen.own if task.action != "skip"}
    from brigade.run import workspaces

    for case_id, cell in worlds(session.plan).items():
        world = cell.world()
        assert world is not None
        built = workspaces.state(session.out, world)
        current = built is not None and (built.ok or not session.options.retry_transient)
        yield {
            "name": names.escape(case_id),
            "doc": f"build {case_id}'s workspace"
            + (" and run its setup" if cell.setup is not None else ""),
            "actions": [(guarded, [build_setup, session.ctx, cell])],
            "task_dep": ["plan"],
            "uptodate": [current or (case_id not in needed and not listing)],
        }


def build_setup(ctx: RunContext, cell: Cell) -> None:
    """Build the workspace of a cell's case (a setup task's action), saying what it did."""
    built, now = build_workspace(ctx, cell)
    if now and not built.ok:
        sys.stderr.write(printable(f"brigade: setup of {cell.case_id} failed: {built.detail}\n"))


def _setup_dep(cell: Cell) -> list[str]:
    return [setup_task_name(cell.case_id)] if cell.workspace is not None else []


def grade_tasks(chosen: Selection, ctx: RunContext) -> Iterator[dict[str, Any]]:
    """`grade:<coordinate>`: re-grade a cell whose grader broke, from stored output."""
    yield {"basename": "grade", "name": None, "doc": grade_tasks.__doc__}
    for cell in chosen.regrade:
        yield {
            "name": names.escape(cell.coordinate),
            "actions": [(guarded, [regrade_if_needed, ctx, cell])],
            # its cell task is up to date (it only grades): no need to wait for it
            "task_dep": ["plan", *_setup_dep(cell)],
            "uptodate": [False],
        }


def collect_task(
    scheduler: Scheduler,
    session: Session,
    info: RunInfo,
    rounds: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """`collect`: wait for the seat runs the cell tasks handed over, recording each (and,
    with adaptive trials, hand over each further round the rules ask for: `rounds`)."""
    return {
        "doc": "Wait for the seat runs the cell tasks handed over; record each as it finishes.",
        "actions": [(guarded, [collect, scheduler, session, _progress(info), rounds])],
        # cell tasks only hand their cells over; one task waits for them all, so the
        # seats' own caps decide what runs when, not doit's threads
        "task_dep": [CELLS_GROUP],
        "uptodate": [False],
    }


def collect(
    scheduler: Scheduler,
    session: Session,
    count: Callable[[str | None, Mapping[str, Any] | None], None],
    rounds: Callable[[], bool] | None = None,
) -> None:
    """Drain the scheduler (then let go of the Dask cluster, when seats ran there); with
    adaptive trials, once a round's runs are recorded, `rounds` hands over the next one
    (True) until every case has stopped."""
    try:
        scheduler.drain(count)
        while rounds is not None and rounds():
            scheduler.drain(count)
    finally:
        if session.cluster is not None:
            session.cluster.close()


def summary_task(wiring: Wiring, collecting: bool) -> dict[str, Any]:
    """`summary`: finish the run (summary.json, export, report, leak checks), keep the caches."""
    session = wiring.session
    return {
        "doc": "Write summary.json, the export and the report; check they leak nothing.",
        "actions": [
            (guarded, [finalize_wired, wiring]),
            (guarded, [session.scan.save]),
            # forgotten cells that ran are done (forgotten.json, when there is one)
            *([(guarded, [forgotten.settle, session.out])] if session.scan.forgotten_file else []),
        ],
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


def finalize_wired(wiring: Wiring) -> TaskFailed | None:
    """The summary task's action, over the selection the run has when it ends."""
    session, chosen = wiring.session, wiring.chosen
    return finalize(
        session.out,
        session.plan,
        session.workspace,
        chosen.unchanged,
        session.plan_key,
        chosen.untouched,
    )


class Wiring:
    """Which cells get which task, as the run finally has it: decided at load time, and
    again when the run starts under plain doit (the task names come with it)."""

    def __init__(
        self, session: Session, info: RunInfo, choice: Choice, listing: bool, late: bool
    ) -> None:
        self.session = session
        self.info = info
        self.listing = listing
        self.late = late  # plain doit: the command is known only once the run starts
        self.choice = choice
        self.chosen = self.select(choice, listing)

    def select(self, choice: Choice, listing: bool) -> Selection:
        """The selection for a choice (`listing`: every cell has a task of its own)."""
        session = self.session
        return select(
            session.plan,
            session.scan.recorded,
            session.scan.actions,
            always=choice.always,
            share=not listing and not choice.always,
            named=frozenset(cell.cell_id for cell in choice.named),
            subset=choice.subset,
            forced=choice.forced,
            plan_is_current=session.plan_is_current,
            receipts_changed=session.scan.changed,
        )

    def choose_again(self, named: Named) -> None:
        """The task names of the run are known now (plain doit): choose and select again."""
        self.choice = choose(self.session, named, always=self.choice.always)
        self.chosen = self.select(self.choice, self.listing)
        self.info.reset_cells()
        _describe(self.session, self.info, self.choice, self.chosen, self.listing)

    def for_creators(self) -> Selection:
        """What the delayed task creators build: a command that lists tasks calls them
        before any run started (plain doit): every cell gets a task of its own then."""
        if not self.late or self.listing or self.info.started:
            return self.chosen
        return self.select(self.choice, listing=True)


def _describe(
    session: Session, info: RunInfo, choice: Choice, chosen: Selection, listing: bool
) -> None:
    """What the reporter is told of the run's cells."""
    info.collected.update(chosen.collected)
    for task in chosen.own:
        info.cell_tasks[cell_task_name(task.cell.coordinate)] = task.cell.cell_id
        info.loaded_states[task.cell.cell_id] = task.state
        info.coordinates[task.cell.cell_id] = task.cell.coordinate
        if task.action == "skip":
            info.done_at_start += 1
    info.done_at_start += sum(chosen.collected.values())
    if not listing:  # the seats this run may launch (a subset's, forced ones too)
        session.launching = {t.cell.seat.name: t.cell.seat for t in chosen.own if t.action == "run"}
        graded = [t.cell for t in chosen.own if t.action != "skip"]
        session.judging = {
            name: session.roster.seats[name]
            for name in judges_of(graded)
            if name in session.roster.seats
        }
    info.subset = choice.subset
    info.subset_how = choice.how
    info.total = len(session.plan.cells) - chosen.outside
    info.named = choice.named
    info.unchanged = chosen.unchanged
    if choice.always:
        info.kept_faults = 0
    elif choice.subset is not None or choice.forced:  # only the cells this run leaves
        scope = choice.subset if choice.subset is not None else session.scan.recorded.keys()
        info.kept_faults = sum(
            1
            for cell_id in scope
            if cell_id not in choice.forced
            and session.scan.actions.get(cell_id) == "skip"
            and kept_fault(session.scan.recorded.get(cell_id))
        )
    else:
        info.kept_faults = 0 if session.options.always else session.scan.kept_faults


def namespace(
    session: Session,
    info: RunInfo | None = None,
    *,
    listing: bool = False,
    choice: Choice | None = None,
    late_names: bool = False,
) -> dict[str, Any]:
    """DOIT_CONFIG and task generators for a session (what dodo.py exposes).

    `listing`: for a doit command that runs nothing (`list`, `info`): every
    cell gets a task of its own. `choice`: the subset, the cells forced to run
    and those named on the command line (default: the options' subset).
    `late_names`: the task names on the command line are not known yet (plain
    doit): the reporter resolves them when the run starts, before any task runs.
    """
    info = info or run_info(session)
    choice = choice if choice is not None else choose(session)
    wiring = Wiring(session, info, choice, listing, late_names)
    chosen = wiring.chosen
    _describe(session, info, choice, chosen, listing)
    info.launch_notes = _launch_notes(session)
    # the scheduler exists only when a seat may run (it is not even imported otherwise)
    scheduler = None
    if not listing and any(task.action in ("run", "reuse") for task in chosen.own):
        if not late_names:
            check_programs(session, chosen)
        scheduler = build_scheduler(session)
        info.scheduler = scheduler
    hand = (
        _hand_to(scheduler, info, session.options.jobs, late_names)
        if scheduler is not None
        else None
    )
    if late_names:

        def prepare(tasks: Mapping[str, Any], selected: Sequence[str]) -> None:
            named = names_of_run(session, tasks, selected)
            if named.cells is not None:
                wiring.choose_again(named)
            check_programs(session, wiring.chosen)

        info.prepare = prepare

    def cells() -> Iterator[dict[str, Any]]:
        """Every cell (each one is its own task below)."""
        # under another reporter (plain doit -r NAME) nothing waits for cells handed over
        # (brigade's reporter does when no collect task runs): each task runs its seat
        handing = hand if not late_names or info.started else None
        return cell_tasks(wiring.for_creators(), session, handing)

    def grades() -> Iterator[dict[str, Any]]:
        """Re-grade a cell whose grader broke, from stored output."""
        return grade_tasks(wiring.for_creators(), session.ctx)

    # Created only once `plan` has run, and only when something needs them (a
    # default run, `doit cell:...`, the summary): `doit plan` of a big battery
    # never builds a doit task per cell. `doit list` still creates and lists all.
    # A task name with a wildcard needs them at load time: doit matches it then.
    # Under plain doit a name that names no task is handed to the cell tasks' creator
    # (its `target_regex`), so that brigade's reporter, not doit, refuses it (exit 2).
    if choice.eager:
        task_cell, task_grade = cells, grades
    else:
        later = create_after(executed="plan", target_regex=".*" if late_names else None)
        task_cell, task_grade = later(cells), create_after(executed="plan")(grades)

    info.fresh_db = not (session.out / store.DEP_FILE).exists()
    generators: dict[str, Any] = {
        "DOIT_CONFIG": {
            # brigade's own doit runs register a guarded one (reporter.CacheDB)
            "backend": DOIT_BACKEND if late_names else CACHE_BACKEND,
            "dep_file": dep_file(session.out),
            "reporter": make_reporter(info),
            # seats are subprocesses: threads are enough and need no pickling or fork
            "par_type": "thread",
        },
        "task_plan": lambda: plan_task(session),
        "task_setup": lambda: setup_tasks(session, wiring.for_creators(), listing),
        "task_cell": task_cell,
        "task_grade": task_grade,
        "task_summary": lambda: summary_task(wiring, scheduler is not None),
    }
    if scheduler is not None:
        rounds = _rounds(session, info, wiring, hand) if hand is not None else None
        generators["task_collect"] = lambda: collect_task(scheduler, session, info, rounds)
    return generators


def _rounds(session: Session, info: RunInfo, wiring: Wiring, hand: Hand) -> Callable[[], bool]:
    """The next round of adaptive trials (front/session.next_round), handed over: True when
    it added cells to run. A run of chosen cells (rerun, task names) gets no further round;
    a subset by case, seat or trial gets the new cells it chooses."""
    from brigade.outdir.scan import reuse_index

    sources: dict[str, str] | None = None

    def more() -> bool:
        nonlocal sources
        choice = wiring.choice
        if session.counts is None or choice.named or choice.by_names or session.options.rerun:
            return False
        added = next_round(session)
        if session.options.cells:
            added = filter_cells(added, session.options.cells)
        info.plan = session.plan
        if not added:
            return False
        if info.subset is not None:
            info.subset = info.subset | {cell.cell_id for cell in added}
        info.total += len(added)
        if info.grow is not None:
            info.grow(len(added))
        if sources is None:  # seat runs of cells only their graders tell apart
            current = {cell.cell_id for cell in session.plan.cells}
            sources = reuse_index(session.out, current, session.options.retry_transient)
        for cell in added:
            info.coordinates[cell.cell_id] = cell.coordinate
            # (inside collect's guarded action: a refusal fails it on one line)
            bring_up_to_date(session.ctx, cell, sources.get(cell.run_key), False, hand)
        return True

    return more


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
        words, session.plan.cells, other_tasks(session), command="run", patterns=False
    )


def _stands_for_a_name(task: Any) -> bool:
    """Whether doit made this task for a name on the command line that names no task (a
    delayed creator's `target_regex` matched it): it has no actions and a loader."""
    return getattr(task, "loader", None) is not None and bool(getattr(task, "file_dep", None))


def check_programs(session: Session, chosen: Selection) -> None:
    """Fail fast: refuse the run (exit 2, one line) when a seat with a cell to run has no
    program here; seats whose cells are all up to date are not asked. (On a Dask cluster
    the workers' resources say which CLIs they have: checked when it connects.)"""
    if session.cluster is not None:
        return
    seats = {task.cell.seat.name: task.cell.seat for task in chosen.own if task.action == "run"}
    missing = missing_programs(seats.values(), session.workspace)
    if missing:
        listed = "; ".join(f"seat {seat} needs {program!r}" for seat, program in missing)
        raise EnvironmentProblem(
            f"{listed}, which cannot be run here (not found on PATH, or not executable): "
            "install it or fix the seat's cli in the roster (brigade doctor checks every seat)"
        )


def _hand_to(scheduler: Scheduler, info: RunInfo, jobs: int, plain: bool) -> Hand:
    """Hands a cell to the scheduler; the reporter counts it once its run is recorded.

    Under plain doit, `doit -n N` sizes doit's own threads, which only hand cells
    over: a dodo cannot read doit's options, so the cap of seat runs is `jobs=N`.
    A hand-over from one of doit's threads while that cap is 1 says so once.
    """
    said: list[bool] = []

    def hand(cell: Cell) -> None:
        if plain and jobs == 1 and not said and threading.current_thread() is not MAIN_THREAD:
            said.append(True)
            sys.stderr.write(printable(f"brigade: {JOBS_NOTE}") + "\n")
        info.handed.add(cell.cell_id)
        scheduler.add(cell)

    return hand


MAIN_THREAD = threading.main_thread()
JOBS_NOTE = (
    "doit -n N sizes doit's own threads, which only hand the cells over: one seat runs at a "
    "time; jobs=N runs N at once (or brigade doit -n N)"
)


def _launch_notes(session: Session) -> Callable[[Cell], list[str]]:
    """What to say when a cell's seat is launched: once per seat, how its run is not
    confined as asked (read-only, network: false); nothing of a seat this run never launches."""
    from brigade.run.doctor import confinement_notes

    warned: set[str] = set()

    def notes(cell: Cell) -> list[str]:
        if cell.seat.name in warned:
            return []
        warned.add(cell.seat.name)
        return confinement_notes(
            [cell.seat],
            session.workspace,
            read_only=session.manifest.execution_mode == "read-only",
            override=session.options.sandbox,
            local=session.executor.kind == "local",
        )

    return notes


def other_tasks(session: Session) -> list[str]:
    """The task names besides the cells' own (for resolving names on the command line)."""
    found = ["plan", SETUP_GROUP, CELLS_GROUP, FINISHED_TASK, "grade", "summary"]
    found.extend(setup_task_name(case_id) for case_id in worlds(session.plan))
    if session.cluster is not None:
        found.append("collect")
    found.extend(
        grade_task_name(cell.coordinate)
        for cell in session.plan.cells
        if session.scan.actions[cell.cell_id] == "regrade"
    )
    return found


def _progress(info: RunInfo) -> Callable[[str | None, Mapping[str, Any] | None], None]:
    """Counts a cell recorded by the collect task on the reporter's progress line."""

    def count(state: str | None, receipt: Mapping[str, Any] | None) -> None:
        if info.count is not None:
            info.count(state, receipt)

    return count


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
    choice: Choice
    info: RunInfo
    namespace: dict[str, Any]


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
        return _namespace_for(options, invocation)
    except BrigadeError as exc:
        for line in str(exc).splitlines():
            sys.stderr.write(printable(f"brigade: {line}\n"))
        lock.discard_refused()
        raise SystemExit(exc.exit_code) from None


def _namespace_for(options: Options, invocation: Invocation) -> Loaded:
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
    session = open_session(options, inputs)
    info = run_info(session)
    if invocation.known:
        named = names.resolve(
            invocation.args,
            session.plan.cells,
            other_tasks(session),
            command=invocation.command or "run",
            patterns=invocation.command in EXPANDING_COMMANDS,
        )
        choice = choose(session, named)
        built = namespace(session, info, listing=not invocation.runs(), choice=choice)
        return Loaded(session, choice, info, built)
    # plain doit: the process ends right after the run; the task names come with it
    info.end_process = True
    choice = choose(session)
    return Loaded(session, choice, info, namespace(session, info, choice=choice, late_names=True))


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


options_from_variables = from_variables  # (the doit side of front/options' table)
