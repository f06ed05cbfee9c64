"""The filesystem sandbox (run/sandbox.py) with the real bwrap: what a confined process can
see, write and reach, and that proc runs it like any other seat (exit status, stdin,
environment, timeouts, stop, leftovers). Skipped only where bwrap cannot run."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents.fake_cli import install
from conftest import (
    FAKE_AGENT,
    FAKE_CLI,
    Project,
    alive,
    cli_python,
    git,
    git_workspace,
    wait_for,
)
from test_progress import masked

from brigade.core.specs import SandboxSpec, SeatSpec
from brigade.run import proc, sandbox

AVAILABLE = sandbox.probe()
needs_bwrap = pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}")


@dataclass
class Layout:
    """A home, a git workspace and an output directory with two cells, under one folder."""

    root: Path
    home: Path
    workspace: Path
    out: Path
    run_dir: Path
    other_run: Path


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    home = tmp_path / "home"
    (home / ".agentcli").mkdir(parents=True)
    (home / ".profile").write_text("profile\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "init")
    out = tmp_path / "out"
    run_dir = out / "cells" / "c1" / "attempts" / "attempt-001" / "run"
    other_run = out / "cells" / "c2" / "attempts" / "attempt-001" / "run"
    run_dir.mkdir(parents=True)
    other_run.mkdir(parents=True)
    (other_run / "stdout.log").write_text("the other cell's answer\n")
    return Layout(tmp_path, home, workspace, out, run_dir, other_run)


def seat(**sandbox_fields: object) -> SeatSpec:
    return SeatSpec(name="s", cli="exec:sh", sandbox=SandboxSpec(**sandbox_fields))  # type: ignore[arg-type]


def run_in(
    view: sandbox.View,
    script: str,
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    stdin_text: str | None = None,
    timeout: float = 60,
    grace: float = 5,
) -> tuple[proc.ProcResult, str, str]:
    """Run `sh -c script` confined by `view` through proc.run: (result, stdout, stderr)."""
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    result = proc.run(
        ["sh", "-c", script],
        cwd=view.cwd,
        env={**os.environ, "LC_ALL": "C", **(env or {})},
        stdin_text=stdin_text,
        timeout=timeout,
        stdout_path=logs / "stdout",
        stderr_path=logs / "stderr",
        grace=grace,
        confine=sandbox.confinement(view, AVAILABLE),
    )
    return result, (logs / "stdout").read_text(), (logs / "stderr").read_text()


def read_only_view(layout: Layout, **extra: object) -> sandbox.View:
    """A read-only seat in the workspace (as the runner builds it)."""
    return sandbox.seat_view(
        seat(readable=[str(layout.root)]),  # the fixture lives under /tmp: make it visible
        cwd=layout.workspace,
        run_dir=layout.run_dir,
        env={"HOME": str(layout.home)},
        state_paths=("~/.agentcli", "~/.not-there"),
        out=layout.out,
        workspace=layout.workspace,
        **extra,  # type: ignore[arg-type]
    )


# -- building views (no bwrap needed) -------------------------------------------------


def test_mounts_are_made_parents_first_and_the_deepest_entry_wins(layout: Layout) -> None:
    view = sandbox.View(
        cwd=layout.workspace,
        writable=(layout.run_dir, layout.home),
        readable=(layout.home / ".profile", layout.root),
        hidden=(layout.out, layout.root / "missing"),
    )
    ordered, cwd = sandbox.mounts(view)
    root = str(layout.root.resolve())
    assert cwd == f"{root}/ws"
    assert ordered == [
        (root, "ro"),
        (f"{root}/home", "rw"),
        (f"{root}/out", "hide"),
        (f"{root}/home/.profile", "ro"),
        (f"{root}/out/cells/c1/attempts/attempt-001/run", "rw"),
    ]


def test_hidden_beats_writable_beats_readable_for_the_same_path(layout: Layout) -> None:
    view = sandbox.View(
        cwd=Path("/"),
        writable=(layout.home, layout.run_dir),
        readable=(layout.home, layout.run_dir, layout.workspace),
        hidden=(layout.run_dir,),
    )
    kinds = dict(sandbox.mounts(view)[0])
    root = str(layout.root.resolve())
    assert kinds == {
        f"{root}/home": "rw",
        f"{root}/out/cells/c1/attempts/attempt-001/run": "hide",
        f"{root}/ws": "ro",
    }


def test_the_folder_a_command_runs_in_is_made_visible_only_where_hidden(layout: Layout) -> None:
    # under /tmp (the sandbox's own empty /tmp) the workspace must be bound back
    view = sandbox.View(cwd=layout.workspace)
    assert sandbox.mounts(view)[0] == [(str(layout.workspace.resolve()), "ro")]
    # outside /tmp it is visible as it is, read-only like everything
    assert sandbox.mounts(sandbox.View(cwd=Path("/usr")))[0] == []


def test_paths_a_command_line_names_are_visible(layout: Layout) -> None:
    script = layout.workspace / "agent.py"
    script.write_text("")
    config = layout.root / "conf"
    config.mkdir()
    argv = ["python3", str(script), f"--config={config}", "-v", "relative.txt", "/no/such"]
    assert sandbox.named_paths(argv) == [layout.workspace.resolve(), config.resolve()]


def test_symlinked_paths_are_resolved(layout: Layout) -> None:
    link = layout.root / "ws-link"
    link.symlink_to(layout.workspace)
    ordered, cwd = sandbox.mounts(sandbox.View(cwd=link, writable=(link,)))
    assert cwd == str(layout.workspace.resolve())
    assert ordered == [(str(layout.workspace.resolve()), "rw")]


@pytest.mark.parametrize(
    ("view", "message"),
    [
        (sandbox.View(cwd=Path("relative")), "cwd path must be absolute: 'relative'"),
        (
            sandbox.View(cwd=Path("/"), writable=(Path("rel/dir"),)),
            "writable path must be absolute: 'rel/dir'",
        ),
        (
            sandbox.View(cwd=Path("/"), readable=(Path("/proc/../"),)),
            "readable path '/proc/..' cannot be bound: it is /",
        ),
        (
            sandbox.View(cwd=Path("/nonexistent-folder")),
            "cannot run in /nonexistent-folder: not a folder",
        ),
    ],
)
def test_views_that_cannot_be_built_are_refused(view: sandbox.View, message: str) -> None:
    with pytest.raises(sandbox.SandboxError) as caught:
        sandbox.mounts(view)
    assert str(caught.value) == message


def test_seat_paths_expand_home_and_the_roster_folder(layout: Layout) -> None:
    spec = SeatSpec(
        name="s",
        cli="exec:sh",
        roster_dir=str(layout.root),
        sandbox=SandboxSpec(
            writable=("~/.agentcli", "cache"), readable=("/etc",), hidden=("~/.profile",)
        ),
        network=False,
    )
    (layout.root / "cache").mkdir()
    view = sandbox.seat_view(
        spec,
        cwd=layout.workspace,
        run_dir=layout.run_dir,
        env={"HOME": str(layout.home), "TMPDIR": "/var/tmp/elsewhere"},
        state_paths=("~/.config/agentcli",),
        out=layout.out,
        workspace=layout.workspace,
    )
    assert view.writable == (
        layout.home / ".config" / "agentcli",
        layout.home / ".agentcli",
        layout.root / "cache",
        layout.run_dir,
    )
    assert view.readable == (Path("/etc"),)
    assert view.hidden == (
        layout.home / ".profile",
        *map(Path, sandbox.HOST_CONTROL_SOCKETS),
        layout.out,
        layout.workspace / ".brigade" / "evals",
    )
    assert view.network is False
    assert view.setenv == {"TMPDIR": "/tmp"}


def test_a_failed_probe_names_the_reason() -> None:
    cases = {
        "bwrap: No permissions to create new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces.": "user namespaces are disabled",
        "bwrap: setting up uid map: Permission denied": "AppArmor forbids",
        "bwrap: Creating new namespace failed: nesting depth or "
        "/proc/sys/user/max_*_namespaces exceeded (ENOSPC)": "no user namespaces left",
        "bwrap: Creating new namespace failed: Operation not permitted": "without CAP_SYS_ADMIN",
        "bwrap: Can't mount proc on /newroot/proc: Operation not permitted": "masked /proc",
    }
    for stderr, expected in cases.items():
        why, raw = sandbox._reason(stderr + "\n", 1)
        assert expected in why, stderr
        assert raw == stderr
    assert sandbox._reason("", 1) == (
        "bwrap cannot start a sandbox here (exit status 1)",
        "exit status 1",
    )


def test_probe_without_bwrap_on_path_says_how_to_install_it(tmp_path: Path) -> None:
    code = "from brigade.run import sandbox; a = sandbox.probe(); print(a.ok); print(a.detail)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(tmp_path)},
        check=True,
    )
    if not sys.platform.startswith("linux"):
        pytest.skip("the probe says Linux is needed first")
    assert done.stdout == f"False\nbwrap is not on PATH; {sandbox.INSTALL_HINT}\n"


# -- read-only seats --------------------------------------------------------------------


@needs_bwrap
def test_read_only_seat_cannot_change_the_workspace_its_parent_or_home(
    layout: Layout, tmp_path: Path
) -> None:
    script = (
        'echo x >> a.txt; echo x > new.txt; echo x > ../outside.txt; echo x > "$HOME/evil";'
        ' echo x >> "$HOME/.profile"; echo ok > "$BRIGADE_RUN_DIR/seat.log";'
        ' echo state > "$HOME/.agentcli/session"; echo done'
    )
    result, out, err = run_in(
        read_only_view(layout),
        script,
        tmp_path,
        env={"HOME": str(layout.home), "BRIGADE_RUN_DIR": str(layout.run_dir)},
    )
    assert (result.launched, result.exit_code) == (True, 0)
    assert out == "done\n"
    home = layout.home
    assert err.splitlines() == [
        "sh: 1: cannot create a.txt: Read-only file system",
        "sh: 1: cannot create new.txt: Read-only file system",
        "sh: 1: cannot create ../outside.txt: Read-only file system",
        f"sh: 1: cannot create {home}/evil: Read-only file system",
        f"sh: 1: cannot create {home}/.profile: Read-only file system",
    ]
    assert (layout.workspace / "a.txt").read_text() == "one\n"
    assert sorted(os.listdir(layout.workspace)) == [".git", "a.txt"]
    assert not (layout.root / "outside.txt").exists()
    assert sorted(os.listdir(home)) == [".agentcli", ".profile"]
    assert (home / ".profile").read_text() == "profile\n"
    # its own run folder and its CLI's state stay writable
    assert (layout.run_dir / "seat.log").read_text() == "ok\n"
    assert (home / ".agentcli" / "session").read_text() == "state\n"


@needs_bwrap
def test_other_cells_and_results_are_not_visible(layout: Layout, tmp_path: Path) -> None:
    script = (
        f"ls -A {layout.out}; ls -A {layout.out}/cells; cat {layout.other_run}/stdout.log;"
        f" mkdir {layout.out}/cells/c3"
    )
    result, out, err = run_in(read_only_view(layout), script, tmp_path)
    assert result.exit_code == 1
    assert out == "cells\nc1\n"
    assert err.splitlines() == [
        f"cat: {layout.other_run}/stdout.log: No such file or directory",
        f"mkdir: cannot create directory '{layout.out}/cells/c3': Read-only file system",
    ]


@needs_bwrap
def test_no_capabilities_no_sysctl_and_no_other_processes(layout: Layout, tmp_path: Path) -> None:
    script = (
        "grep CapEff /proc/self/status; mount -o remount,rw / 2>/dev/null || echo no-remount;"
        " echo 10 2>/dev/null > /proc/sys/vm/swappiness || echo no-sysctl;"
        f" test -e /proc/{os.getpid()}/environ && echo sees-brigade || echo alone"
    )
    result, out, _ = run_in(read_only_view(layout), script, tmp_path)
    assert out == "CapEff:\t0000000000000000\nno-remount\nno-sysctl\nalone\n"
    assert result.exit_code == 0


@needs_bwrap
def test_git_works_in_a_read_only_checkout(layout: Layout, tmp_path: Path) -> None:
    result, out, err = run_in(
        read_only_view(layout), "git status --porcelain; git log --format=%s", tmp_path
    )
    assert (result.exit_code, out, err) == (0, "init\n", "")


# -- writable worktrees -----------------------------------------------------------------


@pytest.fixture
def worktree(layout: Layout) -> Iterator[sandbox.WorktreeGit]:
    root = layout.root / "wt"
    git(layout.workspace, "worktree", "add", "-q", "--detach", str(root), "HEAD")
    with sandbox.worktree_git(root) as access:
        yield access
    assert not access.objects.exists()


def writable_view(layout: Layout, access: sandbox.WorktreeGit) -> sandbox.View:
    return sandbox.seat_view(
        seat(readable=[str(layout.root)]),
        cwd=access.root,
        run_dir=layout.run_dir,
        env={"HOME": str(layout.home)},
        out=layout.out,
        workspace=layout.workspace,
        git=access,
    )


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


@needs_bwrap
def test_writable_seat_writes_and_commits_in_its_worktree_only(
    layout: Layout, worktree: sandbox.WorktreeGit, tmp_path: Path
) -> None:
    ws = layout.workspace
    head = git(ws, "rev-parse", "HEAD").strip()
    objects_before = sorted(p.name for p in (ws / ".git" / "objects").rglob("*"))
    script = (
        "echo two >> a.txt && echo n > n.txt && git add -A && git commit -qm agent"
        " && git log --format=%s -1;"
        f" echo x >> {ws}/a.txt; git -C {ws} update-ref refs/heads/evil HEAD 2>/dev/null"
        " || echo no-ref;"
        f" rm -f {ws}/.git/objects/*/* 2>/dev/null || echo no-delete;"
        f" echo x > {layout.other_run}/stdout.log"
    )
    result, out, err = run_in(writable_view(layout, worktree), script, tmp_path, env=GIT_IDENTITY)
    assert out == "agent\nno-ref\nno-delete\n"
    assert err.splitlines() == [
        f"sh: 1: cannot create {ws}/a.txt: Read-only file system",
        f"sh: 1: cannot create {layout.other_run}/stdout.log: Directory nonexistent",
    ]
    assert result.exit_code == 2
    # the main checkout, its refs and objects are untouched; the commit's objects
    # went to the attempt's private folder, which git outside reads through an alternate
    assert (ws / "a.txt").read_text() == "one\n"
    assert git(ws, "rev-parse", "HEAD").strip() == head
    assert "evil" not in git(ws, "branch", "--list")
    assert sorted(p.name for p in (ws / ".git" / "objects").rglob("*")) == objects_before
    assert (layout.other_run / "stdout.log").read_text() == "the other cell's answer\n"
    outside = subprocess.run(
        ["git", "log", "--format=%s", "-1"],
        cwd=worktree.root,
        env={**os.environ, **worktree.outside_env()},
        capture_output=True,
        text=True,
    )
    assert outside.stdout == "agent\n"


@needs_bwrap
def test_writable_seat_cannot_repoint_the_worktree_at_another_repository(
    layout: Layout, worktree: sandbox.WorktreeGit, tmp_path: Path
) -> None:
    gitdir = worktree.git_dir
    script = (
        "echo 'gitdir: /tmp/evil' > .git; echo /tmp/evil > "
        f"{gitdir}/commondir; echo /tmp/evil > {gitdir}/gitdir;"
        f" printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > {gitdir}/config.worktree"
    )
    result, _, err = run_in(writable_view(layout, worktree), script, tmp_path)
    assert [line.rsplit(": ", 1)[1] for line in err.splitlines()] == ["Read-only file system"] * 4
    assert (worktree.root / ".git").read_text().startswith(f"gitdir: {layout.workspace}")
    assert (gitdir / "commondir").read_text() == "../..\n"
    assert (gitdir / "config.worktree").read_text() == ""
    assert result.exit_code == 2


# -- processes ----------------------------------------------------------------------------


@needs_bwrap
def test_exit_status_stdin_and_environment_pass_through(layout: Layout, tmp_path: Path) -> None:
    view = read_only_view(layout)
    result, out, _ = run_in(
        view,
        'cat; echo "$BRIGADE_RUN_DIR $EXTRA"; exit 42',
        tmp_path,
        env={"BRIGADE_RUN_DIR": str(layout.run_dir), "EXTRA": "yes"},
        stdin_text="the prompt\n",
    )
    assert (result.launched, result.exit_code, result.signal) == (True, 42, None)
    assert out == f"the prompt\n{layout.run_dir} yes\n"
    # a prompt too big for a pipe comes from a temporary file (hidden /tmp or not)
    big = "x" * (proc.PIPE_PROMPT_BYTES * 2) + "\n"
    result, out, _ = run_in(view, "cat", tmp_path, stdin_text=big)
    assert (result.exit_code, out) == (0, big)


@needs_bwrap
def test_a_missing_program_is_a_launch_failure_as_without_the_sandbox(
    layout: Layout, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    confine = sandbox.confinement(read_only_view(layout), AVAILABLE)
    results = [
        proc.run(
            ["no-such-agent-cli", "-p"],
            cwd=layout.workspace,
            env=dict(os.environ),
            stdin_text=None,
            timeout=30,
            stdout_path=logs / "out",
            stderr_path=logs / "err",
            confine=confine_or_none,
        )
        for confine_or_none in (confine, None)
    ]
    assert [(r.launched, r.launch_error) for r in results] == [
        (False, "cannot launch no-such-agent-cli: No such file or directory")
    ] * 2


@needs_bwrap
def test_a_sandbox_that_cannot_start_its_command_is_a_launch_failure(tmp_path: Path) -> None:
    # a folder bound into the sandbox vanished after the view was built
    gone = tmp_path / "gone"
    gone.mkdir()
    confine = sandbox.confinement(sandbox.View(cwd=tmp_path, writable=(gone,)), AVAILABLE)
    gone.rmdir()
    (tmp_path / "logs").mkdir()
    result = proc.run(
        ["sh", "-c", "exit 0"],
        cwd=tmp_path,
        env=dict(os.environ),
        stdin_text=None,
        timeout=30,
        stdout_path=tmp_path / "logs" / "out",
        stderr_path=tmp_path / "logs" / "err",
        confine=confine,
    )
    assert (result.launched, result.exit_code) == (False, None)
    assert result.launch_error == (
        f"cannot launch sh in the sandbox: bwrap: Can't find source path {gone.resolve()}: "
        "No such file or directory"
    )


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment holds BRIGADE_RUN_DIR=marker."""
    return [
        pid for pid in proc._processes_with(f"\0BRIGADE_RUN_DIR={marker}".encode()) if alive(pid)
    ]


# an agent that ends gracefully on SIGTERM, with a TERM-ignoring child and a setsid escapee
STUBBORN = (
    "trap 'echo graceful > \"$BRIGADE_RUN_DIR/term.txt\"; exit 0' TERM;"
    " sh -c 'trap \"\" TERM; sleep 1000' & setsid sh -c 'sleep 1001' &"
    ' echo started > "$BRIGADE_RUN_DIR/started.txt"; while :; do sleep 0.05; done'
)


@needs_bwrap
def test_timeout_stops_the_agent_gracefully_then_ends_everything(
    layout: Layout, tmp_path: Path
) -> None:
    marker = str(layout.run_dir)
    result, _, _ = run_in(
        read_only_view(layout), STUBBORN, tmp_path, env={"BRIGADE_RUN_DIR": marker}, timeout=1
    )
    assert (result.launched, result.timed_out) == (True, True)
    # the agent itself got SIGTERM (and the grace to write), not an instant kill
    assert (layout.run_dir / "term.txt").read_text() == "graceful\n"
    wait_for(lambda: marked_processes(marker) == [], what="sandbox gone")


@needs_bwrap
def test_stopping_brigade_stops_sandboxed_seats_gracefully(layout: Layout, tmp_path: Path) -> None:
    marker = str(layout.run_dir)
    outcome: list[BaseException | proc.ProcResult] = []

    def seat() -> None:
        try:
            outcome.append(
                run_in(read_only_view(layout), STUBBORN, tmp_path, env={"BRIGADE_RUN_DIR": marker})[
                    0
                ]
            )
        except proc.Interrupted as exc:
            outcome.append(exc)

    thread = threading.Thread(target=seat)
    thread.start()
    wait_for(lambda: (layout.run_dir / "started.txt").exists(), what="seat started")
    try:
        proc.terminate_all(grace=5)
        thread.join(30)
    finally:
        proc.stopping.clear()
    assert [type(o) for o in outcome] == [proc.Interrupted]
    assert (layout.run_dir / "term.txt").read_text() == "graceful\n"
    wait_for(lambda: marked_processes(marker) == [], what="sandbox gone")


@needs_bwrap
def test_what_a_seat_leaves_running_ends_with_it(layout: Layout, tmp_path: Path) -> None:
    marker = str(layout.run_dir)
    result, _, _ = run_in(
        read_only_view(layout),
        "setsid sleep 1000 & sleep 1001 & exit 0",
        tmp_path,
        env={"BRIGADE_RUN_DIR": marker},
    )
    assert result.exit_code == 0
    wait_for(lambda: marked_processes(marker) == [], what="leftovers gone")


@needs_bwrap
def test_stragglers_of_a_killed_run_are_found_and_ended(layout: Layout, tmp_path: Path) -> None:
    # the environment scan that ends a crashed run's seats sees inside the sandbox
    marker = str(layout.run_dir)
    confine = sandbox.confinement(read_only_view(layout), AVAILABLE)
    seat = subprocess.Popen(
        [*confine.prefix, "sh", "-c", 'setsid sleep 1000 & echo up > "$BRIGADE_RUN_DIR/up"; wait'],
        env={**os.environ, "BRIGADE_RUN_DIR": marker},
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (layout.run_dir / "up").exists(), what="seat started")
        # two bwrap, sh and the escaped sleep (whose exec may still be under way)
        wait_for(lambda: len(marked_processes(marker)) >= 4, what="all four seen")
        found = marked_processes(marker)
        assert seat.pid in found
        ended = proc.end_stragglers("BRIGADE_RUN_DIR", str(layout.out) + "/")
        assert set(found) <= set(ended)
        seat.wait(30)
        wait_for(lambda: marked_processes(marker) == [], what="stragglers gone")
    finally:
        if seat.poll() is None:
            os.killpg(seat.pid, signal.SIGKILL)


# -- network ------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.sendall(b"hello\n")
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@needs_bwrap
@pytest.mark.parametrize(("network", "expected"), [(True, "hello\n"), (False, "refused\n")])
def test_network_switch_blocks_a_local_listener(
    layout: Layout, tmp_path: Path, listener: int, network: bool, expected: str
) -> None:
    client = (
        "import socket\n"
        "try:\n"
        f"    s = socket.create_connection(('127.0.0.1', {listener}), timeout=10)\n"
        "    print(s.recv(6).decode(), end='')\n"
        "except ConnectionRefusedError:\n"
        "    print('refused')\n"
    )
    view = read_only_view(layout)
    view = sandbox.View(**{**view.__dict__, "network": network})
    result, out, err = run_in(view, f'{sys.executable} -c "{client}"', tmp_path)
    assert (result.exit_code, out, err) == (0, expected, "")


@needs_bwrap
def test_without_network_unix_sockets_under_run_are_hidden(layout: Layout, tmp_path: Path) -> None:
    view = sandbox.View(**{**read_only_view(layout).__dict__, "network": False})
    result, out, _ = run_in(view, "ls -A /run | wc -l", tmp_path)
    assert (result.exit_code, out) == (0, "0\n")


def test_commands_run_in_the_sandbox_over_a_worktree(layout: Layout, tmp_path: Path) -> None:
    """What a grader running tests over a cell's worktree uses: that worktree writable, no more."""
    root = layout.root / "wt"
    git(layout.workspace, "worktree", "add", "-q", "--detach", str(root), "HEAD")
    with sandbox.command_sandbox(root, worktree=root, readable=(layout.root,)) as box:
        if not AVAILABLE.ok:
            assert box.confine is None
            assert box.decision.record()["applied"] == "none"
            return
        assert box.decision.record() == {
            "applied": "sandbox",
            "mode": "auto",
            "network": "isolated",
        }
        assert box.confine is not None
        result = proc.run(
            [
                "sh",
                "-c",
                f"echo ok > report.txt && git add -A && echo x > {layout.workspace}/a.txt",
            ],
            cwd=root,
            env={**os.environ, "LC_ALL": "C"},
            stdin_text=None,
            timeout=60,
            stdout_path=tmp_path / "cmd.out",
            stderr_path=tmp_path / "cmd.err",
            confine=box.confine,
        )
    assert (tmp_path / "cmd.err").read_text() == (
        f"sh: 1: cannot create {layout.workspace}/a.txt: Read-only file system\n"
    )
    assert result.exit_code == 2
    assert (root / "report.txt").read_text() == "ok\n"
    assert (layout.workspace / "a.txt").read_text() == "one\n"


def test_a_required_command_sandbox_that_cannot_run_raises(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "_probed", [sandbox.Availability(False, "no bwrap here")])
    with pytest.raises(sandbox.SandboxError) as caught:
        with sandbox.command_sandbox(layout.workspace, mode="required"):
            pass
    assert str(caught.value) == "the sandbox is required but cannot run here: no bwrap here"
    with sandbox.command_sandbox(layout.workspace) as box:
        assert box.confine is None
        assert box.decision.record() == {
            "applied": "none",
            "mode": "auto",
            "network": "host",
            "unavailable": "no bwrap here",
        }


# -- end to end: brigade run / doit with sandboxed seats ---------------------------------

EXIT_STATUS = [{"type": "exit_status"}]


def sandboxed_seat(project: Project, **fields: Any) -> dict[str, Any]:
    """A fake-agent seat in the sandbox whose launch log (outside it) stays writable."""
    project.log.touch()
    box = dict(fields.pop("sandbox", {}))
    box["writable"] = [str(project.log), *box.get("writable", [])]
    return {"cli": FAKE_CLI, "sandbox": box, **fields}


def marked_in(folder: Path) -> list[int]:
    """Live processes started for a seat whose run folder is under `folder`."""
    needle = f"\0BRIGADE_RUN_DIR={folder}/".encode()
    return [pid for pid in proc._processes_with(needle) if alive(pid)]


@needs_bwrap
def test_read_only_seat_changes_nothing_and_its_failures_are_its_result(project: Project) -> None:
    home = project.root / "home"
    home.mkdir()
    (home / "notes").write_text("mine\n")
    (project.workspace / "a.txt").write_text("one\n")
    project.write_roster(
        {"agent": sandboxed_seat(project, env={"HOME": str(home)})}, sandbox="auto"
    )
    prompt = (
        "try-write: a.txt=x\ntry-write: ../outside.txt=x\n"
        f"try-write: {home}/notes=x\ntry-write: {home}/new=x\nanswer: tried"
    )
    project.write_manifest([{"id": "w", "prompt": prompt, "graders": EXIT_STATUS}])
    done = project.run()
    assert done.returncode == 1, done.stderr
    assert masked(done.stderr) == (
        "brigade: [1/1] w:agent:1 execution_error <t>\n"
        "brigade: 1 cell: execution_error 1 -> rejected (exit 1); <t>; report: "
        f"{project.out / 'report' / 'index.html'}\n"
    )
    receipt = project.receipt("w:agent:1")
    assert (receipt["state"], receipt["exit_code"]) == ("execution_error", 1)
    assert "failure_reason" not in receipt
    assert receipt["enforcement"] == {"applied": "sandbox", "network": "host"}
    exported = json.loads(
        (project.out / "export" / "cells" / f"{receipt['cell_id']}.json").read_text()
    )
    assert exported["enforcement"] == receipt["enforcement"]
    run_dir = Path(receipt["run_dir"])
    assert (run_dir / "stderr.log").read_text().splitlines() == [
        "try-write a.txt: Read-only file system",
        "try-write ../outside.txt: Read-only file system",
        f"try-write {home}/notes: Read-only file system",
        f"try-write {home}/new: Read-only file system",
    ]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["enforcement"] == {"applied": "sandbox", "mode": "auto", "network": "host"}
    assert run["read_only_enforcement"] == "none"  # what the exec adapter does by itself
    assert sorted(os.listdir(project.workspace)) == ["a.txt"]
    assert (project.workspace / "a.txt").read_text() == "one\n"
    assert not (project.root / "outside.txt").exists()
    assert sorted(os.listdir(home)) == ["notes"]
    assert (home / "notes").read_text() == "mine\n"
    assert project.launches() == 1


@needs_bwrap
def test_writable_seat_writes_its_worktree_only(project: Project) -> None:
    git_workspace(project)
    project.write_roster({"agent": sandboxed_seat(project)}, sandbox="auto")
    mode = {"execution": {"mode": "writable-worktree"}}
    project.write_manifest([{"id": "first", "prompt": "answer: one"}], **mode)
    assert project.run().returncode == 0
    first = project.cell_dir("first:agent:1")
    first_receipt = (first / "cell.json").read_text()
    ws = project.workspace
    prompt = (
        "write: src/new.py=print(2)\n"
        f"try-write: {ws}/README=x\ntry-write: {first}/cell.json=x\n"
        f"list: {project.out}\nlist: {project.out}/cells\nanswer: done"
    )
    project.write_manifest(
        [{"id": "first", "prompt": "answer: one"}, {"id": "probe", "prompt": prompt}], **mode
    )
    done = project.run()
    assert done.returncode == 1, done.stderr
    receipt = project.receipt("probe:agent:1")
    run_dir = Path(receipt["run_dir"])
    own = receipt["cell_id"]
    assert (receipt["state"], receipt["exit_code"]) == ("execution_error", 1)
    assert receipt["enforcement"] == {"applied": "sandbox", "network": "host"}
    assert (run_dir / "final.txt").read_text() == f"cells\n{own}\ndone\n"
    assert (run_dir / "stderr.log").read_text().splitlines() == [
        f"try-write {ws}/README: Read-only file system",
        f"try-write {first}/cell.json: No such file or directory",
    ]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["changed_files"] == ["src/new.py"]
    assert (run_dir / "changes" / "src" / "new.py").read_text() == "print(2)\n"
    assert (ws / "README").read_text() == "readme\n"
    assert not (ws / "src" / "new.py").exists()
    assert (first / "cell.json").read_text() == first_receipt
    assert git(ws, "status", "--porcelain") == ""


@needs_bwrap
def test_a_writable_seat_may_commit_and_its_changes_are_still_read(project: Project) -> None:
    git_workspace(project)
    project.write_roster(
        {
            "agent": {
                "cli": "exec:sh -c 'echo 2 > src/b.py && git add -A && git commit -qm agent"
                " && git rev-parse HEAD'",
                "env": GIT_IDENTITY,
            }
        },
        sandbox="auto",
    )
    project.write_manifest(
        [{"id": "c", "prompt": "x", "graders": EXIT_STATUS}],
        execution={"mode": "writable-worktree"},
    )
    head = git(project.workspace, "rev-parse", "HEAD")
    done = project.run()
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("c:agent:1")
    assert (receipt["state"], receipt["enforcement"]["applied"]) == ("accepted", "sandbox")
    run_dir = Path(receipt["run_dir"])
    commit = (run_dir / "final.txt").read_text().strip()
    # the commit counts as the seat's change, read through the attempt's own objects ...
    run = json.loads((run_dir / "run.json").read_text())
    assert run["changed_files"] == ["src/b.py"]
    assert "+++ b/src/b.py" in (run_dir / "changes.patch").read_text()
    # ... which went to a folder of its own, now gone: not one object in the repository
    missing = subprocess.run(
        ["git", "cat-file", "-e", commit], cwd=project.workspace, capture_output=True
    )
    assert (len(commit), missing.returncode) == (40, 1)
    assert git(project.workspace, "rev-parse", "HEAD") == head
    assert git(project.workspace, "worktree", "list").count("\n") == 1


def test_required_sandbox_without_bwrap_refuses_to_start(project: Project, tmp_path: Path) -> None:
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    project.write_roster({"agent": {"cli": FAKE_CLI}}, sandbox="required")
    project.write_manifest([{"id": "c", "prompt": "x"}])
    expected = (
        "brigade: seat agent: sandbox: required, but the sandbox cannot run here: "
        f"bwrap is not on PATH; {sandbox.INSTALL_HINT} (or run with --sandbox auto / doit "
        "sandbox=auto)\n"
    )
    if not sys.platform.startswith("linux"):
        pytest.skip("elsewhere the reason is the platform")
    for done in (project.doit(PATH=str(empty)), project.run(PATH=str(empty))):
        assert (done.returncode, done.stderr) == (2, expected)
    assert project.launches() == 0
    assert not (project.out / "cells").exists()
    # --sandbox overrides the roster either way
    project.write_roster({"agent": {"cli": FAKE_CLI}}, sandbox="off")
    done = project.run("--sandbox", "required", PATH=str(empty))
    assert (done.returncode, done.stderr) == (2, expected)
    done = project.doit("sandbox=required", PATH=str(empty))
    assert (done.returncode, done.stderr) == (2, expected)
    assert project.launches() == 0


def test_auto_without_bwrap_runs_as_before_with_its_warning(
    project: Project, tmp_path: Path
) -> None:
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    project.write_roster({"agent": {"cli": FAKE_CLI, "network": False}}, sandbox="auto")
    project.write_manifest([{"id": "c", "prompt": "answer: hi", "graders": EXIT_STATUS}])
    done = project.run(PATH=str(empty))
    assert done.returncode == 0, done.stderr
    why = f"the sandbox cannot run here (bwrap is not on PATH; {sandbox.INSTALL_HINT})"
    assert done.stderr.splitlines()[:2] == [
        f"brigade: seat agent: read-only run, but {why} and the exec adapter cannot enforce it; "
        "the seat may still change the workspace (the seat's acknowledge_read_only: true "
        "silences this)",
        f"brigade: seat agent: network: false, but {why}; the seat can still use the network",
    ]
    receipt = project.receipt("c:agent:1")
    assert (receipt["state"], receipt["enforcement"]) == (
        "accepted",
        {"applied": "none", "network": "host"},
    )
    run = json.loads((Path(receipt["run_dir"]) / "run.json").read_text())
    assert run["enforcement"] == {
        "applied": "none",
        "mode": "auto",
        "network": "host",
        "unavailable": f"bwrap is not on PATH; {sandbox.INSTALL_HINT}",
    }


@needs_bwrap
def test_no_warning_when_the_sandbox_enforces_read_only(project: Project) -> None:
    project.write_roster({"agent": sandboxed_seat(project)}, sandbox="auto")
    project.write_manifest([{"id": "c", "prompt": "answer: hi"}])
    done = project.run()
    assert (done.returncode, masked(done.stderr)) == (
        0,
        "brigade: [1/1] c:agent:1 unscored <t>\n"
        "brigade: 1 cell: unscored 1 -> clean (exit 0); <t>; report: "
        f"{project.out / 'report' / 'index.html'}\n",
    )


@needs_bwrap
def test_a_seat_keeps_its_cli_state_folder(project: Project, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".agentcli").mkdir(parents=True)
    (home / ".claude").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install(bin_dir, "claude")
    project.write_roster(
        {
            # a roster-listed state folder of a generic command
            "agent": sandboxed_seat(
                project, env={"HOME": str(home)}, sandbox={"writable": ["~/.agentcli"]}
            ),
            # a built-in adapter's own state folder (~/.claude); the fake logs beside itself
            "claude": {
                "cli": "claude",
                "env": {"HOME": str(home)},
                "sandbox": {"writable": [str(bin_dir)]},
            },
        },
        sandbox="auto",
    )
    prompt = f"write: {home}/.agentcli/session=kept\nanswer: hi"
    project.write_manifest(
        [{"id": "c", "prompt": prompt, "graders": EXIT_STATUS}], seats=("agent", "claude")
    )
    done = project.run(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_CLI_STATE="1")
    assert done.returncode == 0, done.stderr
    assert {
        c: (r["state"], r["enforcement"]["applied"]) for c, r in project.receipts().items()
    } == {
        "c:agent:1": ("accepted", "sandbox"),
        "c:claude:1": ("accepted", "sandbox"),
    }
    assert (home / ".agentcli" / "session").read_text() == "kept\n"
    sessions = (home / ".claude" / "fake-sessions.jsonl").read_text().splitlines()
    assert len(sessions) == 1


@needs_bwrap
def test_network_false_blocks_a_local_listener(project: Project, listener: int) -> None:
    project.write_roster(
        {
            "offline": sandboxed_seat(project, network=False),
            "online": sandboxed_seat(project),
        },
        sandbox="auto",
    )
    project.write_manifest(
        [{"id": "c", "prompt": f"connect: 127.0.0.1:{listener}\nanswer: end"}],
        seats=("offline", "online"),
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    receipts = project.receipts()
    finals = {c: (Path(r["run_dir"]) / "final.txt").read_text() for c, r in receipts.items()}
    assert finals == {
        "c:offline:1": f"connect 127.0.0.1:{listener}: Connection refused\nend\n",
        "c:online:1": "hello\nend\n",
    }
    assert {c: r["enforcement"] for c, r in receipts.items()} == {
        "c:offline:1": {"applied": "sandbox", "network": "isolated"},
        "c:online:1": {"applied": "sandbox", "network": "host"},
    }


@needs_bwrap
def test_timeout_ends_the_sandboxed_seat_and_all_it_started(project: Project) -> None:
    project.write_roster({"agent": sandboxed_seat(project, timeout_seconds=1)}, sandbox="auto")
    project.write_manifest([{"id": "c", "prompt": "spawn: 120\nsleep: 120"}])
    done = project.run()
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("c:agent:1")
    assert (receipt["state"], receipt["failure_reason"]) == ("execution_error", "timeout")
    assert marked_in(project.out) == []


@needs_bwrap
def test_sigterm_stops_sandboxed_seats_and_leaves_cells_running(
    project: Project, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    project.write_roster({"agent": sandboxed_seat(project)}, sandbox="auto")
    project.write_manifest(
        [{"id": f"s{i}", "prompt": f"spawn: 120\nblock: {release}\nanswer: done"} for i in range(2)]
    )
    run = project.doit_popen("jobs=2")
    wait_for(lambda: project.launches() == 2 and len(marked_in(project.out)) >= 8)
    started = {c: r["started_at"] for c, r in project.receipts().items()}
    os.kill(run.pid, signal.SIGTERM)
    run.wait(timeout=30)
    assert run.returncode == 128 + signal.SIGTERM
    wait_for(lambda: marked_in(project.out) == [], timeout=10)
    assert set(project.states().values()) == {"running"}
    release.touch()
    assert project.doit().returncode == 0
    assert {
        c: (r["state"], r["attempt"], r["started_at"]) for c, r in project.receipts().items()
    } == {c: ("unscored", 2, at) for c, at in started.items()}


@needs_bwrap
def test_a_killed_run_leaves_no_sandboxed_seat_behind(project: Project, tmp_path: Path) -> None:
    release = tmp_path / "release"
    project.write_roster({"agent": sandboxed_seat(project)}, sandbox="auto")
    project.write_manifest([{"id": "c", "prompt": f"spawn: 120\nblock: {release}\nanswer: done"}])
    run = project.doit_popen()
    wait_for(lambda: project.launches() == 1 and len(marked_in(project.out)) >= 4)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=30)
    # the sandbox dies with the run that started it: nothing is left to clean up
    wait_for(lambda: marked_in(project.out) == [], timeout=10)
    release.touch()
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert "left running" not in done.stderr
    receipt = project.receipt("c:agent:1")
    assert (receipt["state"], receipt["attempt"]) == ("unscored", 2)


@needs_bwrap
def test_the_sandbox_is_not_part_of_any_identity(project: Project, tmp_path: Path) -> None:
    project.write_roster({"agent": sandboxed_seat(project)}, sandbox="off")
    project.write_manifest([{"id": "c", "prompt": "answer: hi"}])
    assert project.run().returncode == 0
    ids = [cell["cell_id"] for cell in project.plan()["cells"]]
    project.write_roster(
        {"agent": sandboxed_seat(project, network=False, sandbox={"mode": "required"})}
    )
    again = project.run()
    assert (again.returncode, project.launches()) == (0, 1)
    assert [cell["cell_id"] for cell in project.plan()["cells"]] == ids
    # a no-op never probes for the sandbox: a required one missing here refuses nothing
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    noop = project.run("--sandbox", "required", PATH=str(empty))
    assert (noop.returncode, masked(noop.stderr)) == (
        0,
        "brigade: 1 cell: unscored 1 -> clean (exit 0); <t>; report: "
        f"{project.out / 'report' / 'index.html'}\n",
    )


def test_doctor_says_whether_the_sandbox_works(project: Project, tmp_path: Path) -> None:
    project.write_roster(
        {
            "plain": {"cli": FAKE_CLI},
            "strict": {"cli": FAKE_CLI, "sandbox": "required", "network": False},
        },
        sandbox="auto",
    )
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    done = project.brigade("doctor", "--roster", str(project.roster), PATH=str(empty))
    python = cli_python()  # the seat's `{python}`, as the CLI that checks it runs on
    assert done.stdout.splitlines() == [
        f"plain   ok       {python}  (version unknown; read-only: none; sandbox: auto)",
        f"strict  REFUSED  {python}  (version unknown; read-only: none; sandbox: required; "
        "network: NOT isolated)",
        f"sandbox: UNAVAILABLE, bwrap is not on PATH; {sandbox.INSTALL_HINT}; seats run with "
        "only their CLI's own limits",
    ]
    assert done.returncode == 1
    if not AVAILABLE.ok:
        return
    done = project.brigade("doctor", "--roster", str(project.roster))
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[1] == (
        f"strict  ok       {python}  (version unknown; read-only: sandbox; sandbox: required; "
        "network: isolated)"
    )
    assert re.fullmatch(r"sandbox: ok, bubblewrap \S+ at /\S+/bwrap \(\d+ ms to start\)", lines[2])


def test_a_cli_override_reaches_the_seat_job() -> None:
    from brigade.core.plan import Cell
    from brigade.run.seat import seat_job

    spec = SeatSpec(name="s", cli="exec:x", sandbox=SandboxSpec(writable=("/a",)))
    cell = Cell("0" * 64, "c:s:1", "c", "p", spec, 1, (), "read-only", "k")
    assert seat_job(cell, 1).seat.sandbox.mode == "auto"
    job = seat_job(cell, 1, sandbox_mode="off")
    assert job.seat.sandbox == SandboxSpec(mode="off", writable=("/a",))
    assert job.seat.identity() == spec.identity()


@needs_bwrap
def test_a_hidden_unix_socket_cannot_be_reached(layout: Layout, tmp_path: Path) -> None:
    # the sockets of container engines are hidden this way (a seat could run anything as root)
    path = layout.root / "engine.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    client = (
        "import socket\n"
        "try:\n"
        f"    socket.socket(socket.AF_UNIX).connect('{path}'); print('connected')\n"
        "except OSError as exc:\n"
        "    print(exc.strerror)\n"
    )
    try:
        for hidden, expected in (((), "connected\n"), ((path,), "Connection refused\n")):
            view = sandbox.View(
                cwd=layout.workspace,
                readable=(layout.root,),
                hidden=hidden,
                visible=tuple(sandbox.program_paths(sys.executable)),
            )
            result, out, _ = run_in(view, f'{sys.executable} -c "{client}"', tmp_path)
            assert (result.exit_code, out) == (0, expected)
    finally:
        server.close()


# -- command graders in the sandbox --------------------------------------------------------


@needs_bwrap
def test_a_command_grader_runs_in_the_seats_sandbox_over_the_cells_worktree(
    project: Project,
) -> None:
    git_workspace(project)
    project.write_roster({"agent": sandboxed_seat(project)}, sandbox="auto")
    ws, out = project.workspace, project.out
    # the tests see the seat's change, write next to the code, read the answer; the
    # checkout and the output directory (but for their own folders) are out of reach
    command = (
        'test -f src/new.py && echo ok > report.txt && cat "$BRIGADE_ANSWER_FILE" && '
        f"ls {out}/cells && ! (echo x > {ws}/README) && ! (echo x > {out}/summary.json)"
    )
    grader = {"type": "command", "command": command}
    project.write_manifest(
        [{"id": "w", "prompt": "write: src/new.py=print(2)\nanswer: done", "graders": [grader]}],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("w:agent:1")
    [result] = receipt["graders"]
    assert (result["status"], result["score"], result["exit_code"]) == ("scored", 1.0, 0)
    assert result["enforcement"] == {"applied": "sandbox", "network": "host"}
    logs = {key: (out / path).read_text() for key, path in result["logs"].items()}
    assert logs == {
        "stdout": f"done\n{receipt['cell_id']}\n",
        "stderr": (
            f"/bin/sh: 1: cannot create {ws}/README: Read-only file system\n"
            f"/bin/sh: 1: cannot create {out}/summary.json: Read-only file system\n"
        ),
    }
    assert (ws / "README").read_text() == "readme\n"
    assert git(ws, "status", "--porcelain") == ""
    exported = json.loads((out / "export" / "cells" / f"{receipt['cell_id']}.json").read_text())
    assert exported["graders"][0]["enforcement"] == result["enforcement"]
    # a regrade runs it in the sandbox again
    regraded = project.brigade("regrade", str(out))
    assert regraded.returncode == 0, regraded.stderr
    assert project.receipt("w:agent:1")["graders"][0]["enforcement"] == (result["enforcement"])


def test_a_command_grader_whose_sandbox_is_required_but_cannot_run_is_a_grader_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_command_grader import context, grade

    monkeypatch.setattr(sandbox, "_probed", [sandbox.Availability(False, "no bwrap here")])
    ctx = context(tmp_path)
    required = dataclasses.replace(ctx.setting, sandbox="required")
    result = grade(
        dataclasses.replace(ctx, setting=required), {"type": "command", "command": "true"}
    )
    assert (result["status"], result["score"]) == ("grader_error", None)
    assert result["detail"] == (
        "sandbox: the sandbox is required but cannot run here: no bwrap here"
    )
    assert "enforcement" not in result  # the command never ran
    auto = dataclasses.replace(ctx.setting, sandbox="auto")
    result = grade(dataclasses.replace(ctx, setting=auto), {"type": "command", "command": "true"})
    assert (result["status"], result["score"]) == ("scored", 1.0)
    assert result["enforcement"] == {"applied": "none", "network": "host"}


def test_the_command_line_mode_reaches_a_judge_seat(tmp_path: Path) -> None:
    from test_command_grader import context

    from brigade.run.judge import judge_seat

    identity = {
        "seat": "critic",
        "cli": "exec:judge",
        "model": None,
        "reasoning": None,
        "transport": "direct",
        "transport_version": None,
        "env": None,
        "codex_transport": None,
    }
    critic = SeatSpec(name="critic", cli="exec:judge", sandbox=SandboxSpec(mode="required"))
    setting = dataclasses.replace(context(tmp_path).setting, seats={"critic": critic})
    spec = {"seat": "critic", "judge_seat": identity}
    own = judge_seat(spec, dataclasses.replace(setting, sandbox=None), 60)
    assert own.sandbox == SandboxSpec(mode="required")
    forced = judge_seat(spec, dataclasses.replace(setting, sandbox="off"), 60)
    assert forced.sandbox == SandboxSpec(mode="off")


@needs_bwrap
def test_programs_and_scripts_under_tmp_run_in_the_sandbox(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # the sandbox's /tmp is private: a checkout, agent script or grader script there
    # (pytest's folders are under /tmp), outside the roster's and the workspace's
    # folders, must still be visible to the command line naming it
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    assert not elsewhere.is_relative_to(project.root)
    agent = elsewhere / "agent.py"
    agent.write_text(Path(FAKE_AGENT).read_text())
    check = elsewhere / "check.py"
    check.write_text("import sys\nsys.exit(0)\n")
    assert str(agent).startswith("/tmp/")
    project.log.touch()
    project.write_roster(
        {"agent": {"cli": f"exec:{{python}} {agent}", "sandbox": {"writable": [str(project.log)]}}},
        sandbox="required",
    )
    grader = {"type": "command", "command": ["{python}", str(check)]}
    project.write_manifest([{"id": "c", "prompt": "answer: hi", "graders": [grader]}])
    done = project.run()
    assert (done.returncode, masked(done.stderr)) == (
        0,
        "brigade: [1/1] c:agent:1 accepted <t>\n"
        "brigade: 1 cell: accepted 1 -> clean (exit 0); <t>; report: "
        f"{project.out / 'report' / 'index.html'}\n",
    ), done.stderr
    receipt = project.receipt("c:agent:1")
    assert receipt["enforcement"]["applied"] == "sandbox"
    assert receipt["graders"][0]["enforcement"]["applied"] == "sandbox"


def test_a_program_s_installation_and_interpreter_are_visible(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    tool = venv / "bin" / "tool"
    tool.write_text("#!/opt/py/bin/python3 -u\nimport tool\n")
    assert set(sandbox.program_paths(str(tool))) == {
        venv / "bin",
        venv,
        Path("/opt/py/bin"),
        Path("/opt/py"),
    }
