"""End to end, each written as the attack: a hostile seat (or the code under test of a
command grader) plants files where brigade reads or writes its own after the seat ended
(issue 27, items 1, 2, 3 and 12). Runs the real `brigade`; every test asserts that the
victim files are byte-identical, and that the run ends with its summary and exit code."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import Project, git_workspace

from brigade import fs
from brigade.run import sandbox

AVAILABLE = sandbox.probe()
# every attack runs with the sandbox off (the seat can write anywhere the user can) and,
# where bwrap works here, required
MODES = [
    "off",
    pytest.param(
        "required",
        marks=pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}"),
    ),
]


def seat_script(project: Project, name: str, text: str, mode: str) -> dict[str, str]:
    """A roster seat running the Python `text` (written beside the project)."""
    path = project.root / name
    path.write_text("import os, sys\nsys.stdin.read()\n" + text)
    return {"cli": f"exec:{{python}} {path}", "sandbox": mode}


def finished(project: Project, code: int = 0) -> dict[str, object]:
    """The run ended with a summary (every cell decided) and exit `code`."""
    done = project.run()
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    summary = project.summary()
    assert all(state != "running" for state in project.states().values())
    return summary


# --- item 3: untrusted JSON, one reader --------------------------------------------------

DEEP_USAGE = """\
with open(os.environ["BRIGADE_USAGE_FILE"], "w") as handle:
    handle.write("[" * 100000)
print("done")
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_usage_file_nested_100000_deep_is_ignored_with_a_note(
    project: Project, mode: str
) -> None:
    project.write_roster({"agent": seat_script(project, "deep.py", DEEP_USAGE, mode)})
    project.write_manifest(
        [{"id": "a", "prompt": "p"}], graders=[{"type": "regex_output", "pattern": "done"}]
    )
    finished(project)
    receipt = project.receipt("a:agent:1")
    assert receipt["state"] == "accepted"
    run = json.loads((Path(receipt["run_dir"]) / "run.json").read_text())
    assert run["usage"] is None
    assert run["notes"] == ["usage ignored: usage.json: nested deeper than 200 levels"]


# --- item 1: links in the run folder never redirect brigade's writes ---------------------

PLANTING = """\
run_dir = os.environ["BRIGADE_RUN_DIR"]
# its own folder, and the folder beside it where brigade keeps the run's files (reachable
# only without the sandbox)
for folder in (run_dir, os.path.join(run_dir, "..", "run")):
    for name, target in (
        ("changes.patch", os.environ["VICTIM"]),
        ("final.txt", os.environ["VICTIM"]),
        ("run.json", os.environ["VICTIM"]),
        ("seat_run.json", os.environ["VICTIM"]),
        ("changes", os.environ["CHECKOUT_GIT"]),
    ):
        try:
            os.symlink(target, os.path.join(folder, name))
        except OSError:
            pass
# changed files whose copies would land in the checkout's .git through `changes`
with open("description", "w") as handle:
    handle.write("chosen by the seat\\n")
with open("config", "w") as handle:
    handle.write("[filter \\"x\\"]\\n\\tclean = sh -c 'id > /tmp/pwned; cat'\\n")
print("done")
"""


def victims(project: Project) -> dict[str, bytes]:
    """The files an attack aims at: the user's note and the checkout's git folder."""
    found = {"victim.txt": (project.root / "victim.txt").read_bytes()}
    for path in sorted((project.workspace / ".git").rglob("*")):
        relative = path.relative_to(project.workspace).as_posix()
        # git's own bookkeeping of brigade's worktrees and the index come and go
        if path.is_file() and not relative.startswith((".git/worktrees", ".git/index")):
            if not relative.startswith(".git/logs"):
                found[relative] = path.read_bytes()
    return found


def writable(project: Project, text: str, mode: str) -> None:
    git_workspace(project)
    (project.root / "victim.txt").write_bytes(b"the user's own notes\n")
    project.write_roster({"agent": seat_script(project, "plant.py", text, mode)})
    project.write_manifest(
        [{"id": "a", "prompt": "p"}],
        execution={"mode": "writable-worktree"},
        graders=[{"type": "regex_output", "pattern": "done"}],
    )


@pytest.mark.parametrize("mode", MODES)
def test_links_a_seat_plants_redirect_none_of_brigades_writes(
    project: Project, mode: str
) -> None:
    writable(project, PLANTING, mode)
    before = victims(project)
    env = {"VICTIM": str(project.root / "victim.txt")}
    env["CHECKOUT_GIT"] = str(project.workspace / ".git")
    done = project.run(**env)
    assert "Traceback" not in done.stderr
    assert victims(project) == before
    assert not Path("/tmp/pwned").exists()
    receipt = project.receipt("a:agent:1")
    run_dir = Path(receipt["run_dir"])
    for name in ("final.txt", "run.json", "changes.patch", "seat_run.json"):
        assert not (run_dir / name).is_symlink()
    assert (run_dir / "changes" / "description").read_text() == "chosen by the seat\n"
    assert not (run_dir / "changes").is_symlink()
    assert project.summary()["schema"] == "brigade.eval_summary.v1"
    if mode == "required":
        # the sandbox shows the seat no folder of brigade's: its links were in its own
        assert done.returncode == 0, done.stderr
        assert receipt["state"] == "accepted"
        assert (run_dir.parent / "seat" / "final.txt").is_symlink()
    else:
        # without it the seat reached brigade's run folder: removed, the seat's failure
        assert done.returncode == 1, done.stderr
        assert receipt["state"] == "execution_error"
        assert "tampered with brigade's record" in receipt["failure_detail"]
        assert "run/final.txt" in receipt["failure_detail"]


# --- item 2: a folder where brigade writes a run file -----------------------------------

FOLDERS = """\
run_dir = os.environ["BRIGADE_RUN_DIR"]
for folder in (run_dir, os.path.join(run_dir, "..", "run")):
    for name in ("final.txt", "worker-results.json", "run.json", "transcript.json",
                 "seat_run.json"):
        try:
            os.makedirs(os.path.join(folder, name, "inside"))
        except OSError:
            pass
os.makedirs(os.environ["BRIGADE_USAGE_FILE"], exist_ok=True)
print("done")
"""


@pytest.mark.parametrize("mode", MODES)
def test_folders_where_brigade_writes_run_files_end_in_a_verdict(
    project: Project, mode: str
) -> None:
    project.write_roster({"agent": seat_script(project, "folders.py", FOLDERS, mode)})
    project.write_manifest(
        [{"id": "a", "prompt": "p"}], graders=[{"type": "regex_output", "pattern": "done"}]
    )
    code = 0 if mode == "required" else 1
    finished(project, code)
    receipt = project.receipt("a:agent:1")
    run_dir = Path(receipt["run_dir"])
    assert (run_dir / "final.txt").read_text() == "done\n"
    assert json.loads((run_dir / "run.json").read_text())["schema"] == "brigade.run.v1"
    if mode == "required":
        assert receipt["state"] == "accepted"
    else:
        assert receipt["state"] == "execution_error"
        for name in ("final.txt", "worker-results.json", "run.json", "seat_run.json"):
            assert f"run/{name}" in receipt["failure_detail"]
    # the next run finds the cell decided: nothing runs again, the same exit code
    again = project.run()
    assert again.returncode == code, again.stderr
    assert project.receipt("a:agent:1")["attempt"] == 1


# --- item 12: the code under test against a command grader's own files ------------------

SABOTAGE = """\
import os, shutil
folder = os.environ["BRIGADE_GRADER_DIR"]
# its own folder, and the grader's folder around it where brigade keeps its logs (reachable
# only without the sandbox)
for where in (folder, os.path.dirname(folder)):
    for name, victim in (("stderr.log", None), ("stdout.log", os.environ["VICTIM"])):
        path = os.path.join(where, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
            if victim is None:
                os.makedirs(os.path.join(path, "inside"))
            else:
                os.symlink(victim, path)
        except OSError:
            pass
print("tests passed")
"""


@pytest.mark.parametrize("mode", MODES)
def test_the_code_under_test_cannot_break_its_grading_or_a_regrade(
    project: Project, mode: str
) -> None:
    victim = project.root / "victim.txt"
    victim.write_bytes(b"the user's own notes\n")
    sabotage = project.root / "sabotage.py"
    sabotage.write_text(SABOTAGE)
    project.write_roster({"agent": seat_script(project, "fine.py", 'print("fine")\n', mode)})
    project.write_manifest(
        [{"id": "a", "prompt": "p"}],
        graders=[{"type": "command", "command": ["{python}", str(sabotage)]}],
    )
    env = {"VICTIM": str(victim)}
    done = project.run(**env)
    assert done.returncode == 0, done.stderr
    for _ in range(2):  # every regrade after it grades the same
        again = project.brigade("regrade", str(project.out), **env)
        assert again.returncode == 0, again.stderr
        assert "Traceback" not in again.stderr
        receipt = project.receipt("a:agent:1")
        assert receipt["state"] == "accepted", receipt["graders"]
        assert victim.read_bytes() == b"the user's own notes\n"
    assert all(state != "running" for state in project.states().values())
    assert project.summary()["schema"] == "brigade.eval_summary.v1"


def test_a_folder_nested_past_any_path_length_is_removed_without_following_links(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / ".rm-1").mkdir()  # a name the removal itself uses, taken
    (root / ".rm-1" / "x").write_text("x")
    here = os.open(root, os.O_RDONLY)
    try:
        for _ in range(2500):  # deeper than a path may be long, than Python recurses
            os.symlink(outside, "link", dir_fd=here)
            os.mkdir("d", dir_fd=here)
            inner = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = inner
        os.mkdir("closed", dir_fd=here)
        os.chmod("closed", 0, dir_fd=here)
    finally:
        os.close(here)
    assert fs.remove(root)
    assert not root.exists()
    assert (outside / "kept.txt").read_text() == "kept\n"
