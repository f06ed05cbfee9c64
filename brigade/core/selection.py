"""Choosing cells of a plan: by case, seat and trial (glob patterns), by coordinate (pure).

A subset run brings only the chosen cells up to date; its exit code covers
them alone. Every name that chooses nothing is refused with the closest
names the plan has, so a typo never runs an empty subset.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from brigade.core.plan import Cell
from brigade.errors import InputError


@dataclass(frozen=True)
class CellFilter:
    """Which cells a run is about: case ids and seat names (glob patterns), trial numbers.

    An empty dimension keeps every cell; a cell is chosen when it matches every
    dimension given.
    """

    cases: tuple[str, ...] = ()
    seats: tuple[str, ...] = ()
    trials: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.cases or self.seats or self.trials)

    def describe(self) -> str:
        """The filter as the doit variables that give it (`cases=a,b* trials=1`)."""
        parts = []
        if self.cases:
            parts.append("cases=" + ",".join(self.cases))
        if self.seats:
            parts.append("seats=" + ",".join(self.seats))
        if self.trials:
            parts.append("trials=" + ",".join(str(t) for t in self.trials))
        return " ".join(parts)


def is_pattern(text: str) -> bool:
    """Whether a name is a glob pattern (`*`, `?` or `[`)."""
    return any(ch in text for ch in "*?[")


def closest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates nearest to a mistyped name, best first: those about as near as the
    nearest one (none when nothing is near)."""
    near = difflib.get_close_matches(name, list(dict.fromkeys(candidates)), n=n, cutoff=0.6)
    if len(near) < 2:
        return near
    ratios = [difflib.SequenceMatcher(None, name, found).ratio() for found in near]
    return [found for found, ratio in zip(near, ratios, strict=True) if ratio >= ratios[0] - 0.02]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """` (did you mean 'x'?)` or ` (did you mean 'x' or 'y'?)`; empty when nothing is near."""
    near = closest(name, candidates)
    if not near:
        return ""
    return " (did you mean " + " or ".join(repr(n) for n in near) + "?)"


def _matching(patterns: Sequence[str], names: Sequence[str], what: str) -> set[str]:
    chosen: set[str] = set()
    for pattern in patterns:
        found = (
            {n for n in names if fnmatch.fnmatchcase(n, pattern)}
            if is_pattern(pattern)
            else ({pattern} if pattern in names else set())
        )
        if not found:
            known = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
            raise InputError(
                f"{what} {pattern!r} matches no {what} of the plan"
                f"{did_you_mean(pattern, names)} (the plan has: {known})"
            )
        chosen |= found
    return chosen


def filter_cells(cells: Sequence[Cell], chosen: CellFilter) -> list[Cell]:
    """The cells a filter keeps, in plan order; InputError when a pattern, a name or a trial
    number matches nothing in the plan, or when together they keep no cell."""
    if not chosen:
        return list(cells)
    cases = list(dict.fromkeys(cell.case_id for cell in cells))
    seats = list(dict.fromkeys(cell.seat.name for cell in cells))
    keep_cases = _matching(chosen.cases, cases, "case") if chosen.cases else None
    keep_seats = _matching(chosen.seats, seats, "seat") if chosen.seats else None
    trials = sorted({cell.trial for cell in cells})
    for trial in chosen.trials:
        if trial not in trials:
            raise InputError(
                f"trial {trial}: the plan has trials {trials[0]} to {trials[-1]}"
                if trials
                else f"trial {trial}: the plan has no cells"
            )
    kept = [
        cell
        for cell in cells
        if (keep_cases is None or cell.case_id in keep_cases)
        and (keep_seats is None or cell.seat.name in keep_seats)
        and (not chosen.trials or cell.trial in chosen.trials)
    ]
    if not kept:
        raise InputError(f"{chosen.describe()}: no cell of the plan matches all of these")
    return kept


def cells_at(cells: Sequence[Cell], coordinates: Sequence[str]) -> list[Cell]:
    """The cells at these coordinates (`case:seat:trial`, or glob patterns over them), in
    plan order; InputError naming the closest coordinates for one that matches nothing."""
    by_coordinate = {cell.coordinate: cell for cell in cells}
    names = list(by_coordinate)
    chosen: set[str] = set()
    for wanted in coordinates:
        if is_pattern(wanted):
            found = {n for n in names if fnmatch.fnmatchcase(n, wanted)}
        else:
            found = {wanted} if wanted in by_coordinate else set()
        if not found:
            raise InputError(
                f"no cell {wanted!r} in the plan{did_you_mean(wanted, names)}; "
                "a cell is case:seat:trial (brigade show DIR --cells lists them)"
            )
        chosen |= found
    return [cell for cell in cells if cell.coordinate in chosen]
