"""doit task names of cells, and the task names a doit command line gives, resolved.

A cell's task is `cell:<case>:<seat>:<trial>`. doit forbids `=` in task names
(and reads `a=b` on its command line as a variable), so the name escapes it
(`%3D`, and `%` as `%25`): any case id the manifest allows has a task.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from brigade.core.plan import Cell
from brigade.core.selection import closest
from brigade.errors import InputError

CELL_PREFIX = "cell:"
GRADE_PREFIX = "grade:"
# doit's own wildcard is `*` alone (doit.control matches names with fnmatch when a name
# holds one); brigade expands the same names the same way
WILDCARD = "*"


def escape(coordinate: str) -> str:
    """A coordinate as it appears in a task name (`=` and `%` escaped)."""
    if "=" not in coordinate and "%" not in coordinate:
        return coordinate
    return coordinate.replace("%", "%25").replace("=", "%3D")


def cell_task_name(coordinate: str) -> str:
    """`cell:<case>:<seat>:<trial>` (escaped)."""
    return CELL_PREFIX + escape(coordinate)


def grade_task_name(coordinate: str) -> str:
    """`grade:<case>:<seat>:<trial>` (escaped)."""
    return GRADE_PREFIX + escape(coordinate)


class NoSuchTask(InputError):
    """A task name on the command line that names no task (doit's 'invalid parameter')."""


@dataclass(frozen=True)
class Named:
    """What the task names of a doit command line choose (engine/names resolves them)."""

    # the cells they name or match, in plan order; None when no name is about cells
    cells: tuple[Cell, ...] | None
    # the cells named one by one (their outcome is printed after the run)
    exact: tuple[Cell, ...] = ()
    # a name holds a wildcard: doit must see every chosen cell's task at load time to match
    patterns: bool = False


def resolve(
    args: Sequence[str],
    cells: Sequence[Cell],
    other_tasks: Iterable[str],
    *,
    command: str = "run",
    patterns: bool = True,
) -> Named:
    """Resolve the task names of a doit command line against the plan's cells and the other
    tasks; NoSuchTask (exit 2) with the closest names for one that names nothing.

    `patterns`: whether the command expands `*` (doit's `run` does; `list` and `info`
    take exact names).
    """
    if not args:
        return Named(None)
    by_name = {cell_task_name(cell.coordinate): cell for cell in cells}
    others = set(other_tasks)
    chosen: dict[str, Cell] = {}
    exact: dict[str, Cell] = {}
    about_cells = False
    wildcard = False
    for arg in args:
        if arg in others:
            continue
        cell = by_name.get(arg)
        if cell is not None:
            chosen[cell.cell_id] = exact[cell.cell_id] = cell
            about_cells = True
            continue
        if WILDCARD in arg and patterns:
            matched = [name for name in (*by_name, *others) if fnmatch.fnmatchcase(name, arg)]
            if matched:
                for name in matched:
                    if name in by_name:
                        chosen[by_name[name].cell_id] = by_name[name]
                        about_cells = True
                wildcard = True
                continue
        raise NoSuchTask(no_such_task(arg, [*by_name, *sorted(others)], command, patterns))
    if not about_cells:
        return Named(None)
    order = {cell.cell_id: index for index, cell in enumerate(cells)}
    return Named(
        tuple(sorted(chosen.values(), key=lambda c: order[c.cell_id])),
        tuple(sorted(exact.values(), key=lambda c: order[c.cell_id])),
        patterns=wildcard,
    )


def no_such_task(arg: str, names: Sequence[str], command: str, patterns: bool) -> str:
    """doit's 'no such task' in one line, with the closest task names."""
    if arg.startswith("-"):
        return (
            f'no such task "{arg}": options go before task names '
            f"(doit {command} [OPTIONS] [TASK...])"
        )
    if WILDCARD in arg:
        if not patterns:
            return f'no such task "{arg}": doit {command} takes task names, not patterns'
        return f'no such task "{arg}": the pattern matches no task (doit list shows them)'
    near = closest(arg, names)
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    if "=" in arg:
        hint += "; a task name holds no '=': doit list shows the cell's task"
    return f'no such task "{arg}"{hint}; doit list shows every task'
