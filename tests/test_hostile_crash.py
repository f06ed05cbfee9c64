"""End to end, as the attack: `kill -9` of brigade while a command grader runs (or while the
seat runs) leaves a worktree in the temporary folder and its registration in the user's
checkout; the next run removes them (only what brigade's ledger names, never a worktree
of the user's), so `git worktree list`, `git fsck` and `git gc` are as before. Issue 27,
item 4."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project, git, git_workspace, wait_for
from reliability import start_brigade_run, start_doit
from test_hostile_git import checkout_state, gc_works

from brigade.run import sandbox, worktree

AVAILABLE = sandbox.probe()

SEAT = """\
import os, pathlib, sys, time
with open(sys.argv[1], "a") as log:
    log.write("launch\\n")
pathlib.Path("new.txt").write_text("new\\n")
if not os.path.exists(sys.argv[2]):
    pathlib.Path(sys.argv[3]).touch()
    time.sleep(60)
print("done")
"""


def crash_project(project: Project, tmp: Path, slow: str, mode: str = "off") -> dict[str, Path]:
    """A writable run whose seat (`slow="seat"`) or command grader (`slow="grader"`) waits
    to be killed unless `fast` exists; returns the paths the test watches (in a folder
    the seat and the grader may write, in the sandbox too)."""
    git_workspace(project)
    box = project.root / "box"
    box.mkdir()
    paths = {name: box / name for name in ("launches", "fast", "waiting")}
    script = box / "seat.py"
    script.write_text(SEAT)
    seat_args = [paths["launches"], paths["fast"] if slow == "seat" else script]
    seat_args.append(paths["waiting"])
    command = "test -f new.txt"
    if slow == "grader":
        command = (
            f"test -f new.txt && {{ test -f {paths['fast']} || "
            f"{{ touch {paths['waiting']}; sleep 60; }}; }}"
        )
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": "do it",
                "graders": [{"type": "command", "command": ["sh", "-c", command]}],
            }
        ],
        execution={"mode": "writable-worktree"},
    )
    cli = f"exec:{sys.executable} {script} " + " ".join(map(str, seat_args))
    seat: dict[str, object] = {"cli": cli}
    if mode != "off":
        seat["sandbox"] = {"mode": mode, "writable": [str(box)]}
    project.write_roster({"agent": seat})
    tmp.mkdir()
    return paths


def leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("brigade-worktree-"))


def killed(project: Project, tmp: Path, paths: dict[str, Path], door: str = "brigade") -> None:
    """Start a run and kill -9 it (brigade and all it started) once the slow part waits."""
    start = start_doit if door == "doit" else start_brigade_run
    running = start(project, TMPDIR=str(tmp))
    try:
        wait_for(paths["waiting"].exists, 60, "the slow part waiting")
    finally:
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()


def kill_then_resume(
    project: Project, tmp_path: Path, slow: str, door: str = "brigade", mode: str = "off"
) -> dict[str, Path]:
    tmp = tmp_path / "tmp"
    paths = crash_project(project, tmp, slow, mode)
    before = checkout_state(project.workspace)
    killed(project, tmp, paths, door)
    # what the crash left: the folder, and its registration in the checkout
    assert leftovers(tmp)
    assert checkout_state(project.workspace) != before
    paths["fast"].touch()
    if door == "doit":
        result = project.doit(TMPDIR=str(tmp))
    else:
        result = project.run(TMPDIR=str(tmp))
    assert "Traceback" not in result.stderr
    assert "removed 1 worktree(s) left by a run that was killed" in result.stderr
    assert project.receipt("c:agent:1")["state"] == "accepted", result.stderr
    assert leftovers(tmp) == []
    assert checkout_state(project.workspace) == before
    assert not (project.out / worktree.LEDGER_DIR).exists() or not os.listdir(
        project.out / worktree.LEDGER_DIR
    )
    gc_works(project.workspace)
    return paths


@pytest.mark.parametrize(
    "door, mode",
    [
        ("brigade", "off"),
        ("doit", "off"),
        pytest.param(
            "brigade",
            "required",
            marks=pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}"),
        ),
    ],
)
def test_a_kill_during_a_command_grader_leaves_no_worktree_after_the_next_run(
    project: Project, tmp_path: Path, door: str, mode: str
) -> None:
    """... and the resume runs a new attempt (the resume contract) that reuses the killed
    attempt's finished seat run instead of running the seat again."""
    paths = kill_then_resume(project, tmp_path, "grader", door, mode)
    assert len(paths["launches"].read_text().splitlines()) == 1
    assert project.attempts("c:agent:1") == ["attempt-001", "attempt-002"]
    receipt = project.receipt("c:agent:1")
    assert receipt["attempt"] == 2 and receipt["acceptance"]["graders_passed"] == 1
    assert receipt["reused_run"]["cell_id"] == receipt["cell_id"]
    assert receipt["reused_run"]["attempt"] == 1


def test_a_kill_during_a_seat_run_leaves_no_worktree_after_the_next_run(
    project: Project, tmp_path: Path
) -> None:
    paths = kill_then_resume(project, tmp_path, "seat")
    assert len(paths["launches"].read_text().splitlines()) == 2  # the killed one ran again


def test_a_forged_ledger_record_never_removes_a_worktree_of_the_users(
    project: Project, tmp_path: Path
) -> None:
    """Records naming a worktree of the user's (outside the temporary folder, or not named as
    brigade names its own) are dropped, the worktree left as it is."""
    git_workspace(project)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    mine = tmp_path / "brigade-worktree-mine"
    other = tmp / "feature"
    git(project.workspace, "worktree", "add", "-q", "--detach", str(mine))
    git(project.workspace, "worktree", "add", "-q", "--detach", str(other))
    before = checkout_state(project.workspace)
    ledger = project.out / worktree.LEDGER_DIR
    ledger.mkdir(parents=True)
    common = str((project.workspace / ".git").resolve())
    host = os.uname().nodename
    for root in (mine, other):
        record = {"root": str(root), "common_dir": common, "host": host}
        (ledger / f"{root.name}.json").write_text(json.dumps(record))
    (ledger / "brigade-worktree-x.json").write_text("[" * 100_000)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from brigade.run import worktree; print(worktree.remove_leftovers(Path(sys.argv[1])))",
            str(project.out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert done.stdout.strip() == "0", done.stderr
    assert os.listdir(ledger) == []
    assert mine.is_dir() and other.is_dir()
    assert checkout_state(project.workspace) == before


def tamper_final(rdir: Path) -> None:
    (rdir / "final.txt").write_text("another answer\n")


def tamper_patch(rdir: Path) -> None:
    with open(rdir / "changes.patch", "a") as handle:
        handle.write("\n")


def cut_record(rdir: Path) -> None:
    data = (rdir / "seat_run.json").read_bytes()
    (rdir / "seat_run.json").write_bytes(data[: len(data) // 2])


def forge_record(rdir: Path) -> None:
    record = json.loads((rdir / "seat_run.json").read_text())
    record["attempt"] = 2
    (rdir / "seat_run.json").write_text(json.dumps(record))


def drop_snapshot(rdir: Path) -> None:
    for path in sorted((rdir / "changes").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()


@pytest.mark.parametrize(
    "tamper", [tamper_final, tamper_patch, cut_record, forge_record, drop_snapshot]
)
def test_a_finished_seat_run_changed_since_runs_again(
    project: Project, tmp_path: Path, tamper: Callable[[Path], None]
) -> None:
    """A seat run whose record is cut, forged, or whose files no longer have the digests
    it recorded, is not graded: the seat runs again in a new attempt."""
    tmp = tmp_path / "tmp"
    paths = crash_project(project, tmp, "grader")
    killed(project, tmp, paths)
    rdir = project.cell_dir("c:agent:1") / "attempts" / "attempt-001" / "run"
    assert (rdir / "seat_run.json").exists()
    tamper(rdir)
    paths["fast"].touch()
    result = project.run(TMPDIR=str(tmp))
    assert "Traceback" not in result.stderr
    assert len(paths["launches"].read_text().splitlines()) == 2
    receipt = project.receipt("c:agent:1")
    assert receipt["attempt"] == 2 and receipt["state"] == "accepted", result.stderr
