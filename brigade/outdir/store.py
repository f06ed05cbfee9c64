"""The output directory: layout, atomic JSON writes, receipts and attempt folders.

The output directory is the source of truth; doit's dependency DB is a cache.
Every JSON document is validated against its schema, then written to a temp
file in the same folder, fsynced and renamed, so a crash never leaves a
truncated receipt.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from brigade.core.identity import CELL_SCHEMA, digest
from brigade.core.taxonomy import STATES
from brigade.inputs import schemas
from brigade.outdir import legacy

PLAN_FILE = "plan.json"
# a cache: plan.json's stat and key, so an unchanged plan is not parsed again
PLAN_INDEX = ".plan-index.json"
# a cache: the stat of each run/final.txt whose digest was verified
OUTPUT_INDEX = ".output-index.json"
# a cache: each cell.json's stat and the slim view of what it says
RECEIPT_INDEX = ".receipt-index.json"
SUMMARY_FILE = "summary.json"
RECEIPT_FILE = "cell.json"
CELLS_DIR = "cells"
ATTEMPTS_DIR = "attempts"
RUN_DIR = "run"
DEP_FILE = ".doit.db"
LOCK_FILE = ".brigade.lock"
EXPORT_DIR = "export"

SAMPLE_ITEMS = 200
REPORT_DIR = "report"

# the output directory's storage failing: full, read-only, forbidden, or a path of the
# wrong kind (a folder where a file goes, a file where a folder goes)
STORAGE_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EEXIST,
    }
)


def storage_problem(exc: BaseException) -> str | None:
    """One line naming the file and what is wrong, when `exc` is the storage failing."""
    if not isinstance(exc, OSError) or exc.errno not in STORAGE_ERRNOS:
        return None
    # os.replace(temp, target) names the target second
    where = exc.filename2 or exc.filename or "the output directory"
    if isinstance(where, bytes):
        where = os.fsdecode(where)
    name = os.path.basename(str(where))
    if is_temp_name(name):  # a temp file of an atomic write: name what it was for
        where = os.path.join(os.path.dirname(str(where)), name[1:].rsplit(".", 2)[0])
    return f"cannot write {where}: {exc.strerror or exc}"


# what brigade keeps in the output directory: a file, or a folder, at each of these names
_FILES = ("plan.json", "summary.json", ".doit.db", ".brigade.lock")
_FOLDERS = ("cells", "export", REPORT_DIR)


def check_layout(out: Path) -> None:
    """Refuse (EnvironmentProblem) an output directory where a file brigade keeps is a
    folder or a folder it keeps is a file: nothing is written, nothing removed."""
    from brigade.errors import EnvironmentProblem

    for name in _FILES:
        if os.path.isdir(out / name) and not os.path.islink(out / name):
            raise EnvironmentProblem(
                f"{out / name}: is a folder where brigade keeps a file (move it away)"
            )
    for name in _FOLDERS:
        path = out / name
        if os.path.lexists(path) and not os.path.isdir(path):
            raise EnvironmentProblem(
                f"{path}: is not a folder where brigade keeps one (move it away)"
            )


_ATTEMPT = re.compile(r"^attempt-(\d+)$")


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def cells_root(out: Path) -> Path:
    """`<out>/cells`."""
    return out / CELLS_DIR


def cell_dir(out: Path, cell_id: str) -> Path:
    """`<out>/cells/<cell_id>`."""
    return out / CELLS_DIR / cell_id


def attempt_name(number: int) -> str:
    """`attempt-001` style folder name."""
    return f"attempt-{number:03d}"


def attempt_dir(out: Path, cell_id: str, number: int) -> Path:
    """`<out>/cells/<cell_id>/attempts/attempt-NNN`."""
    return cell_dir(out, cell_id) / ATTEMPTS_DIR / attempt_name(number)


def run_dir(out: Path, cell_id: str, number: int) -> Path:
    """`.../attempt-NNN/run`: where the seat's files go."""
    return attempt_dir(out, cell_id, number) / RUN_DIR


def atomic_write_bytes(
    path: Path, data: bytes, *, durable: bool = True, sync_dir: bool = True
) -> None:
    """Write via a temp file in the same folder, fsync, rename, fsync the folder.

    `durable=False` skips the fsyncs (still atomic) for files derived from others;
    `sync_dir=False` skips only the folder's fsync (for files a receipt commits).
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; receipts are ordinary files
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable and sync_dir:
        _fsync_dir(path.parent)


# `.<name>.<8 random characters>.tmp`: what tempfile.mkstemp makes for atomic_write_bytes
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def is_temp_name(name: str) -> bool:
    """Whether a file name is an atomic write's temp file."""
    return _TEMP_NAME.match(name) is not None


def remove_stale_temps(folder: Path) -> int:
    """Delete the temp files an interrupted atomic write left in `folder` (`.<name>.*.tmp`).

    Only for folders no other writer is using: the caller holds the run's lock
    and nothing else of this run writes there at the time. Returns how many went.
    """
    removed = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if is_temp_name(entry.name) and entry.is_file(follow_symlinks=False):
                    try:
                        os.unlink(entry.path)
                        removed += 1
                    except FileNotFoundError:
                        pass
    except OSError:
        pass
    return removed


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def dumps(doc: Any, *, compact: bool = False) -> bytes:
    """Stable JSON bytes: indented for people, compact (and much faster) for big documents."""
    if compact:
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(doc, indent=2, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def write_json(
    path: Path,
    doc: dict[str, Any],
    schema_tag: str,
    *,
    sample: bool = False,
    compact: bool = False,
    sync_dir: bool = True,
) -> None:
    """Validate `doc` against its schema, then write it atomically.

    `sample`: the document's long lists (a plan's cells, a summary's values)
    hold items made by one code path, so only their first SAMPLE_ITEMS are
    validated; a 100,000-cell plan would otherwise cost seconds of validation.
    Tests validate whole documents. `compact` skips indentation (big documents).
    """
    schemas.check_output(sampled(doc) if sample else doc, schema_tag)
    atomic_write_bytes(path, dumps(doc, compact=compact), sync_dir=sync_dir)


def sampled(value: Any) -> Any:
    """A copy of a JSON value with every list cut to its first SAMPLE_ITEMS items."""
    if isinstance(value, dict):
        return {key: sampled(item) for key, item in value.items()}
    if isinstance(value, list):
        return [sampled(item) for item in value[:SAMPLE_ITEMS]]
    return value


def read_json(path: Path) -> Any | None:
    """A JSON document, or None when it is missing, unreadable or corrupt."""
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read())
    except (OSError, ValueError):
        return None


def file_digest(path: Path | str) -> str | None:
    """`sha256:<hex>` of a file's bytes, None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return digest(handle.read())
    except OSError:
        return None


@dataclass(frozen=True)
class Recorded:
    """What cell.json says about a cell, as far as it can be trusted."""

    receipt: dict[str, Any] | None  # None: missing, unreadable, corrupt or not this cell's
    attempt: int | None  # the recorded attempt number when it is a positive int

    @property
    def state(self) -> str | None:
        """The recorded state, None when there is no trustworthy receipt."""
        return self.receipt["state"] if self.receipt is not None else None


def recorded_from(doc: Any, cell_id: str, out: Path | None = None) -> Recorded:
    """Interpret a parsed cell.json for `cell_id` (pure).

    With `out`, a trusted receipt is viewed in this output directory's terms
    (legacy.receipt_view): what a receipt of the original tool lacks is derived,
    and a run folder recorded elsewhere is the attempt's in the cell's own folder.
    """
    if not isinstance(doc, dict):
        return Recorded(None, None)
    attempt = doc.get("attempt")
    attempt = attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None
    attempt = attempt if attempt is not None and attempt > 0 else None
    trusted = (
        doc.get("schema") == CELL_SCHEMA
        and doc.get("cell_id") == cell_id
        and doc.get("state") in STATES
    )
    if not trusted:
        return Recorded(None, attempt)
    if out is not None:
        base = os.path.abspath(out)
        local = (
            f"{base}/{CELLS_DIR}/{cell_id}/{ATTEMPTS_DIR}/{attempt_name(attempt)}/{RUN_DIR}"
            if attempt is not None
            else None
        )
        doc = legacy.receipt_view(doc, base, local)
    return Recorded(doc, attempt)


@contextlib.contextmanager
def opened_folder(path: Path | str) -> Iterator[int | None]:
    """A descriptor of a folder for stats relative to it (None when it cannot be opened).

    Statting thousands of files under one deep folder then resolves only each
    file's own part of the path.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def existing_cells(out: Path) -> set[str]:
    """Names of the cell folders present (one listing instead of a failed open per cell).

    A cell folder that is a symbolic link is left out: it is never trusted.
    """
    try:
        with os.scandir(out / CELLS_DIR) as entries:
            return {entry.name for entry in entries if not entry.is_symlink()}
    except OSError:
        return set()


# what a receipt says about its cell's outcome, without its identity and details
SLIM_KEYS = (
    "cell_id",
    "state",
    "attempt",
    "started_at",
    "finished_at",
    "graded_at",
    "exit_code",
    "duration_seconds",
    "score",
    "output_digest",
    "failure_reason",
)
_SLIM_POSITION = {key: position for position, key in enumerate(SLIM_KEYS)}
_OPTIONAL = frozenset({"failure_reason"})  # absent, not null, when it does not apply


class SlimReceipt(Mapping[str, Any]):
    """A receipt's outcome fields as a read-only mapping, compact in memory.

    A no-op resume of 100,000 cells holds one per cell: a tuple instead of a
    dict of a dozen keys keeps that to a fraction of the memory.
    """

    __slots__ = ("_values", "_graders")

    def __init__(self, values: tuple[Any, ...], graders: tuple[tuple[Any, Any], ...]) -> None:
        self._values = values
        self._graders = graders

    @classmethod
    def of(cls, receipt: Mapping[str, Any]) -> SlimReceipt:
        """The slim view of a full receipt."""
        state = receipt.get("state")
        values = tuple(
            sys.intern(state) if key == "state" and isinstance(state, str) else receipt.get(key)
            for key in SLIM_KEYS
        )
        graders = tuple((g.get("status"), g.get("score")) for g in receipt.get("graders", []))
        return cls(values, graders)

    @classmethod
    def from_json(cls, data: Any) -> SlimReceipt | None:
        """From the receipt index's [values, graders] form; None when malformed."""
        if type(data) is not list or len(data) != 2:
            return None
        values, graders = data
        if type(values) is not list or len(values) != len(SLIM_KEYS) or type(graders) is not list:
            return None
        if any(type(g) is not list or len(g) != 2 for g in graders):
            return None
        if type(values[1]) is str:
            values[1] = sys.intern(values[1])
        return cls(tuple(values), tuple(map(tuple, graders)))

    def to_json(self) -> list[Any]:
        """The receipt index's form."""
        return [list(self._values), [list(g) for g in self._graders]]

    def __getitem__(self, key: str) -> Any:
        if key == "graders":
            return [{"status": status, "score": score} for status, score in self._graders]
        if key == "slim":
            return True
        position = _SLIM_POSITION.get(key)
        if position is None:
            raise KeyError(key)
        value = self._values[position]
        if value is None and key in _OPTIONAL:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        for key, value in zip(SLIM_KEYS, self._values, strict=True):
            if value is not None or key not in _OPTIONAL:
                yield key
        yield "graders"
        yield "slim"

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return True  # never empty; `receipt or {}` must not count its keys

    def get(self, key: str, default: Any = None) -> Any:
        """Like dict.get, without the exception round trip of Mapping.get."""
        position = _SLIM_POSITION.get(key)
        if position is not None:
            value = self._values[position]
            return default if value is None and key in _OPTIONAL else value
        if key in ("graders", "slim"):
            return self[key]
        return default


def slim_receipt(receipt: Mapping[str, Any]) -> SlimReceipt:
    """The outcome of a receipt: enough to decide, summarise and stamp it (not to export it)."""
    return SlimReceipt.of(receipt)


class Seen(NamedTuple):
    """A cell's receipt as seen at load time: in full, or its slim view from the index.

    (A named tuple: one is built per cell on every resume.)
    """

    receipt: Mapping[str, Any] | None
    attempt: int | None

    @property
    def state(self) -> str | None:
        """The recorded state, None when there is no trustworthy receipt."""
        return self.receipt["state"] if self.receipt is not None else None


UNSEEN = Seen(None, None)


NOTHING = Recorded(None, None)


def read_receipt(out: Path, cell_id: str) -> Recorded:
    """The recorded receipt of a cell; a cell.json naming another cell, or read through a
    cell folder that is a symbolic link (into who knows where), is never trusted."""
    base = cell_dir(out, cell_id)
    if os.path.islink(base):
        return NOTHING
    return recorded_from(read_json(base / RECEIPT_FILE), cell_id, out)


def attempt_numbers(cell_path: Path) -> list[int]:
    """Numbers of the attempt-NNN folders of a cell (other names ignored)."""
    try:
        names = os.listdir(cell_path / ATTEMPTS_DIR)
    except OSError:
        return []
    numbers = []
    for name in names:
        match = _ATTEMPT.match(name)
        if match:
            numbers.append(int(match.group(1)))
    return numbers


def new_attempt(out: Path, cell_id: str, recorded_attempt: int | None) -> int:
    """Create the next attempt folder (with its run/) and return its number.

    Next = max(attempt folders, recorded attempt) + 1; creation is exclusive,
    so a number is never reused even if two processes race.
    """
    base = cell_dir(out, cell_id)
    for folder in (base, base / ATTEMPTS_DIR):
        if os.path.islink(folder):
            os.unlink(folder)  # a planted link: never write through it (its target stays)
    number = max([0, recorded_attempt or 0, *attempt_numbers(base)]) + 1
    (base / ATTEMPTS_DIR).mkdir(parents=True, exist_ok=True)
    while True:
        target = base / ATTEMPTS_DIR / attempt_name(number)
        try:
            target.mkdir()
        except FileExistsError:
            number += 1
            continue
        (target / RUN_DIR).mkdir()
        return number


def write_receipt(out: Path, receipt: dict[str, Any], *, durable: bool = True) -> None:
    """Write cell.json (validated, atomic); a terminal receipt is also copied into its attempt."""
    schemas.check_output(receipt, CELL_SCHEMA)
    data = dumps(receipt)
    cell_id, number = receipt["cell_id"], receipt["attempt"]
    if receipt["state"] != "running":
        # cell.json is the commit point: the copy and the run files before it need
        # no folder fsync of their own
        atomic_write_bytes(
            attempt_dir(out, cell_id, number) / RECEIPT_FILE, data, durable=durable, sync_dir=False
        )
    atomic_write_bytes(cell_dir(out, cell_id) / RECEIPT_FILE, data, durable=durable)
