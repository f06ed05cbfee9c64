"""Reliability: concurrent runs on one output directory.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from conftest import Project, brigade_command, wait_for
from reliability import ANSWER_ID, launched, one_line, start_brigade_run, tree_snapshot

# ---------------------------------------------------------------------------------------
# 7: concurrency
# ---------------------------------------------------------------------------------------


def test_second_run_on_one_output_dir_is_refused_and_writes_nothing(
    project: Project, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    project.write_manifest([{"id": "b", "prompt": "x"}])
    assert project.doit().returncode == 0  # doit's DB exists: a refused run must not touch it
    project.write_manifest(
        [{"id": "b", "prompt": "x"}, {"id": "slow", "prompt": f"block: {release}\n{ANSWER_ID}"}]
    )
    first = start_brigade_run(project)
    try:
        wait_for(lambda: len(launched(project)) == 2, what="first run's seat started")
        before = tree_snapshot(project.out)
        db_written = (project.out / ".doit.db").stat().st_mtime_ns
        regrade = project.brigade("regrade", str(project.out))
        for second in (project.doit(), project.run(), project.doit("-n", "4"), regrade):
            assert second.returncode == 2
            assert f"pid {first.pid}" in one_line(second.stderr)
        assert tree_snapshot(project.out) == before
        assert (project.out / ".doit.db").stat().st_mtime_ns == db_written
    finally:
        release.touch()
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert len(launched(project)) == 2


@pytest.mark.parametrize("front", ["doit", "brigade doit", "brigade run"])
def test_ctrl_c_while_waiting_for_the_lock_is_one_line_and_exit_130(
    project: Project, tmp_path: Path, front: str
) -> None:
    """A run told to wait for another (`doit wait=1`, `--wait`) and stopped with Ctrl-C
    while it waits says so on one line and exits 130 through every front door: no
    traceback (plain doit imports the dodo, which waits, before any run starts), and
    the run it waited for is untouched."""
    release = tmp_path / "release"
    project.write_manifest([{"id": "slow", "prompt": f"block: {release}\n{ANSWER_ID}"}])
    first = start_brigade_run(project)
    try:
        wait_for(lambda: len(launched(project)) == 1, what="first run's seat started")
        argv = {
            "doit": [*project.doit_popen_args(), "wait=1"],
            "brigade doit": [*brigade_command(), "doit", *project.variables(), "wait=1"],
            "brigade run": [*brigade_command(), *project.run_args("--wait")],
        }[front]
        # a shell's background job (a CI runner's, say) starts with SIGINT ignored, which
        # its children inherit and Python then keeps: a handler set here is what a child
        # gets as the default instead (handlers are reset at exec; an ignored signal is not)
        inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            waiting = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=project.env(),
                start_new_session=True,
                cwd=project.workspace,
            )
        finally:
            signal.signal(signal.SIGINT, inherited)
        assert waiting.stderr is not None
        said = waiting.stderr.readline()
        assert said.startswith(f"brigade: waiting for pid {first.pid} "), said
        waiting.send_signal(signal.SIGINT)
        _, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 130, err
        assert err == "brigade: interrupted\n"
    finally:
        release.touch()
        _, first_err = first.communicate(timeout=60)
    assert first.returncode == 0, first_err
    assert project.states() == {"slow:agent:1": "unscored"}
