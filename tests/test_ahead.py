"""A copied output directory's outputs digested beside the run by a helper process
(outdir/digests, run/ahead): what the helper answers, that its answers only ever confirm,
that a helper that dies, hangs or answers nonsense costs time and nothing else, and that a
copied directory's changed files are still found through it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import BATTERY_STATES, Project, opened
from test_restored import changed, mtimes, restore_copy, settled

from brigade import fs
from brigade.engine.engine import Engine
from brigade.engine.session import Options, Session, open_session
from brigade.outdir import digests, store
from brigade.run import ahead, proc


def folder(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def planted(tmp_path: Path) -> Path:
    """A folder of files of every kind the helper may meet."""
    root = tmp_path / "cells"
    root.mkdir(parents=True)
    (root / "a.txt").write_bytes(b"hello")
    (root / "big.txt").write_bytes(b"x" * 5000)
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_bytes(b"")
    (root / "elsewhere.txt").write_bytes(b"secret")
    (root / "link.txt").symlink_to(root / "elsewhere.txt")
    os.mkfifo(root / "fifo")
    return root


# (name, limit): each is its own key
WANTED: list[tuple[str, int]] = [
    ("a.txt", -1),
    ("sub/b.txt", 10),
    ("big.txt", 100),  # more than its limit: a digest of its first 101 bytes answers nothing
    ("link.txt", -1),  # a symlink: never followed
    ("fifo", -1),  # never opened to wait on
    ("sub", -1),  # a folder
    ("missing.txt", -1),
]


def job_of(fd: int, wanted: list[tuple[str, int]] = WANTED) -> digests.Job:
    keys = [name for name, _ in wanted]
    tags = array("q", range(len(keys)))  # (each key's own tag)
    limits = array("q", [limit for _, limit in wanted])
    return digests.Job(fd, keys, tags, limits, lambda key, _: key)


def helper_output(job: digests.Job) -> bytes:
    numbers, found = digests.digest_all(job.folder_fd, job.wanted(0, len(job.keys)))
    return numbers + found


def test_the_answers_are_what_the_run_would_read_itself(tmp_path: Path) -> None:
    root = planted(tmp_path)
    fd = folder(root)
    try:
        job = job_of(fd)
        answers = digests.decode(digests.folder_of(fd), job, helper_output(job))
        assert answers.of(fd) is answers
        for tag, (name, limit) in enumerate(WANTED[:2]):
            info, digest = fs.digest_stat(name, limit if limit >= 0 else None, dir_fd=fd)
            found = answers.get(name, tag)
            assert found is not None
            assert found[1] == digest
            keyed = ("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino")
            assert [getattr(found[0], k) for k in keyed] == [getattr(info, k) for k in keyed]
            assert answers.get(name, tag + 1) is None  # another attempt's file: no answer
        for tag, (name, _) in enumerate(WANTED[2:], start=2):
            assert answers.get(name, tag) is None
        assert answers.get("not-wanted.txt") is None
        # answers of another folder are none of this one's
        other = folder(tmp_path)
        try:
            assert answers.of(other) is digests.NONE
        finally:
            os.close(other)
    finally:
        os.close(fd)


def test_a_long_list_is_written_and_read_a_chunk_at_a_time(tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    wanted = []
    for number in range(10_000):
        (root / f"{number}.txt").write_text(str(number))
        wanted.append((f"{number}.txt", -1))
    fd = folder(root)
    try:
        job = job_of(fd, wanted)
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out:
            job.write(out.fileno(), given)
            given.flush()
            given.seek(0)
            env = {"PYTHONPATH": str(Path(digests.__file__).resolve().parents[2])}
            program = f"from brigade.outdir.digests import main; main({given.fileno()})"
            done = subprocess.run(
                [sys.executable, "-c", program],
                input=b"", capture_output=True, pass_fds=(fd, given.fileno(), out.fileno()),
                env=env, timeout=120, check=True,
            )  # fmt: skip
            assert done.stdout == b"\x00"
            data = os.pread(out.fileno(), os.fstat(out.fileno()).st_size, 0)
        answers = digests.decode(digests.folder_of(fd), job, data)
        for number in (0, 4095, 4096, 9999):
            found = answers.get(f"{number}.txt", number)
            assert found is not None
            assert found[1] == fs.digest_stat(f"{number}.txt", dir_fd=fd)[1]
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage", b"\x00" * 64 * (len(WANTED) - 1), b"\x00" * (64 * len(WANTED) + 1)],
)
def test_answers_that_are_not_one_per_file_are_none(data: bytes) -> None:
    job = job_of(-1)
    assert digests.decode((1, 2), job, data) is digests.NONE
    assert not digests.decode((1, 2), job, data)


def plan_of(*cell_ids: str) -> Any:
    return SimpleNamespace(cells=[SimpleNamespace(cell_id=cell_id) for cell_id in cell_ids])


def output_directory(tmp_path: Path) -> tuple[Path, int]:
    """An output directory with a cells folder (open) and an export folder."""
    out = tmp_path / "out"
    cells = planted(out)
    export = out / store.EXPORT_DIR / store.CELLS_DIR
    export.mkdir(parents=True)
    (export / "c1.json").write_bytes(b'{"cell": 1}')
    (export / "c2.json").symlink_to(cells / "elsewhere.txt")
    return out, folder(cells)


def test_a_helper_digests_the_cells_and_the_export_beside_the_run(tmp_path: Path) -> None:
    out, fd = output_directory(tmp_path)
    helper = ahead.Ahead(out, plan_of("c1", "c2", "c3"))
    try:
        if ahead._cores() < 2:
            pytest.skip("the helper runs only with a second core")
        wait = helper.start(fd, lambda: job_of(fd))
        answers = wait()
        found = answers.get("a.txt", 0)
        assert found is not None and found[1] == fs.digest_stat("a.txt", dir_fd=fd)[1]
        assert answers.get("link.txt", 3) is None and answers.get("fifo", 4) is None
        assert helper.answers(0) is digests.NONE  # taken once
        exported = helper.export_answers()
        export_fd = folder(out / "export" / "cells")
        try:
            assert exported.of(export_fd) is exported
            assert exported.of(fd) is digests.NONE  # not the folder they are of
            found = exported.get("c1")
            assert found is not None and found[1] == fs.digest_stat("c1.json", dir_fd=export_fd)[1]
            assert exported.get("c2") is None and exported.get("c3") is None
        finally:
            os.close(export_fd)
    finally:
        helper.close()
        os.close(fd)
    assert helper._child is None


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_cores", lambda: 2)


@pytest.mark.parametrize(
    "program",
    [
        "import sys; sys.exit(1)",  # dies at once
        "import sys; sys.stdin.buffer.read(); sys.stdout.buffer.write(b'xx')",  # no answers
        "raise SystemExit(__import__('os').kill(__import__('os').getpid(), 9))",  # killed
    ],
)
def test_a_helper_that_dies_or_answers_nothing_costs_nothing_but_the_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_cores: None, program: str
) -> None:
    monkeypatch.setattr(ahead, "_PROGRAM", program)
    out, fd = output_directory(tmp_path)
    helper = ahead.Ahead(out, plan_of("c1"))
    try:
        assert helper.start(fd, lambda: job_of(fd))() is digests.NONE
        assert helper.export_answers() is digests.NONE
    finally:
        helper.close()
        os.close(fd)


def test_a_helper_that_hangs_is_stopped_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_cores: None
) -> None:
    monkeypatch.setattr(ahead, "_PROGRAM", "import time; time.sleep(600)")
    monkeypatch.setattr(ahead, "_GRACE_SECONDS", 0.5)
    out, fd = output_directory(tmp_path)
    helper = ahead.Ahead(out, plan_of("c1"))
    try:
        wait = helper.start(fd, lambda: job_of(fd))
        child = helper._child
        started = time.monotonic()
        assert wait() is digests.NONE
        assert time.monotonic() - started < 30
        assert child.poll() is not None  # stopped, and reaped
    finally:
        helper.close()
        os.close(fd)


def test_one_core_starts_no_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_cores", lambda: 1)
    out, fd = output_directory(tmp_path)
    helper = ahead.Ahead(out, plan_of("c1"))
    try:
        assert helper.start(fd, lambda: job_of(fd))() is digests.NONE
        assert helper._child is None
    finally:
        os.close(fd)


def test_the_helper_gets_no_environment_and_none_of_the_runs_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-passed-on")
    kept = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    os.set_inheritable(kept, True)  # even one a careless library left inheritable
    passed = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    program = (
        "import os, sys; sys.stdout.write(repr((dict(os.environ), sorted(map(int, "
        "os.listdir('/proc/self/fd'))))))"
    )
    try:
        child = proc.start_helper([sys.executable, "-I", "-S", "-c", program], [passed])
        stdout, _ = child.communicate(b"", timeout=60)
    finally:
        os.close(kept)
        os.close(passed)
    environment, descriptors = ast.literal_eval(stdout.decode())
    assert "ANTHROPIC_API_KEY" not in environment
    assert not any("sk-ant" in value for value in environment.values())
    assert passed in descriptors and kept not in descriptors


# -- through the run --------------------------------------------------------------------


def final_of(project: Project, coordinate: str) -> Path:
    return project.cell_dir(coordinate) / "attempts" / "attempt-001" / "run" / "final.txt"


def rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    info = path.stat()
    data = path.read_bytes()
    assert old in data and len(old) == len(new)
    path.write_bytes(data.replace(old, new))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_a_copied_directory_with_one_output_edited_refuses_that_output(
    finished_battery: Project,
) -> None:
    """The attack: the helper vouches for the copy's files; an output edited at its size and
    mtime is still found by its bytes."""
    settled(finished_battery)
    restore_copy(finished_battery)
    receipt = finished_battery.receipt("ok:agent:1")
    rewrite_keeping_size_and_mtime(final_of(finished_battery, "ok:agent:1"), b"hello", b"hellO")
    done = finished_battery.run()
    assert done.returncode == 2, done.stderr
    assert "output digest mismatch" in done.stderr
    assert finished_battery.receipt("ok:agent:1") == receipt


def test_a_copied_directory_with_one_exported_file_edited_exports_it_again(
    finished_battery: Project,
) -> None:
    settled(finished_battery)
    restore_copy(finished_battery)
    cell_id = finished_battery.receipt("ok:agent:1")["cell_id"]
    exported = finished_battery.out / "export" / "cells" / f"{cell_id}.json"
    right = exported.read_bytes()
    rewrite_keeping_size_and_mtime(exported, b'"accepted"', b'"rejected"')
    before = mtimes(finished_battery.out)
    assert finished_battery.run().returncode == 3
    assert exported.read_bytes() == right
    assert changed(before, mtimes(finished_battery.out)) == {f"export/cells/{cell_id}.json"}
    assert finished_battery.states() == BATTERY_STATES


def test_a_copied_directory_is_vouched_for_by_the_helper_not_read_again_here(
    finished_battery: Project, monkeypatch: pytest.MonkeyPatch, two_cores: None
) -> None:
    """A resume of a copy reads no final.txt and no exported cell file in the run's own
    process: the helper read them."""
    settled(finished_battery)
    restore_copy(finished_battery)
    before = mtimes(finished_battery.out)
    read: list[str] = []
    for name in ("read_stat", "digest_stat", "read_regular"):
        original = getattr(fs, name)

        def spy(path: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            read.append(str(path))
            return _original(path, *args, **kwargs)

        monkeypatch.setattr(fs, name, spy)
    session = finishing(finished_battery)
    assert session.ahead is not None and session.ahead._jobs, "no helper was started"
    engine = Engine(session)
    assert engine.chosen.untouched
    assert engine.finish() is None
    assert not [path for path in read if path.endswith("final.txt")]
    assert not [path for path in read if re.fullmatch(r"[0-9a-f]{64}\.json", path)]
    assert session.ahead._child is None  # closed with the run
    assert changed(before, mtimes(finished_battery.out)) == set()
    assert json.loads((finished_battery.out / "summary.json").read_text())


def finishing(project: Project) -> Session:
    """The session a run that finishes opens (`brigade run`, doit's run)."""
    options = Options(
        manifest=project.manifest, roster=project.roster, out=project.out,
        workspace=project.workspace,
    )  # fmt: skip
    return open_session(options, finishing=True)


def test_a_listing_or_a_session_that_fails_starts_or_keeps_no_helper(
    finished_battery: Project, monkeypatch: pytest.MonkeyPatch, two_cores: None
) -> None:
    settled(finished_battery)
    restore_copy(finished_battery)
    started: list[ahead.Ahead] = []
    original = ahead.Ahead.start

    def spy(self: ahead.Ahead, *args: Any) -> Any:
        started.append(self)
        return original(self, *args)

    monkeypatch.setattr(ahead.Ahead, "start", spy)
    assert opened(finished_battery).ahead is None  # (a listing's session: no lock taken)
    listed = finished_battery.doit("list")
    assert listed.returncode == 0, listed.stderr
    assert started == []

    def broken(*args: Any) -> Any:
        raise RuntimeError("after the scan")

    monkeypatch.setattr("brigade.engine.session.battery_unseen", broken)
    with pytest.raises(RuntimeError):
        finishing(finished_battery)
    assert len(started) == 1 and started[0]._child is None  # closed: stopped and reaped


def test_an_output_longer_than_its_recorded_size_is_not_answered_for(
    finished_battery: Project, two_cores: None
) -> None:
    """The attack: the output index's size one short of a final.txt whose bytes were then
    appended to; the helper's digest of the size and a byte would be the recorded one."""
    settled(finished_battery)
    restore_copy(finished_battery)
    cell_id = finished_battery.receipt("ok:agent:1")["cell_id"]
    final = final_of(finished_battery, "ok:agent:1")
    index_path = finished_battery.out / store.OUTPUT_INDEX
    index = json.loads(index_path.read_text())
    index["entries"][cell_id][1] = final.stat().st_size - 1
    index_path.write_text(json.dumps(index))
    with final.open("ab") as handle:
        handle.write(b"\nINJECTED: every check passed\n")
    done = finished_battery.run()
    assert done.returncode == 2, done.stderr
    assert "output digest mismatch" in done.stderr


@pytest.mark.parametrize("field", ["size", "attempt"])
def test_a_cache_number_past_64_bits_costs_no_traceback(
    finished_battery: Project, two_cores: None, field: str
) -> None:
    settled(finished_battery)
    restore_copy(finished_battery)
    cell_id = finished_battery.receipt("ok:agent:1")["cell_id"]
    name = store.OUTPUT_INDEX if field == "size" else store.RECEIPT_INDEX
    path = finished_battery.out / name
    index = json.loads(path.read_text())
    if field == "size":
        index["entries"][cell_id][1] = 1 << 64
    else:
        index["entries"][cell_id][2][2] = 1 << 64  # the view's attempt
    path.write_text(json.dumps(index))
    done = finished_battery.run()
    assert "Traceback" not in done.stderr
    assert done.returncode == 3, done.stderr
    assert finished_battery.states() == BATTERY_STATES
