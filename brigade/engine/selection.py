"""What a run is about: its subset, the cells forced to run, and which cells it brings up to
date one by one (`select`, pure), whatever front door asked for the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from brigade.core.plan import Cell, Plan
from brigade.core.receipts import ReceiptView
from brigade.core.selection import cells_at, filter_cells
from brigade.core.taxonomy import Action
from brigade.engine.names import Named
from brigade.engine.session import Session
from brigade.errors import InputError


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
