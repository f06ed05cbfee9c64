"""End to end: a writable run stores its changes as run/changes.patch; command graders run
over them re-applied to a fresh worktree of the base commit, at the first grading and at
every regrade, without the agent; a tampered patch is refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from conftest import Project, git, git_workspace

# an exec seat that leaves every kind of change: an edited, a deleted, a new, an ignored
# and a binary file, and a commit of its own
SEAT = textwrap.dedent(
    """\
    import os, subprocess, sys
    sys.stdin.read()
    with open(os.environ["FAKE_AGENT_LOG"], "a") as log:
        log.write(os.environ["BRIGADE_COORDINATE"] + "\\n")
    def git(*args):
        subprocess.run(["git", "-c", "user.name=s", "-c", "user.email=s@s", *args], check=True)
    with open("src/app.py", "w") as f:
        f.write("print('v2')\\n")
    git("commit", "-qam", "the seat's own commit")
    os.remove("README")
    os.makedirs("notes", exist_ok=True)
    with open("notes/new.txt", "w") as f:
        f.write("new\\n")
    with open("build.log", "w") as f:
        f.write("ignored by .gitignore\\n")
    with open("blob.bin", "wb") as f:
        f.write(bytes(range(256)))
    print("changed")
    """
)
# what the command grader checks in the folder it runs in: the seat's changes, all there
CHECK = textwrap.dedent(
    """\
    import hashlib, os, sys
    want = {
        "src/app.py": "print('{version}')\\n",
        "notes/new.txt": "new\\n",
        "build.log": "ignored by .gitignore\\n",
    }
    for path, text in want.items():
        if open(path).read() != text:
            print(path, "differs"); sys.exit(1)
    assert open("blob.bin", "rb").read() == bytes(range(256)), "blob.bin"
    assert not os.path.exists("README"), "README is back"
    print("all there in", os.path.basename(os.path.dirname(os.getcwd())) or "/")
    """
)


def writable_project(project: Project, version: str = "v2") -> None:
    git_workspace(project)
    (project.workspace / ".gitignore").write_text("*.log\n")
    git(project.workspace, "add", "-A")
    git(project.workspace, "commit", "-qm", "ignore logs")
    seat = project.root / "seat.py"
    seat.write_text(SEAT)
    check = project.root / "check.py"
    check.write_text(CHECK.replace("{version}", version))
    project.write_roster(
        {"agent": {"cli": f"exec:{{python}} {seat}"}, "plain": {"cli": "exec:true"}}
    )
    project.write_manifest(
        [{"id": "change", "prompt": "change things"}],
        execution={"mode": "writable-worktree"},
        graders=[{"type": "command", "command": [sys.executable, str(check)]}],
    )


def test_the_patch_is_stored_and_graded_in_a_fresh_worktree(project: Project) -> None:
    writable_project(project)
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.launches() == 1
    receipt = project.receipt("change:agent:1")
    assert receipt["state"] == "accepted", receipt["graders"]
    run_dir = Path(receipt["run_dir"])
    patch = (run_dir / "changes.patch").read_bytes()
    assert receipt["changes_digest"] == "sha256:" + hashlib.sha256(patch).hexdigest()
    # the patch names exactly the files the run counts as changed
    run = json.loads((run_dir / "run.json").read_text())
    named = sorted(
        {
            line.split(" b/", 1)[1]
            for line in patch.decode().splitlines()
            if line.startswith("diff --git ")
        }
    )
    assert run["changed_files"] == ["blob.bin", "build.log", "notes/new.txt", "src/app.py"]
    assert run["workspace_snapshot"]["deleted"] == ["README"]
    assert named == sorted([*run["changed_files"], "README"])
    assert b"GIT binary patch" in patch
    [result] = receipt["graders"]
    assert result["schema"] == "brigade.grader_result.v2"
    assert result["exit_code"] == 0
    assert result["output_refs"][1] == str((run_dir / "changes.patch").relative_to(project.out))
    stdout = project.out / result["logs"]["stdout"]
    assert stdout.read_text().startswith("all there in ")
    # the grading worktree is gone, and git forgot it
    assert git(project.workspace, "worktree", "list").count("\n") == 1


def test_editing_the_command_reruns_the_tests_on_every_stored_change(project: Project) -> None:
    writable_project(project)
    project.write_manifest(
        [{"id": "change", "prompt": "change things"}],
        execution={"mode": "writable-worktree"},
        trials=2,
        graders=[{"type": "command", "command": [sys.executable, str(project.root / "check.py")]}],
    )
    assert project.run().returncode == 0
    (project.root / "check3.py").write_text(CHECK.replace("{version}", "v3"))
    project.write_manifest(
        [{"id": "change", "prompt": "change things"}],
        execution={"mode": "writable-worktree"},
        trials=2,
        graders=[{"type": "command", "command": [sys.executable, str(project.root / "check3.py")]}],
    )
    done = project.run()
    assert done.returncode == 1, done.stderr
    assert project.states() == {"change:agent:1": "rejected", "change:agent:2": "rejected"}
    for receipt in project.receipts().values():
        assert "reused_run" in receipt  # zero seat launches: both runs were reused
        assert receipt["graders"][0]["detail"].startswith(
            'exit status 1, expected 0; the output ends "src/app.py differs"'
        )
        source = project.out / "cells" / receipt["reused_run"]["cell_id"] / "cell.json"
        assert receipt["changes_digest"] == json.loads(source.read_text())["changes_digest"]
    assert project.launches() == 2


def test_brigade_regrade_reruns_a_command_on_the_reapplied_patch(project: Project) -> None:
    writable_project(project)
    assert project.run().returncode == 0
    check = project.root / "check.py"
    check.write_text(CHECK.replace("{version}", "v3"))  # the test itself changed on disk
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 1, done.stderr
    assert project.states() == {"change:agent:1": "rejected"}
    check.write_text(CHECK.replace("{version}", "v2"))
    assert project.brigade("regrade", str(project.out)).returncode == 0
    assert project.states() == {"change:agent:1": "accepted"}
    assert project.launches() == 1


def test_a_grader_error_cell_is_regraded_by_the_next_run(project: Project) -> None:
    writable_project(project)
    script = project.root / "later.sh"  # not there yet: the command cannot start
    project.write_manifest(
        [{"id": "change", "prompt": "change things"}],
        execution={"mode": "writable-worktree"},
        graders=[{"type": "command", "command": [str(script)]}],
    )
    assert project.run().returncode == 3
    receipt = project.receipt("change:agent:1")
    assert receipt["state"] == "grader_error"
    assert receipt["graders"][0]["detail"].startswith("the command could not start: ")
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {project.root / 'check.py'}\n")
    script.chmod(0o755)
    done = project.doit()
    assert done.returncode == 0, done.stderr
    after = project.receipt("change:agent:1")
    assert (after["state"], after["attempt"]) == ("accepted", 1)
    assert project.launches() == 1


def test_a_tampered_patch_is_refused_and_the_receipt_untouched(project: Project) -> None:
    writable_project(project)
    assert project.run().returncode == 0
    receipt_file = project.cell_dir("change:agent:1") / "cell.json"
    before = receipt_file.read_bytes()
    patch = Path(project.receipt("change:agent:1")["run_dir"]) / "changes.patch"
    patch.write_bytes(patch.read_bytes().replace(b"print('v2')", b"print('v3')"))
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "change:agent:1: changes digest mismatch: " in done.stderr
    assert receipt_file.read_bytes() == before
    patch.unlink()
    gone = project.brigade("regrade", str(project.out))
    assert gone.returncode == 2
    assert f"{patch} is missing" in gone.stderr
    assert receipt_file.read_bytes() == before


def test_a_tampered_patch_is_not_reused(project: Project) -> None:
    writable_project(project)
    assert project.run().returncode == 0
    patch = Path(project.receipt("change:agent:1")["run_dir"]) / "changes.patch"
    patch.write_bytes(b"")
    (project.root / "check3.py").write_text(CHECK.replace("{version}", "v3"))
    project.write_manifest(
        [{"id": "change", "prompt": "change things"}],
        execution={"mode": "writable-worktree"},
        graders=[{"type": "command", "command": [sys.executable, str(project.root / "check3.py")]}],
    )
    done = project.run()
    assert "not reusing a seat run" in done.stderr
    assert "changes digest mismatch" in done.stderr
    receipt = project.receipt("change:agent:1")
    assert "reused_run" not in receipt  # the seat ran again
    assert project.launches() == 2


def test_a_read_only_regrade_runs_the_command_in_the_workspace_as_it_is_now(
    project: Project,
) -> None:
    (project.workspace / "status").write_text("green\n")
    code = "import sys; sys.exit(0 if open('status').read() == 'green\\n' else 1)"
    project.write_manifest(
        [{"id": "look", "prompt": "answer: ok"}],
        graders=[{"type": "command", "command": [sys.executable, "-c", code]}],
    )
    assert project.run().returncode == 0
    assert project.launches() == 1
    (project.workspace / "status").write_text("red\n")
    assert project.brigade("regrade", str(project.out)).returncode == 1
    assert project.states() == {"look:agent:1": "rejected"}
    assert project.launches() == 1
    assert "changes_digest" not in project.receipt("look:agent:1")


def test_runs_of_the_original_tool_without_a_patch_are_a_grader_error(project: Project) -> None:
    writable_project(project)
    assert project.run().returncode == 0
    receipt_file = project.cell_dir("change:agent:1") / "cell.json"
    receipt: dict[str, Any] = json.loads(receipt_file.read_text())
    del receipt["changes_digest"]  # as recorded before brigade kept a patch
    receipt_file.write_text(json.dumps(receipt))
    (Path(receipt["run_dir"]) / "changes.patch").unlink()
    assert project.brigade("regrade", str(project.out)).returncode == 3
    after = project.receipt("change:agent:1")
    assert after["state"] == "grader_error"
    assert after["graders"][0]["detail"] == (
        "this run stored no changes.patch (it was recorded before brigade kept one): "
        "its changes cannot be re-applied for the command"
    )


def test_the_fixit_example_end_to_end(repo_copy: Path) -> None:
    """manifests/fixit.yaml as README shows it: a fixture repository, agents that fix its
    failing test (one hastily), graded by pytest over their re-applied changes. The
    documented command, as README gives it right after the set-up: it installs pytest
    (here already there: pip installs nothing) and runs the battery."""
    from conftest import brigade_command

    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "checkout"]):
        git(repo_copy, *argv)
    import shlex
    import subprocess

    from test_readme import block_after

    install, run = block_after("fixit-command").split(" && ")
    assert shlex.split(install) == [".venv/bin/pip", "install", "pytest"]
    documented = shlex.split(run)
    assert documented[0] == ".venv/bin/brigade"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "pytest"]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stderr
    command = [*brigade_command(), *documented[1:]]

    done = subprocess.run(command, cwd=repo_copy, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    out = repo_copy / ".brigade" / "evals" / "fixit"
    plan = json.loads((out / "plan.json").read_text())
    receipts = {
        cell["coordinate"]: json.loads((out / "cells" / cell["cell_id"] / "cell.json").read_text())
        for cell in plan["cells"]
    }
    fixer, hasty = receipts["fix-add:fixer:1"], receipts["fix-add:hasty:1"]
    assert (fixer["state"], fixer["score"]) == ("accepted", 1.0)
    assert (hasty["state"], hasty["score"]) == ("rejected", 0.666667)
    assert hasty["graders"][0]["detail"] == (
        "2 of 3 test(s) passed (1 failed, 0 error(s), 0 skipped and not counted); "
        "exit status 1, expected 0"
    )
    assert hasty["graders"][0]["component_checks"][1]["name"] == "test_calc.test_negative"
    patch = (Path(fixer["run_dir"]) / "changes.patch").read_text()
    assert "-    return a - b\n+    return a + b\n" in patch
    assert patch.startswith("diff --git a/calc.py b/calc.py\n")
    # the checkout itself is as it was
    assert "return a - b" in (repo_copy / "manifests" / "fixit" / "calc.py").read_text()
    # as README says, `brigade show` names the failed test (regression: only --json did),
    # and so does the cell's report page
    shown = subprocess.run(
        [*brigade_command(), "show", str(out), "fix-add:hasty:1"],
        cwd=repo_copy,
        capture_output=True,
        text=True,
        timeout=60,
    )
    graders = shown.stdout.split("graders:\n", 1)[1].split("\n")[:3]
    assert graders == [
        "  command:0  scored 0.666667  2 of 3 test(s) passed (1 failed, 0 error(s), 0 skipped "
        "and not counted); exit status 1, expected 0",
        "    failed  exit status: exit status 1, expected 0",
        "    failed  test_calc.test_negative: failed: assert 2 == 0 + where 2 = add(-1, 1)",
    ]
    page = out / "report" / "index_files" / "cells" / f"{hasty['cell_id'][:2]}.html"
    assert (
        '<ul class="checks"><li>failed: exit status: exit status 1, expected 0</li>'
        "<li>failed: test_calc.test_negative: failed: assert 2 == 0 + where 2 = add(-1, 1)"
        "</li></ul>"
    ) in page.read_text()


def test_a_fifo_in_place_of_the_patch_is_refused_not_waited_on(project: Project) -> None:
    """Regression: `git apply` (and the digest) read a FIFO there forever."""
    writable_project(project)
    assert project.run().returncode == 0
    receipt_file = project.cell_dir("change:agent:1") / "cell.json"
    before = receipt_file.read_bytes()
    patch = Path(project.receipt("change:agent:1")["run_dir"]) / "changes.patch"
    patch.unlink()
    os.mkfifo(patch)
    done = project.brigade("regrade", str(project.out), timeout=60)
    assert done.returncode == 2
    digest = project.receipt("change:agent:1")["changes_digest"]
    assert done.stderr == (
        f"brigade: change:agent:1: changes digest mismatch: {patch} is missing, the receipt "
        f"records {digest}; the stored changes changed since the seat made them (restore "
        "them, or delete the cell folder to run it again)\n"
    )
    assert receipt_file.read_bytes() == before


def test_a_base_commit_missing_at_regrade_says_what_grades_again(project: Project) -> None:
    """Regression: the grader_error advised --retry-transient, which never touches a
    grader_error cell (it runs seats again)."""
    writable_project(project)
    assert project.run().returncode == 0
    head = project.receipt("change:agent:1")
    shutil.rmtree(project.workspace / ".git")  # another repository, without that commit
    git(project.workspace, "init", "-q")
    git(project.workspace, "add", "-A")
    git(project.workspace, "commit", "-qm", "other history")
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("change:agent:1")
    assert receipt["state"] == "grader_error"
    snapshot = json.loads((Path(head["run_dir"]) / "run.json").read_text())["workspace_snapshot"]
    assert receipt["graders"][0]["detail"] == (
        f"cannot re-create the run's worktree: commit {snapshot['head']} is not in the git "
        f"checkout at {project.workspace} here (fetch it there, then run `brigade regrade` "
        "or the run again: it grades grader_error cells again)"
    )
