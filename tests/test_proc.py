"""run/proc.py: the one place that spawns processes (unit tests; no timing assertions:
a timeout is only ever asserted against a process that cannot finish in time). A
program that cannot be launched is a result, with the fault it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import alive, wait_for

from brigade.run import proc

PY = sys.executable


def run(tmp_path: Path, argv: list[str], **kwargs: object) -> proc.ProcResult:
    options: dict[str, object] = {
        "cwd": tmp_path,
        "env": dict(os.environ),
        "stdin_text": None,
        "timeout": 60.0,
        "stdout_path": tmp_path / "stdout.log",
        "stderr_path": tmp_path / "stderr.log",
    }
    options.update(kwargs)
    return proc.run(argv, **options)  # type: ignore[arg-type]


def test_output_goes_to_files_and_the_exit_code_is_kept(tmp_path: Path) -> None:
    script = "import sys; print(sys.stdin.read().upper()); print('err', file=sys.stderr); exit(4)"
    result = run(tmp_path, [PY, "-c", script], stdin_text="hello")
    assert (result.launched, result.exit_code, result.signal, result.timed_out) == (
        True,
        4,
        None,
        False,
    )
    assert result.executable == PY
    assert (tmp_path / "stdout.log").read_text() == "HELLO\n"
    assert (tmp_path / "stderr.log").read_text() == "err\n"


def test_a_missing_program_is_a_result_not_an_exception(tmp_path: Path) -> None:
    result = run(tmp_path, ["no-such-program-for-brigade"])
    assert (result.launched, result.exit_code, result.executable) == (False, None, None)
    assert result.launch_error is not None and "no-such-program-for-brigade" in result.launch_error


def test_a_timeout_ends_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # the child and its grandchild both sleep far longer than the limit
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    result = run(tmp_path, [PY, "-c", script], timeout=1.0, grace=0.5)
    assert (result.launched, result.timed_out) == (True, True)
    grandchild = int(pids.read_text())
    wait_for(lambda: not alive(grandchild), what="the grandchild ended with its group")


def test_should_stop_ends_a_running_seat_as_an_interruption(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    script = f"open({str(marker)!r}, 'w').close(); import time; time.sleep(600)"
    with pytest.raises(proc.Interrupted, match="stopped while running"):
        run(tmp_path, [PY, "-c", script], should_stop=lambda: marker.exists(), grace=0.5)


def test_resolve_executable(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    env = {"PATH": str(tool.parent)}
    assert proc.resolve_executable("tool", tmp_path, env) is None  # not executable yet
    tool.chmod(0o755)
    assert proc.resolve_executable("tool", tmp_path, env) == str(tool)
    assert proc.resolve_executable("bin/tool", tmp_path, env) == str(tool)
    assert proc.resolve_executable(str(tool), Path("/"), {}) == str(tool)
    assert proc.resolve_executable("bin", tmp_path, {"PATH": str(tmp_path)}) is None


def test_capture_never_raises(tmp_path: Path) -> None:
    assert proc.capture([PY, "-c", "print('ok')"]) == (0, "ok\n", "")
    code, out, err = proc.capture(["no-such-program-for-brigade"])
    assert (code, out) == (None, "") and "no-such-program-for-brigade" in err
    code, _, _ = proc.capture([PY, "-c", "import time; time.sleep(600)"], timeout=0.5)
    assert code is None


def test_end_stragglers_finds_processes_by_their_run_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BRIGADE_RUN_DIR"}
    sleeper = [PY, "-c", "import time; time.sleep(600)"]
    mine = subprocess.Popen(
        sleeper, env={**env, "BRIGADE_RUN_DIR": f"{tmp_path}/cells/a/run"}, start_new_session=True
    )
    other = subprocess.Popen(
        sleeper, env={**env, "BRIGADE_RUN_DIR": f"{tmp_path}/cells/ab/run"}, start_new_session=True
    )
    try:
        wait_for(lambda: len(proc._processes_with(f"\0BRIGADE_RUN_DIR={tmp_path}/".encode())) == 2)
        assert proc.end_stragglers("BRIGADE_RUN_DIR", f"{tmp_path}/cells/a/") == [mine.pid]
        assert mine.wait(timeout=30) == -signal.SIGKILL
        assert alive(other.pid)
    finally:
        for process in (mine, other):
            process.kill()
            process.wait()


# -- launch faults ------------------------------------------------------------------------


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


# -- the end of the process ---------------------------------------------------------------

SCRIPT = (
    "import atexit, os, sys\n"
    "from brigade.run import proc\n"
    "atexit.register(lambda: sys.stderr.write(' atexit'))\n"
    "sys.stdout.write('partial line without newline')\n"
    "sys.stderr.write('brigade: headline')\n"
    "CLOSE\n"
    "proc.end_process(3)\n"
)


def end(close: str = "pass", **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "BRIGADE_CLEAN_EXIT")
    }
    return subprocess.run(
        [PY, "-c", SCRIPT.replace("CLOSE", close)],
        capture_output=True,
        text=True,
        env={**base, **env},  # stdout stays buffered
    )


def test_the_process_ends_with_its_code_and_everything_it_wrote() -> None:
    """doit and the brigade script end through proc.end_process (no teardown of the run's
    objects): what is still buffered arrives, and an output already gone is no error."""
    done = end()
    assert (done.returncode, done.stdout, done.stderr) == (
        3,
        "partial line without newline",
        "brigade: headline",  # atexit handlers are skipped
    )
    gone = end("os.close(1)")
    assert (gone.returncode, gone.stderr) == (3, "brigade: headline")


@pytest.mark.parametrize("value", ["1", "yes"])
def test_brigade_clean_exit_runs_atexit_handlers(value: str) -> None:
    done = end(BRIGADE_CLEAN_EXIT=value)
    assert (done.returncode, done.stdout, done.stderr) == (
        3,
        "partial line without newline",
        "brigade: headline atexit",
    )
    assert end(BRIGADE_CLEAN_EXIT="0").stderr == "brigade: headline"


def test_only_the_outermost_entry_points_end_the_process() -> None:
    package = Path(proc.__file__).resolve().parents[1]
    callers = sorted(
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "end_process(" in path.read_text() and path.name != "proc.py"
    )
    assert callers == ["front/cli.py", "front/reporter.py"]
