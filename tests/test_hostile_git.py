"""End to end, as the attack: what a seat (or the code a command grader tests) writes into
its worktree or the repository's configuration never makes brigade's own git run a program,
and never leaves the checkout's `git worktree list`, `git fsck` or `git gc` worse than
before. Issue 27, item 4 and the git part of item 1; runs the real `brigade` CLI with and
without the sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Project, git, git_workspace

from brigade import fs
from brigade.run import sandbox

AVAILABLE = sandbox.probe()
MODES = [
    "off",
    pytest.param(
        "required",
        marks=pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}"),
    ),
]


def marker_program(markers: Path, name: str) -> str:
    """A shell command that leaves `markers/name` behind and passes its input through."""
    return f"sh -c 'touch {markers}/{name}; cat'"


def plant_programs(repo: Path, markers: Path) -> None:
    """A repository configuration where every place git takes a program from names one that
    leaves a marker: filters, diff drivers, an external diff, fsmonitor, hooks, a pager."""
    hooks = markers.parent / "hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "post-index-change", "reference-transaction", "post-commit"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {markers}/hook-{hook}\n")
        (hooks / hook).chmod(0o755)
    settings = {
        "filter.evil.clean": marker_program(markers, "clean"),
        "filter.evil.smudge": marker_program(markers, "smudge"),
        "filter.evil.process": marker_program(markers, "process"),
        "filter.evil.required": "true",
        "diff.evil.textconv": marker_program(markers, "textconv"),
        "diff.evil.command": marker_program(markers, "diff-command"),
        "merge.evil.driver": marker_program(markers, "merge"),
        "diff.external": marker_program(markers, "external"),
        "core.fsmonitor": marker_program(markers, "fsmonitor"),
        "core.hooksPath": str(hooks),
        "core.pager": marker_program(markers, "pager"),
        "core.sshCommand": marker_program(markers, "ssh"),
    }
    for key, value in settings.items():
        git(repo, "config", key, value)


SEAT = """\
import os, pathlib, sys
# the worktree's own git folder, from its .git file (the seat runs no git itself)
git_dir = pathlib.Path(pathlib.Path(".git").read_text().split(":", 1)[1].strip())
pathlib.Path(".gitattributes").write_text("* filter=evil diff=evil merge=evil\\n")
pathlib.Path("README").write_text("changed by the seat\\n")
pathlib.Path("new.txt").write_text("new\\n")
for name, text in [
    ("config.worktree", "[core]\\n\\tfsmonitor = {fsmonitor}\\n"),
    ("locked", "the seat's\\n"),
]:
    try:
        (git_dir / name).write_text(text)
    except OSError:
        pass
print("done")
"""


def checkout_state(repo: Path) -> dict[str, str]:
    """What a run must leave as it found it: the worktree list, fsck's verdict, gc's."""
    fsck = subprocess.run(
        ["git", "fsck", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    return {
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "fsck": f"{fsck.returncode} {fsck.stdout}{fsck.stderr}",
    }


def gc_works(repo: Path) -> None:
    done = subprocess.run(["git", "gc", "-q"], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def writable_project(project: Project, mode: str, seat: str, command: str) -> None:
    git_workspace(project)
    script = project.root / "seat.py"
    script.write_text(seat)
    project.write_manifest(
        [
            {
                "id": "attack",
                "prompt": "do it",
                "graders": [{"type": "command", "command": ["sh", "-c", command]}],
            }
        ],
        execution={"mode": "writable-worktree"},
    )
    project.write_roster({"agent": {"cli": f"exec:{sys.executable} {script}"}}, sandbox=mode)


@pytest.mark.parametrize("mode", MODES)
def test_no_program_the_repository_or_the_worktree_names_runs_outside(
    project: Project, mode: str
) -> None:
    markers = project.root / "markers"
    markers.mkdir()
    writable_project(
        project,
        mode,
        SEAT.replace("{fsmonitor}", marker_program(markers, "worktree-fsmonitor")),
        "test -f new.txt",
    )
    before = checkout_state(project.workspace)
    original = (project.workspace / ".git" / "config").read_bytes()
    # planted after the checkout's commit: the user's own git ran none of them
    plant_programs(project.workspace, markers)
    planted = (project.workspace / ".git" / "config").read_bytes()
    result = project.run()
    assert "Traceback" not in result.stderr
    receipt = project.receipt("attack:agent:1")
    assert receipt["state"] == "accepted", result.stderr
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(markers)) == []
    assert (project.workspace / ".git" / "config").read_bytes() == planted
    # the patch is the seat's changes as written, no filter between
    patch = (Path(receipt["run_dir"]) / "changes.patch").read_text()
    assert "+changed by the seat" in patch and "+* filter=evil" in patch
    # the checkout as it was (the test's own git would run what the configuration names)
    (project.workspace / ".git" / "config").write_bytes(original)
    assert checkout_state(project.workspace) == before
    gc_works(project.workspace)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a checkout owned by another user")
def test_the_users_safe_directory_still_counts(project: Project, tmp_path: Path) -> None:
    """brigade's git reads no global configuration, but the `safe.directory` entries of the
    user's own: a checkout of another user that the user's git accepts is accepted still."""
    writable_project(project, "off", SEAT.replace("{fsmonitor}", "false"), "test -f new.txt")
    for folder, _, names in os.walk(project.workspace):
        for path in [folder, *(os.path.join(folder, name) for name in names)]:
            os.lchown(path, 65534, 65534)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {project.workspace}\n")
    result = project.run(HOME=str(home))
    assert project.receipt("attack:agent:1")["state"] == "accepted", result.stderr
    assert result.returncode == 0, result.stderr
    listed = subprocess.run(
        ["git", "worktree", "list"],
        cwd=project.workspace,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )
    assert listed.stdout.count("\n") == 1, listed.stderr


LOCK_AND_COMMIT = """\
git_dir=$(sed -n 's/^gitdir: //p' .git)
echo "mine" > "$git_dir/locked"
echo new > new.txt
git add -A && git -c user.name=s -c user.email=s@s commit -qm "its own" && {after}
"""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", ["seat", "grader"])
def test_a_locked_worktree_with_commits_of_its_own_leaves_the_checkout_clean(
    project: Project, mode: str, who: str
) -> None:
    """`locked` written into the worktree's git folder, and a HEAD naming a commit of the
    seat's (in the sandbox: in its private objects folder, gone with it): the registration
    goes all the same, and `git worktree list`, `fsck` and `gc` are as before."""
    if who == "seat":
        script = LOCK_AND_COMMIT.format(after="echo done")
        seat = f"import subprocess\nsubprocess.run(['sh', '-c', {script!r}], check=True)\n"
        command = "test -f new.txt"
    else:
        seat = SEAT.replace("{fsmonitor}", "false")
        command = LOCK_AND_COMMIT.format(after="test -f new.txt")
    writable_project(project, mode, seat, command)
    before = checkout_state(project.workspace)
    result = project.run()
    assert "Traceback" not in result.stderr
    receipt = project.receipt("attack:agent:1")
    assert receipt["state"] == "accepted", (result.stderr, receipt)
    assert checkout_state(project.workspace) == before
    gc_works(project.workspace)


# a seat that leaves a repository of its own inside its worktree, configured to run a
# program whenever git looks at it (a filter of its files, fsmonitor), with files at the
# paths the outer repository tracks (git asks the nested one whether it is modified)
NESTED = """\
import os, pathlib, subprocess, sys
env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
env.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@a", GIT_COMMITTER_NAME="a",
           GIT_COMMITTER_EMAIL="a@a")
sub = pathlib.Path("sub")
sub.mkdir()
(sub / "f.txt").write_text("one\\n")
for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
    subprocess.run(["git", *args], cwd=sub, env=env, check=True, capture_output=True)
with open(sub / ".git" / "config", "a") as config:
    config.write('[filter "evil"]\\n\\tclean = "{clean}"\\n')
    config.write('[core]\\n\\tfsmonitor = "{fsmonitor}"\\n')
(sub / ".gitattributes").write_text("* filter=evil\\n")
(sub / "README").write_text("x\\n")
(sub / "f.txt").write_text("two\\n")
pathlib.Path("README").write_text("changed by the seat\\n")
print("done")
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_repository_the_seat_nests_in_its_worktree_runs_nothing_outside(
    project: Project, mode: str
) -> None:
    markers = project.root / "markers"
    markers.mkdir()
    seat = NESTED.replace("{clean}", f"touch {markers}/nested-clean && cat").replace(
        "{fsmonitor}", f"touch {markers}/nested-fsmonitor"
    )
    writable_project(project, mode, seat, "grep -q seat README")
    result = project.run()
    assert "Traceback" not in result.stderr
    assert project.states() == {"attack:agent:1": "accepted"}, result.stderr
    assert sorted(os.listdir(markers)) == []
    patch = (Path(project.receipt("attack:agent:1")["run_dir"]) / "changes.patch").read_text()
    assert "+changed by the seat" in patch


# a seat that leaves files at names git refuses to hold (they would alias `.git` on
# another file system): its cell is graded on the rest of its work, never an apparatus fault
UNHOLDABLE = """\
import pathlib
pathlib.Path(".git.").write_text("x\\n")
pathlib.Path("GIT~1").mkdir()
pathlib.Path("GIT~1", "x").write_text("x\\n")
pathlib.Path("README").write_text("changed by the seat\\n")
print("done")
"""


def test_files_git_cannot_hold_are_left_out_of_the_changes(project: Project) -> None:
    writable_project(project, "off", UNHOLDABLE, "grep -q seat README && test ! -e .git.")
    result = project.run()
    assert "Traceback" not in result.stderr
    assert project.states() == {"attack:agent:1": "accepted"}, result.stderr
    run = Path(project.receipt("attack:agent:1")["run_dir"])
    patch = (run / "changes.patch").read_text()
    assert "+changed by the seat" in patch
    assert ".git." not in patch and "GIT~1" not in patch
    assert json.loads((run / "run.json").read_text())["changed_files"] == ["README"]


# a seat that nests folders deeper than a path may be long (and than Python's recursion
# limit) in its worktree, its worktree's git folder, its private objects folder and its
# own run folder; it also says where its worktree is
DEEP = """\
import os, subprocess, sys
def nest(where):
    if not where:
        return
    os.chdir(where)
    for _ in range(3000):
        os.mkdir("d")
        os.chdir("d")
    open("f", "w").write("x")
top = os.getcwd()
git_dir = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True,
                         text=True).stdout.strip()
for where in (top, git_dir, os.environ.get("GIT_OBJECT_DIRECTORY"),
              os.environ["BRIGADE_RUN_DIR"]):
    nest(where)
os.chdir(top)
print(top)
"""


@pytest.mark.parametrize("mode", MODES)
def test_folders_nested_past_any_path_length_are_removed(project: Project, mode: str) -> None:
    writable_project(project, mode, DEEP, "true")
    try:
        result = project.run()
        assert "Traceback" not in result.stderr, result.stderr[-2000:]
        assert project.states() == {"attack:agent:1": "accepted"}, result.stderr[-2000:]
        run = Path(project.receipt("attack:agent:1")["run_dir"])
        worktree = Path((run / "final.txt").read_text().strip())
        assert worktree.name.startswith("brigade-worktree-") and not worktree.exists()
        assert checkout_state(project.workspace)["worktrees"].count("worktree ") == 1
    finally:
        fs.remove(project.out)  # the seat's own folder, as deep as it made it


# two seats on one case at once: one commits its work and waits, the other looks for the
# first one's commit in the git folders of the other worktrees of its repository
COMMITS = """\
import os, subprocess, sys, time
env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a",
       "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a"}
open("work.txt", "w").write("mine\\n")
subprocess.run(["git", "add", "work.txt"], env=env, check=True)
subprocess.run(["git", "commit", "-qm", "SECRET-PLAN"], env=env, check=True)
time.sleep(6)
print("committed")
"""
LOOKS = """\
import glob, os, subprocess, time
time.sleep(3)
common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                        capture_output=True, text=True).stdout.strip()
seen = []
for path in glob.glob(os.path.join(common, "worktrees", "*", "logs", "HEAD")):
    try:
        seen.append("SECRET-PLAN" in open(path).read())
    except OSError:
        pass
print("seen" if any(seen) else "nothing")
"""


@pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}")
def test_a_seat_sees_nothing_of_the_other_worktrees_of_its_repository(project: Project) -> None:
    git_workspace(project)
    commits, looks = project.root / "commits.py", project.root / "looks.py"
    commits.write_text(COMMITS)
    looks.write_text(LOOKS)
    project.write_roster(
        {
            "commits": {"cli": f"exec:{sys.executable} {commits}"},
            "looks": {"cli": f"exec:{sys.executable} {looks}"},
        },
        sandbox="required",
    )
    project.write_manifest(
        [{"id": "c", "prompt": "work"}],
        seats=("commits", "looks"),
        execution={"mode": "writable-worktree"},
    )
    done = project.run("-n", "2")
    assert done.returncode == 0, done.stderr
    run = Path(project.receipt("c:looks:1")["run_dir"])
    assert (run / "final.txt").read_text() == "nothing\n"
    assert (Path(project.receipt("c:commits:1")["run_dir"]) / "final.txt").read_text() == (
        "committed\n"
    )
