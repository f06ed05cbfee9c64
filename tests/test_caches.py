"""The output directory's caches: one sidecar mechanism, keys that cannot lie.

Unit tests of outdir/caches.py, then end to end: a file rewritten with the same
size and its mtime restored, a changed source file of brigade itself, and
caches of the wrong type or garbage are noticed by every cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import DODO, GRADED, REPO, Project

from brigade import fs
from brigade.inputs import sources
from brigade.outdir import caches, export

CACHE_FILES = (
    ".plan-index.json",
    ".receipt-index.json",
    ".output-index.json",
    ".report-state.json",
    ".report-rows.json",
    ".summary-key.json",
)


def rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    """Edit a file in place as a careful tamperer would: same size, mtime set back."""
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1
    info = path.stat()
    with open(path, "r+b") as handle:  # same inode
        handle.write(data.replace(old, new))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        info.st_size,
        info.st_mtime_ns,
        info.st_ino,
    )


# -- the sidecar ---------------------------------------------------------------------


def test_an_entry_vouches_for_a_file_only_while_its_stat_is_unchanged(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_bytes(b"rejected")
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "k1")
    assert sidecar.fresh_file("file.txt", target) is caches.MISS
    sidecar.record("file.txt", caches.stat_of(target), {"state": "rejected"})
    sidecar.save()
    again = caches.Sidecar(tmp_path / ".cache.json", "k1")
    assert again.fresh_file("file.txt", target) == {"state": "rejected"}
    # same size, mtime restored: the ctime still moved
    rewrite_keeping_size_and_mtime(target, b"rejected", b"accepted")
    assert again.fresh_file("file.txt", target) is caches.MISS
    # replaced by another file (a rename over it): a new inode
    again.record("file.txt", caches.stat_of(target), "x")
    replacement = tmp_path / "other.txt"
    replacement.write_bytes(b"accepted")
    os.replace(replacement, target)
    assert again.fresh_file("file.txt", target) is caches.MISS
    assert again.fresh_file("missing.txt", tmp_path / "missing.txt") is caches.MISS


def test_a_copied_folder_is_told_apart_and_its_files_vouched_for_by_their_bytes(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "file.txt").write_bytes(b"accepted")
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "k1")
    assert not sidecar.copied("a", caches.stat_of(folder))  # never seen: no guess
    info = caches.stat_of(folder / "file.txt")
    sidecar.record("file.txt", info, "v", caches.content_digest(b"accepted"))
    sidecar.save()
    again = caches.Sidecar(tmp_path / ".cache.json", "k1")
    assert not again.copied("a", caches.stat_of(folder))
    shutil.move(folder, tmp_path / "aside")
    subprocess.run(["cp", "-a", str(tmp_path / "aside"), str(folder)], check=True)
    copied = caches.Sidecar(tmp_path / ".cache.json", "k1")
    assert copied.copied("a", caches.stat_of(folder))
    # the eager path gives the lazy path's answers: the same bytes vouch, others do not
    assert copied.recall("file.txt", "file.txt", fs.open_folder(folder), eager=True) == "v"
    assert copied.fresh_file("file.txt", folder / "file.txt") == "v"  # the new stat kept
    rewrite_keeping_size_and_mtime(folder / "file.txt", b"accepted", b"rejected")
    for eager in (True, False):
        assert copied.recall("file.txt", folder / "file.txt", eager=eager) is caches.MISS
    (folder / "link.txt").symlink_to(folder / "file.txt")
    copied.record("link.txt", caches.stat_of(folder / "file.txt"), "v", "digest")
    assert copied.recall("link.txt", folder / "link.txt", eager=True) is caches.MISS


@pytest.mark.parametrize("count", [0, 1, 1999, 2000, 2001, 4500])
def test_a_sidecar_is_written_in_pieces_as_one_document(tmp_path: Path, count: int) -> None:
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "k1", load=False)
    sidecar.meta["cells"] = [1, 2]
    sidecar.changed = True
    info = caches.stat_of(tmp_path)
    for index in range(count):
        sidecar.record(f"n{index}", info, [index, "value"], "digest")
    sidecar.save()
    doc = json.loads((tmp_path / ".cache.json").read_text())
    meta = {"cells": [1, 2]}
    assert doc == {"key": "k1", "meta": meta, "stamp": sidecar.stamp, "entries": sidecar.entries}
    again = caches.Sidecar(tmp_path / ".cache.json", "k1")
    assert again.entries == sidecar.entries and again.meta == meta
    assert all(again.fresh(f"n{index}", info) == [index, "value"] for index in range(count))


def test_new_stats_of_the_same_bytes_rewrite_only_the_stats(tmp_path: Path) -> None:
    """A copied directory's files all have new stats and the same bytes: the values (a
    hundred megabytes at 100,000 cells) are left as written, only NAME.stats changes."""
    target = tmp_path / "file.txt"
    target.write_bytes(b"accepted")
    path = tmp_path / ".cache.json"
    sidecar = caches.Sidecar(path, "k1")
    sidecar.record("file.txt", caches.stat_of(target), "v", caches.content_digest(b"accepted"))
    sidecar.save()
    values = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino)
    shutil.copy(target, tmp_path / "copy")
    os.replace(tmp_path / "copy", target)  # the same bytes, a new inode
    copied = caches.Sidecar(path, "k1")
    assert copied.fresh_file("file.txt", target) is caches.MISS
    assert copied.recall("file.txt", target) == "v"
    assert copied.changed and not copied.altered
    copied.save()
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino) == values
    assert caches.Sidecar(path, "k1").fresh_file("file.txt", target) == "v"


def vouched_pair(a: Path, b: Path, path: Path, meta: dict[str, Any] | None = None) -> Any:
    """Two files of the same size and other bytes, `a` and `b`, vouched for as "A" and
    "B" by the sidecar at `path` (saved, with `meta`); the sidecar."""
    a.write_bytes(b"accepted")
    b.write_bytes(b"rejected")
    sidecar = caches.Sidecar(path, "k1")
    sidecar.record("a", caches.stat_of(a), "A")
    sidecar.record("b", caches.stat_of(b), "B")
    sidecar.meta.update(meta or {})
    sidecar.save()
    return sidecar


def test_stats_written_with_other_values_vouch_for_nothing(tmp_path: Path) -> None:
    """Stats lost, or left from another write of the values (their stamps differ): every
    entry misses, and the rows given out after cannot make an old entry's row stand for
    another file. The attack: with the stats lost, `a` is replaced by a hard link to `b`
    (same size, other bytes) and `b` recorded again; had `b` been given `a`'s old row,
    `a` would be vouched for with its old value by `b`'s stat."""
    a, b, path = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / ".cache.json"
    sidecar = vouched_pair(a, b, path, {"seen": 1})
    old_stats = caches.stats_path(path).read_bytes()
    sidecar.record("b", caches.stat_of(b), "B2")  # another value: new values, new stamp
    sidecar.meta["seen"] = 2
    sidecar.save()
    caches.stats_path(path).write_bytes(old_stats)
    stale = caches.Sidecar(path, "k1")
    assert stale.fresh_file("a", a) is caches.MISS and stale.fresh_file("b", b) is caches.MISS
    assert stale.meta == {"seen": 2}  # the values' own (the newest stats' would say so too)
    caches.stats_path(path).unlink()
    lost = caches.Sidecar(path, "k1")
    assert lost.fresh_file("a", a) is caches.MISS
    a.unlink()
    os.link(b, a)
    lost.record("b", caches.stat_of(b), "B2")
    assert lost.fresh_file("b", b) == "B2"
    assert lost.fresh_file("a", a) is caches.MISS
    lost.save()
    again = caches.Sidecar(path, "k1")
    assert again.fresh_file("a", a) is caches.MISS and again.fresh_file("b", b) == "B2"


def lose_stats_in_a_failed_write(path: Path, stat_of_other: Any) -> None:
    """A new value saved while the stats cannot be written (a crash between the two
    writes, a full disk): the values are of a new stamp, the stats of the old one."""
    sidecar = caches.Sidecar(path, "k1")
    sidecar.record("c", stat_of_other, "C")
    stats = caches.stats_path(path)
    stats.unlink()
    (stats / "x").mkdir(parents=True)  # a folder holding something: not ours to replace
    sidecar.save()
    shutil.rmtree(stats)


@pytest.mark.parametrize("lose", ["deleted", "failed write"])
@pytest.mark.parametrize("meta", ["copied", "moved"])
def test_a_meta_only_save_after_lost_stats_writes_the_values_too(
    tmp_path: Path, lose: str, meta: str
) -> None:
    """With the stats lost, a save whose only change is the meta (a copied cells folder,
    a moved export) must not write stats alone under the values' stamp: they would pair
    with entries naming rows they do not hold, the next row given out (to `b`) would be
    `a`'s, and `a`, replaced by a hard link to `b` (same size, other bytes), would be
    vouched for with its old value."""
    a, b, path = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / ".cache.json"
    vouched_pair(a, b, path)
    c = tmp_path / "c.txt"
    c.write_bytes(b"c")
    if lose == "deleted":
        caches.stats_path(path).unlink()
    else:
        lose_stats_in_a_failed_write(path, caches.stat_of(c))
    lost = caches.Sidecar(path, "k1")
    if meta == "copied":
        lost.copied("cells", caches.stat_of(tmp_path))
    else:
        export.moved_secrets(lost, tmp_path)
    lost.save()
    again = caches.Sidecar(path, "k1")
    a.unlink()
    os.link(b, a)
    again.record("b", caches.stat_of(b), "B")
    again.save()
    assert caches.Sidecar(path, "k1").fresh_file("a", a) is caches.MISS


def test_the_stats_meta_is_the_newest(tmp_path: Path) -> None:
    """`copied` remembers a folder in the stats' meta (a copied directory writes no
    values); without those stats the values' meta, as it was when they were written,
    stands in."""
    folder = tmp_path / "cells"
    folder.mkdir()
    path = tmp_path / ".cache.json"
    sidecar = caches.Sidecar(path, "k1")
    sidecar.record("x", caches.stat_of(tmp_path), 1)
    assert not sidecar.copied("cells", caches.stat_of(folder))
    sidecar.save()
    first = caches.Sidecar(path, "k1").meta
    shutil.move(folder, tmp_path / "aside")
    folder.mkdir()
    moved = caches.Sidecar(path, "k1")
    assert moved.copied("cells", caches.stat_of(folder)) and not moved.altered
    moved.save()
    assert not caches.Sidecar(path, "k1").copied("cells", caches.stat_of(folder))
    caches.stats_path(path).unlink()
    assert caches.Sidecar(path, "k1").meta == first


def stat_like(size: int, mtime_ns: int, ctime_ns: int, ino: int) -> Any:
    return SimpleNamespace(st_size=size, st_mtime_ns=mtime_ns, st_ctime_ns=ctime_ns, st_ino=ino)


def test_any_inode_and_time_a_stat_may_hold(tmp_path: Path) -> None:
    """Inodes past 2**63 (overlayfs's high bits) are kept and matched; a time that does
    not fit 64 bits (past the year 2262) is never vouched for, and costs no traceback."""
    path = tmp_path / ".cache.json"
    sidecar = caches.Sidecar(path, "k1")
    odd = {
        "huge inode": stat_like(5, 1, 2, (1 << 64) - 7),
        "half": stat_like(5, 1, 2, 1 << 63),
        "before 1970": stat_like(5, -(10**18), -1, 3),
    }
    for name, info in odd.items():
        sidecar.record(name, info, name)
    sidecar.record("far future", stat_like(5, 1 << 63, 2, 4), "x")
    sidecar.record("small", stat_like(5, 1, 2, 4), "y")
    sidecar.save()
    again = caches.Sidecar(path, "k1")
    for name, info in odd.items():
        assert again.fresh(name, info) == name
    assert again.fresh("huge inode", stat_like(5, 1, 2, (1 << 63) - 7)) is caches.MISS
    assert again.fresh("far future", stat_like(5, 1 << 63, 2, 4)) is caches.MISS
    assert again.fresh("small", stat_like(5, 1, 2, 4 + (1 << 64))) is caches.MISS
    assert again.fresh("small", stat_like(5, 1, 2, 4)) == "y"
    # the same bytes under a stat whose time does not fit: their value, not vouched for
    again.record("kept", stat_like(5, 1, 2, 9), "z", "digest")
    assert again.same_digest("kept", stat_like(5, 1 << 63, 2, 9), "digest") == "z"
    assert "kept" not in again.entries
    again.record("kept", stat_like(5, 1, 2, 9), "z", "digest")
    assert again.same_digest("kept", stat_like(5, 3, 4, (1 << 64) - 1), "digest") == "z"
    assert again.fresh("kept", stat_like(5, 3, 4, (1 << 64) - 1)) == "z"


def test_forgotten_entries_leave_no_stats_behind(tmp_path: Path) -> None:
    path = tmp_path / ".cache.json"
    sidecar = caches.Sidecar(path, "k1")
    infos = {f"n{index}": stat_like(index, index, index, index) for index in range(10)}
    for name, info in infos.items():
        sidecar.record(name, info, name)
    sidecar.keep_only({"n3", "n7"})
    sidecar.save()
    again = caches.Sidecar(path, "k1")
    assert len(again.stats) == 6
    assert [again.fresh(name, infos[name]) for name in ("n3", "n7")] == ["n3", "n7"]


@pytest.mark.parametrize(
    "stats",
    [
        b"not json",
        b'{"key": "other", "stamp": "S", "stats": ""}',
        b'{"key": "k1", "stamp": "S", "stats": "not base64!"}',
        b'{"key": "k1", "stamp": "S", "stats": "AAAA"}',  # 3 bytes: no whole row
        b'{"key": "k1", "stamp": "S", "stats": 7}',
        b'{"key": "k1", "stamp": "S"}',
        b"[]",
    ],
)
def test_garbage_stats_vouch_for_nothing(tmp_path: Path, stats: bytes) -> None:
    target = tmp_path / "file.txt"
    target.write_bytes(b"x")
    path = tmp_path / ".cache.json"
    sidecar = caches.Sidecar(path, "k1")
    sidecar.record("file.txt", caches.stat_of(target), 1)
    sidecar.save()
    assert sidecar.stamp is not None
    caches.stats_path(path).write_bytes(stats.replace(b'"S"', json.dumps(sidecar.stamp).encode()))
    again = caches.Sidecar(path, "k1")
    assert again.fresh_file("file.txt", target) is caches.MISS
    again.record("file.txt", caches.stat_of(target), 1)
    again.save()
    assert caches.Sidecar(path, "k1").fresh_file("file.txt", target) == 1


def test_a_table_has_no_stats(tmp_path: Path) -> None:
    path = tmp_path / ".rows.json"
    table = caches.Table(path, "k1")
    table.entries["cell"] = ["stamp", [1, 2]]
    table.changed = True
    table.save()
    assert caches.Table(path, "k1").entries == {"cell": ["stamp", [1, 2]]}
    assert caches.Table(path, "k2").entries == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rows.json"]


def test_read_stat_reads_a_file_once_with_its_stat(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_bytes(b"x" * 100)
    info, data = fs.read_stat(target)
    assert data == b"x" * 100 and info.st_ino == target.stat().st_ino
    assert fs.read_stat(target, 10)[1] == b"x" * 11  # the limit, and one more byte


@pytest.mark.parametrize("read", [fs.read_stat, fs.digest_stat])
def test_reads_with_a_stat_open_regular_files_only(tmp_path: Path, read: Any) -> None:
    target = tmp_path / "file.txt"
    target.write_bytes(b"x")
    os.mkfifo(tmp_path / "fifo")  # an open that waited on it would never return
    (tmp_path / "link").symlink_to(target)
    for planted in ("fifo", "link"):
        with pytest.raises(fs.NotRegularFile):
            read(tmp_path / planted)
    with pytest.raises(IsADirectoryError):
        read(tmp_path)
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "missing")


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7])
def test_digest_stat_hashes_a_regular_file_in_pieces(tmp_path: Path, size: int) -> None:
    target = tmp_path / "file.bin"
    data = os.urandom(size)
    target.write_bytes(data)
    info, digest = fs.digest_stat(target)
    assert digest == caches.content_digest(data) and info.st_ino == target.stat().st_ino
    folder = fs.open_folder(tmp_path)
    try:
        assert fs.digest_stat("file.bin", dir_fd=folder)[1] == digest
    finally:
        os.close(folder)


def test_a_copied_large_file_is_vouched_for_without_holding_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a check only the digest is wanted: a copied 47 MB plan.json of 100,000
    cells is hashed in pieces, never read whole (the peak of a cold resume)."""
    data = os.urandom(3 * (1 << 20) + 5)
    target = tmp_path / "plan.json"
    target.write_bytes(data)
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "k1")
    sidecar.record("plan.json", caches.stat_of(target), "v", caches.content_digest(data))
    shutil.copy(target, tmp_path / "copy")
    os.replace(tmp_path / "copy", target)  # the same bytes, a new inode

    def whole(*args: object, **kwargs: object) -> None:
        raise AssertionError("read whole")

    monkeypatch.setattr(fs, "read_regular", whole)
    monkeypatch.setattr(fs, "read_stat", whole)
    for eager in (False, True):
        assert sidecar.recall("plan.json", target, eager=eager) == "v"
    assert sidecar.fresh_file("plan.json", target) == "v"  # the new stat kept
    rewrite_keeping_size_and_mtime(target, data[:10], b"0123456789")
    for eager in (False, True):
        assert sidecar.recall("plan.json", target, eager=eager) is caches.MISS
    target.unlink()
    target.symlink_to(tmp_path / ".cache.json")
    assert sidecar.recall("plan.json", target, eager=True) is caches.MISS
    assert sidecar.recall("plan.json", tmp_path / "missing") is caches.MISS


def test_digest_stat_reads_no_more_than_its_limit_and_a_byte(tmp_path: Path) -> None:
    target = tmp_path / "file.bin"
    data = os.urandom(3 * (1 << 20))
    target.write_bytes(data)
    for limit in (0, 10, (1 << 20) - 1, 1 << 20, len(data), len(data) + 5):
        expected = caches.content_digest(data[: limit + 1])
        assert fs.digest_stat(target, limit)[1] == expected, limit


@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("checked", [False, True])
def test_a_planted_sparse_terabyte_costs_a_miss_not_a_read(
    tmp_path: Path, eager: bool, checked: bool
) -> None:
    """A copied directory's file replaced by a sparse terabyte (free to make): the bytes
    compared with the digest recorded are at most its recorded size and a byte."""
    target = tmp_path / "summary.json"
    target.write_bytes(b'{"cells": 1}')
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "k1")
    digest = caches.content_digest(b'{"cells": 1}')
    sidecar.record("summary.json", caches.stat_of(target), "v", digest)
    target.unlink()
    with open(target, "wb") as handle:
        handle.truncate(1 << 40)
    check = (lambda data: True) if checked else None
    started = time.monotonic()
    assert sidecar.recall("summary.json", target, check=check, eager=eager) is caches.MISS
    assert time.monotonic() - started < 5  # (reading the terabyte: minutes)


@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("checked", [False, True])
def test_a_link_to_the_vouched_file_is_not_vouched_for(
    tmp_path: Path, eager: bool, checked: bool
) -> None:
    """A symlink planted in a file's place, to the very file its entry vouched for (the
    stat it would follow to matches): both paths say MISS, never read through it."""
    original = tmp_path / "kept.json"
    original.write_bytes(b"{}")
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "k1")
    sidecar.record("plan.json", caches.stat_of(original), "v", caches.content_digest(b"{}"))
    (tmp_path / "plan.json").symlink_to(original)
    check = (lambda data: True) if checked else None
    assert sidecar.recall("plan.json", tmp_path / "plan.json", check=check, eager=eager) is (
        caches.MISS
    )


def test_a_sidecar_written_under_another_key_is_ignored(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    sidecar = caches.Sidecar(tmp_path / ".cache.json", "old code")
    sidecar.record("file.txt", caches.stat_of(target), 1)
    sidecar.save()
    assert caches.Sidecar(tmp_path / ".cache.json", "new code").entries == {}
    assert caches.Sidecar(tmp_path / ".cache.json", "old code").fresh_file("file.txt", target) == 1


def test_every_cache_key_holds_the_code_digest() -> None:
    assert caches.cache_key() == sources.code_digest()
    assert caches.cache_key("secrets") == f"{sources.code_digest()}|secrets"


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[1, 2]", b'"text"', b'{"key": "k", "entries": []}', b"\xff\xfe"],
)
def test_garbage_is_an_empty_cache(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / ".cache.json"
    path.write_bytes(content)
    sidecar = caches.Sidecar(path, "k")
    assert sidecar.entries == {}
    sidecar.record("a", caches.stat_of(path), 1)
    sidecar.save()
    assert json.loads(path.read_text())["entries"]["a"][-1] == 1


def test_a_folder_where_the_cache_file_should_be_costs_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ".cache.json"
    (path / "inside").mkdir(parents=True)
    sidecar = caches.Sidecar(path, "k")
    assert sidecar.entries == {}
    sidecar.record("inside", caches.stat_of(path / "inside"), 1)
    sidecar.save()  # cannot replace a folder: the run goes on without the cache
    sidecar.changed = True
    sidecar.save()
    err = capsys.readouterr().err
    assert err == (
        f"brigade: ignoring the cache {path}: is a folder, not a file (it only saves time)\n"
    )
    assert (path / "inside").is_dir()


def test_an_empty_folder_in_the_cache_s_place_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ".cache.json"
    path.mkdir()
    sidecar = caches.Sidecar(path, "k")
    sidecar.record("x", caches.stat_of(tmp_path), 1)
    sidecar.save()
    assert json.loads(path.read_text())["entries"]["x"][-1] == 1
    assert capsys.readouterr().err == (
        f"brigade: ignoring the cache {path}: is a folder, not a file (it only saves time)\n"
    )


def test_nothing_is_written_when_nothing_changed(tmp_path: Path) -> None:
    path = tmp_path / ".cache.json"
    sidecar = caches.Sidecar(path, "k")
    sidecar.save()
    assert not path.exists()
    sidecar.record("gone", None, 1)  # a missing file is not vouched for
    assert sidecar.entries == {} and not sidecar.changed


def test_the_code_digest_covers_every_source_and_schema_file(tmp_path: Path) -> None:
    copy = copy_package(tmp_path)
    before = digest_of(copy)
    assert before == digest_of(copy)
    module = copy / "brigade" / "report" / "render.py"
    module.write_text(module.read_text() + "\n# changed\n")
    changed = digest_of(copy)
    assert changed != before
    schema = copy / "schemas" / "eval_cell.v1.json"
    schema.write_text(schema.read_text() + " ")
    assert digest_of(copy) not in (before, changed)


def test_the_code_digest_covers_the_versions_of_the_libraries_brigade_runs_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache answers what brigade's code computed with its libraries (a pattern checked
    by the regex engine, an input validated by jsonschema): another version of one is
    another code."""
    site = tmp_path / "site"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text("")
    (site / "Fake_Lib-1.0.dist-info").mkdir()
    (site / "fake_lib_extra-3.0.dist-info").mkdir()  # another project's, not this one's
    (site / "single.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(
        sources,
        "LIBRARIES",
        (("fakelib", "fake-lib"), ("single", "single"), ("absent_here", "absent")),
    )
    versions = sources.library_versions()
    assert versions[0] == "fake-lib:Fake_Lib-1.0.dist-info"
    assert versions[1].startswith(f"single:{site / 'single.py'}|")  # no metadata: its stat
    assert versions[2] == "absent:missing"
    before = digest_with_libraries(monkeypatch)
    (site / "Fake_Lib-1.0.dist-info").rename(site / "fake_lib-1.1.dist-info")
    assert sources.library_versions()[0] == "fake-lib:fake_lib-1.1.dist-info"
    assert digest_with_libraries(monkeypatch) != before


@pytest.mark.parametrize("layout", ["package", "module", "zipped"])
def test_a_library_without_metadata_edited_where_it_sits_is_another_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """A source tree or a zip on the path has no version to read: its files' stats are."""
    site = tmp_path / "site"
    site.mkdir()
    if layout == "package":
        (site / "lib").mkdir()
        (site / "lib" / "__init__.py").write_text("from lib.core import x\n")
        edited = site / "lib" / "core.py"  # not the __init__: any file of the package
    elif layout == "module":
        edited = site / "lib.py"
    else:
        edited = tmp_path / "lib.zip"
    edited.write_text("x = 1\n")
    if layout == "zipped":
        with zipfile.ZipFile(edited, "w") as archive:
            archive.writestr("lib.py", "x = 1\n")
        site = edited
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sources, "LIBRARIES", (("lib", "lib"),))
    before = digest_with_libraries(monkeypatch)
    assert digest_with_libraries(monkeypatch) == before
    if layout == "zipped":
        with zipfile.ZipFile(edited, "a") as archive:
            archive.writestr("lib_extra.py", "y = 2\n")
    else:
        edited.write_text("x = 22\n")
    assert digest_with_libraries(monkeypatch) != before


def test_the_code_digest_covers_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its re compiles a grader's pattern first, its Unicode tables write a warning: another
    Python is another code, whatever brigade's files and libraries are."""
    before = digest_with_libraries(monkeypatch)
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    assert digest_with_libraries(monkeypatch) != before


def digest_with_libraries(monkeypatch: pytest.MonkeyPatch) -> str:
    sources.code_digest.cache_clear()
    try:
        return sources.code_digest()
    finally:
        sources.code_digest.cache_clear()


def test_the_libraries_brigade_runs_on_are_found_installed() -> None:
    found = dict(line.split(":", 1) for line in sources.library_versions())
    assert set(found) == {distribution for _, distribution in sources.LIBRARIES}
    assert all(value.endswith(".dist-info") for value in found.values()), found


# -- end to end ------------------------------------------------------------------------


def exported_cell(project: Project, coordinate: str) -> dict:
    cell_id = project.receipt(coordinate)["cell_id"]
    return json.loads((project.out / "export" / "cells" / f"{cell_id}.json").read_text())


def test_a_receipt_edited_at_the_same_size_and_mtime_is_noticed_everywhere(
    project: Project,
) -> None:
    project.write_manifest(GRADED)
    assert project.doit().returncode == 1
    assert project.doit().returncode == 1  # every cache is written and vouches
    receipt = project.cell_dir("no:agent:1") / "cell.json"
    rewrite_keeping_size_and_mtime(receipt, b'"state": "rejected"', b'"state": "accepted"')
    done = project.doit()
    assert (done.returncode, project.summary()["counts"]["accepted"]) == (0, 2), done.stderr
    assert exported_cell(project, "no:agent:1")["state"] == "accepted"
    junit = (project.out / "report" / "junit.xml").read_text()
    assert '<testsuites name="t" tests="2" failures="0"' in junit
    shown = project.brigade("summary", str(project.out))
    assert shown.returncode == 0 and "accepted 2" in shown.stdout


def test_an_output_edited_at_the_same_size_and_mtime_is_refused(project: Project) -> None:
    project.write_manifest(GRADED[:1])
    assert project.doit().returncode == 0
    assert project.doit().returncode == 0
    receipt = project.receipt("ok:agent:1")
    final = project.cell_dir("ok:agent:1") / "attempts" / "attempt-001" / "run" / "final.txt"
    rewrite_keeping_size_and_mtime(final, b"hello", b"hellO")
    done = project.doit()
    assert done.returncode == 2
    assert "output digest mismatch" in done.stderr
    assert project.receipt("ok:agent:1") == receipt


def test_caches_of_the_wrong_type_are_rebuilt(project: Project) -> None:
    project.write_manifest(GRADED)
    assert project.doit().returncode == 1
    assert project.doit().returncode == 1  # the receipt index is written by a resume
    first = project.summary()
    # folders holding something where the cache files should be: not ours to delete
    for name in CACHE_FILES:
        (project.out / name).unlink()
        (project.out / name / "mine").mkdir(parents=True)
    shutil.rmtree(project.out / ".export-state")
    (project.out / ".export-state").write_text("not a folder")
    done = project.doit()
    assert done.returncode == 1
    # (the final line names the report's path, which holds this test's name)
    lines = [line for line in done.stderr.splitlines() if "ignoring the cache" in line]
    assert len(lines) == len(CACHE_FILES) + 1, done.stderr
    assert all(line.startswith("brigade: ignoring the cache ") for line in lines)
    assert "Traceback" not in done.stderr
    assert project.summary()["counts"] == first["counts"]
    assert all((project.out / name / "mine").is_dir() for name in CACHE_FILES)
    assert (project.out / ".export-state").read_text() == "not a folder"
    # empty folders are nobody's: the caches are rebuilt in their place
    for name in CACHE_FILES:
        (project.out / name / "mine").rmdir()
    (project.out / ".export-state").unlink()
    done = project.doit()
    assert done.returncode == 1
    # (at most one line each, from the reads that found the folder before it went)
    ignored = [line for line in done.stderr.splitlines() if "ignoring the cache" in line]
    assert len(ignored) == len(set(ignored)) <= len(CACHE_FILES)
    assert all((project.out / name).is_file() for name in CACHE_FILES)
    done = project.doit()
    assert (done.returncode, done.stderr.count("ignoring the cache")) == (1, 0)
    for name in CACHE_FILES:
        assert json.loads((project.out / name).read_text())["key"].startswith(sources.code_digest())
    assert len(list((project.out / ".export-state").glob("*.json"))) == 1


def test_garbage_caches_are_rebuilt(project: Project) -> None:
    project.write_manifest(GRADED)
    assert project.doit().returncode == 1
    assert project.doit().returncode == 1
    paths = [project.out / name for name in CACHE_FILES]
    # each sidecar's stats (the report's rows have none), the export's values and stats
    paths += [caches.stats_path(path) for path in paths if path.name != ".report-rows.json"]
    paths += list((project.out / ".export-state").iterdir())
    assert len(set(paths)) == len(paths) == 2 * len(CACHE_FILES) - 1 + 2
    for path in paths:
        path.write_text('{"key": 1, "entries": {"x": [[1, 2, 3, 4], 5]}}')
    done = project.doit()
    assert (done.returncode, done.stderr.count("ignoring the cache")) == (1, 0)
    for path in paths:
        assert json.loads(path.read_text())["key"].startswith(sources.code_digest())


# -- a changed brigade -----------------------------------------------------------------


def copy_package(root: Path) -> Path:
    """brigade's sources and schemas in a folder of their own (imported before the install)."""
    target = root / "pkg"
    shutil.copytree(
        REPO / "brigade", target / "brigade", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(REPO / "schemas", target / "schemas")
    shutil.copy(DODO, target / "dodo.py")  # doit imports from the dodo's folder first
    return target


def digest_of(copy: Path) -> str:
    code = "from brigade.inputs import sources; print(sources.code_digest())"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(copy)},
        cwd=copy,
    ).stdout.strip()


def doit_with(copy: Path, project: Project) -> subprocess.CompletedProcess[str]:
    """The real doit running the copy's brigade: from the copy's folder, first on the path
    (doit imports brigade's own doit commands before it imports the dodo)."""
    argv = [sys.executable, "-m", "doit", "-f", str(copy / "dodo.py"), *project.variables()]
    return subprocess.run(
        argv, capture_output=True, text=True, env=project.env(), timeout=120, cwd=copy
    )


def test_a_changed_source_file_reaches_every_cache(project: Project, tmp_path: Path) -> None:
    copy = copy_package(tmp_path)
    project.write_manifest(GRADED)
    assert doit_with(copy, project).returncode == 1
    assert doit_with(copy, project).returncode == 1
    old = digest_of(copy)
    cache = Path(os.environ["BRIGADE_CACHE_DIR"]) / "inputs"
    inputs_before = set(cache.iterdir())
    keys = {name: json.loads((project.out / name).read_text())["key"] for name in CACHE_FILES}
    assert all(key.startswith(old) for key in keys.values())
    # a new word in the HTML page: a change nothing but the code digest can see
    render = copy / "brigade" / "report" / "render.py"
    text = render.read_text()
    assert text.count("<title>brigade report: ") == 1
    render.write_text(text.replace("<title>brigade report: ", "<title>Changed renderer: "))
    new = digest_of(copy)
    assert new != old
    done = doit_with(copy, project)
    assert done.returncode == 1, done.stderr
    for name in CACHE_FILES:
        assert json.loads((project.out / name).read_text())["key"].startswith(new), name
    (state,) = (project.out / ".export-state").glob("*.json")
    assert json.loads(state.read_text())["key"].startswith(new)
    assert "<title>Changed renderer: " in (project.out / "report" / "index.html").read_text()
    # the input cache: the manifest and roster are validated again by the new code
    assert len(set(cache.iterdir()) - inputs_before) == 2
