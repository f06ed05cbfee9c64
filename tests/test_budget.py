"""The spending cap of a run (--max-cost, max_cost=, the roster's max_cost): what an attempt
cost, the budget stopping the scheduler, and end to end through doit and brigade run."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Project
from test_progress import masked
from test_schedule import Recorder, cell, scheduler

from brigade.core.accounting import attempt_cost
from brigade.core.usage import Price
from brigade.run.budget import Budget
from brigade.run.schedule import Limits

PRICES = {"m-1": Price(input_per_mtok=1.0, output_per_mtok=2.0)}


def receipt(
    attempt: int, spent: dict[int, Any], graders: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    return {
        "cell_id": "c" * 64,
        "state": "accepted",
        "attempt": attempt,
        "attempts_usage": [{"attempt": n, "usage": usage} for n, usage in spent.items()],
        "graders": list(graders),
    }


def test_an_attempt_s_cost_is_its_own_seat_run_and_judges() -> None:
    earlier = {"cost_usd": 5.0, "cost_source": "reported"}
    seat = {"cost_usd": 0.25, "cost_source": "priced"}
    judge = {"input_tokens": 1_000_000, "output_tokens": 0, "model": "m-1"}
    assert attempt_cost(receipt(2, {1: earlier, 2: seat}), PRICES) == 0.25
    assert attempt_cost(receipt(2, {1: earlier, 2: seat}, ({"usage": judge},)), PRICES) == 1.25
    # a grader that calls no model has no usage; one whose usage is null spent nothing known
    assert attempt_cost(receipt(1, {1: seat}, ({"passed": True}, {"usage": None})), {}) == 0.25


def test_an_attempt_whose_seat_never_launched_cost_nothing() -> None:
    assert attempt_cost(receipt(2, {1: {"cost_usd": 1.0}}), {}) == 0.0


@pytest.mark.parametrize(
    "spent",
    [
        {1: None},  # the CLI reported nothing
        {1: {"input_tokens": 10, "output_tokens": 1, "cost_source": "unknown"}},  # no price
        {1: {"cost_usd": "lots"}},  # a receipt edited by hand
    ],
)
def test_an_unknown_cost_is_unknown_never_zero(spent: dict[int, Any]) -> None:
    assert attempt_cost(receipt(1, spent), {}) is None


def test_a_judge_of_unknown_cost_makes_the_attempt_s_cost_unknown() -> None:
    judged = receipt(1, {1: {"cost_usd": 0.5}}, ({"usage": {"output_tokens": 3}},))
    assert attempt_cost(judged, {}) is None


def test_the_budget_stops_launching_once_reached_and_says_what_was_spent() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=2), recorder)
    budget = Budget(1.0, {}, sched)
    for n in range(5):
        sched.add(cell("a", n))
    first, second = recorder.started
    sched.finished(first, receipt(1, {1: {"cost_usd": 0.6}}))
    third = recorder.started[2]
    sched.finished(third, receipt(1, {1: None}))
    assert not sched.any_stopped
    sched.finished(second, receipt(1, {1: {"cost_usd": 0.4}}))
    assert sched.any_stopped
    assert recorder.names() == ["c0:a:1#1", "c1:a:1#1", "c2:a:1#1", "c3:a:1#1"]
    # a run in flight when the budget stopped is recorded and counted too
    fourth = recorder.started[3]
    sched.finished(fourth, receipt(1, {1: {"cost_usd": 0.3}}))
    sched.drain(lambda state, receipt: None)
    assert (budget.runs, budget.unknown, round(budget.spent, 6)) == (4, 1, 1.3)
    assert sched.lines() == [
        "stopped launching: the budget of $1.0000 was reached: $1.3000 spent by 4 seat runs "
        "of this run, 1 of them of unknown cost (not counted); 1 cell not started"
    ]


def test_unknown_costs_never_reach_the_budget() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=1), recorder)
    budget = Budget(0.01, {}, sched)
    for n in range(3):
        sched.add(cell("a", n))
    for n in range(3):
        job = recorder.started[n]
        sched.finished(job, receipt(1, {1: None}))
    assert not sched.any_stopped
    assert (budget.runs, budget.unknown, budget.spent) == (3, 3, 0.0)


# -- end to end -------------------------------------------------------------------------

SPENT = '{"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.02}'


def four_cells(
    project: Project,
    *,
    unknown: int | None = None,
    manifest: dict[str, Any] | None = None,
    **roster: Any,
) -> None:
    project.write_roster(**roster)
    cases = [
        {"id": f"c{n}", "prompt": "answer: ok" if n == unknown else f"answer: ok\nusage: {SPENT}"}
        for n in range(4)
    ]
    project.write_manifest(cases, **(manifest or {}))


def headline_and_notes(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if " cell" in line and "-> " in line)
    return lines[start:]


@pytest.mark.parametrize("front", ["brigade", "doit", "manifest", "roster"])
def test_a_run_stops_launching_at_its_budget(project: Project, front: str) -> None:
    cap = {"max_cost": 0.03}
    if front == "roster":
        four_cells(project, **cap)
    else:
        four_cells(project, manifest=cap if front == "manifest" else None)
    if front == "brigade":
        done = project.run("--max-cost", "0.03")
    elif front == "doit":
        done = project.doit("max_cost=0.03")
    else:
        done = project.run()
    assert done.returncode == 3, done.stderr
    assert project.states() == {"c0:agent:1": "unscored", "c1:agent:1": "unscored"}
    assert headline_and_notes(masked(done.stderr)) == [
        "brigade: 4 cells: unscored 2, missing 2 -> incomplete (exit 3); <t>; report: "
        f"{project.out / 'report' / 'index.html'}",
        "brigade: stopped launching: the budget of $0.0300 was reached: $0.0400 spent by 2 seat "
        "runs of this run; 2 cells not started",
    ]
    # the budget counts this run only: the next one runs the cells left unfinished
    again = project.run("--max-cost", "0.03")
    assert again.returncode == 0, again.stderr
    assert set(project.states().values()) == {"unscored"} and len(project.states()) == 4


def test_the_command_line_overrides_the_manifest_s_budget_which_overrides_the_roster_s(
    project: Project,
) -> None:
    four_cells(project, manifest={"max_cost": 0.05}, max_cost=0.01)
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert len(project.states()) == 3
    assert "the budget of $0.0500 was reached" in done.stderr
    # a new cap in the manifest re-runs nothing and changes no cell
    before = project.receipts()
    four_cells(project, manifest={"max_cost": 0.001}, max_cost=0.01)
    done = project.run("--max-cost", "100")
    assert done.returncode == 0, done.stderr
    assert len(project.states()) == 4
    assert {coordinate: project.receipts()[coordinate] for coordinate in before} == before


def test_cells_of_unknown_cost_are_counted_as_unknown(project: Project) -> None:
    four_cells(project, unknown=1)
    done = project.run("--max-cost", "0.04")
    assert done.returncode == 3, done.stderr
    assert sorted(project.states()) == ["c0:agent:1", "c1:agent:1", "c2:agent:1"]
    assert headline_and_notes(done.stderr)[1] == (
        "brigade: stopped launching: the budget of $0.0400 was reached: $0.0400 spent by 3 seat "
        "runs of this run, 1 of them of unknown cost (not counted); 1 cell not started"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--max-cost", "0"), "brigade: --max-cost 0 (doit: max_cost=): use a number of US "),
        (("--max-cost", "nan"), "brigade: --max-cost nan (doit: max_cost=): use a number of US "),
        (("doit", "max_cost=lots"), "brigade: doit variable max_cost='lots': use a number of US "),
        (("doit", "max_cost=-1"), "brigade: --max-cost -1 (doit: max_cost=): use a number of US "),
    ],
)
def test_a_bad_budget_is_refused_on_one_line(
    project: Project, args: tuple[str, ...], line: str
) -> None:
    four_cells(project)
    done = project.doit(args[1]) if args[0] == "doit" else project.run(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(line) and done.stderr.count("\n") == 1, done.stderr
    assert not (project.out / "plan.json").exists()


def test_a_bad_roster_budget_is_refused(project: Project) -> None:
    four_cells(project, max_cost=0)
    done = project.run()
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"brigade: {project.roster}: max_cost: must be greater than 0, got 0\n"
