"""The output directory: layout, atomic JSON writes, receipts and attempt folders.

The output directory is the source of truth; doit's dependency DB is a cache.
Every JSON document is validated against its schema, then written to a temp
file in the same folder, fsynced and renamed, so a crash never leaves a
truncated receipt.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.core import jsontext
from brigade.core.identity import CELL_SCHEMA, digest
from brigade.core.receipts import Receipt, ReceiptView
from brigade.core.taxonomy import STATES
from brigade.inputs import schemas
from brigade.outdir import feed, legacy

PLAN_FILE = "plan.json"
# a cache: plan.json's stat and key, so an unchanged plan is not parsed again
PLAN_INDEX = ".plan-index.json"
# a cache: the stat of each run/final.txt whose digest was verified
OUTPUT_INDEX = ".output-index.json"
# a cache: each cell.json's stat and the view of what it says (core/receipts.ReceiptView)
RECEIPT_INDEX = ".receipt-index.json"
SUMMARY_FILE = "summary.json"
RECEIPT_FILE = "cell.json"
CELLS_DIR = "cells"
ATTEMPTS_DIR = "attempts"
RUN_DIR = "run"
# the seat's own folder of an attempt (its BRIGADE_RUN_DIR, writable in its sandbox); brigade
# keeps nothing there: its files of the attempt are in run/, which no seat can write
SEAT_DIR = "seat"
DEP_FILE = ".doit.db"
LOCK_FILE = ".brigade.lock"
EXPORT_DIR = "export"
# one record per worktree made for the output directory, until removed (run/worktree)
WORKTREE_LEDGER = ".worktrees"

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
    """`.../attempt-NNN/run`: brigade's files of the seat run (answer, logs, run.json)."""
    return attempt_dir(out, cell_id, number) / RUN_DIR


def seat_dir(out: Path, cell_id: str, number: int) -> Path:
    """`.../attempt-NNN/seat`: the seat's own folder (`BRIGADE_RUN_DIR`)."""
    return attempt_dir(out, cell_id, number) / SEAT_DIR


def atomic_write_bytes(
    path: Path, data: bytes, *, durable: bool = True, sync_dir: bool = True
) -> None:
    """Write via a temp file in the same folder, fsync, rename, fsync the folder
    (`fs.atomic_write`: no link followed, no temp file left by a failure).

    `durable=False` skips the fsyncs (still atomic) for files derived from others;
    `sync_dir=False` skips only the folder's fsync (for files a receipt commits).
    """
    fs.atomic_write(path, data, durable=durable, sync_dir=sync_dir)


# `.<name>.<8 random characters>.tmp`: what fs.temp_name makes for atomic_write_bytes
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
) -> bytes:
    """Validate `doc` against its schema, then write it atomically; the bytes written.

    `sample`: the document's long lists (a plan's cells, a summary's values)
    hold items made by one code path, so only their first SAMPLE_ITEMS are
    validated; a 100,000-cell plan would otherwise cost seconds of validation.
    Tests validate whole documents. `compact` skips indentation (big documents).
    """
    schemas.check_output(sampled(doc) if sample else doc, schema_tag)
    data = dumps(doc, compact=compact)
    atomic_write_bytes(path, data, sync_dir=sync_dir)
    return data


def sampled(value: Any) -> Any:
    """A copy of a JSON value with every list cut to its first SAMPLE_ITEMS items."""
    if isinstance(value, dict):
        return {key: sampled(item) for key, item in value.items()}
    if isinstance(value, list):
        return [sampled(item) for item in value[:SAMPLE_ITEMS]]
    return value


# reading a file of the output directory: regular files only, no symlink followed, never
# blocking, bounded (`fs`); kept under these names for the modules that read through store
NotRegularFile = fs.NotRegularFile
open_regular = fs.open_regular
read_regular = fs.read_regular


def read_json(path: Path) -> Any | None:
    """A JSON document, or None when it is missing, unreadable, not a regular file or not
    JSON brigade reads (`fs.load_json`: size and depth bounded)."""
    return fs.load_json(path)


def read_own_json(path: Path) -> Any | None:
    """A JSON document brigade itself writes under the output directory (plan.json,
    summary.json; no seat writes there), or None as `read_json` says: depth bounded but
    of any size, since a plan of 100,000 cells is larger than the cap on seat-writable
    files."""
    try:
        return fs.read_json(path, limit=None)
    except (OSError, ValueError):
        return None


def file_digest(path: Path | str) -> str | None:
    """`sha256:<hex>` of a file's bytes, None when it cannot be read (or is not a regular
    file)."""
    try:
        return digest(read_regular(path))
    except OSError:
        return None


def trusted_receipt(doc: Any, cell_id: str) -> dict[str, Any] | None:
    """A parsed cell.json when it is a receipt of `cell_id` brigade can trust, else None
    (pure): its schema tag, the cell's own id and a known state."""
    if (
        isinstance(doc, dict)
        and doc.get("schema") == CELL_SCHEMA
        and doc.get("cell_id") == cell_id
        and doc.get("state") in STATES
    ):
        return doc
    return None


def recorded_attempt(doc: Any) -> int | None:
    """The attempt number a parsed cell.json records, when it is a positive int (pure).

    Counted even from an untrusted receipt, so attempt numbers never go backwards.
    """
    attempt = doc.get("attempt") if isinstance(doc, dict) else None
    return attempt if type(attempt) is int and attempt > 0 else None


def receipt_in(out: Path, cell_id: str, doc: Any) -> Receipt | None:
    """A parsed cell.json of `out` as a trusted receipt in this output directory's terms
    (legacy.receipt_view: what a receipt of the original tool lacks is derived, and a
    run folder recorded elsewhere is the attempt's in the cell's own folder), parsed once
    into a `Receipt`; None when it is not one to trust."""
    receipt = trusted_receipt(doc, cell_id)
    if receipt is None:
        return None
    attempt = recorded_attempt(receipt)
    base = os.path.abspath(out)
    local = f"{base}/{run_path(cell_id, attempt)}" if attempt is not None else None
    return Receipt.of(legacy.receipt_view(receipt, base, local))


def view_in(cell_id: str, doc: Any, digest: str | None = None) -> ReceiptView | None:
    """The view of a parsed cell.json when it is a trusted receipt (None otherwise): its
    outcome, the same wherever the output directory is (`legacy.derived`), so a moved
    directory's index still holds; `digest`: of the bytes it was parsed from."""
    receipt = trusted_receipt(doc, cell_id)
    return ReceiptView.of(legacy.derived(receipt), digest) if receipt is not None else None


def read_cell(out: Path, cell_id: str) -> tuple[Receipt | None, ReceiptView | None]:
    """A cell's trusted receipt in full (as `read_receipt`) and its view with the digest of
    the bytes both came from (one read); (None, None) when there is none."""
    doc, view = _read_view(out, cell_id)
    return (receipt_in(out, cell_id, doc), view) if view is not None else (None, None)


def read_view(out: Path, cell_id: str) -> ReceiptView | None:
    """The view of a cell's trusted receipt, with the digest of its bytes (`read_cell`; the
    full receipt is never made)."""
    return _read_view(out, cell_id)[1]


def _read_view(out: Path, cell_id: str) -> tuple[Any, ReceiptView | None]:
    """A cell.json as parsed and its view (None: not a trusted receipt)."""
    base = cell_dir(out, cell_id)
    if os.path.islink(base):
        return None, None
    try:
        data = fs.read_regular(base / RECEIPT_FILE, jsontext.MAX_BYTES)
        doc = jsontext.parse(data)
    except (OSError, ValueError):
        return None, None
    return doc, view_in(cell_id, doc, hashlib.sha256(data).hexdigest())


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


def read_cell_json(out: Path, cell_id: str) -> tuple[Receipt | None, int | None]:
    """A cell's trusted receipt in full (None when there is none) and the attempt number its
    cell.json records. A cell.json naming another cell, or read through a cell folder
    that is a symbolic link (into who knows where), is never trusted."""
    base = cell_dir(out, cell_id)
    if os.path.islink(base):
        return None, None
    doc = read_json(base / RECEIPT_FILE)
    return receipt_in(out, cell_id, doc), recorded_attempt(doc)


def attempt_receipt(out: Path, cell_id: str, number: int) -> Receipt | None:
    """The copy of its receipt an attempt keeps (`attempt-NNN/cell.json`), parsed as it was
    written (nothing derived), when it is a trusted receipt of the cell; else None."""
    doc = read_json(attempt_dir(out, cell_id, number) / RECEIPT_FILE)
    return Receipt.of(trusted_receipt(doc, cell_id))


def has_cell_json(out: Path, cell_id: str) -> bool:
    """Whether anything is at a cell's cell.json (a link included, never followed), or the
    cell folder is a link (never followed either): a cell with no trusted receipt and
    this is unreadable, not missing."""
    base = cell_dir(out, cell_id)
    return os.path.islink(base) or os.path.lexists(base / RECEIPT_FILE)


def read_receipt(out: Path, cell_id: str) -> Receipt | None:
    """A cell's trusted receipt in full, None when there is none (see read_cell_json)."""
    return read_cell_json(out, cell_id)[0]


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
    """Create the next attempt folder (with its run/ and seat/) and return its number.

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
        (target / SEAT_DIR).mkdir()
        return number


def run_path(cell_id: str, attempt: int) -> str:
    """An attempt's run folder relative to the output directory (a receipt's `run_path`)."""
    return f"{CELLS_DIR}/{cell_id}/{ATTEMPTS_DIR}/{attempt_name(attempt)}/{RUN_DIR}"


def write_receipt(out: Path, receipt: dict[str, Any], *, durable: bool = True) -> None:
    """Write cell.json (validated, atomic); a terminal receipt is also copied into its attempt.

    A receipt naming its run folder (`run_dir`, absolute, as the original tool's readers
    expect) also gets `run_path`, the same folder relative to the output directory: what
    brigade reads, so a moved directory's receipts say where their runs are."""
    number = receipt.get("attempt")
    if isinstance(receipt.get("run_dir"), str) and type(number) is int and number > 0:
        receipt["run_path"] = run_path(receipt["cell_id"], number)
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
    feed.append(out, cell_id, receipt["state"], number)


def remove_fresh_db(out: Path) -> None:
    """Remove the doit DB a refused run wrote on its way out where there was none before
    (doit writes it whatever its reporter says; it is only a cache)."""
    path = out / DEP_FILE
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            path.unlink()
    except OSError:
        pass


def _not_files_or_folders(folder: str, names: list[str]) -> list[str]:
    """The entries of a folder that are no files, folders or symlinks (a FIFO a seat left
    would block the copy): they are not copied."""
    skipped = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.append(name)
    return skipped


def copy_folder(source: Path, target: Path) -> None:
    """Copy a folder of the output directory a seat or a grader's process wrote (a run
    folder, a grader's folder) into another: symlinks are copied as links, never followed,
    and FIFOs or devices are left out."""
    shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True, ignore=_not_files_or_folders)
