"""End to end: what a seat does to its own workspace, hostile inputs, a planted lock link,
exports into the wrong folder, a missing workspace, setsid grandchildren and SIGHUP
(issue 15, items 3, 4, 6, 10-14). Runs the real `brigade` and `doit`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import DODO, FAKE_CLI, Project, alive, brigade_command, git, git_workspace, wait_for


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if "read-only run, but" not in line]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# --- item 3: a seat's own worktree; NUL bytes ------------------------------------------


@pytest.mark.parametrize("how", ["rm -f .git", "gitdir: /nonexistent"])
def test_a_seat_that_breaks_its_worktree_is_a_result_of_its_cell(
    project: Project, how: str
) -> None:
    git_workspace(project)
    action = {
        "rm -f .git": "delete: .git",
        "gitdir: /nonexistent": "write: .git=gitdir: /nonexistent",
    }[how]
    project.write_manifest(
        [
            {
                "id": "breaks",
                "prompt": f"write: made.txt=x\n{action}\nanswer: ok",
                "graders": [{"type": "file_exists", "path": "made.txt"}],
            },
            {"id": "next", "prompt": "answer: ok"},
        ],
        execution={"mode": "writable-worktree"},
    )
    result = project.run()
    assert "Traceback" not in result.stderr
    states = project.states()
    assert states["next:agent:1"] == "unscored"
    assert states["breaks:agent:1"] == "accepted", result.stderr
    assert result.returncode == 0
    assert project.summary()["counts"]["running"] == 0
    assert git(project.workspace, "worktree", "list").count("\n") == 1


def test_a_worktree_whose_changes_cannot_be_read_is_an_adapter_error(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_workspace(project)
    project.write_manifest(
        [{"id": "gone", "prompt": "answer: ok"}], execution={"mode": "writable-worktree"}
    )
    # a seat that removes its whole worktree folder: git cannot list what changed
    script = project.root / "vanish.py"
    script.write_text("import os, shutil, sys\nshutil.rmtree(os.getcwd())\nprint('ok')\n")
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    result = project.run()
    assert result.returncode == 3, result.stderr
    receipt = project.receipt("gone:agent:1")
    assert receipt["state"] == "adapter_error"
    assert receipt["failure_detail"].startswith("worktree: git ls-files failed in the worktree")


@pytest.mark.parametrize("where", ["env", "cli", "model"])
def test_nul_bytes_in_a_seat_are_refused_by_validate(project: Project, where: str) -> None:
    seat = {"cli": FAKE_CLI, "env": {"A": "ok"}}
    if where == "env":
        seat["env"] = {"A": "x\0y"}
    elif where == "cli":
        seat["cli"] = FAKE_CLI + " \0"
    else:
        seat["model"] = "m\0"
    project.roster.write_text(json.dumps({"schema": "brigade.roster.v1", "seats": {"a": seat}}))
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("a",))
    path = {"env": "seats.a.env.A", "cli": "seats.a.cli", "model": "seats.a.model"}[where]
    for result in (project.brigade("validate", str(project.manifest)), project.run()):
        assert result.returncode == 2
        assert one_line(result.stderr) == (
            f"brigade: {project.roster}: {path}: contains a NUL byte, which no command line "
            "or environment variable can carry"
        )
    assert not project.out.exists()


@pytest.mark.parametrize("where", ["env", "cli"])
def test_nul_bytes_in_a_roster_toml_seat_are_refused_too(project: Project, where: str) -> None:
    """Regression: the same NUL byte was refused in roster.yaml and accepted in roster.toml."""
    value = {
        "env": 'cli = "exec:echo hi"\nenv = {A = "x\\u0000y"}',
        "cli": 'cli = "exec:echo \\u0000"',
    }
    roster = project.root / "roster.toml"
    roster.write_text(f"[agents.a]\n{value[where]}\n")
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("a",))
    path = {"env": "agents.a.env.A", "cli": "agents.a.cli"}[where]
    validate = project.brigade("validate", str(project.manifest), "--roster", str(roster))
    run = project.brigade(*project.run_args()[:2], "--roster", str(roster), *project.run_args()[4:])
    for result in (validate, run):
        assert result.returncode == 2
        assert one_line(result.stderr) == (
            f"brigade: {project.manifest}: seats[0]: {roster}: {path}: contains a NUL byte, "
            "which no command line or environment variable can carry"
        )
    assert not project.out.exists()


# --- item 4: graders under a time limit ---------------------------------------------


def test_backtracking_pattern_is_warned_about_and_stopped(project: Project) -> None:
    nested = {"type": "regex_output", "pattern": "^(a+)+$"}
    # exponential for the regex package too; stopped at its time limit
    slow = {"type": "regex_output", "pattern": "^(a|aa)+$", "timeout_seconds": 0.5}
    project.write_manifest(
        [{"id": "slow", "prompt": "answer: " + "a" * 60 + "!", "graders": [nested, slow]}]
    )
    validated = project.brigade("validate", str(project.manifest))
    assert validated.returncode == 0
    assert validated.stderr == (
        f"warning: {project.manifest}: cases[0] (slow) graders[0]: pattern '^(a+)+$' repeats "
        "a group that itself repeats (like (a+)+): it can take exponential time, and is "
        "stopped at the grader's time limit (grader_error)\n"
        "warning: seat agent: read-only run, but the exec adapter cannot enforce it; the seat "
        "may still change the workspace (the seat's acknowledge_read_only: true silences this)\n"
    )
    result = project.run()
    assert result.returncode == 3
    receipt = project.receipt("slow:agent:1")
    assert receipt["state"] == "grader_error"
    assert receipt["graders"][0]["status"] == "scored"
    assert receipt["graders"][1]["detail"].startswith("stopped at its time limit of 0.5 s")


def test_a_fifo_planted_for_a_grader_does_not_hang_the_run(project: Project) -> None:
    script = project.root / "fifo.py"
    script.write_text("import os\nos.mkfifo('r.json')\nprint('ok')\n")
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    project.write_manifest(
        [
            {
                "id": "fifo",
                "prompt": "x",
                "graders": [
                    {"type": "verify_receipt", "path": "r.json"},
                    {"type": "file_exists", "path": "r.json"},
                ],
            }
        ]
    )
    result = project.run(timeout=60)
    assert result.returncode == 1, result.stderr
    graders = project.receipt("fifo:agent:1")["graders"]
    assert [(g["status"], g["score"]) for g in graders] == [("scored", 0.0), ("scored", 1.0)]


# --- item 6: lone surrogates, FIFOs as inputs -----------------------------------------


def test_a_lone_surrogate_in_a_json_manifest_or_roster_is_refused(project: Project) -> None:
    manifest = project.root / "m.json"
    manifest.write_text(
        '{"schema": "brigade.eval_manifest.v1", "name": "t", "seats": ["agent"], '
        '"cases": [{"id": "a", "prompt": "hi \\ud800"}]}'
    )
    for result in (project.brigade("validate", str(manifest), "--roster", str(project.roster)),):
        assert result.returncode == 2
        assert one_line(result.stderr) == (
            f"brigade: {manifest}: cases[0].prompt: a lone surrogate (a \\uD800-\\uDFFF "
            "escape without its pair) is not text"
        )
    roster = project.root / "r.json"
    roster.write_text(
        '{"schema": "brigade.roster.v1", "seats": {"agent": {"cli": "exec:x", '
        '"env": {"A": "\\udc00"}}}}'
    )
    project.write_manifest([{"id": "a", "prompt": "x"}])
    result = project.brigade("validate", str(project.manifest), "--roster", str(roster))
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(f"brigade: {roster}: seats.agent.env.A: a lone")
    # a surrogate pair is fine
    manifest.write_text(manifest.read_text().replace("\\ud800", "\\ud83d\\ude00"))
    ok = project.brigade("validate", str(manifest), "--roster", str(project.roster))
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("which", ["manifest", "roster", "prompt_file"])
def test_a_fifo_as_an_input_is_refused_not_waited_on(project: Project, which: str) -> None:
    project.write_manifest([{"id": "a", "prompt_file": "p.txt"}])
    (project.root / "p.txt").write_text("x")
    fifo = {
        "manifest": project.manifest,
        "roster": project.roster,
        "prompt_file": project.root / "p.txt",
    }[which]
    fifo.unlink()
    os.mkfifo(fifo)
    result = project.brigade("validate", str(project.manifest), timeout=30)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "not a regular file (a FIFO)" in line, line


# --- items 10-12: the lock link, export destinations, a missing workspace -------------


def test_a_symlinked_lock_is_refused_and_its_target_untouched(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    precious = project.root / "precious.txt"
    precious.write_text("mine\n")
    project.out.mkdir()
    (project.out / ".brigade.lock").symlink_to(precious)
    lock = project.out.resolve() / ".brigade.lock"
    for result in (project.run(), project.doit()):
        assert result.returncode == 2
        assert one_line(result.stderr) == (
            f"brigade: {lock}: the lock file is a symbolic link; brigade never writes "
            "through one (remove the link)"
        )
    assert precious.read_text() == "mine\n"
    assert not project.log.exists()


def exported(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}])
    assert project.run().returncode == 0


def test_export_refuses_a_folder_it_did_not_write(project: Project) -> None:
    exported(project)
    dest = project.root / "mine"
    (dest / "cells").mkdir(parents=True)
    (dest / "cells" / "mydata.json").write_text("{}")
    (dest / "plan.json").write_text("my plan")
    result = project.brigade("export", str(project.out), "--to", str(dest))
    assert result.returncode == 2
    assert one_line(result.stderr) == (
        f"brigade: {dest}: not empty, and not an export brigade wrote (it has no "
        ".brigade-export.json); export into a new or empty folder"
    )
    assert (dest / "plan.json").read_text() == "my plan"
    # into a new folder, then again into it (its marker says brigade wrote it): fine,
    # and files brigade does not name there are left alone
    fresh = project.root / "fresh"
    assert project.brigade("export", str(project.out), "--to", str(fresh)).returncode == 0
    (fresh / "cells" / "mydata.json").write_text("{}")
    (fresh / "notes.txt").write_text("my notes")
    assert project.brigade("export", str(project.out), "--to", str(fresh)).returncode == 0
    assert (fresh / "cells" / "mydata.json").read_text() == "{}"
    assert (fresh / "notes.txt").read_text() == "my notes"
    assert len(list((fresh / "cells").glob("*.json"))) == 3


@pytest.mark.parametrize("dest", [".", "cells", "report", "cells/x"])
def test_export_refuses_the_output_directory_itself(project: Project, dest: str) -> None:
    exported(project)
    before = (project.out / "plan.json").read_bytes(), (project.out / "summary.json").read_bytes()
    target = project.out / dest if dest != "." else project.out
    result = project.brigade("export", str(project.out), "--to", str(target))
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(
        f"brigade: --to {target}: inside the output directory {project.out}"
    )
    after = (project.out / "plan.json").read_bytes(), (project.out / "summary.json").read_bytes()
    assert after == before


def test_a_symlinked_export_folder_is_never_written_through(project: Project) -> None:
    exported(project)
    target = project.root / "elsewhere"
    (target / "cells").mkdir(parents=True)
    (target / "cells" / ("0" * 64 + ".json")).write_text("{}")
    (target / "plan.json").write_text("theirs")
    link = project.root / "link"
    link.symlink_to(target)
    result = project.brigade("export", str(project.out), "--to", str(link))
    assert result.returncode == 2
    assert "symbolic link" in one_line(result.stderr)
    # the output directory's own export/ as a link: the link goes, the target stays
    export = project.out / "export"
    for path in sorted(export.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    export.rmdir()
    export.symlink_to(target)
    assert project.doit().returncode == 0
    assert not export.is_symlink() and (export / "plan.json").exists()
    assert (target / "plan.json").read_text() == "theirs"
    assert (target / "cells" / ("0" * 64 + ".json")).read_text() == "{}"


def test_a_missing_workspace_is_refused_before_anything_is_made(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    missing = project.root / "does" / "not" / "exist"
    for args in (["--workspace", str(missing)], ["--workspace", str(missing), "--out", "o"]):
        result = project.brigade(
            "run", str(project.manifest), "--roster", str(project.roster), *args
        )
        assert result.returncode == 2
        assert one_line(result.stderr) == (
            f"brigade: {missing}: workspace is not a folder (--workspace / workspace=DIR)"
        )
    assert not (project.root / "does").exists()
    assert not (project.workspace / "o").exists()


# --- item 13: what a writable run changed ---------------------------------------------


def test_committed_and_ignored_files_count_as_changed(project: Project) -> None:
    git_workspace(project)
    script = project.root / "commit.py"
    script.write_text(
        "import subprocess\n"
        "open('secrets.env', 'w').write('k=v')\n"
        "open('.gitignore', 'w').write('hidden.txt\\n')\n"
        "open('hidden.txt', 'w').write('h')\n"
        "env = {'GIT_AUTHOR_NAME': 'a', 'GIT_AUTHOR_EMAIL': 'a@a', 'GIT_COMMITTER_NAME': 'a',"
        " 'GIT_COMMITTER_EMAIL': 'a@a', 'PATH': '/usr/bin:/bin'}\n"
        "subprocess.run(['git', 'add', 'secrets.env'], check=True, env=env)\n"
        "subprocess.run(['git', 'commit', '-qm', 'x'], check=True, env=env)\n"
        "print('ok')\n"
    )
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": "x",
                "graders": [
                    {"type": "diff_constraints", "forbidden": ["secrets"], "max_files": 0},
                    {"type": "file_exists", "path": "secrets.env"},
                    {"type": "file_exists", "path": "hidden.txt"},
                ],
            }
        ],
        execution={"mode": "writable-worktree"},
    )
    result = project.run()
    assert result.returncode == 1, result.stderr
    receipt = project.receipt("c:agent:1")
    run = json.loads((Path(receipt["run_dir"]) / "run.json").read_text())
    assert run["changed_files"] == [".gitignore", "hidden.txt", "secrets.env"]
    assert [(g["status"], g["score"]) for g in receipt["graders"]] == [
        ("scored", 0.0),
        ("scored", 1.0),
        ("scored", 1.0),
    ]


# --- item 14: setsid grandchildren and SIGHUP ------------------------------------------

ESCAPE = """
import os, subprocess, sys, time
pids = os.environ["PIDS"]
child = subprocess.Popen(
    [sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"],
    start_new_session=True,
)
with open(pids, "a") as handle:
    handle.write(f"{child.pid}\\n")
if os.environ.get("HOLD"):
    time.sleep(300)
print("ok")
"""


def test_a_setsid_grandchild_ends_with_its_cell(project: Project) -> None:
    script = project.root / "escape.py"
    script.write_text(ESCAPE)
    pids = project.root / "pids"
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    project.write_manifest([{"id": "a", "prompt": "x"}])
    result = project.run(PIDS=str(pids))
    assert result.returncode == 0, result.stderr
    [pid] = [int(line) for line in pids.read_text().split()]
    wait_for(lambda: not alive(pid), timeout=10, what="setsid grandchild ended")


@pytest.mark.parametrize("front", ["brigade", "doit"])
def test_sighup_stops_seats_like_sigterm(project: Project, front: str) -> None:
    script = project.root / "escape.py"
    script.write_text(ESCAPE)
    pids = project.root / "pids"
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    project.write_manifest([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}])
    if front == "brigade":
        argv = [*brigade_command(), *project.run_args("-n", "2")]
    else:
        argv = [sys.executable, "-m", "doit", "-f", str(DODO), "jobs=2", *project.variables()]
    runner = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=project.env(PIDS=str(pids), HOLD="1"),
        start_new_session=True,
        cwd=project.workspace,
    )
    try:
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="seats started")
        runner.send_signal(signal.SIGHUP)
        _, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 128 + signal.SIGHUP, err
    for pid in (int(line) for line in pids.read_text().split()):
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what="grandchild ended")
    seats = [
        int(line.split()[1])
        for line in (project.log.read_text().splitlines() if project.log.exists() else [])
    ]
    assert all(not alive(pid) for pid in seats)
    assert set(project.states().values()) == {"running"}


# --- item 5: outputs of the wrong kind, storage failing ---------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "line"),
    [
        (".doit.db", "folder", "is a folder where brigade keeps a file (move it away)"),
        ("summary.json", "folder", "is a folder where brigade keeps a file (move it away)"),
        ("plan.json", "folder", "is a folder where brigade keeps a file (move it away)"),
        ("export", "file", "is not a folder where brigade keeps one (move it away)"),
        ("report", "file", "is not a folder where brigade keeps one (move it away)"),
    ],
)
def test_outputs_of_the_wrong_kind_are_refused_on_one_line(
    project: Project, name: str, kind: str, line: str
) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    assert project.run().returncode == 0
    path = project.out / name
    if path.is_dir():
        for item in sorted(path.rglob("*"), reverse=True):
            item.rmdir() if item.is_dir() else item.unlink()
        path.rmdir()
    else:
        path.unlink(missing_ok=True)  # (brigade run keeps no doit DB; plain doit does)
    path.mkdir() if kind == "folder" else path.write_text("mine")
    receipts = {p: p.read_bytes() for p in project.out.glob("cells/*/cell.json")}
    commands = [project.run(), project.doit()]
    if name != "plan.json":
        commands += [project.brigade(c, str(project.out)) for c in ("regrade", "export", "report")]
    for result in commands:
        assert result.returncode == 2, result.stderr
        assert one_line(result.stderr) == f"brigade: {path}: {line}"
    assert path.is_dir() == (kind == "folder")
    assert {p: p.read_bytes() for p in project.out.glob("cells/*/cell.json")} == receipts
    assert project.launches() == 1


def test_doits_db_write_failing_is_one_line_and_keeps_the_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import errno

    from doit.dependency import JSONCodec

    from brigade.front import reporter
    from brigade.outdir import store

    def full(path: Path, data: bytes, **_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    db = reporter.CacheDB(str(tmp_path / ".doit.db"), JSONCodec())
    db.set("plan", "result:", "x")
    monkeypatch.setattr(store, "atomic_write_bytes", full)
    db.dump()  # (doit calls it when the run ends; the reporter says the problem after)
    assert reporter.CacheDB.problems == [
        f"cannot write {tmp_path / '.doit.db'}: No space left on device (doit's DB, a cache: "
        "the results are kept)"
    ]
    reporter.CacheDB.problems.clear()
    monkeypatch.undo()
    db.dump()
    assert (tmp_path / ".doit.db").read_text() == '{"plan": {"result:": "x"}}'


def test_storage_problems_name_the_target_of_an_atomic_write() -> None:
    import errno

    from brigade.outdir.store import storage_problem

    replace = OSError(errno.EISDIR, "Is a directory", "/o/.summary.json.ab12cd34.tmp", None)
    replace.filename2 = "/o/summary.json"
    assert storage_problem(replace) == "cannot write /o/summary.json: Is a directory"
    temp = OSError(errno.ENOSPC, "No space left on device", "/o/cells/x/.cell.json.ab12cd34.tmp")
    assert storage_problem(temp) == "cannot write /o/cells/x/cell.json: No space left on device"
    assert storage_problem(OSError(errno.EPIPE, "Broken pipe")) is None
    assert storage_problem(ValueError("x")) is None


def test_popen_refusing_a_command_is_a_launch_failure(tmp_path: Path) -> None:
    """Defence in depth for item 3: whatever makes Popen refuse argv or env is a result."""
    from brigade.run import proc

    result = proc.run(
        [sys.executable, "-c", "pass"],
        cwd=tmp_path,
        env={"A": "x\0y"},
        stdin_text=None,
        timeout=10,
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
    )
    assert (result.launched, result.exit_code) == (False, None)
    assert result.launch_error == f"cannot launch {sys.executable}: embedded null byte"


def test_an_unreadable_doit_db_is_dropped_as_the_cache_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chmod 000 .doit.db` (root reads it anyway, so the refusal is simulated)."""
    from brigade.errors import EnvironmentProblem
    from brigade.front.tasks import dep_file
    from brigade.outdir import store

    db = tmp_path / ".doit.db"
    db.write_text("{}")
    real = store.read_regular

    def forbidden(path: Path | str, limit: int | None = None) -> bytes:
        if Path(path) == db:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, limit)

    monkeypatch.setattr(store, "read_regular", forbidden)
    assert dep_file(tmp_path) == str(db)
    assert not db.exists()
    monkeypatch.undo()
    os.mkfifo(db)  # doit would wait on it forever: dropped like an unreadable one
    assert dep_file(tmp_path) == str(db)
    assert not db.exists()
    db.mkdir()
    with pytest.raises(EnvironmentProblem) as refused:
        dep_file(tmp_path)
    assert str(refused.value) == f"{db}: is a folder where doit keeps its DB (move it away)"


def test_a_fifo_a_seat_leaves_in_its_run_folder_hangs_nothing(project: Project) -> None:
    """Regression: a FIFO as run/transcript.json hung the report stage and every later run,
    report and show; one in place of final.txt hung regrade and report."""
    script = project.root / "fifo.py"
    script.write_text(
        "import os, sys\nsys.stdin.read()\n"
        "os.mkfifo(os.path.join(os.environ['BRIGADE_RUN_DIR'], 'transcript.json'))\n"
        "print('hello')\n"
    )
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    project.write_manifest(
        [{"id": "c", "prompt": "p", "graders": [{"type": "exact_output", "expected": "hello"}]}]
    )
    result = project.run(timeout=60)
    assert result.returncode == 0, result.stderr
    assert project.receipt("c:agent:1")["state"] == "accepted"
    assert project.run(timeout=60).returncode == 0
    shown = project.brigade("show", str(project.out), "c:agent:1", timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "transcript" not in shown.stdout.split("folders:")[0]
    assert project.brigade("report", str(project.out), timeout=60).returncode == 0
    receipt = project.receipt("c:agent:1")
    final = Path(receipt["run_dir"]) / "final.txt"
    final.unlink()
    os.mkfifo(final)
    regraded = project.brigade("regrade", str(project.out), timeout=60)
    assert regraded.returncode == 2
    assert regraded.stderr == (
        f"brigade: c:agent:1: output digest mismatch: {final} is missing, the receipt records "
        f"{receipt['output_digest']}; the stored output changed since the seat wrote it "
        "(restore it, or delete the cell folder to run it again)\n"
    )
    reported = project.brigade("report", str(project.out), timeout=60)
    assert reported.returncode == 0, reported.stderr
    shown = project.brigade("show", str(project.out), "c:agent:1", timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "answer (final.txt" not in shown.stdout


def test_a_transcript_a_seat_writes_itself_is_not_read_as_one(project: Project) -> None:
    """Regression: an exec seat (which has no transcript) left a brigade.transcript.v1 in
    its run folder and the report and show took it for what the agent did."""
    script = project.root / "planted.py"
    script.write_text(
        "import json, os, sys\nsys.stdin.read()\n"
        "entry = {'kind': 'message', 'role': 'assistant', 'text': 'I ran every test'}\n"
        "doc = {'schema': 'brigade.transcript.v1', 'entries': [entry]}\n"
        "path = os.path.join(os.environ['BRIGADE_RUN_DIR'], 'transcript.json')\n"
        "open(path, 'w').write(json.dumps(doc))\n"
        "print('hello')\n"
    )
    project.write_roster({"agent": {"cli": f"exec:{{python}} {script}"}})
    project.write_manifest([{"id": "c", "prompt": "p"}])
    assert project.run().returncode == 0
    run_dir = Path(project.receipt("c:agent:1")["run_dir"])
    assert "transcript_digest" not in json.loads((run_dir / "run.json").read_text())
    shown = project.brigade("show", str(project.out), "c:agent:1", "--json")
    assert json.loads(shown.stdout)["transcript_entries"] is None
    pages = "".join(p.read_text() for p in (project.out / "report").rglob("*.html"))
    assert "I ran every test" not in pages


# --- report destinations: as safe as the export's ----------------------------------------


def test_report_html_refuses_a_pages_folder_it_did_not_write(project: Project) -> None:
    """Regression: `--html saved.html` deleted a user's `saved_files/cells/ab.html`."""
    exported(project)
    mine = project.root / "saved_files"
    (mine / "cells").mkdir(parents=True)
    (mine / "cells" / "ab.html").write_text("precious")
    page = project.root / "saved.html"
    result = project.brigade("report", str(project.out), "--html", str(page))
    assert result.returncode == 2
    assert one_line(result.stderr) == (
        f"brigade: {mine}: not empty, and not a report's pages folder brigade wrote (it has "
        "no .brigade-report); name another file for the report, or move that folder away"
    )
    assert (mine / "cells" / "ab.html").read_text() == "precious"
    assert not page.exists()
    # a new folder: brigade marks it as its own, and writes there again later
    fresh = project.root / "fresh.html"
    assert project.brigade("report", str(project.out), "--html", str(fresh)).returncode == 0
    pages = project.root / "fresh_files"
    assert (pages / ".brigade-report").is_file()
    (pages / "notes.txt").write_text("mine")
    assert project.brigade("report", str(project.out), "--html", str(fresh)).returncode == 0
    assert (pages / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("where", ["report", "report/index_files", "report/index_files/cells"])
def test_a_symlinked_report_folder_is_never_written_through(project: Project, where: str) -> None:
    """Regression: a link as out/report/index_files was written through, and pages of the
    folder it pointed to deleted as stale."""
    exported(project)
    target = project.root / "elsewhere"
    (target / "cells").mkdir(parents=True)
    (target / "cells" / "ab.html").write_text("precious")
    folder = project.out / where
    shutil.rmtree(folder)
    folder.symlink_to(target)
    result = project.brigade("report", str(project.out))
    assert result.returncode == 0, result.stderr
    assert not folder.is_symlink()
    assert sorted(p.name for p in target.rglob("*")) == ["ab.html", "cells"]
    assert (target / "cells" / "ab.html").read_text() == "precious"
    assert (project.out / "report" / "index_files" / "cells").is_dir()
    # a link given as the page, or as its pages folder: refused
    link = project.root / "page.html"
    link.symlink_to(target / "cells" / "ab.html")
    refused = project.brigade("report", str(project.out), "--html", str(link))
    assert refused.returncode == 2
    assert one_line(refused.stderr) == (
        f"brigade: {link}: a symbolic link; brigade never writes a report through one "
        "(name the real file)"
    )
    (project.root / "other_files").symlink_to(target)
    other = project.root / "other.html"
    refused = project.brigade("report", str(project.out), "--html", str(other))
    assert refused.returncode == 2
    assert "other_files: a symbolic link" in one_line(refused.stderr)
    assert (target / "cells" / "ab.html").read_text() == "precious"


@pytest.mark.parametrize(
    ("flag", "name"),
    [("--junit", "cells/{id}/cell.json"), ("--html", "plan.json"), ("--junit", "summary.json")],
)
def test_report_files_never_land_on_the_output_directorys_own(
    project: Project, flag: str, name: str
) -> None:
    """Regression: `--junit out/cells/<id>/cell.json` and `--html out/plan.json` overwrote
    brigade's own files."""
    exported(project)
    target = project.out / name.format(id=project.receipt("a:agent:1")["cell_id"])
    before = target.read_bytes()
    result = project.brigade("report", str(project.out), flag, str(target))
    assert result.returncode == 2
    assert one_line(result.stderr) == (
        f"brigade: {target}: inside the output directory {project.out}; name a file outside "
        "it (or in its report/ folder)"
    )
    assert target.read_bytes() == before
    # its own report folder is fine
    own = project.out / "report" / "mine.xml"
    assert project.brigade("report", str(project.out), "--junit", str(own)).returncode == 0
    assert own.read_text().startswith("<?xml")


@pytest.mark.parametrize("command", ["report", "export", "regrade"])
def test_a_folder_that_is_no_output_directory_is_left_as_it_was(
    project: Project, command: str
) -> None:
    """Regression: the refusal (exit 2) left `.brigade.lock` behind (and made the folder)."""
    empty = project.root / "empty"
    empty.mkdir()
    absent = project.root / "absent" / "deeper"
    for folder in (empty, absent):
        result = project.brigade(command, str(folder))
        assert result.returncode == 2
        assert one_line(result.stderr) == (
            f"brigade: {folder}: no readable plan.json here; is this a brigade output directory?"
        )
    assert list(empty.iterdir()) == []
    assert not (project.root / "absent").exists()


@pytest.mark.parametrize(
    ("cells", "where"),
    [
        ([{"cell_id": "x"}], "cells[0].seat: is required but missing"),
        ([{"seat": {"seat": "a"}}], "cells[0].seat.cli: is required but missing"),
        ([5], "cells[0]: not a valid plan cell (TypeError: 'int' object is not subscriptable)"),
    ],
)
def test_a_broken_plan_json_is_named_with_its_json_path(
    project: Project, cells: list[Any], where: str
) -> None:
    out = project.root / "broken"
    out.mkdir()
    plan = {"schema": "brigade.eval_plan.v1", "name": "x", "manifest_digest": "a", "cells": cells}
    (out / "plan.json").write_text(json.dumps(plan))
    result = project.brigade("show", str(out))
    assert result.returncode == 2
    assert one_line(result.stderr) == f"brigade: {out / 'plan.json'}: {where}"
