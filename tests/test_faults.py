"""Faults people can trust, end to end: fail fast on a missing program or a lasting fault,
retries with backoff, the hint about kept faults (real doit and brigade, fake agents)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from agents.fake_cli import install
from conftest import FAKE_AGENT, FAKE_CLI, Project

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
    assert headline_and_notes(done.stderr) == [
        "brigade: 10 cells: unscored 6, adapter_error 1, missing 3; measurement failures 1 "
        "-> incomplete (exit 3)",
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
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        0,
        "brigade: 2 cells: unscored 2 -> clean (exit 0)",
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
