"""Reliability: full or read-only disks, unusable output paths, writes failing midway.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, brigade_command
from reliability import (
    assert_valid,
    launched,
    load_json,
    one_line,
    temp_files,
    tree_snapshot,
    without_seat_warnings,
)

from brigade.outdir import store

# ---------------------------------------------------------------------------------------
# 6: full or read-only disks
# ---------------------------------------------------------------------------------------


def test_output_path_that_is_a_file_is_refused(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    project.out = project.root / "out-file"
    project.out.write_text("not a folder\n")
    for result in (project.doit(), project.run()):
        assert result.returncode == 2
        assert "not a folder" in one_line(result.stderr)
    assert project.out.read_text() == "not a folder\n"
    assert not project.log.exists()


@pytest.mark.parametrize("where", ["under a file", "under /proc"])
def test_output_dir_that_cannot_be_created_is_refused(project: Project, where: str) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    (project.root / "file").write_text("x")
    project.out = {
        "under a file": project.root / "file" / "out",
        "under /proc": Path("/proc/self/brigade-out"),
    }[where]
    for result in (project.doit(), project.run()):
        assert result.returncode == 2, result.stderr
        assert str(project.out) in one_line(result.stderr)
    assert not project.log.exists()


def namespace_mounts_work(folder: Path) -> bool:
    """Whether this process may make a private mount namespace with a tmpfs (root, unshare)."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = folder / "probe"
    probe.mkdir(exist_ok=True)
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {probe}"],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


def doit_shell(project: Project) -> str:
    """The doit command line for a shell script: `brigade doit`, whose DB write on a full
    disk is one line (plain doit's own DB write is doit's: a traceback, DEVELOPERS.md)."""
    argv = [*brigade_command(), "doit", *project.variables()]
    return " ".join(f"'{arg}'" for arg in argv)


def receipts_are_whole(out: Path) -> None:
    """No truncated or invalid document and no temp file anywhere under out."""
    assert temp_files(out) == set()
    for path in out.rglob("*.json"):
        if path.name == "cell.json":
            assert_valid(path, "brigade.eval_cell.v1")
        elif path.parent == out and path.name in ("plan.json", "summary.json"):
            load_json(path)


def test_read_only_output_dir_is_refused_cleanly(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    assert project.doit().returncode == 0
    project.write_manifest([{"id": "a", "prompt": "answer: a"}, {"id": "b", "prompt": "answer: b"}])

    def records() -> dict[str, tuple[str, bytes]]:
        # the lock and doit's DB are existing files: chmod on their folder does not stop them
        snapshot = tree_snapshot(project.out)
        return {k: v for k, v in snapshot.items() if k not in (".brigade.lock", ".doit.db")}

    before = records()
    if os.geteuid() != 0:
        mode = project.out.stat().st_mode
        for folder in (project.out, project.out / "cells"):
            folder.chmod(0o555)
        try:
            results = [project.doit(), project.run()]
        finally:
            for folder in (project.out, project.out / "cells"):
                folder.chmod(mode)
    else:
        if not namespace_mounts_work(project.root):
            pytest.skip("running as root without mount namespaces: cannot make a read-only dir")
        script = (
            f"mount --bind '{project.out}' '{project.out}' && "
            f"mount -o remount,bind,ro '{project.out}' && {doit_shell(project)}"
        )
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            capture_output=True,
            text=True,
            env=project.env(),
            timeout=120,
        )
        results = [done]
    for result in results:
        assert result.returncode == 2, result.stderr
        line = one_line(without_seat_warnings(result.stderr))
        assert "Read-only file system" in line or "Permission denied" in line, line
    assert records() == before
    assert len(launched(project)) == 1


@pytest.mark.parametrize("spare_kib", [0, 8, 16, 24, 32, 48])
def test_full_disk_is_refused_cleanly(project: Project, spare_kib: int) -> None:
    """An output dir on a tiny tmpfs, filled up but for `spare_kib`, so writes fail at
    different points of the run (lock, plan, seat files, receipts, summary)."""
    if not namespace_mounts_work(project.root):
        pytest.skip("needs a private mount namespace (root with unshare) for a tiny tmpfs")
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    assert project.doit().returncode == 0
    project.write_manifest([{"id": "a", "prompt": "answer: a"}, {"id": "b", "prompt": "answer: b"}])
    stage = project.root / "stage"
    result = project.root / "result"
    recovered = project.root / "recovered"
    out = project.out
    script = "; ".join(
        [
            f"cp -a '{out}' '{stage}'",
            f"mount -t tmpfs -o size=256k tmpfs '{out}'",
            f"cp -a '{stage}/.' '{out}/'",
            f"head -c {spare_kib * 1024} /dev/zero > '{out}/spare'",
            f"cat /dev/zero > '{out}/filler' 2>/dev/null",
            f"rm '{out}/spare'",
            doit_shell(project),
            "code=$?",
            f"cp -a '{out}' '{result}'",
            f"rm -f '{out}/filler'",
            f"{doit_shell(project)} 2> '{project.root}/recovery.err'",
            f"echo $? > '{project.root}/recovery.code'",
            f"cp -a '{out}' '{recovered}'",
            "exit $code",
        ]
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=project.env(),
        timeout=120,
    )
    assert "Traceback" not in done.stderr
    receipts_are_whole(result)
    a_cell = next(p for p in (stage / "cells").iterdir())
    assert tree_snapshot(result / "cells" / a_cell.name) == tree_snapshot(a_cell)
    if done.returncode != 0:  # else it all fitted
        assert done.returncode == 2, done.stderr
        assert any("No space left on device" in line for line in done.stderr.splitlines())
        states = [load_json(p)["state"] for p in result.glob("cells/*/cell.json")]
        assert sorted(states) in (["unscored"], ["running", "unscored"], ["unscored", "unscored"])
    # with space again, a resume finishes the job
    assert (project.root / "recovery.code").read_text().strip() == "0"
    assert load_json(recovered / "summary.json")["counts"]["unscored"] == 2
    receipts_are_whole(recovered)


def test_atomic_write_failing_midway_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk filling up mid-write: the write raises, the old file and nothing else remains."""
    target = tmp_path / "cell.json"
    target.write_bytes(b'{"old": true}\n')
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, data: bytes) -> int:
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode)))
    with pytest.raises(OSError) as raised:
        store.atomic_write_bytes(target, b'{"new": true, "padding": "' + b"x" * 4096 + b'"}\n')
    assert raised.value.errno == errno.ENOSPC
    assert target.read_bytes() == b'{"old": true}\n'
    assert sorted(os.listdir(tmp_path)) == ["cell.json"]
