"""core/selection.py and engine/names.py: choosing cells by case, seat, trial, coordinate and
doit task name; every name that chooses nothing is refused with the closest names."""

from __future__ import annotations

import pytest

from brigade.core.plan import Cell
from brigade.core.selection import CellFilter, cells_at, closest, did_you_mean, filter_cells
from brigade.core.specs import SeatSpec
from brigade.engine import names
from brigade.errors import InputError


def cells_of(cases: list[str], seats: list[str], trials: int = 2) -> list[Cell]:
    found = []
    for case in cases:
        for seat in seats:
            for trial in range(1, trials + 1):
                found.append(
                    Cell(
                        cell_id=f"{case}-{seat}-{trial}",
                        coordinate=f"{case}:{seat}:{trial}",
                        case_id=case,
                        prompt="p",
                        seat=SeatSpec(name=seat, cli="exec:true"),
                        trial=trial,
                        graders=(),
                        execution_mode="read-only",
                        run_key="",
                    )
                )
    return found


PLAN = cells_of(["greet", "greeting", "fix=1"], ["opus", "sonnet"])


def coordinates(cells: list[Cell] | tuple[Cell, ...] | None) -> list[str]:
    return [cell.coordinate for cell in cells or ()]


def test_a_filter_keeps_the_cells_matching_every_dimension() -> None:
    kept = filter_cells(PLAN, CellFilter(cases=("greet*",), seats=("opus",), trials=(2,)))
    assert coordinates(kept) == ["greet:opus:2", "greeting:opus:2"]
    assert coordinates(filter_cells(PLAN, CellFilter(cases=("fix=1", "greet")))) == [
        "greet:opus:1",
        "greet:opus:2",
        "greet:sonnet:1",
        "greet:sonnet:2",
        "fix=1:opus:1",
        "fix=1:opus:2",
        "fix=1:sonnet:1",
        "fix=1:sonnet:2",
    ]
    assert filter_cells(PLAN, CellFilter()) == PLAN
    assert CellFilter(seats=("a", "b*"), trials=(1, 3)).describe() == "seats=a,b* trials=1,3"


def test_a_name_that_matches_nothing_is_refused_with_the_closest() -> None:
    with pytest.raises(InputError) as caught:
        filter_cells(PLAN, CellFilter(seats=("sonet",)))
    assert str(caught.value) == (
        "seat 'sonet' matches no seat of the plan (did you mean 'sonnet'?) "
        "(the plan has: opus, sonnet)"
    )
    with pytest.raises(InputError) as caught:
        filter_cells(PLAN, CellFilter(cases=("nothing*",)))
    assert str(caught.value) == (
        "case 'nothing*' matches no case of the plan (the plan has: greet, greeting, fix=1)"
    )
    with pytest.raises(InputError, match=r"^trial 3: the plan has trials 1 to 2$"):
        filter_cells(PLAN, CellFilter(trials=(3,)))


def test_dimensions_that_keep_no_cell_together_are_refused() -> None:
    few = [c for c in PLAN if c.coordinate in ("greet:opus:1", "fix=1:sonnet:1")]
    with pytest.raises(InputError) as caught:
        filter_cells(few, CellFilter(cases=("greet",), seats=("sonnet",)))
    assert str(caught.value) == (
        "cases=greet seats=sonnet: no cell of the plan matches all of these"
    )


def test_cells_at_coordinates_and_patterns() -> None:
    chosen = cells_at(PLAN, ["fix=1:sonnet:2", "greet:*:1"])
    assert coordinates(chosen) == ["greet:opus:1", "greet:sonnet:1", "fix=1:sonnet:2"]
    with pytest.raises(InputError) as caught:
        cells_at(PLAN, ["greet:sonet:1"])
    assert str(caught.value) == (
        "no cell 'greet:sonet:1' in the plan (did you mean 'greet:sonnet:1'?); "
        "a cell is case:seat:trial (brigade show DIR --cells lists them)"
    )


def test_closest_keeps_only_those_about_as_near_as_the_nearest() -> None:
    assert closest("sonet", ["sonnet", "opus"]) == ["sonnet"]
    assert closest("expect", ["expected", "path", "pattern"]) == ["expected"]
    assert closest("zzz", ["sonnet", "opus"]) == []
    assert did_you_mean("gret", ["greet", "greeting"]) == " (did you mean 'greet'?)"
    assert did_you_mean("zzz", ["greet"]) == ""


def test_task_names_escape_what_doit_forbids() -> None:
    assert names.cell_task_name("fix=1:opus:1") == "cell:fix%3D1:opus:1"
    assert names.cell_task_name("50%:opus:1") == "cell:50%25:opus:1"
    assert names.cell_task_name("a%3D:opus:1") == "cell:a%253D:opus:1"  # never a collision
    assert names.grade_task_name("fix=1:opus:1") == "grade:fix%3D1:opus:1"
    assert names.cell_task_name("greet:opus:1") == "cell:greet:opus:1"


OTHERS = ["plan", "cell", "cell:finished", "grade", "summary", "grade:greet:opus:1"]


def test_resolving_names_patterns_and_other_tasks() -> None:
    named = names.resolve(["cell:greet:opus:1", "summary", "cell:fix%3D1:*"], PLAN, OTHERS)
    assert coordinates(named.cells) == [
        "greet:opus:1",
        "fix=1:opus:1",
        "fix=1:opus:2",
        "fix=1:sonnet:1",
        "fix=1:sonnet:2",
    ]
    assert coordinates(named.exact) == ["greet:opus:1"]
    assert named.patterns
    assert names.resolve([], PLAN, OTHERS) == names.Named(None)
    assert names.resolve(["plan", "grade:greet:opus:1"], PLAN, OTHERS) == names.Named(None)


def test_a_name_that_names_no_task_is_refused_like_doit_with_the_closest() -> None:
    cases = {
        "cell:greet:sonet:1": 'no such task "cell:greet:sonet:1" (did you mean '
        "cell:greet:sonnet:1?); doit list shows every task",
        "nosuchtask": 'no such task "nosuchtask"; doit list shows every task',
        "summery": 'no such task "summery" (did you mean summary?); doit list shows every task',
        "cell:nothing*": 'no such task "cell:nothing*": the pattern matches no task '
        "(doit list shows them)",
        "--bogus": 'no such task "--bogus": options go before task names '
        "(doit run [OPTIONS] [TASK...])",
    }
    for arg, message in cases.items():
        with pytest.raises(names.NoSuchTask) as caught:
            names.resolve([arg], PLAN, OTHERS)
        assert str(caught.value) == message
    with pytest.raises(names.NoSuchTask) as caught:
        names.resolve(["cell:*"], PLAN, OTHERS, command="list", patterns=False)
    assert str(caught.value) == 'no such task "cell:*": doit list takes task names, not patterns'
