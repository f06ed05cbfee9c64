"""End to end: the run lock, kills and signals, safe export, writable worktrees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import FAKE_CLI, Project, alive, brigade_command, git, git_workspace, wait_for


def running_cells(project: Project) -> int:
    return sum(1 for p in project.out.glob("cells/*/cell.json") if '"running"' in p.read_text())


def test_second_run_on_the_same_output_is_refused(project: Project, tmp_path: Path) -> None:
    release = tmp_path / "release"
    project.write_manifest([{"id": "slow", "prompt": f"block: {release}\nanswer: done"}])
    first = project.doit_popen()
    try:
        wait_for(lambda: running_cells(project) == 1)
        second = project.doit()
        assert second.returncode == 2
        assert f"pid {first.pid}" in second.stderr
        assert second.stderr.count("\n") == 1
        via_cli = project.run()
        assert via_cli.returncode == 2
        assert f"pid {first.pid}" in via_cli.stderr
        err_file = tmp_path / "waiting.err"
        with open(err_file, "w") as err_handle:
            waiting = subprocess.Popen(
                [*brigade_command(), *project.run_args("--wait")],
                env=project.env(),
                stdout=subprocess.DEVNULL,
                stderr=err_handle,
                text=True,
            )
        # it says it waits (the first run still holds the lock: its seat is blocked)
        wait_for(lambda: f"waiting for pid {first.pid}" in err_file.read_text())
        assert running_cells(project) == 1
        release.touch()
        assert waiting.wait(timeout=60) == 0, err_file.read_text()
    finally:
        release.touch()
        first.wait(timeout=60)
    assert first.returncode == 0
    assert project.launches() == 1


def test_a_killed_run_leaves_no_blocking_lock(project: Project, tmp_path: Path) -> None:
    release = tmp_path / "release"
    project.write_manifest([{"id": "slow", "prompt": f"block: {release}\nanswer: done"}])
    first = project.doit_popen()
    wait_for(lambda: running_cells(project) == 1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    assert project.states() == {"slow:agent:1": "running"}
    release.touch()
    done = project.doit()
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("slow:agent:1")
    assert (receipt["state"], receipt["attempt"]) == ("unscored", 2)


def test_sigterm_stops_seats_and_leaves_cells_running(project: Project, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    release = tmp_path / "release"
    project.write_manifest(
        [{"id": "slow", "prompt": f"spawn: 120\nblock: {release}\nanswer: done"}]
    )
    run = project.doit_popen(FAKE_AGENT_PIDS=str(pids))
    wait_for(lambda: pids.exists() and pids.read_text().strip() != "")
    agent_pid = int(project.log.read_text().split()[1])
    child_pid = int(pids.read_text().split()[0])
    started = project.receipt("slow:agent:1")["started_at"]
    os.kill(run.pid, signal.SIGTERM)
    run.wait(timeout=30)
    assert run.returncode == 128 + signal.SIGTERM
    wait_for(lambda: not alive(agent_pid) and not alive(child_pid), timeout=10)
    assert project.states() == {"slow:agent:1": "running"}
    release.touch()
    assert project.doit(FAKE_AGENT_PIDS=str(pids)).returncode == 0
    receipt = project.receipt("slow:agent:1")
    assert (receipt["state"], receipt["attempt"], receipt["started_at"]) == ("unscored", 2, started)


def test_sigterm_in_parallel_mode(project: Project, tmp_path: Path) -> None:
    project.write_manifest([{"id": f"s{i}", "prompt": "sleep: 120"} for i in range(3)])
    run = project.doit_popen("jobs=3")
    wait_for(lambda: project.launches() == 3)
    agents = [int(line.split()[1]) for line in project.log.read_text().splitlines()]
    os.kill(run.pid, signal.SIGTERM)
    run.wait(timeout=30)
    assert run.returncode == 128 + signal.SIGTERM
    wait_for(lambda: not any(alive(pid) for pid in agents), timeout=10)
    assert set(project.states().values()) == {"running"}


def test_export_strips_prompts_paths_and_env(project: Project) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "env": {"API_TOKEN": "tok-secret-123"}}})
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": "answer: hello\nstderr: the secret prompt text",
                "graders": [{"type": "exit_status"}],
            }
        ]
    )
    assert project.doit().returncode == 0
    export = project.out / "export"
    cell = json.loads(next((export / "cells").glob("*.json")).read_text())
    assert "prompt" not in cell and cell["prompt_digest"].startswith("sha256:")
    assert "prompt" not in cell["case"] and cell["case"]["prompt_digest"] == cell["prompt_digest"]
    assert cell["seat"]["env"] == {"API_TOKEN": "<redacted>"}
    assert not os.path.isabs(cell["run_dir"])
    text = "".join(p.read_text() for p in export.rglob("*") if p.is_file())
    for secret in ("the secret prompt text", "tok-secret-123", str(project.out), str(project.root)):
        assert secret not in text
    assert json.loads((export / "plan.json").read_text())["cells"][0]["prompt_digest"]
    assert (export / "summary.json").exists()


@pytest.mark.parametrize(
    ("planted", "kind"),
    [
        ("answer: hello\nstderr: the secret prompt text", "prompt"),
        ("{out}/cells", "absolute path"),
        ("tok-secret-123", "env value"),
    ],
)
def test_export_leak_check_fails_the_build(project: Project, planted: str, kind: str) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "env": {"API_TOKEN": "tok-secret-123"}}})
    project.write_manifest([{"id": "c", "prompt": "answer: hello\nstderr: the secret prompt text"}])
    assert project.doit().returncode == 0
    leak = project.out / "export" / "notes.json"
    leak.write_text(json.dumps({"note": planted.replace("{out}", str(project.out))}))
    done = project.doit()
    assert done.returncode != 0
    assert "export/notes.json" in done.stderr and "note" in done.stderr and kind in done.stderr
    cli = project.brigade("export", str(project.out))
    assert cli.returncode == 3
    assert "export/notes.json: note: contains " + kind in cli.stderr
    leak.unlink()
    assert project.doit().returncode == 0
    assert project.brigade("export", str(project.out)).returncode == 0


def test_writable_worktree_runs_grade_the_real_changes(project: Project) -> None:
    git_workspace(project)
    project.write_manifest(
        [
            {
                "id": "edit",
                "prompt": "write: src/app.py=print('v2')\n"
                'write: out/receipt.json={"status": "completed"}\n'
                "delete: README",
                "graders": [
                    {
                        "type": "diff_constraints",
                        "allowed": ["^src/", "^out/", "^README$"],
                        "forbidden": ["secret"],
                    },
                    {"type": "file_exists", "path": "out/receipt.json"},
                    {"type": "verify_receipt", "path": "out/receipt.json"},
                ],
            },
            {
                "id": "bad",
                "prompt": "write: secret.txt=x",
                "graders": [{"type": "diff_constraints", "forbidden": ["secret"]}],
            },
            {"id": "fails", "prompt": "write: src/new.py=x\nexit: 1"},
        ],
        execution={"mode": "writable-worktree"},
    )
    done = project.doit()
    assert done.returncode == 1, done.stderr
    assert project.states() == {
        "edit:agent:1": "accepted",
        "bad:agent:1": "rejected",
        "fails:agent:1": "execution_error",
    }
    run = json.loads(Path(project.receipt("edit:agent:1")["run_dir"], "run.json").read_text())
    assert run["changed_files"] == ["out/receipt.json", "src/app.py"]
    assert run["workspace_snapshot"]["deleted"] == ["README"]
    assert run["workspace_access"] == "detached-worktree"
    assert run["cwd"] != str(project.workspace)
    # the worktrees are gone and the original checkout is untouched
    assert not Path(run["cwd"]).exists()
    assert git(project.workspace, "worktree", "list").count("\n") == 1
    assert git(project.workspace, "status", "--porcelain") == ""
    assert (project.workspace / "src" / "app.py").read_text() == "print('v1')\n"
    # regrade works from the recorded snapshot after the worktree is gone
    regraded = project.brigade("regrade", str(project.out))
    assert regraded.returncode == 1, regraded.stderr
    assert project.states()["edit:agent:1"] == "accepted"


def test_writable_mode_needs_a_git_work_tree(project: Project) -> None:
    project.write_manifest([{"id": "c", "prompt": "x"}], execution={"mode": "writable-worktree"})
    done = project.doit()
    assert done.returncode == 2
    assert "git work tree" in done.stderr
    assert done.stderr.count("\n") == 1
    assert project.launches() == 0
