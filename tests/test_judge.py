"""The judge grader: a roster seat grades the answer against a rubric. Pass and fail, and a
judge that faults, times out or gives no verdict is a grader_error; the judge's identity is
part of the cell's, so a new judge model re-grades only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FAKE_CLI, REPO, Project

from brigade.inputs import schemas
from brigade.run.judge import JUDGE_TEMPLATE, judge_prompt, parse_verdict

FAKE_JUDGE = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'fake_judge.py'}"
RUBRIC = "The answer must greet the user in English."


def judged(project: Project, model: str = "pass", **grader: Any) -> None:
    project.write_roster(
        {"agent": {"cli": FAKE_CLI}, "critic": {"cli": FAKE_JUDGE, "model": model}}
    )
    project.write_manifest(
        [{"id": "hello", "prompt": "answer: hello"}],
        graders=[{"type": "judge", "seat": "critic", "rubric": RUBRIC, **grader}],
    )


def judge_log(project: Project) -> list[dict[str, Any]]:
    path = project.root / "judge.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(project: Project, *args: str) -> Any:
    return project.run(*args, FAKE_JUDGE_LOG=str(project.root / "judge.log"))


def result_of(project: Project, coordinate: str = "hello:agent:1") -> dict[str, Any]:
    [result] = project.receipt(coordinate)["graders"]
    assert schemas.problems(result, "brigade.grader_result.v2") == []
    return result


def test_a_judge_that_passes_the_answer(project: Project) -> None:
    judged(project)
    done = run(project)
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("hello:agent:1")
    assert receipt["state"] == "accepted"
    result = result_of(project)
    folder = f"cells/{receipt['cell_id']}/attempts/attempt-001/graders/judge-0"
    assert (result["status"], result["score"], result["exit_code"]) == ("scored", 1.0, 0)
    assert result["judge"] == {"seat": "critic", "verdict": "pass", "score": 0.9, "pass_score": 0.5}
    assert result["detail"] == (
        "the judge seat 'critic' says SCORE: 0.9 (reaches pass_score 0.5); reasoning: "
        "The answer greets the user as the rubric asks. It is short."
    )
    assert result["logs"] == {
        "stdout": f"{folder}/stdout.log",
        "stderr": f"{folder}/stderr.log",
        "answer": f"{folder}/final.txt",
        "run": f"{folder}/run.json",
    }
    judge_run = json.loads((project.out / folder / "run.json").read_text())
    assert (judge_run["status"], judge_run["execution_mode"]) == ("completed", "read-only")
    [call] = judge_log(project)
    assert call["prompt"] == judge_prompt(RUBRIC, "answer: hello", "hello\n")
    assert call["cwd"] == str(project.workspace)
    assert call["env"]["BRIGADE_CELL_ID"] == receipt["cell_id"]
    assert call["env"]["BRIGADE_EXECUTION_MODE"] == "read-only"
    # the judge's identity is in the grader spec of the cell
    assert receipt["grader_specs"][0]["judge_seat"] == {
        "seat": "critic",
        "cli": FAKE_JUDGE,
        "model": "pass",
        "reasoning": None,
        "transport": "direct",
        "transport_version": None,
        "env": None,
        "codex_transport": None,
    }
    assert project.launches() == 1


def test_the_judge_prompt_is_the_documented_template() -> None:
    assert judge_prompt("Be kind {really}.", "Say hi", "hi\n") == (
        "You are grading the answer an AI agent gave to a task, against a rubric.\n\n"
        "## Rubric\n\nBe kind {really}.\n\n"
        "## The task the agent was given\n\nSay hi\n\n"
        "## The agent's answer\n\nhi\n\n"
        "## How to reply\n\n"
        "Reason briefly about how well the answer meets the rubric. Then end your reply "
        "with a\nlast line that is exactly one of:\n"
        "SCORE: <a number from 0 to 1>\nVERDICT: pass\nVERDICT: fail\n"
    )
    without = judge_prompt("R", None, "{answer}")
    assert "## The task" not in without
    assert "## The agent's answer\n\n{answer}\n" in without
    assert JUDGE_TEMPLATE.count("{") == 3


@pytest.mark.parametrize(
    ("answer", "passed", "score", "reasoning"),
    [
        ("fine\nSCORE: 0.8", True, 0.8, "fine"),
        ("fine\nSCORE: .5\n\n", True, 0.5, "fine"),
        ("meh\nscore : 0.2", False, 0.2, "meh"),
        ("**VERDICT: PASS**", True, None, ""),
        ("a\nb\n`VERDICT: fail`", False, None, "a\nb"),
        ("SCORE: 1", True, 1.0, ""),
    ],
)
def test_verdicts(answer: str, passed: bool, score: float | None, reasoning: str) -> None:
    found = parse_verdict(answer, 0.5)
    assert found is not None
    verdict, said = found
    assert (verdict.passed, verdict.score, said) == (passed, score, reasoning)


@pytest.mark.parametrize(
    "answer",
    ["", "SCORE: 1.5", "SCORE: -0.1", "SCORE: high", "VERDICT: maybe", "SCORE: 0.8\nthanks"],
)
def test_no_verdict(answer: str) -> None:
    assert parse_verdict(answer, 0.5) is None


def test_a_judge_that_fails_the_answer(project: Project) -> None:
    judged(project, model="fail")
    assert run(project).returncode == 1
    assert project.states() == {"hello:agent:1": "rejected"}
    result = result_of(project)
    assert (result["status"], result["score"]) == ("scored", 0.0)
    assert result["judge"] == {
        "seat": "critic",
        "verdict": "fail",
        "score": None,
        "pass_score": 0.5,
    }
    assert result["detail"].startswith("the judge seat 'critic' says VERDICT: fail; reasoning: ")


def test_pass_score(project: Project) -> None:
    judged(project, model="low", pass_score=0.25)
    assert run(project).returncode == 0
    assert result_of(project)["detail"].startswith(
        "the judge seat 'critic' says SCORE: 0.3 (reaches pass_score 0.25)"
    )
    judged(project, model="low")
    assert run(project).returncode == 1
    assert result_of(project)["detail"].startswith(
        "the judge seat 'critic' says SCORE: 0.3 (is below pass_score 0.5)"
    )


@pytest.mark.parametrize(
    ("model", "detail", "exit_code"),
    [
        (
            "garbage",
            "the judge seat 'critic' gave no verdict: its last line is \"I would say it is fine "
            'overall.", not `SCORE: <0..1>` or `VERDICT: pass|fail`',
            0,
        ),
        (
            "fault",
            "the judge seat 'critic' hit a fault of the apparatus (rate_limited): "
            "429 from the provider, retry after 30s",
            75,
        ),
        ("crash", "the judge seat 'critic' exited with status 1: judge: internal error", 1),
    ],
)
def test_a_judge_that_cannot_judge_is_a_grader_error(
    project: Project, model: str, detail: str, exit_code: int
) -> None:
    judged(project, model=model)
    assert run(project).returncode == 3
    receipt = project.receipt("hello:agent:1")
    assert receipt["state"] == "grader_error"
    assert receipt["score"] is None
    result = result_of(project)
    assert (result["status"], result["score"], result["exit_code"]) == (
        "grader_error",
        None,
        exit_code,
    )
    assert result["detail"] == detail
    assert "judge" not in result


def test_a_judge_past_its_time_limit_is_a_grader_error(project: Project) -> None:
    judged(project, model="slow", timeout_seconds=1)
    assert run(project).returncode == 3
    result = result_of(project)
    assert result["status"] == "grader_error"
    assert result["detail"].startswith(
        "the judge seat 'critic' did not answer within its time limit of 1 s: "
    )


def test_a_new_judge_model_grades_again_without_the_agent(project: Project) -> None:
    judged(project, model="pass")
    assert run(project).returncode == 0
    before = project.receipt("hello:agent:1")
    judged(project, model="fail")
    done = run(project)
    assert done.returncode == 1, done.stderr
    after = project.receipt("hello:agent:1")
    assert after["cell_id"] != before["cell_id"]
    assert after["reused_run"]["cell_id"] == before["cell_id"]
    assert after["state"] == "rejected"
    assert project.launches() == 1  # the agent ran once; the judge twice
    assert [call["model"] for call in judge_log(project)] == ["pass", "fail"]
    # the same judge again: nothing runs
    assert run(project).returncode == 1
    assert len(judge_log(project)) == 2


def test_regrade_runs_only_the_judge(project: Project) -> None:
    judged(project, model="pass")
    assert run(project).returncode == 0
    done = project.brigade(
        "regrade", str(project.out), FAKE_JUDGE_LOG=str(project.root / "judge.log")
    )
    assert done.returncode == 0, done.stderr
    assert project.launches() == 1
    assert len(judge_log(project)) == 2


def test_a_judge_seat_may_judge_its_own_cells(project: Project) -> None:
    project.write_roster({"critic": {"cli": FAKE_JUDGE, "model": "pass"}})
    project.write_manifest(
        [{"id": "self", "prompt": "anything"}],
        seats=("critic",),
        graders=[{"type": "judge", "seat": "critic", "rubric": RUBRIC}],
    )
    done = project.brigade("validate", str(project.manifest), "--roster", str(project.roster))
    assert (done.returncode, done.stderr) == (
        0,
        "warning: seat critic: read-only run, but the exec adapter cannot enforce it; the seat "
        "may still change the workspace (the seat's acknowledge_read_only: true silences this)\n",
    )
    assert run(project).returncode == 0
    assert project.states() == {"self:critic:1": "accepted"}


def test_validate_names_an_unknown_judge_seat_and_missing_fields(project: Project) -> None:
    project.write_manifest(
        [{"id": "hello", "prompt": "answer: hello"}],
        graders=[
            {"type": "judge", "seat": "nobody", "rubric": RUBRIC},
            {"type": "judge", "seat": "agent"},
            {"type": "command"},
        ],
    )
    done = project.brigade("validate", str(project.manifest), "--roster", str(project.roster))
    assert done.returncode == 0
    where = f"{project.manifest}: cases[0] (hello)"
    tail = " — this grader will record grader_error until fixed"
    assert done.stderr.splitlines() == [
        f"warning: {where} graders[0]: judge seat 'nobody' is not a seat of the roster "
        f"(it defines: agent){tail}",
        f"warning: {where} graders[1]: judge graders need a 'rubric' field{tail}",
        f"warning: {where} graders[2]: command graders need a 'command' field{tail}",
        "warning: seat agent: read-only run, but the exec adapter cannot enforce it; the seat "
        "may still change the workspace (the seat's acknowledge_read_only: true silences this)",
    ]
    assert run(project).returncode == 3
    [unknown, _, _] = project.receipt("hello:agent:1")["graders"]
    assert unknown["detail"] == "judge seat 'nobody' is not a seat of the roster"


def test_judge_env_values_never_leave_the_output_directory(project: Project) -> None:
    secret = "judge-secret-token-4711"
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI},
            "critic": {"cli": FAKE_JUDGE, "model": "pass", "env": {"JUDGE_TOKEN": secret}},
        }
    )
    project.write_manifest(
        [{"id": "hello", "prompt": "answer: hello"}],
        graders=[{"type": "judge", "seat": "critic", "rubric": RUBRIC}],
    )
    done = run(project)
    assert done.returncode == 0, done.stderr
    assert judge_log(project)[0]["env"]["JUDGE_TOKEN"] == secret
    exported = [p for p in (project.out / "export").rglob("*") if p.is_file()]
    reported = [p for p in (project.out / "report").rglob("*") if p.is_file()]
    assert exported and reported
    for path in exported + reported:
        assert secret not in path.read_text(errors="replace"), path
    cell = yaml.safe_load(next((project.out / "export" / "cells").glob("*.json")).read_text())
    assert cell["grader_specs"][0]["judge_seat"]["env"] == {"JUDGE_TOKEN": "<redacted>"}


def test_include_prompt_false_leaves_the_task_out(project: Project) -> None:
    judged(project, include_prompt=False)
    assert run(project).returncode == 0
    [call] = judge_log(project)
    assert call["prompt"] == judge_prompt(RUBRIC, None, "hello\n")
    assert "answer: hello" not in call["prompt"]


def test_the_judge_spec_problems() -> None:
    from brigade.run.graders import spec_problem

    base = {"type": "judge", "seat": "critic", "rubric": "r"}
    assert spec_problem(base) is None
    assert spec_problem({**base, "rubric": " "}) == "rubric must not be empty"
    assert (
        spec_problem({**base, "pass_score": 2}) == "pass_score must be a number from 0 to 1, got 2"
    )
    assert spec_problem({**base, "pass_score": True}) == (
        "field 'pass_score' must be int or float, got bool"
    )
    assert spec_problem({**base, "judge_seat": {"seat": "x"}}) == (
        "judge_seat must be the judge seat's identity (brigade writes it)"
    )
    assert spec_problem({**base, "include_prompt": "no"}) == (
        "field 'include_prompt' must be bool, got str"
    )


def test_the_plan_records_the_judge_identity(project: Project, tmp_path: Path) -> None:
    judged(project, model="pass")
    done = project.brigade("plan", str(project.manifest), "--roster", str(project.roster))
    assert done.returncode == 0, done.stderr
    [cell] = json.loads(done.stdout)["cells"]
    assert cell["graders"][0]["judge_seat"]["model"] == "pass"


def test_show_the_report_and_junit_carry_the_judge(project: Project) -> None:
    judged(project, model="fail")
    assert run(project).returncode == 1
    receipt = project.receipt("hello:agent:1")
    shown = project.brigade("show", str(project.out), "hello:agent:1")
    assert shown.returncode == 0, shown.stderr
    folder = project.out / "cells" / receipt["cell_id"] / "attempts" / "attempt-001"
    block = shown.stdout.split("graders:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block[0].startswith(
        "  judge:0  scored 0  the judge seat 'critic' says VERDICT: fail; reasoning: "
    )
    assert block[1:] == [
        "    exit 0",
        f"    stdout  {folder}/graders/judge-0/stdout.log",
        f"    stderr  {folder}/graders/judge-0/stderr.log",
        f"    answer  {folder}/graders/judge-0/final.txt",
        f"    run     {folder}/graders/judge-0/run.json",
        # the fake judge reports no usage: it ran, at a cost that is unknown (not none)
        "    spent   unknown: the judge reported no usage",
    ]
    junit = (project.out / "report" / "junit.xml").read_text()
    assert "rejected: judge:0: the judge seat 'critic' says VERDICT: fail" in junit
    assert '<property name="grader_runs" value="1" />' in junit
    assert '<property name="grader_usage_partial" value="true" />' in junit
    summary = project.summary()
    assert (summary["grader_usage"]["results"], summary["grader_usage"]["cost_usd"]) == (1, None)
    assert summary["grader_usage"]["results_cost_unknown"] == 1
    html = (project.out / "report" / "index.html").read_text()
    assert "judge:0: scored 0: the judge seat &#x27;critic&#x27; says VERDICT: fail" in html


def test_doctor_checks_the_judge_seats_too(project: Project) -> None:
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI},
            "critic": {"cli": "exec:/nonexistent/judge --strict"},
            "unused": {"cli": "exec:/nonexistent/other"},
        }
    )
    project.write_manifest(
        [{"id": "hello", "prompt": "answer: hello"}],
        graders=[{"type": "judge", "seat": "critic", "rubric": RUBRIC}],
    )
    done = project.brigade("doctor", str(project.manifest), "--roster", str(project.roster))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:-1]] == [["agent", "ok"], ["critic", "MISSING"]]
    # the last line says whether the filesystem sandbox works here
    assert lines[-1].startswith(("sandbox: ok, ", "sandbox: UNAVAILABLE, "))
