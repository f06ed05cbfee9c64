"""The `judge` grader: a roster seat reads the answer and grades it against a rubric.

The judge runs through the same seat execution as any seat (run/seat: its
adapter, its process, its logs), in a read-only run in the workspace, with
JUDGE_TEMPLATE as its prompt; its run is recorded in the grader's folder
(answer, logs, run.json with its usage). It must end its answer with a verdict
line, `SCORE: <0..1>` or `VERDICT: pass|fail`: the grader passes (score 1) when
the verdict is pass or the score reaches `pass_score`. A judge that cannot start,
faults, times out, fails or gives no verdict is grader_error, never a zero.

The judge seat's identity (cli, model, reasoning, ...) is written into the
grader's spec when the plan is made (core/plan.resolve_judges), so it is part
of the cells' identity: a new judge model makes new cells that reuse the seat
runs and only grade again. Its time limit and roster folder come from the roster.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

from brigade.adapters.base import last_line
from brigade.core.identity import SEAT_KEYS, text_digest
from brigade.core.specs import DEFAULT_TIMEOUT_SECONDS, SeatSpec
from brigade.run.grading import (
    DETAIL_CHARACTERS,
    Field,
    GradeContext,
    Graded,
    GraderFault,
    GraderType,
    Setting,
    need_setting,
)
from brigade.run.seat import (
    FINAL,
    RUN_RECORD,
    SEAT_DIR,
    STDERR,
    STDOUT,
    SeatJob,
    execute_seat,
    read_text,
    record_run,
)

# a judge may take as long as a seat may
MAX_JUDGE_SECONDS = 604800.0
DEFAULT_PASS_SCORE = 0.5

# The judge's prompt. The task section is left out with `include_prompt: false`.
JUDGE_TEMPLATE = """\
You are grading the answer an AI agent gave to a task, against a rubric.

## Rubric

{rubric}
{task}
## The agent's answer

{answer}

## How to reply

Reason briefly about how well the answer meets the rubric. Then end your reply with a
last line that is exactly one of:
SCORE: <a number from 0 to 1>
VERDICT: pass
VERDICT: fail
"""
TASK_SECTION = """
## The task the agent was given

{prompt}
"""

# the verdict line: markdown emphasis around it is tolerated
_VERDICT = re.compile(r"^(SCORE|VERDICT)\s*:\s*(.+?)$", re.IGNORECASE)
_NUMBER = re.compile(r"^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")


# a placeholder of brigade's own templates (JUDGE_TEMPLATE with TASK_SECTION in it)
_PLACEHOLDER = re.compile(r"\{(rubric|prompt|answer)\}")


def judge_prompt(rubric: str, prompt: str | None, answer: str) -> str:
    """The judge's prompt: JUDGE_TEMPLATE with the rubric, the task (or not), the answer.

    The placeholders are filled in one pass over brigade's own template, so a
    `{answer}` or `{task}` written in a rubric, a prompt or an answer reaches the
    judge as written.
    """
    template = JUDGE_TEMPLATE.replace("{task}", TASK_SECTION if prompt is not None else "")
    values = {
        "rubric": rubric.strip("\n"),
        "prompt": (prompt or "").strip("\n"),
        "answer": answer.rstrip("\n"),
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the judge's last line said."""

    passed: bool
    score: float | None  # the judge's own score (SCORE lines)
    line: str


def parse_verdict(answer: str, pass_score: float) -> tuple[Verdict, str] | None:
    """The verdict on the answer's last non-empty line and the reasoning before it, or None
    when that line is not `SCORE: <0..1>` or `VERDICT: pass|fail`."""
    lines = answer.rstrip().splitlines()
    if not lines:
        return None
    last = lines[-1].strip().strip("*_`").strip()
    match = _VERDICT.match(last)
    if match is None:
        return None
    word, value = match.group(1).upper(), match.group(2).strip().strip("*_`").strip()
    reasoning = "\n".join(lines[:-1]).strip()
    if word == "VERDICT":
        if value.lower() not in ("pass", "fail"):
            return None
        return Verdict(value.lower() == "pass", None, f"VERDICT: {value.lower()}"), reasoning
    if not _NUMBER.match(value):
        return None
    score = float(value)
    if not 0.0 <= score <= 1.0:
        return None
    return Verdict(score >= pass_score, score, f"SCORE: {value}"), reasoning


def _check(spec: Mapping[str, Any]) -> None:
    if not spec["seat"]:
        raise GraderFault("seat must name a roster seat")
    if not spec["rubric"].strip():
        raise GraderFault("rubric must not be empty")
    score = spec["pass_score"]
    if isinstance(score, bool) or not 0 <= score <= 1:
        raise GraderFault(f"pass_score must be a number from 0 to 1, got {score!r}")
    identity = spec["judge_seat"]
    if identity is not None and (
        not isinstance(identity, dict) or any(key not in identity for key in SEAT_KEYS)
    ):
        raise GraderFault("judge_seat must be the judge seat's identity (brigade writes it)")


def judge_seat(spec: Mapping[str, Any], setting: Setting, limit: float) -> SeatSpec:
    """The judge as a seat: its identity from the spec, the rest (roster folder) from the
    roster; GraderFault when the roster had no such seat when the plan was made."""
    identity = spec["judge_seat"]
    name = spec["seat"]
    if identity is None:
        raise GraderFault(f"judge seat {name!r} is not a seat of the roster")
    roster_seat = setting.seats.get(name)
    base = roster_seat if roster_seat is not None else SeatSpec(name=name, cli=identity["cli"])
    if setting.sandbox is not None:  # --sandbox reaches the judge as it reaches every seat
        base = dataclasses.replace(
            base, sandbox=dataclasses.replace(base.sandbox, mode=setting.sandbox)
        )
    return dataclasses.replace(
        base,
        name=identity["seat"],
        cli=identity["cli"],
        model=identity["model"],
        reasoning=identity["reasoning"],
        transport=identity["transport"],
        transport_version=identity["transport_version"],
        env=dict(identity["env"] or {}),
        codex_transport=identity["codex_transport"],
        timeout_seconds=limit,
        roster_dir=roster_seat.roster_dir if roster_seat is not None else setting.roster_dir,
    )


def _default_limit(spec: Mapping[str, Any], ctx: GradeContext) -> float:
    seat = ctx.setting.seats.get(spec["seat"]) if ctx.setting is not None else None
    return seat.timeout_seconds if seat is not None else DEFAULT_TIMEOUT_SECONDS


def _grade(spec: Mapping[str, Any], ctx: GradeContext) -> Graded:
    setting, folder = need_setting(ctx, "judge")
    seat = judge_seat(spec, setting, ctx.time_limit)
    prompt = judge_prompt(
        spec["rubric"], setting.prompt if spec["include_prompt"] else None, ctx.final_text
    )
    job = SeatJob(
        cell_id=ctx.cell_id,
        coordinate=setting.coordinate,
        attempt=setting.attempt,
        seat=seat,
        prompt=prompt,
        execution_mode="read-only",
    )
    # the judge reads a hostile answer: the output directory (other cells' answers, the
    # results) is hidden from it as from any seat, but for its own folder
    # brigade's files of the judge's run are in its grader folder, which the judge cannot
    # write; its own folder (BRIGADE_RUN_DIR) is seat/ in there
    seat_dir = folder / SEAT_DIR
    run_doc = record_run(
        folder, execute_seat(job, setting.workspace, folder, seat_dir, out=setting.out)
    )
    files = {"stdout": STDOUT, "stderr": STDERR, "answer": FINAL, "run": RUN_RECORD}
    logs = {
        key: os.path.relpath(folder / name, setting.out)
        for key, name in files.items()
        if (folder / name).is_file()
    }
    extra: dict[str, Any] = {"exit_code": run_doc["exit_code"], "logs": logs}
    if isinstance(run_doc.get("usage"), dict):
        extra["usage"] = run_doc["usage"]
    who = f"the judge seat {seat.name!r}"
    status = run_doc["status"]
    if status != "completed":
        detail = run_doc.get("failure_detail") or status
        if status == "failed":  # what it said about it, rather than its status again
            detail = last_line(read_text(folder / STDERR)) or "no message on stderr"
        what = {
            "not_launched": "could not start",
            "timed_out": f"did not answer within its time limit of {ctx.time_limit:g} s",
            "apparatus_fault": f"hit a fault of the apparatus ({run_doc.get('failure_kind')})",
            "failed": f"exited with status {run_doc['exit_code']}",
        }.get(status, status)
        raise GraderFault(f"{who} {what}: {ctx.redact(detail)}", extra)
    answer = read_text(folder / FINAL)
    found = parse_verdict(answer, spec["pass_score"])
    if found is None:
        last = answer.rstrip().splitlines()[-1:] or [""]
        raise GraderFault(
            f"{who} gave no verdict: its last line is {_quote(ctx.redact(last[0]), 80)}, not "
            "`SCORE: <0..1>` or `VERDICT: pass|fail`",
            extra,
        )
    verdict, reasoning = found
    extra["judge"] = {
        "seat": seat.name,
        "verdict": "pass" if verdict.passed else "fail",
        "score": verdict.score,
        "pass_score": spec["pass_score"],
    }
    if verdict.score is not None:
        reached = "reaches" if verdict.passed else "is below"
        said = f"{verdict.line} ({reached} pass_score {spec['pass_score']:g})"
    else:
        said = verdict.line
    head = f"{who} says {said}"
    # the reasoning may quote the prompt or a secret: replaced first, then cut
    shown = " ".join(ctx.redact(reasoning).split())
    room = DETAIL_CHARACTERS - len(head) - len("; reasoning: ")
    detail = f"{head}; reasoning: {_cut(shown, room)}" if shown and room > 20 else head
    return Graded(1.0 if verdict.passed else 0.0, detail, [], extra)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(text: str, limit: int) -> str:
    return '"' + _cut(text.strip(), limit) + '"'


def _inputs(spec: Mapping[str, Any], ctx: GradeContext) -> Mapping[str, Any]:
    """What a judge reads besides the answer and its spec (the rubric, its seat's identity):
    the case's prompt, when it is shown one."""
    prompt = ctx.setting.prompt if ctx.setting is not None and spec["include_prompt"] else None
    return {"prompt": text_digest(prompt) if prompt is not None else None}


GRADER = GraderType(
    "1",
    {
        "seat": Field((str,), required=True),
        "rubric": Field((str,), required=True),
        "pass_score": Field((int, float), default=DEFAULT_PASS_SCORE),
        "include_prompt": Field((bool,), default=True),
        # written by the plan: the judge seat's identity (None: no such seat in the roster)
        "judge_seat": Field((dict, type(None)), default=None),
    },
    _grade,
    _check,
    process=True,
    default_limit=_default_limit,
    max_limit=MAX_JUDGE_SECONDS,
    inputs=_inputs,
)
