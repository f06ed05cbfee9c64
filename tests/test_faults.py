"""Faults people can trust, end to end: fail fast on a missing program or a lasting fault,
retries with backoff, the hint about kept faults (real doit and brigade, fake agents)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agents.fake_cli import install
from conftest import FAKE_AGENT, FAKE_CLI, Project
from test_progress import masked

AUTH = "Not logged in · Please run /login"


def path_with(folder: Path) -> str:
    import os

    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def headline_and_notes(stderr: str) -> list[str]:
    """The run's last lines: from the headline on."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if " cell" in line and "-> " in line)
    return lines[start:]


def test_an_auth_fault_stops_its_seat_and_the_others_finish(
    project: Project, tmp_path: Path
) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    install(folder, "claude")
    project.write_roster({"opus": {"cli": "claude"}, "local": {"cli": FAKE_CLI}})
    # the fake agent ignores SCENARIO lines; the fake claude answers them with its login error
    cases = [{"id": f"c{n}", "prompt": "SCENARIO:auth" if n == 1 else "hi"} for n in range(5)]
    project.write_manifest(cases, seats=("opus", "local"))
    done = project.doit(PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    states = project.states()
    assert states == {
        "c0:opus:1": "unscored",
        "c1:opus:1": "adapter_error",
        **{f"c{n}:local:1": "unscored" for n in range(5)},
    }
    auth = project.receipt("c1:opus:1")
    assert auth["fault"] == {"kind": "auth", "message": AUTH}
    assert "failure_reason" not in auth
    assert headline_and_notes(masked(done.stderr)) == [
        "brigade: 10 cells: unscored 6, adapter_error 1, missing 3; measurement failures 1 "
        f"(auth 1) -> incomplete (exit 3); <t>; report: {project.out / 'report' / 'index.html'}",
        f"brigade: seat opus stopped after an auth fault: {AUTH}; 3 cells not started",
    ]
    summary = project.summary()
    assert summary["fault_kinds"] == {"auth": 1}
    assert summary["by_seat"]["opus"]["fault_kinds"] == {"auth": 1}
    assert summary["by_seat"]["local"]["fault_kinds"] == {}
    # the next run tries the seat again: the cells it did not start run now
    again = project.doit(PATH=path_with(folder))
    assert again.returncode == 3, again.stderr
    assert project.states() == {
        **states,
        **{f"c{n}:opus:1": "unscored" for n in (2, 3, 4)},
    }
    assert "seat opus stopped" not in again.stderr


def test_a_program_gone_mid_run_stops_its_seat(project: Project, tmp_path: Path) -> None:
    program = tmp_path / "agent"
    program.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_AGENT}\n")
    program.chmod(0o755)
    spare = tmp_path / "spare"
    spare.write_text("")
    project.write_roster(
        {
            "gone": {"cli": f"exec:{program}", "env": {"DOOMED": str(program)}},
            "local": {"cli": FAKE_CLI, "env": {"DOOMED": str(spare)}},
        }
    )
    cases = [{"id": "c0", "prompt": "delete: $DOOMED"}]
    cases += [{"id": f"c{n}", "prompt": "answer: ok"} for n in range(1, 4)]
    project.write_manifest(cases, seats=("gone", "local"))
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert project.states() == {
        "c0:gone:1": "unscored",
        "c1:gone:1": "adapter_error",
        **{f"c{n}:local:1": "unscored" for n in range(4)},
    }
    fault = project.receipt("c1:gone:1")["fault"]
    assert fault == {
        "kind": "binary_missing",
        "message": f"cannot launch {program}: No such file or directory",
    }
    assert headline_and_notes(done.stderr)[-1] == (
        f"brigade: seat gone stopped after a binary_missing fault: {fault['message']}; "
        "2 cells not started"
    )


@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_a_missing_program_refuses_only_a_run_that_needs_it(
    project: Project, tmp_path: Path, front: str
) -> None:
    program = tmp_path / "agent"
    program.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_AGENT}\n")
    program.chmod(0o755)
    project.write_roster({"agent": {"cli": FAKE_CLI}, "other": {"cli": f"exec:{program}"}})
    project.write_manifest([{"id": "a", "prompt": "answer: ok"}], seats=("agent", "other"))
    assert project.doit().returncode == 0
    program.unlink()

    def run() -> Any:
        return project.doit() if front == "doit" else project.run()

    # every cell of the seat is up to date: its program is not needed
    done = run()
    assert (done.returncode, masked(done.stderr).splitlines()[-1]) == (
        0,
        f"brigade: 2 cells: unscored 2 -> clean (exit 0); <t>; report: "
        f"{project.out / 'report' / 'index.html'}",
    )
    # a new case needs it: refused before anything is written or launched
    project.write_manifest(
        [{"id": "a", "prompt": "answer: ok"}, {"id": "b", "prompt": "answer: ok"}],
        seats=("agent", "other"),
    )
    plan = (project.out / "plan.json").read_bytes()
    launches = project.launches()
    done = run()
    assert done.returncode == 2
    assert done.stderr == (
        f"brigade: seat other needs '{program}', which cannot be run here (not found on "
        "PATH, or not executable): install it or fix the seat's cli in the roster "
        "(brigade doctor checks every seat)\n"
    )
    assert (project.out / "plan.json").read_bytes() == plan
    assert project.launches() == launches


def attempt_receipts(project: Project, coordinate: str) -> list[dict[str, Any]]:
    """Each attempt's receipt of a cell, in order."""
    folder = project.cell_dir(coordinate) / "attempts"
    return [json.loads((path / "cell.json").read_text()) for path in sorted(folder.iterdir())]


@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_transient_faults_are_retried_after_a_backoff_as_new_attempts(
    project: Project, front: str
) -> None:
    # roster: no retries; the command line asks for two, after a short backoff
    project.write_roster({"agent": {"cli": FAKE_CLI, "retry": {"max": 0, "backoff_seconds": 60}}})
    project.write_manifest(
        [
            {"id": "flaky", "prompt": "tempfail_before: 3 rate_limited: 429 slow down\nanswer: a"},
            {"id": "steady", "prompt": "answer: b"},
            {"id": "down", "prompt": "tempfail: overloaded: 529 Overloaded"},
        ]
    )
    if front == "doit":
        done = project.doit("retries=2", "retry_backoff=0.05")
    else:
        done = project.run("--retries", "2", "--retry-backoff", "0.05")
    assert done.returncode == 3, done.stderr
    assert project.states() == {
        "flaky:agent:1": "unscored",
        "steady:agent:1": "unscored",
        "down:agent:1": "adapter_error",
    }
    flaky = attempt_receipts(project, "flaky:agent:1")
    assert [(r["attempt"], r["state"], r["attempts_in_run"]) for r in flaky] == [
        (1, "adapter_error", 1),
        (2, "adapter_error", 2),
        (3, "unscored", 3),
    ]
    assert flaky[0]["fault"] == {"kind": "rate_limited", "message": "429 slow down"}
    assert project.receipt("flaky:agent:1")["attempts_in_run"] == 3
    # the one slot went to the next cell while the first waited for its retry
    steady = project.receipt("steady:agent:1")
    assert flaky[0]["finished_at"] <= steady["started_at"] <= flaky[1]["started_at"]
    assert flaky[1]["started_at"] >= flaky[0]["finished_at"]
    down = attempt_receipts(project, "down:agent:1")
    assert [(r["state"], r["fault"]["kind"]) for r in down] == [("adapter_error", "overloaded")] * 3
    assert headline_and_notes(done.stderr)[1:] == [
        "brigade: 2 cells retried after transient faults (4 retries); 1 still failed"
    ]


def test_faults_that_waiting_does_not_cure_are_never_retried(project: Project) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "retry": {"max": 3, "backoff_seconds": 0}}})
    project.write_manifest([{"id": "denied", "prompt": "tempfail: quota: credit balance too low"}])
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert [r["attempt"] for r in attempt_receipts(project, "denied:agent:1")] == [1]
    assert headline_and_notes(done.stderr)[1:] == [
        "brigade: seat agent stopped after a quota fault: credit balance too low; "
        "0 cells not started"
    ]


def test_a_retry_waits_as_long_as_the_provider_asks(project: Project) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "retry": {"max": 1, "backoff_seconds": 0}}})
    project.write_manifest(
        [{"id": "a", "prompt": "tempfail_before: 2 rate_limited: busy, retry after 1s"}]
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    first, second = attempt_receipts(project, "a:agent:1")
    assert first["fault"] == {
        "kind": "rate_limited",
        "message": "busy, retry after 1s",
        "retry_after_seconds": 1.0,
    }
    waited = _seconds(second["started_at"]) - _seconds(first["finished_at"])
    assert waited >= 1.0
    assert headline_and_notes(done.stderr)[1:] == [
        "brigade: 1 cell retried after transient faults (1 retry); 0 still failed"
    ]


def test_timeouts_are_retried_only_when_asked(project: Project) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "timeout_seconds": 1}})
    project.write_manifest([{"id": "slow", "prompt": "sleep_before: 2 30\nanswer: ok"}])
    done = project.run("--retries", "1", "--retry-backoff", "0")
    assert done.returncode == 3, done.stderr
    assert [r["state"] for r in attempt_receipts(project, "slow:agent:1")] == ["execution_error"]
    project.write_manifest([{"id": "slow2", "prompt": "sleep_before: 2 30\nanswer: ok"}])
    done = project.run("--retries", "1", "--retry-backoff", "0", "--retry-timeouts")
    assert done.returncode == 0, done.stderr
    first, second = attempt_receipts(project, "slow2:agent:1")
    assert (first["failure_reason"], first["fault"]["kind"]) == ("timeout", "timeout")
    assert (second["state"], second["attempts_in_run"]) == ("unscored", 2)


def test_kept_apparatus_faults_are_named_in_the_final_line(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "ok", "prompt": "answer: x"},
            {"id": "drop", "prompt": "tempfail: connection reset by peer"},
            {"id": "limit", "prompt": "tempfail: rate_limited: 429"},
        ]
    )
    first = project.doit()
    assert first.returncode == 3
    assert len(headline_and_notes(first.stderr)) == 1  # nothing kept yet: they just ran
    again = project.doit()
    assert again.returncode == 3
    assert headline_and_notes(again.stderr)[1:] == [
        "brigade: 2 cells with apparatus faults kept; re-run them with --retry-transient "
        "(doit: retry_transient=1)"
    ]
    retried = project.run("--retry-transient")
    assert retried.returncode == 3
    assert len(headline_and_notes(retried.stderr)) == 1
    assert [a for a in project.attempts("drop:agent:1")] == ["attempt-001", "attempt-002"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--retries", "-1"), "brigade: --retries -1 (doit: retries=): use 0 to 100 retries"),
        (
            ("--retry-backoff", "nan"),
            "brigade: --retry-backoff nan (doit: retry_backoff=): use 0 to 86400 seconds",
        ),
    ],
)
def test_bad_retry_settings_are_refused(project: Project, args: tuple[str, ...], line: str) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    done = project.run(*args)
    assert (done.returncode, done.stderr) == (2, line + "\n")


def test_a_bad_doit_retry_variable_is_refused(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    done = project.doit("retries=two")
    assert (done.returncode, done.stderr) == (
        2,
        "brigade: doit variable retries='two': use a whole number\n",
    )


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_new_fault_kinds_reach_every_record_and_lasting_ones_stop_their_seat(
    project: Project,
) -> None:
    """cli_incompatible and model_unavailable stop their seat and are never retried; unknown
    is not retried either; all three are apparatus faults everywhere they show."""
    import xml.etree.ElementTree as ET

    retry = {"max": 3, "backoff_seconds": 0}
    messages = {
        "old": ("cli_incompatible", "error: unknown option '--effort'"),
        "nomodel": ("model_unavailable", "The model 'gpt-9' does not exist"),
        "odd": ("unknown", "the CLI said the request failed"),
    }
    # every seat gets every case; the fake agent reads the seat's env to pick its fault
    project.write_roster(
        {
            seat: {"cli": FAKE_CLI, "retry": retry, "env": {"KIND": kind, "TEXT": text}}
            for seat, (kind, text) in messages.items()
        }
    )
    cases = [{"id": f"c{n}", "prompt": "tempfail: $KIND: $TEXT"} for n in range(3)]
    project.write_manifest(cases, seats=tuple(messages))
    done = project.run()
    assert done.returncode == 3, done.stderr
    states = project.states()
    # the lasting kinds stop their seat after its first cell; unknown runs every cell
    assert states == {
        "c0:old:1": "adapter_error",
        "c0:nomodel:1": "adapter_error",
        **{f"c{n}:odd:1": "adapter_error" for n in range(3)},
    }
    for seat, (kind, text) in messages.items():
        receipt = project.receipt(f"c0:{seat}:1")
        assert receipt["fault"] == {"kind": kind, "message": text}
        assert "failure_reason" not in receipt
        assert [r["attempt"] for r in attempt_receipts(project, f"c0:{seat}:1")] == [1]
        run = json.loads(Path(receipt["run_dir"], "run.json").read_text())
        assert (run["failure_kind"], run["fault"]) == (kind, receipt["fault"])
    assert headline_and_notes(done.stderr)[1:] == [
        "brigade: seat nomodel stopped after a model_unavailable fault: The model 'gpt-9' does "
        "not exist; 2 cells not started",
        "brigade: seat old stopped after a cli_incompatible fault: error: unknown option "
        "'--effort'; 2 cells not started",
    ]
    summary = project.summary()
    assert summary["fault_kinds"] == {"cli_incompatible": 1, "model_unavailable": 1, "unknown": 3}
    assert summary["by_seat"]["old"]["fault_kinds"] == {"cli_incompatible": 1}
    shown = project.brigade("show", str(project.out), "c0:old:1")
    assert shown.returncode == 0, shown.stderr
    assert "  fault cli_incompatible: error: unknown option '--effort'" in shown.stdout
    root = ET.parse(project.out / "report" / "junit.xml").getroot()
    errors = {case.get("name"): case.find("error") for case in root.iter("testcase")}
    kinds = {name: element.get("type") for name, element in errors.items() if element is not None}
    assert sorted(kinds.values()) == ["cli_incompatible", "model_unavailable", *["unknown"] * 3]
    page = (project.out / "report" / "index.html").read_text()
    assert "cli_incompatible" in page and "model_unavailable" in page
