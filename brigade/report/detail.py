"""One cell as its folder records it: receipt, attempts, answer, stderr, transcript, changes.

Read from the output directory as it is, for `brigade show` (which prints it
raw: the output directory is the user's own) and for the report's detail
pages (which project every text first). Nothing here decides anything: a
missing or unreadable file is simply absent from the record.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core import jsontext
from brigade.core.identity import digest
from brigade.core.plan import Cell
from brigade.core.receipts import Receipt
from brigade.core.taxonomy import SEAT_FAILED
from brigade.core.transcript import TRANSCRIPT_SCHEMA
from brigade.outdir import store
from brigade.report.model import reused_run_text

FINAL = "final.txt"
RUN_RECORD = "run.json"
STDERR = "stderr.log"
STDOUT = "stdout.log"
TRANSCRIPT = "transcript.json"
PATCH = "changes.patch"
CHANGES_DIR = "changes"
# what is read of a log for its tail, and of an answer or a transcript at most
TAIL_BYTES = 64 * 1024
READ_LIMIT = 4 * 1024 * 1024
# a diff built from the snapshot stops after this many characters
DIFF_LIMIT = 256 * 1024


@dataclass(frozen=True)
class Attempt:
    """One attempt folder: what its receipt (or, without one, its run.json) says."""

    number: int
    state: str  # a receipt state, or "interrupted": an earlier attempt that never finished
    started_at: str | None
    finished_at: str | None
    duration: float | None
    failure_reason: str | None
    fault: str | None  # `kind: message` when the run met a fault, else None
    run_dir: Path
    # a seat run reused from another cell's attempt (`reused run of cell ...`): then
    # `started_at` is when that seat run started, not when this attempt copied it
    reused: str | None = None


@dataclass(frozen=True)
class Text:
    """A text read from a file: what was read, and whether the file holds more."""

    text: str
    more: bool = False


@dataclass(frozen=True)
class Changes:
    """What a writable run changed: paths, and the diff of them when it can be had."""

    changed: tuple[str, ...]
    deleted: tuple[str, ...]
    not_copied: tuple[str, ...]
    diff: Text | None
    diff_source: str  # "changes.patch", "snapshot", or why there is no diff


@dataclass(frozen=True)
class CellRecord:
    """Everything recorded of one planned cell (raw: not projected)."""

    cell: Cell
    receipt: Receipt | None
    attempts: tuple[Attempt, ...]
    cell_dir: Path
    run_dir: Path | None  # the current attempt's run folder, when there is one
    run_doc: dict[str, Any] | None
    answer: Text | None
    stderr_tail: Text | None
    transcript: tuple[dict[str, Any], ...] | None
    changes: Changes | None
    # no receipt, but a cell.json brigade does not read (too big, too deep, no JSON, a
    # link, not a regular file)
    unreadable: bool = False

    @property
    def state(self) -> str:
        """The receipt's state, or `unreadable`, or `missing`."""
        if self.receipt is not None:
            return self.receipt.state
        return "unreadable" if self.unreadable else "missing"

    @property
    def usage(self) -> dict[str, Any] | None:
        """The receipt's usage, else run.json's, when either records one."""
        if self.receipt is not None and self.receipt.usage is not None:
            return dict(self.receipt.usage)
        usage = self.run_doc.get("usage") if self.run_doc is not None else None
        return usage if isinstance(usage, dict) else None

    @property
    def fault(self) -> str | None:
        """`kind: message` of the current attempt's fault, when it met one."""
        return self.attempts[-1].fault if self.attempts else None


def read_text(path: Path, limit: int | None = READ_LIMIT) -> Text | None:
    """A file's text (UTF-8, bad bytes replaced), at most `limit` bytes; None when absent."""
    try:
        data = store.read_regular(path, limit)
    except OSError:
        return None
    more = limit is not None and len(data) > limit
    return Text(data[:limit].decode("utf-8", "replace"), more)


def read_tail(path: Path, lines: int, limit: int = TAIL_BYTES) -> Text | None:
    """The last `lines` lines of a file (from its last `limit` bytes); None when absent."""
    try:
        with os.fdopen(store.open_regular(path), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - limit))
            data = handle.read(limit)
    except OSError:
        return None
    text = data.decode("utf-8", "replace")
    kept = text.splitlines()
    if size > limit and kept:
        kept = kept[1:]  # the first line read is probably cut
    shown = kept[-lines:] if lines else []
    return Text("\n".join(shown), more=len(kept) > len(shown) or size > limit)


def _json_object(path: Path) -> dict[str, Any] | None:
    doc = store.read_json(path)
    return doc if isinstance(doc, dict) else None


def fault_text(doc: Mapping[str, Any] | None) -> str | None:
    """`kind: message` of the fault a receipt or run.json records, else None."""
    if doc is None:
        return None
    fault = doc.get("fault")
    if isinstance(fault, dict) and fault.get("kind"):
        message = fault.get("message")
        return f"{fault['kind']}: {message}" if message else str(fault["kind"])
    kind = doc.get("failure_kind") or doc.get("failure_reason")
    detail = doc.get("failure_detail")
    if kind in (None, "nonzero_exit") and doc.get("state") != "adapter_error":
        return None
    if kind is None:
        return str(detail) if detail else None
    return f"{kind}: {detail}" if detail else str(kind)


def unlinked(base: Path, *parts: str) -> Path | None:
    """`base/parts...`, or None when `base` or a component after it is a symbolic link:
    what is under a linked folder could be anywhere, so nothing there is read."""
    path = base
    if os.path.islink(path):
        return None
    for part in parts:
        path = path / part
        if os.path.islink(path):
            return None
    return path


def _attempts(cell_dir: Path, receipt: Receipt | None) -> tuple[Attempt, ...]:
    listed = unlinked(cell_dir, store.ATTEMPTS_DIR)
    numbers = store.attempt_numbers(cell_dir) if listed is not None else []
    current = receipt.attempt if receipt is not None else None
    if current is not None and current not in numbers:
        numbers.append(current)  # its folder is gone: the receipt still says what it was
    numbers.sort()
    attempts = []
    for number in numbers:
        folder = cell_dir / store.ATTEMPTS_DIR / store.attempt_name(number)
        rdir = folder / store.RUN_DIR
        # a linked attempt or run folder is read as if it held nothing
        readable = unlinked(cell_dir, store.ATTEMPTS_DIR, store.attempt_name(number))
        run_readable = readable is not None and not os.path.islink(rdir)
        doc: Mapping[str, Any] | None
        # each attempt's copy of its receipt, as written (an untrusted copy is shown as it
        # says, never trusted for anything); the cell's own receipt says most about its
        # current attempt
        if number == current and receipt is not None:
            doc = receipt.document
        else:
            doc = _json_object(folder / store.RECEIPT_FILE) if readable is not None else None
        reused = reused_run_text(doc) if doc is not None else None
        if doc is not None and doc.get("cell_id") == cell_dir.name:
            state = str(doc.get("state"))
            started = doc.get("started_at")
            if reused is not None:  # the seat run's own start (a regrade is no start)
                recorded = doc.get("reused_run") or {}
                run_doc = _json_object(rdir / RUN_RECORD) if run_readable else None
                started = recorded.get("started_at") or (run_doc or {}).get("started_at")
            finished = doc.get("finished_at")
            duration = doc.get("duration_seconds")
            reason = doc.get("failure_reason")
            fault = fault_text(doc) if doc.get("state") != "running" else None
        else:
            # no receipt of its own: a run that was killed before it finished this attempt
            state = "interrupted"
            run_doc = _json_object(rdir / RUN_RECORD) if run_readable else None
            started = run_doc.get("started_at") if run_doc else None
            finished = run_doc.get("finished_at") if run_doc else None
            duration = run_doc.get("duration_seconds") if run_doc else None
            reason, fault = None, None
        attempts.append(
            Attempt(
                number=number,
                state=state,
                started_at=started if isinstance(started, str) else None,
                finished_at=finished if isinstance(finished, str) else None,
                duration=duration if isinstance(duration, (int, float)) else None,
                failure_reason=reason if isinstance(reason, str) else None,
                fault=fault,
                run_dir=rdir,
                reused=reused,
            )
        )
    return tuple(attempts)


def read_transcript(
    path: Path, run_doc: Mapping[str, Any] | None
) -> tuple[dict[str, Any], ...] | None:
    """The entries of a run/transcript.json (brigade.transcript.v1), None when there is
    none: only the file brigade wrote is one (run.json records its digest), never one a
    seat left in its run folder."""
    expected = run_doc.get("transcript_digest") if run_doc is not None else None
    if not isinstance(expected, str):
        return None
    try:
        data = store.read_regular(path, READ_LIMIT)
    except OSError:
        return None
    if digest(data) != expected:
        return None
    try:
        doc = jsontext.parse(data, limit=None)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != TRANSCRIPT_SCHEMA:
        return None
    entries = doc.get("entries")
    if not isinstance(entries, list):
        return None
    return tuple(entry for entry in entries if isinstance(entry, dict))


_READ = object()  # read the receipt from the cell's folder


def read_record(
    out: Path,
    cell: Cell,
    *,
    workspace: Path | None = None,
    answer_limit: int | None = READ_LIMIT,
    stderr_lines: int = 20,
    receipt: Any = _READ,
) -> CellRecord:
    """What the output directory records of a cell (`answer_limit` None: the whole answer).

    `workspace` is where the plan ran: a writable run without changes.patch is
    diffed against its base commit there. `receipt`: the cell's trusted receipt
    (or None) when the caller has read it already.
    """
    cell_dir = store.cell_dir(out, cell.cell_id)
    if receipt is _READ:
        receipt = store.read_receipt(out, cell.cell_id)
    attempts = _attempts(cell_dir, receipt)
    attempt = receipt.attempt if receipt is not None else None
    run_dir = (
        unlinked(cell_dir, store.ATTEMPTS_DIR, store.attempt_name(attempt), store.RUN_DIR)
        if attempt is not None
        else None
    )  # (None through a linked folder: its files could be anywhere)
    if run_dir is not None and not run_dir.is_dir():
        run_dir = None
    run_doc = _json_object(run_dir / RUN_RECORD) if run_dir is not None else None
    finished = receipt is not None and receipt.state != "running"
    answer = read_text(run_dir / FINAL, answer_limit) if run_dir and finished else None
    faulty = receipt is not None and receipt.state in SEAT_FAILED
    stderr = read_tail(run_dir / STDERR, stderr_lines) if run_dir and faulty else None
    transcript = read_transcript(run_dir / TRANSCRIPT, run_doc) if run_dir is not None else None
    changes = read_changes(run_dir, run_doc, workspace) if run_dir is not None and run_doc else None
    return CellRecord(
        unreadable=receipt is None and store.has_cell_json(out, cell.cell_id),
        cell=cell,
        receipt=receipt,
        attempts=attempts,
        cell_dir=cell_dir,
        run_dir=run_dir,
        run_doc=run_doc,
        answer=answer,
        stderr_tail=stderr,
        transcript=transcript,
        changes=changes,
    )


# -- what a writable run changed ----------------------------------------------------


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def read_changes(
    run_dir: Path, run_doc: Mapping[str, Any], workspace: Path | None
) -> Changes | None:
    """The changed files of a writable run and their diff: changes.patch when the run wrote
    one, else the snapshot in run/changes/ against the base commit (in `workspace`)."""
    if not isinstance(run_doc.get("changed_files"), list):
        return None
    snapshot = run_doc.get("workspace_snapshot")
    snapshot = snapshot if isinstance(snapshot, dict) else {}
    changed = _strings(run_doc["changed_files"])
    deleted = _strings(snapshot.get("deleted"))
    not_copied = _strings(snapshot.get("not_copied"))
    patch = read_text(run_dir / PATCH, DIFF_LIMIT)
    if patch is not None:
        return Changes(changed, deleted, not_copied, patch, PATCH)
    if not changed and not deleted:
        return Changes(changed, deleted, not_copied, None, "no files changed")
    head = snapshot.get("head")
    if not isinstance(head, str) or workspace is None:
        return Changes(changed, deleted, not_copied, None, "no base commit recorded")
    prefix = snapshot.get("prefix") if isinstance(snapshot.get("prefix"), str) else ""
    paths = sorted({*changed, *deleted})
    from brigade.run.worktree import base_files  # (git, only for a snapshot's diff)

    base = base_files(workspace, head, [f"{prefix}/{p}" if prefix else p for p in paths])
    if base is None:
        return Changes(changed, deleted, not_copied, None, f"base commit {head[:12]} not found")
    parts: list[str] = []
    size = 0
    more = False
    for path, old in zip(paths, base, strict=True):
        if path in not_copied:
            part = f"--- a/{path}\n+++ b/{path}\n(not copied: a large file or not a file)\n"
        else:
            new = None if path in deleted else _read_bytes(run_dir / CHANGES_DIR / path)
            part = file_diff(path, old, new)
        if size + len(part) > DIFF_LIMIT:
            more = True
            break
        parts.append(part)
        size += len(part)
    return Changes(changed, deleted, not_copied, Text("".join(parts), more), "snapshot")


def _read_bytes(path: Path) -> bytes | None:
    try:
        return store.read_regular(path)
    except OSError:
        return None


def file_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """A unified diff of one file (None: absent on that side); binary files are named only."""
    if (old is not None and b"\0" in old) or (new is not None and b"\0" in new):
        return f"--- a/{path}\n+++ b/{path}\nbinary file changed\n"
    before = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    after = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lines = difflib.unified_diff(
        before,
        after,
        fromfile=f"a/{path}" if old is not None else "/dev/null",
        tofile=f"b/{path}" if new is not None else "/dev/null",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text or f"--- a/{path}\n+++ b/{path}\n(no change in content)\n"


def record_document(record: CellRecord, reason: str) -> dict[str, Any]:
    """A cell's record as `brigade show DIR CELL --json` prints it (paths absolute)."""
    changes = record.changes
    return {
        "coordinate": record.cell.coordinate,
        "cell_id": record.cell.cell_id,
        "state": record.state,
        "reason": reason,
        "receipt": dict(record.receipt.document) if record.receipt is not None else None,
        "attempts": [
            {
                "attempt": a.number,
                "state": a.state,
                "started_at": a.started_at,
                "finished_at": a.finished_at,
                "duration_seconds": a.duration,
                "failure_reason": a.failure_reason,
                "fault": a.fault,
                "run_dir": str(a.run_dir),
                "reused": a.reused,
            }
            for a in record.attempts
        ],
        "usage": record.usage,
        "answer": record.answer.text if record.answer is not None else None,
        "answer_truncated": record.answer.more if record.answer is not None else False,
        "stderr_tail": record.stderr_tail.text if record.stderr_tail is not None else None,
        "changed_files": list(changes.changed) if changes is not None else None,
        "deleted_files": list(changes.deleted) if changes is not None else None,
        "transcript_entries": len(record.transcript) if record.transcript is not None else None,
        "cell_dir": str(record.cell_dir),
        "run_dir": str(record.run_dir) if record.run_dir is not None else None,
    }
