"""The progress line: shown on a terminal, absent when stderr is not one."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from conftest import DODO, Project


def run_on_terminal(project: Project) -> tuple[int, str]:
    """Run doit with stderr on a pseudo-terminal; return its exit code and what it printed."""
    leader, follower = pty.openpty()
    argv = [sys.executable, "-m", "doit", "-f", str(DODO), *project.variables()]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=follower, env=project.env())
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the terminal closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_progress_line_on_a_terminal(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "a", "prompt": "answer: x", "graders": [{"type": "exit_status"}]},
            {"id": "b", "prompt": "exit: 1"},
        ]
    )
    code, printed = run_on_terminal(project)
    assert code == 1
    assert "\r\x1b[K[0/2]" in printed
    assert "[2/2]" in printed and "accepted 1" in printed and "execution_error 1" in printed
    assert "2 cells: accepted 1, execution_error 1 -> rejected (exit 1)" in printed


def test_no_progress_line_when_not_a_terminal(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: x"}])
    done = project.doit()
    assert "\r" not in done.stderr
    assert done.stderr.strip().endswith("1 cell: unscored 1 -> clean (exit 0)")
