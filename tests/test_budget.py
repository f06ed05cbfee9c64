"""The spending cap of a run (--max-cost, max_cost=, the roster's max_cost): what an attempt
cost, the budget stopping the scheduler, and end to end through doit and brigade run."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAKE_CLI, REPO, Project
from test_progress import masked
from test_schedule import Recorder, cell, scheduler, terminal

from brigade.core.accounting import model_runs
from brigade.core.receipts import ReceiptView
from brigade.core.usage import Price
from brigade.run.budget import Budget
from brigade.run.schedule import Limits

PRICES = {"m-1": Price(input_per_mtok=1.0, output_per_mtok=2.0)}


def judge_result(usage: Any = None, exit_code: int | None = 0, **extra: Any) -> dict[str, Any]:
    result = {"grader_type": "judge", "status": "scored", "exit_code": exit_code, **extra}
    if usage is not None:
        result["usage"] = usage
    return result


JUDGE = {"type": "judge", "seat": "critic", "rubric": "r", "judge_seat": {"model": "m-1"}}


def test_what_each_judge_that_ran_cost() -> None:
    known = {"input_tokens": 1_000_000, "output_tokens": 0}  # priced as its seat's model
    specs = [JUDGE, {"type": "exact_output"}, {**JUDGE, "seat": "other"}, JUDGE, JUDGE]
    results = [
        judge_result(known),
        {"grader_type": "exact_output", "status": "scored", "score": 1.0},
        judge_result(None),  # an exec judge that reported no usage: it ran, cost unknown
        judge_result(None, exit_code=None, status="grader_error"),  # never started
        judge_result({"cost_usd": 0.5, "cost_source": "reported"}),
    ]
    assert model_runs(specs, results, PRICES) == [
        ("critic", 1.0),
        ("other", None),
        ("critic", 0.5),
    ]
    # a result reused from an earlier grading ran nothing here
    assert model_runs(specs, results, PRICES, skip={0, 4}) == [("other", None)]


def test_the_summary_counts_a_judge_without_usage_as_unknown() -> None:
    view = ReceiptView.of(
        {
            "cell_id": "c" * 64,
            "state": "accepted",
            "grader_specs": [JUDGE, JUDGE],
            "graders": [judge_result({"input_tokens": 5, "output_tokens": 1}), judge_result()],
        }
    )
    assert view.grader_usage == ({"input_tokens": 5, "output_tokens": 1, "model": "m-1"}, None)


def test_the_budget_keeps_back_the_run_that_would_pass_the_cap() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=1), recorder)
    budget = Budget(1.0)
    budget.attach(sched)
    for n in range(5):
        sched.add(cell("a", n))
    for cost in (0.3, None, 0.4):
        job = recorder.started[-1]
        budget.record(job.cell.cell_id, ("a", cost), [])
        sched.finished(job, terminal(job.cell.cell_id, "unscored"))
    # 0.7 spent; the next is expected to cost the most a run of the seat cost (0.4): 1.1
    assert recorder.names() == ["c0:a:1#1", "c1:a:1#1", "c2:a:1#1"]
    sched.drain(lambda state, receipt: None)
    assert (budget.seat_runs, budget.unknown, round(budget.spent, 6)) == (3, 1, 0.7)
    assert budget.lines() == [
        "stopped launching: the budget of $1.0000 was reached: $0.7000 spent by 3 seat runs "
        "of this run, 1 of them of unknown cost (not counted); the next would cost about "
        "$0.4000, past the cap; 2 cells not started"
    ]


def test_runs_in_flight_count_with_what_they_are_expected_to_cost() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=2), recorder)
    budget = Budget(1.0)
    budget.attach(sched)
    for n in range(6):
        sched.add(cell("a", n))
    # nothing is known of what a run of the seat costs: one run learns it first
    (first,) = recorder.started
    budget.record(first.cell.cell_id, ("a", 0.3), [])
    sched.finished(first, terminal(first.cell.cell_id, "unscored"))
    # 0.3 spent; c1 and c2 start, each expected to cost 0.3
    assert len(recorder.started) == 3
    second = recorder.started[1]
    budget.record(second.cell.cell_id, ("a", 0.3), [])
    sched.finished(second, terminal(second.cell.cell_id, "unscored"))
    # 0.6 spent and c2 in flight at 0.3: c3 (0.3 more) would make 1.2
    assert len(recorder.started) == 3
    assert budget.kept == {"start": 3, "retry": 0, "regrade": 0}


def test_a_reached_cap_drops_retries_waiting_for_their_backoff() -> None:
    from brigade.core.specs import RetryPolicy

    recorder = Recorder()
    policy = RetryPolicy(max_retries=2, backoff_seconds=600.0)
    sched = scheduler(Limits(total=2), recorder, {"a": policy})
    budget = Budget(1.0)
    budget.attach(sched)
    for n in range(2):
        sched.add(cell("a", n))
    (first,) = recorder.started  # the first run learns what a run of the seat costs
    budget.record(first.cell.cell_id, ("a", 0.2), [])
    fault = {"kind": "rate_limited", "message": "m"}
    sched.finished(first, terminal(first.cell.cell_id, "adapter_error", fault=fault))
    assert sched.busy  # its retry waits for the backoff
    second = recorder.started[1]
    budget.record(second.cell.cell_id, ("a", 0.9), [])  # 1.1: the cap is reached
    sched.finished(second, terminal(second.cell.cell_id, "unscored"))
    sched.drain(lambda state, receipt: None)  # (no waiting out the backoff)
    assert budget.kept == {"start": 0, "retry": 1, "regrade": 0}
    assert budget.lines()[0].endswith("; 1 retry not made")


def test_one_run_of_each_seat_learns_its_price_before_the_others_start() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=8), recorder)
    budget = Budget(10.0)
    budget.attach(sched)
    for n in range(3):
        sched.add(cell("a", n))
        sched.add(cell("b", n))
    # one run of each seat at once, however many slots there are
    assert recorder.names() == ["c0:a:1#1", "c0:b:1#1"]
    a0, b0 = recorder.started
    # a run that ended without being counted (interrupted, a full disk) teaches nothing:
    # the next run of its seat learns the price instead
    sched.finished(a0, None, RuntimeError("the disk is full"))
    assert recorder.names()[2:] == ["c1:a:1#1"]
    # a run of unknown cost is learned too: nothing is held back for it any more
    budget.record(b0.cell.cell_id, ("b", None), [])
    sched.finished(b0, terminal(b0.cell.cell_id, "unscored"))
    assert sorted(recorder.names()[3:]) == ["c1:b:1#1", "c2:b:1#1"]
    a1 = recorder.started[2]
    budget.record(a1.cell.cell_id, ("a", 1.0), [])
    sched.finished(a1, terminal(a1.cell.cell_id, "unscored"))
    assert recorder.names()[5:] == ["c2:a:1#1"]
    assert budget.kept == {"start": 0, "retry": 0, "regrade": 0}


def test_gradings_without_judges_are_free_and_judges_are_expected_as_they_cost() -> None:
    budget = Budget(2.5)
    plain = cell("a", 0)
    judged = plain._replace(graders=({"type": "judge", "seat": "critic"},))
    for _ in range(2):
        assert budget.admit(judged, seat=False)
        budget.record(judged.cell_id, None, [("critic", 1.0)])
    assert not budget.admit(judged, seat=False)  # 2.0 spent, 1.0 more would pass 2.5
    assert budget.admit(plain, seat=False)  # a grading that runs no model costs nothing
    assert not budget.admit(judged, seat=False, kept="regrade")
    assert budget.lines() == [
        "stopped launching: the budget of $2.5000 was reached: $2.0000 spent by 2 judge runs "
        "of this run; the next would cost about $1.0000, past the cap; 1 cell not started, "
        "1 cell not regraded"
    ]


def test_unknown_costs_never_reach_the_budget() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=1), recorder)
    budget = Budget(0.01)
    budget.attach(sched)
    for n in range(3):
        sched.add(cell("a", n))
    for n in range(3):
        job = recorder.started[n]
        budget.record(job.cell.cell_id, ("a", None), [])
        sched.finished(job, terminal(job.cell.cell_id, "unscored"))
    assert not budget.kept_back
    assert (budget.seat_runs, budget.unknown, budget.spent) == (3, 3, 0.0)


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


@pytest.mark.parametrize(
    "front", ["brigade", "doit", "manifest", "roster", "brigade -n 4", "doit -n 4"]
)
def test_a_run_stops_launching_at_its_budget(project: Project, front: str) -> None:
    cap = {"max_cost": 0.03}
    if front == "roster":
        four_cells(project, **cap)
    else:
        four_cells(project, manifest=cap if front == "manifest" else None)
    # with four slots, the other runs wait for the first to say what a run costs
    if front.startswith("brigade"):
        done = project.run("--max-cost", "0.03", *front.split()[1:])
    elif front.startswith("doit"):
        done = project.doit("max_cost=0.03", *front.split()[1:])
    else:
        done = project.run()
    assert done.returncode == 3, done.stderr
    # a second run of $0.02 would pass the cap: it is not launched
    # (one run: the first, or with -n 4 whichever of the four doit handed over first)
    states = project.states()
    assert list(states.values()) == ["unscored"], states
    if "-n" not in front:
        assert states == {"c0:agent:1": "unscored"}
    assert headline_and_notes(masked(done.stderr)) == [
        "brigade: 4 cells: unscored 1, missing 3 -> incomplete (exit 3); <t>; report: "
        f"{project.out / 'report' / 'index.html'}",
        "brigade: stopped launching: the budget of $0.0300 was reached: $0.0200 spent by 1 seat "
        "run of this run; the next would cost about $0.0200, past the cap; 3 cells not started",
    ]
    # the budget counts this run only: the next one runs the cells left unfinished
    again = project.run("--max-cost", "0.1")
    assert again.returncode == 0, again.stderr
    assert set(project.states().values()) == {"unscored"} and len(project.states()) == 4


def test_the_command_line_overrides_the_manifest_s_budget_which_overrides_the_roster_s(
    project: Project,
) -> None:
    four_cells(project, manifest={"max_cost": 0.05}, max_cost=0.01)
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert len(project.states()) == 2
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


# -- judges -----------------------------------------------------------------------------

FAKE_JUDGE = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'fake_judge.py'}"
DOLLAR = '{"input_tokens": 1000, "output_tokens": 50, "cost_usd": 1.0}'


def judged_cells(project: Project, model: str, cells: int = 6, **extra: Any) -> None:
    """Cells graded by a judge that costs $1 a run (the agent's runs cost nothing known)."""
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI},
            "critic": {"cli": FAKE_JUDGE, "model": model, "env": {"JUDGE_USAGE": DOLLAR}},
        },
        **extra,
    )
    judge = {"type": "judge", "seat": "critic", "rubric": "Greets the user."}
    project.write_manifest(
        [{"id": f"c{n}", "prompt": "answer: hello"} for n in range(cells)], graders=[judge]
    )


def judge_runs(project: Project) -> int:
    log = project.root / "judge.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_new_judge_model_grades_only_what_the_budget_allows(project: Project) -> None:
    judged_cells(project, "pass")
    log = {"FAKE_JUDGE_LOG": str(project.root / "judge.log")}
    assert project.run(**log).returncode == 0
    assert (judge_runs(project), project.launches()) == (6, 6)
    judged_cells(project, "bold")  # new cell ids: the seat runs are reused, judges run again
    done = project.run("--max-cost", "2.5", **log)
    assert done.returncode == 3, done.stderr
    assert (judge_runs(project), project.launches()) == (8, 6)  # $2 of judges, no agent
    assert len(project.states()) == 2
    assert done.stderr.splitlines()[-1] == (
        "brigade: stopped launching: the budget of $2.5000 was reached: $2.0000 spent by 2 "
        "judge runs of this run; the next would cost about $1.0000, past the cap; 4 cells not "
        "started"
    )
    assert project.run(**log).returncode == 0  # the next run grades the rest
    assert (judge_runs(project), len(project.states())) == (12, 6)


def test_a_fresh_run_counts_its_judges_with_its_seat_runs(project: Project) -> None:
    """Judges that grade the seat runs of the same run count toward its cap: a cell whose
    judge would pass it is not started at all."""
    judged_cells(project, "pass")
    log = {"FAKE_JUDGE_LOG": str(project.root / "judge.log")}
    done = project.run("--max-cost", "2.5", **log)
    assert done.returncode == 3, done.stderr
    assert (judge_runs(project), project.launches()) == (2, 2)
    assert project.states() == {"c0:agent:1": "accepted", "c1:agent:1": "accepted"}
    assert done.stderr.splitlines()[-1] == (
        "brigade: stopped launching: the budget of $2.5000 was reached: $2.0000 spent by 2 seat "
        "runs and 2 judge runs of this run, 2 of them of unknown cost (not counted); the next "
        "would cost about $1.0000, past the cap; 4 cells not started"
    )


def test_the_regrade_of_grader_error_cells_counts_its_judges(project: Project) -> None:
    judged_cells(project, "pass", cells=3)
    log = {"FAKE_JUDGE_LOG": str(project.root / "judge.log")}
    assert project.run(**log, FAKE_JUDGE_FAULT="1").returncode == 3  # the judge was down
    assert set(project.states().values()) == {"grader_error"}
    done = project.run("--max-cost", "1.5", **log)
    assert done.returncode == 3, done.stderr
    assert sorted(project.states().values()) == ["accepted", "grader_error", "grader_error"]
    assert done.stderr.splitlines()[-1] == (
        "brigade: stopped launching: the budget of $1.5000 was reached: $1.0000 spent by 1 "
        "judge run of this run; the next would cost about $1.0000, past the cap; 2 cells not "
        "regraded"
    )


@pytest.mark.parametrize("where", ["command line", "roster"])
def test_brigade_regrade_has_a_budget(project: Project, where: str) -> None:
    judged_cells(project, "pass", cells=3)
    log = {"FAKE_JUDGE_LOG": str(project.root / "judge.log")}
    assert project.run(**log).returncode == 0
    if where == "roster":  # the cap of the roster the plan was made with
        judged_cells(project, "pass", cells=3, max_cost=1.5)
        args: tuple[str, ...] = ()
    else:
        args = ("--max-cost", "1.5")
    done = project.brigade("regrade", str(project.out), *args, **log)
    assert done.returncode == 3, done.stderr
    assert judge_runs(project) == 4
    assert done.stdout.startswith("regraded 1 cell(s) from stored output (0 changed state); ")
    assert done.stderr.splitlines()[-1] == (
        "brigade: stopped launching: the budget of $1.5000 was reached: $1.0000 spent by 1 "
        "judge run of this run; the next would cost about $1.0000, past the cap; 2 cells not "
        "regraded"
    )
    assert set(project.states().values()) == {"accepted"}  # kept back, not changed


def test_brigade_regrade_refuses_a_bad_budget(project: Project) -> None:
    judged_cells(project, "pass", cells=1)
    assert project.run().returncode == 0
    done = project.brigade("regrade", str(project.out), "--max-cost", "0")
    assert (done.returncode, done.stderr) == (
        2,
        "brigade: --max-cost 0 (doit: max_cost=): use a number of US dollars above 0\n",
    )
