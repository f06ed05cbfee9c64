"""The output directory's caches: sidecar files that only save time and whose keys cannot lie.

Every cache (`.plan-index.json`, `.receipt-index.json`, `.output-index.json`,
`.export-state/`, `.report-state.json`, `.summary-key.json`) is a `Sidecar`: two
files, the values and the stats of the files they vouch for.

- `NAME.json`, the values: `{"key": ..., "meta": ..., "stamp": ..., "entries":
  {name: [row, size, value, digest]}}`, one flat list per entry (a resume of 100,000
  cells holds three such maps; the digest is optional). Written only when an entry's
  value, digest or size, or the set of names, changed.
- `NAME.stats`, the stats: `{"key": ..., "stamp": ..., "meta": ..., "stats": base64}`,
  for each entry's `row` three signed 64-bit integers (mtime_ns, ctime_ns, inode) at
  `3 * row` in one little-endian array. It belongs to the values written under the
  same `stamp` (a random token made at each write of the values); any other stats
  file is ignored, and every entry then misses its stat. A copied or restored
  directory (every stat new, every byte the same) rewrites only this file: a few
  megabytes at 100,000 cells where the values are a hundred. Its `meta` is the
  newest; the values' own (written with them) stands in when it is ignored.

`.report-rows.json` is a `Table`, the values without stats: each entry a report row
kept under its cell's stamp (`report/build.Rows`), vouching for no file.

- The key is brigade's code digest (every source and schema file) plus what
  the cache's answers depend on besides (secrets, the export's destination):
  a sidecar written under another key is ignored as a whole.
- An entry vouches for one file as it was when its stat was taken: size,
  mtime_ns, ctime_ns and inode (`stat_key`). The stat is always taken
  *before* the file is read, so a change made while it was read is noticed
  the next time; ctime cannot be set back by a user, and a file replaced by
  another (a rename over it) has a new inode.
- An entry may also hold the digest of the file's bytes (`record(..., digest=)`):
  when the stat no longer matches (a copied or restored directory: new inodes
  and ctimes), `recall` reads the file and, when its bytes have that digest,
  vouches for it again under its new stat. Content decides; the stat is only
  the fast path.
- A sidecar that is missing, unreadable, of the wrong type or garbage is
  treated as empty and rebuilt; one that cannot be written costs one line on
  stderr and the time it would have saved, never a traceback or a wrong answer.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sys
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from brigade import fs
from brigade.core import jsontext
from brigade.core.terminal import printable
from brigade.inputs.sources import code_digest

# what a Sidecar returns for a file it cannot vouch for (None may be a cached value)
MISS: Any = object()


def content_digest(data: bytes) -> str:
    """The digest an entry records of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


def stat_key(info: os.stat_result) -> list[int]:
    """[size, mtime_ns, ctime_ns, inode]: what an entry records of a file."""
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def stat_of(
    path: Path | str, dir_fd: int | None = None, *, follow: bool = True
) -> os.stat_result | None:
    """A file's stat (`path` relative to `dir_fd` when given; of a symlink itself when not
    `follow`), None when it is missing."""
    try:
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    except OSError:
        return None


def matches(recorded: Any, info: os.stat_result) -> bool:
    """Whether a recorded stat_key is the stat of the file now."""
    return (
        type(recorded) is list
        and len(recorded) == 4
        and recorded[0] == info.st_size
        and recorded[1] == info.st_mtime_ns
        and recorded[2] == info.st_ctime_ns
        and recorded[3] == info.st_ino
    )


def cache_key(*parts: str) -> str:
    """brigade's code digest joined with what else a cache's answers depend on."""
    return "|".join((code_digest(), *parts))


_warned: set[str] = set()


def _warn(path: Path, problem: str) -> None:
    """One line per cache file and process: the cache is rebuilt, the run goes on."""
    if str(path) not in _warned:
        _warned.add(str(path))
        sys.stderr.write(
            printable(f"brigade: ignoring the cache {path}: {problem} (it only saves time)\n")
        )


class Table:
    """One cache file of entries (`{"key": ..., "meta": ..., "entries": {...}}`), ignored
    as a whole when written under another key; what an entry holds is its user's."""

    __slots__ = ("path", "key", "entries", "changed", "meta")

    def __init__(self, path: Path, key: str, *, load: bool = True) -> None:
        """The table at `path` when it was written under `key` (`load=False`: start empty)."""
        self.path = path
        self.key = key
        self.changed = False  # anything to save
        self.entries: dict[str, Any] = {}
        # what the whole cache was written under besides its key (the receipt index: the
        # output directory's path); saved with it
        self.meta: dict[str, Any] = {}
        if load:
            doc = _load(path, key)
            if doc is not None and type(doc.get("entries")) is dict:
                self.entries = doc["entries"]
                meta = doc.get("meta")
                self.meta = meta if type(meta) is dict else {}

    def save(self, default: Callable[[Any], Any] | None = None) -> None:
        """Write the table when it changed (atomic, no fsync: it is only a cache)."""
        head, entries = self._head(), self.entries
        if self.changed and _write(self.path, lambda: _encoded(head, entries, default)):
            self.changed = False

    def _head(self) -> dict[str, Any]:
        head: dict[str, Any] = {"key": self.key}
        if self.meta:
            head["meta"] = self.meta
        return head


# an entry's fields: [row, size, value] or [row, size, value, digest]; `row` places the
# stats of its file (mtime_ns, ctime_ns, inode) at 3 * row of the stats array
ROW, SIZE, VALUE, DIGEST = 0, 1, 2, 3
# an inode past 2**63 is kept as its two's complement
_HALF, _WRAP = 1 << 63, 1 << 64


class Sidecar(Table):
    """One cache: entries that each vouch for a file while its stat is unchanged."""

    __slots__ = ("altered", "stamp", "stats", "_dirty")

    def __init__(self, path: Path, key: str, *, load: bool = True) -> None:
        """The sidecar at `path` (and its stats beside it) when it was written under `key`
        (`load=False`: start empty)."""
        super().__init__(path, key, load=False)
        # an entry's value or digest was new (not only a new stat for the same bytes)
        self.altered = False
        self._dirty = False  # the values must be written (not only the stats)
        self.stamp: str | None = None  # of the values as written
        self.stats = array("q")
        if not load:
            return
        doc = _load(path, key)
        if doc is None or type(doc.get("entries")) is not dict or type(doc.get("stamp")) is not str:
            return
        self.entries = doc["entries"]
        self.stamp = doc["stamp"]
        meta = doc.get("meta")
        self.meta = meta if type(meta) is dict else {}
        if not self._load_stats(key):
            # stats lost (or another write's): no entry's row stands for anything, and a
            # row given out from now on must not be one an entry still names. The values
            # are written again with the next save, whatever it saves: stats written alone
            # under this stamp (a new meta only) would pair them with rows they name and
            # do not hold, and a later row given out would stand for an old entry's file
            for entry in self.entries.values():
                if type(entry) is list and entry:
                    entry[0] = -1
            self._dirty = True

    def _load_stats(self, key: str) -> bool:
        """Take the stats written with the values loaded (their stamp); False when there
        are none."""
        doc = _load(stats_path(self.path), key)
        if doc is None or doc.get("stamp") != self.stamp:
            return False
        try:
            packed = base64.b64decode(doc["stats"], validate=True)
        except (KeyError, TypeError, ValueError):  # (binascii.Error is a ValueError)
            return False
        if len(packed) % 24:
            return False  # not three 8-byte numbers a row: not what this code writes
        self.stats.frombytes(packed)
        if sys.byteorder == "big":
            self.stats.byteswap()
        meta = doc.get("meta")
        self.meta = meta if type(meta) is dict else self.meta
        return True

    def fresh(self, name: str, info: os.stat_result | None) -> Any:
        """The value recorded for `name` when `info` (its stat, taken before reading it)
        is the one recorded with it; MISS otherwise."""
        # (inlined: a resume asks this once per cell)
        entry = self.entries.get(name)
        if (
            info is not None
            and type(entry) is list
            and len(entry) > 2
            and entry[1] == info.st_size
            and type(row := entry[0]) is int
            and row >= 0
        ):
            at = 3 * row
            stats = self.stats
            if (
                len(stats) >= at + 3
                and stats[at] == info.st_mtime_ns
                and stats[at + 1] == info.st_ctime_ns
                and (
                    stats[at + 2] == info.st_ino
                    or (stats[at + 2] < 0 and stats[at + 2] + _WRAP == info.st_ino)
                )
            ):
                return entry[2]
        return MISS

    def fresh_file(self, name: str, path: Path | str, dir_fd: int | None = None) -> Any:
        """`fresh` with the file's stat taken now."""
        return self.fresh(name, stat_of(path, dir_fd))

    def digest(self, name: str) -> str | None:
        """The digest of the bytes recorded with `name`'s entry (None: none recorded)."""
        entry = self.entries.get(name)
        if type(entry) is list and len(entry) == 4 and type(entry[3]) is str:
            return entry[3]
        return None

    def same_content(self, name: str, info: os.stat_result | None, data: bytes) -> Any:
        """The value recorded for `name` when `data` (its bytes, read after `info` was
        taken) has the digest recorded with it; the entry then vouches under `info`.
        MISS otherwise."""
        return self.same_digest(name, info, content_digest(data))

    def same_digest(self, name: str, info: os.stat_result | None, digest: str) -> Any:
        """`same_content` with the digest of the file's bytes (`content_digest`) given."""
        recorded = self.digest(name)
        if info is None or recorded is None or digest != recorded:
            return MISS
        entry = self.entries[name]
        row = _row(entry, len(self.stats))
        if row is None or entry[1] != info.st_size:
            self.record(name, info, entry[2], recorded)
            return entry[2]
        # the same bytes (a copied file): its new stat in its row, nothing else changes
        try:
            self.stats[3 * row : 3 * row + 3] = array("q", _stat_row(info))
        except OverflowError:  # a time past the year 2262: the bytes hold, the stat is no key
            self.forget(name)
            return entry[2]
        self.changed = True
        return entry[2]

    def copied(self, label: str, info: os.stat_result | None) -> bool:
        """Whether the folder `label` (`info`: its stat now) is another folder than the one
        this sidecar last saw (a copy, a restored tarball: every file's stat in it is new,
        so `recall(..., eager=True)` saves a lookup per file); remembered with the sidecar.
        Only ever a choice of the fast path: both paths give the same answers."""
        if info is None:
            return False
        now = [info.st_dev, info.st_ino]
        seen = self.meta.get(label)
        if seen != now:
            self.meta[label] = now
            self.changed = True
        return seen is not None and seen != now

    def recall(
        self,
        name: str,
        path: Path | str,
        dir_fd: int | None = None,
        check: Callable[[bytes], bool] | None = None,
        *,
        eager: bool = False,
        known: tuple[os.stat_result, str] | None = None,
    ) -> Any:
        """`fresh_file`, and when the stat misses, the file's bytes compared with the digest
        recorded (read once, no-follow, a regular file only; `path` relative to `dir_fd`
        when given): the same bytes vouch again under the new stat. MISS otherwise.

        `check`: what the file's bytes must also pass for its entry to hold (the file is
        read even while its stat matches); MISS when they do not. `eager`: the stat is
        expected to miss (`copied`): the file is opened at once and its stat taken from
        the open file, before its bytes are read.

        Without `check`, only the digest of the bytes is wanted: they are read a piece at a
        time (`fs.digest_stat`), never held whole (a 100,000-cell plan.json is 47 MB). No
        more is read than the size recorded and a byte (a planted sparse terabyte costs
        that), and a symlink in the file's place is never vouched for, even by the stat
        of what it points to: both paths give the same answers.

        `known`: the stat and digest (hex) of the file a helper read (outdir/digests),
        taken when they match the entry's; else the file is read here."""
        info: os.stat_result | None
        if check is None:
            if known is not None:
                value = self.fresh(name, known[0])
                if value is MISS:
                    value = self.same_digest(name, known[0], known[1])
                if value is not MISS:
                    return value
            return self._recall_digest(name, path, dir_fd, eager)
        limit = self.size(name)
        if eager and name in self.entries:
            try:
                info, data = fs.read_stat(path, limit, dir_fd=dir_fd)
            except OSError:
                return MISS
            value = self.fresh(name, info)
            if value is MISS:
                value = self.same_content(name, info, data)
            if value is not MISS and not check(data):
                return MISS
            return value
        info = stat_of(path, dir_fd, follow=False)
        value = self.fresh(name, info)
        if value is MISS and (info is None or self.digest(name) is None):
            return MISS
        try:
            data = fs.read_regular(path, limit, dir_fd=dir_fd)
        except OSError:
            return MISS
        if value is MISS:
            value = self.same_content(name, info, data)
        if value is not MISS and not check(data):
            return MISS
        return value

    def _recall_digest(self, name: str, path: Path | str, dir_fd: int | None, eager: bool) -> Any:
        """`recall` without a check: the stat, else the digest of the bytes read in pieces
        (the stat vouched under is the open file's, taken before they are read)."""
        if not eager or name not in self.entries:
            info = stat_of(path, dir_fd, follow=False)
            value = self.fresh(name, info)
            if value is not MISS or info is None or self.digest(name) is None:
                return value
        try:
            info, digest = fs.digest_stat(path, self.size(name), dir_fd=dir_fd)
        except OSError:
            return MISS
        value = self.fresh(name, info)
        return self.same_digest(name, info, digest) if value is MISS else value

    def size(self, name: str) -> int | None:
        """The size recorded for `name` (what its bytes can match at most), if any."""
        entry = self.entries.get(name)
        if type(entry) is list and len(entry) > 2 and type(entry[1]) is int and entry[1] >= 0:
            return entry[1]
        return None

    def record(
        self, name: str, info: os.stat_result | None, value: Any, digest: str | None = None
    ) -> None:
        """Vouch for `name` with `value` while its stat is `info` (taken before it was read,
        or after this process wrote it), and while its bytes have `digest` when given
        (`content_digest`); a missing file (None) is forgotten."""
        if info is None:
            self.forget(name)
            return
        stat = _stat_row(info)
        tail = [info.st_size, value] if digest is None else [info.st_size, value, digest]
        old = self.entries.get(name)
        row = _row(old, len(self.stats))
        kept = row is not None  # the stats' row of the old entry, if it has one
        stats = self.stats
        try:
            if row is None:
                row = len(stats) // 3
                stats.extend(array("q", stat))
            elif (stats[3 * row], stats[3 * row + 1], stats[3 * row + 2]) != stat:
                stats[3 * row : 3 * row + 3] = array("q", stat)
                self.changed = True
        except OverflowError:  # a time past the year 2262: never vouched for
            self.forget(name)
            return
        if kept and type(old) is list and old[1:] == tail:
            return  # the same bytes (a new stat at most): the values stay as written
        if type(old) is not list or old[2:] != tail[1:]:
            self.altered = True
        self.entries[name] = [row, *tail]
        self.changed = self._dirty = True

    def parsed(self, name: str, value: Any, digest: str | None = None) -> None:
        """Keep a fresh entry's value in its parsed form (it saves as the same JSON); and
        `digest`, equal to the one recorded, in its place (one string held, not two)."""
        entry = self.entries[name]
        entry[2] = value
        if digest is not None and len(entry) == 4 and entry[3] == digest:
            entry[3] = digest

    def forget(self, name: str) -> None:
        """Stop vouching for `name` (its stats stay unused until the values are written)."""
        if self.entries.pop(name, None) is not None:
            self.changed = self.altered = self._dirty = True

    def keep_only(self, names: set[str]) -> None:
        """Forget every entry not in `names`."""
        for name in [name for name in self.entries if name not in names]:
            self.forget(name)

    def save(self, default: Callable[[Any], Any] | None = None) -> None:
        """Write what changed (atomic, no fsync: it is only a cache): the values when an
        entry's value, digest or size, or the names, did (under a new stamp), and the
        stats."""
        if not self.changed:
            return
        if self._dirty or self.stamp is None:
            self._pack()
            stamp = os.urandom(16).hex()
            head, entries = {**self._head(), "stamp": stamp}, self.entries
            if not _write(self.path, lambda: _encoded(head, entries, default)):
                return
            self.stamp = stamp
            self._dirty = False
        stats = self.stats
        if sys.byteorder == "big":
            stats = array("q", stats)
            stats.byteswap()
        doc = {**self._head(), "stamp": self.stamp}
        doc["stats"] = base64.b64encode(stats.tobytes()).decode("ascii")
        if _write(stats_path(self.path), lambda: json.dumps(doc).encode()):
            self.changed = False

    def _pack(self) -> None:
        """Renumber the rows in the entries' order when any stats may be no entry's (a
        forgotten file's): the stats array holds no more rows than the entries."""
        if len(self.stats) == 3 * len(self.entries):
            return
        packed = array("q")
        for entry in self.entries.values():
            row = _row(entry, len(self.stats))
            if row is not None:
                entry[0] = len(packed) // 3
                packed.extend(self.stats[3 * row : 3 * row + 3])
            elif type(entry) is list and entry:
                entry[0] = -1  # (its stats lost: it misses until recorded again)
        self.stats = packed


def stats_path(path: Path) -> Path:
    """Where the stats of the sidecar at `path` are (`NAME.json` -> `NAME.stats`)."""
    return path.with_suffix(".stats")


def _stat_row(info: os.stat_result) -> tuple[int, int, int]:
    """What the stats array holds of a file's stat (an inode past 2**63 as its two's
    complement); OverflowError from the array for a time that fits no 64 bits."""
    ino = info.st_ino if info.st_ino < _HALF else info.st_ino - _WRAP
    return (info.st_mtime_ns, info.st_ctime_ns, ino)


def _row(entry: Any, length: int) -> int | None:
    """An entry's row when it is a well-formed entry whose stats are within `length`."""
    if type(entry) is list and len(entry) > 2 and type(entry[0]) is int:
        row = entry[0]
        if 0 <= row and 3 * row + 3 <= length:
            return row
    return None


def _load(path: Path, key: str) -> dict[str, Any] | None:
    """The JSON object at `path` when it was written under `key`; None when it is missing,
    another key's, or garbage (one line on stderr)."""
    try:
        # brigade's own cache, looked up by name: no depth scan on every no-op run. Its
        # bytes are let go once decoded: a 100,000-cell index is 50 MB of them, and the
        # parse would otherwise hold them, their text and the entries at once
        text = fs.read_regular(path).decode("utf-8")
        doc = jsontext.parse(text, limit=None, max_depth=None)
        del text
    except (FileNotFoundError, NotADirectoryError):
        return None  # no cache yet (or no output directory: its own check says so)
    except (OSError, ValueError) as exc:
        # a folder where the file should be, no permission, garbage: start empty
        _warn(path, _problem(exc))
        return None
    if type(doc) is dict and doc.get("key") == key:
        return doc
    return None


def _write(path: Path, make: Callable[[], bytes | BinaryIO]) -> bool:
    """Write a cache file with what `make` makes (atomic, no fsync); one line on stderr and
    False when it cannot be."""
    try:
        try:
            fs.atomic_write(path, make(), durable=False)
        except IsADirectoryError:
            # an empty folder in the cache's place holds nothing: it goes (one with
            # anything in it is not ours to delete, and stays)
            os.rmdir(path)
            fs.atomic_write(path, make(), durable=False)
    except OSError as exc:
        _warn(path, f"cannot write it: {_problem(exc)}")
        return False
    return True


# entries encoded at a time: each piece is one call of the C encoder, and a 100,000-cell
# index is never one string (and its bytes) in memory at once
_PIECE = 2000


class _Pieces(io.RawIOBase):
    """A sidecar's JSON document read piece by piece (what fs.write_at copies to the file):
    `{"key":..,"meta":..,"entries":{...}}`, the entries a few thousand at a time."""

    def __init__(
        self, head: dict[str, Any], entries: dict[str, Any], default: Callable[[Any], Any] | None
    ) -> None:
        super().__init__()
        self._pieces = self._make(head, entries, default)

    @staticmethod
    def _make(
        head: dict[str, Any], entries: dict[str, Any], default: Callable[[Any], Any] | None
    ) -> Iterator[bytes]:
        def dumps(value: Any) -> str:
            # entries are trees of values parsed from JSON or made as it: no cycle to look for
            return json.dumps(value, separators=(",", ":"), default=default, check_circular=False)

        yield (dumps(head)[:-1] + ',"entries":{').encode()
        items = list(entries.items())
        for start in range(0, len(items), _PIECE):
            piece = dumps(dict(items[start : start + _PIECE]))[1:-1]
            yield (piece if start == 0 else "," + piece).encode()
        yield b"}}"

    def readable(self) -> bool:
        """Read by shutil.copyfileobj."""
        return True

    def read(self, size: int | None = -1) -> bytes:
        """The next piece (whatever its size; b"" at the end)."""
        return next(self._pieces, b"")


def _encoded(
    head: dict[str, Any], entries: dict[str, Any], default: Callable[[Any], Any] | None
) -> BinaryIO:
    return cast(BinaryIO, _Pieces(head, entries, default))


def _problem(exc: BaseException) -> str:
    if isinstance(exc, IsADirectoryError):
        return "is a folder, not a file"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return "not a cache this brigade wrote"
