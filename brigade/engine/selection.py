"""What a run is about: its subset, the cells forced to run, and which cells it brings up to
date one by one (`select`, pure), whatever front door asked for the run."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from brigade.core.plan import Cell, Plan, judges_of
from brigade.core.receipts import ReceiptView
from brigade.core.selection import cells_at, filter_cells
from brigade.core.specs import SeatSpec
from brigade.core.taxonomy import Action
from brigade.engine.names import Named
from brigade.engine.session import Session
from brigade.errors import InputError
from brigade.outdir.scan import kept_fault


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
    options = session.inputs.options
    cells = session.planned.plan.cells
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


@dataclass(frozen=True)
class Scope:
    """What follows from a run's selection: the cells with a step of their own, the counts
    the run starts from, the seats it may launch and judge with, the faults it leaves as
    they are. An adaptive round makes a new one (`grown`)."""

    own: Mapping[str, CellTask]  # cell id -> its step, in plan order
    collected: Counter[str]  # finished cells sharing one step: how many of each state
    done_at_start: int  # cells of the run already finished when it starts
    total: int  # cells the run is about: the plan's, or its subset's
    subset: frozenset[str] | None  # cell ids (None: the whole plan)
    needed: frozenset[str]  # cases whose workspace the run needs (a cell runs or grades)
    launching: Mapping[str, SeatSpec]  # seats with a cell to run
    # the judge seats of the cells the run grades (run, reuse or regrade): refused up
    # front, as seats are, when their sandbox is required and cannot run here
    judging: Mapping[str, SeatSpec]
    kept_faults: int  # finished cells with an apparatus fault the run leaves as they are

    def grown(self, added: Sequence[Cell]) -> Scope:
        """The scope once an adaptive round added these cells to the run."""
        ids = {cell.cell_id for cell in added}
        subset = self.subset | ids if self.subset is not None else None
        return dataclasses.replace(self, subset=subset, total=self.total + len(added))


def scope_of(session: Session, choice: Choice, chosen: Selection, listing: bool) -> Scope:
    """The scope of a run's selection (pure). `listing`: a command that runs nothing, which
    launches and judges no seat."""
    scanned = session.scan
    launching: dict[str, SeatSpec] = {}
    judging: dict[str, SeatSpec] = {}
    if not listing:  # the seats this run may launch (a subset's, forced ones too)
        launching = {t.cell.seat.name: t.cell.seat for t in chosen.own if t.action == "run"}
        seats = session.inputs.roster.seats
        graded = [t.cell for t in chosen.own if t.action != "skip"]
        judging = {name: seats[name] for name in judges_of(graded) if name in seats}
    if choice.always:
        kept = 0
    elif choice.subset is not None or choice.forced:  # only the cells this run leaves
        scope = choice.subset if choice.subset is not None else scanned.recorded.keys()
        kept = sum(
            1
            for cell_id in scope
            if cell_id not in choice.forced
            and scanned.actions.get(cell_id) == "skip"
            and kept_fault(scanned.recorded.get(cell_id))
        )
    else:
        kept = 0 if session.inputs.options.always else scanned.kept_faults
    return Scope(
        own={task.cell.cell_id: task for task in chosen.own},
        collected=Counter(chosen.collected),
        done_at_start=sum(1 for task in chosen.own if task.action == "skip")
        + sum(chosen.collected.values()),
        total=len(session.planned.plan.cells) - chosen.outside,
        subset=choice.subset,
        needed=frozenset(task.cell.case_id for task in chosen.own if task.action != "skip"),
        launching=launching,
        judging=judging,
        kept_faults=kept,
    )
