"""run.proc: a program that cannot be launched is a result, with the fault it is."""

from __future__ import annotations

import sys
from pathlib import Path

from brigade.run import proc


def launch(tmp_path: Path, argv: list[str], driver: tuple[str, ...] = ()) -> proc.ProcResult:
    return proc.run(
        argv,
        cwd=tmp_path,
        env={"PATH": str(tmp_path)},
        stdin_text=None,
        timeout=30,
        stdout_path=tmp_path / "out.log",
        stderr_path=tmp_path / "err.log",
        driver=driver,
    )


def test_missing_program_is_binary_missing(tmp_path: Path) -> None:
    result = launch(tmp_path, ["no-such-agent", "-p"])
    assert (result.launched, result.launch_fault) == (False, "binary_missing")
    assert result.launch_error == "cannot launch no-such-agent: No such file or directory"


def test_program_that_cannot_be_executed_is_binary_missing(tmp_path: Path) -> None:
    script = tmp_path / "agent"
    script.write_text("#!/bin/sh\necho hi\n")  # not executable
    result = launch(tmp_path, [str(script)])
    assert (result.launched, result.launch_fault) == (False, "binary_missing")


def test_missing_program_under_a_driver_is_binary_missing(tmp_path: Path) -> None:
    result = launch(tmp_path, ["codex", "app-server"], driver=(sys.executable, "-c", "pass"))
    assert (result.launched, result.launch_fault) == (False, "binary_missing")


def test_launched_program_has_no_launch_fault(tmp_path: Path) -> None:
    result = launch(tmp_path, [sys.executable, "-c", "pass"])
    assert (result.launched, result.exit_code, result.launch_fault) == (True, 0, None)
