"""Scanning the output directory: every planned cell's trusted receipt, whether a graded
cell's output is intact, what bringing each cell up to date needs, and the seat runs a
cell without a receipt may reuse.

`scan(out, plan)` is the one entry point (both front doors call it once, at load
time, under the lock); it returns a `Scan`, and `Scan.save()` keeps its indexes
for the next run. A finished cell costs one stat of its cell.json and one of its
final.txt while their index entries vouch for them (outdir/caches).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from brigade import fs
from brigade.core import jsontext
from brigade.core.identity import cell_id as hash_cell
from brigade.core.identity import identity_payload, run_key
from brigade.core.plan import Plan
from brigade.core.receipts import ReceiptView
from brigade.core.taxonomy import GRADED, Action, decide, is_transient, reusable_source
from brigade.outdir import caches, digests, forgotten, store


@dataclass(frozen=True)
class Scan:
    """What the output directory says about every cell of a plan, and what each needs."""

    # cell_id -> the view of its trusted receipt (None: missing or untrusted)
    recorded: Mapping[str, ReceiptView | None]
    actions: Mapping[str, Action]  # cell_id -> what bringing it up to date needs
    reuse: Mapping[str, str]  # cell_id -> the finished cell whose seat run it reuses
    # finished cells with an apparatus fault left as they are (no --retry-transient)
    kept_faults: int
    # cells `doit forget` asked to run again that have not run since (forgotten.json)
    forgotten: frozenset[str]
    forgotten_file: bool  # forgotten.json holds entries (the final task settles them)
    receipts: caches.Sidecar  # the receipt index: cell_id -> the view of its cell.json
    outputs: caches.Sidecar | None  # the output index: cell_id -> final.txt's digest

    @property
    def changed(self) -> bool:
        """Whether a cell.json changed since the receipt index was written (its bytes: a
        copied directory's new stats are no change)."""
        return self.receipts.altered

    def save(self) -> None:
        """Keep the receipt and output indexes for the next run (caches; safe to lose)."""
        if self.outputs is not None:
            self.outputs.save()
        self.receipts.save()


# starts a helper digesting files of an open folder (their names and size limits, made
# while it starts); returns the wait for its answers
Ahead = Callable[[int, Callable[[], digests.Job]], Callable[[], digests.Answers]]

# what an array of signed 64-bit numbers holds
_LIMIT = 1 << 63

_FAULTED = frozenset({"adapter_error", "execution_error"})


def kept_fault(view: ReceiptView | None) -> bool:
    """A finished cell with an apparatus fault, which --retry-transient would run again."""
    return view is not None and view.state in _FAULTED and is_transient(view)


def scan(
    out: Path, plan: Plan, *, retry_transient: bool = False, ahead: Ahead | None = None
) -> Scan:
    """Read every planned cell's receipt and decide what bringing it up to date needs.

    Runs over every cell on every resume: a finished cell costs one stat of its
    cell.json and one of its final.txt (see output_intact), nothing more. `ahead`: how
    to have a helper digest files of a copied cells folder while the receipts are read
    (`run/ahead`; its answers only ever confirm, outdir/digests).
    """
    needs_run = []
    present = store.existing_cells(out)
    index = caches.Sidecar(out / store.RECEIPT_INDEX, caches.cache_key(), load=bool(present))
    recorded: dict[str, ReceiptView | None] = {}
    actions: dict[str, Action] = {}
    kept = 0
    with store.opened_folder(store.cells_root(out)) as cells_fd:
        # a cells folder that is not the one the index last saw (copied, restored, moved):
        # every stat misses, so each file is opened at once (the same answers, sooner)
        eager = cells_fd is not None and index.copied(store.CELLS_DIR, os.fstat(cells_fd))
        outputs = _Outputs(out, eager)
        if eager and ahead is not None and cells_fd is not None:
            # the final.txt files the receipts recorded are read by a helper meanwhile
            wanted = partial(outputs.wanted, plan, present, index, cells_fd)
            outputs.wait = ahead(cells_fd, wanted)
        for cell in plan.cells:
            cell_id = cell.cell_id
            if cell_id in present:
                view = read_receipt_indexed(out, cell_id, index, cells_fd, eager)
            else:
                view = None
            recorded[cell_id] = view
            actions[cell_id] = decide(view, retry_transient=retry_transient, reusable=False)
        # (a pass of its own: the helper reads the outputs while the receipts are read)
        for cell in plan.cells:
            cell_id = cell.cell_id
            action, view = actions[cell_id], recorded[cell_id]
            if action == "skip" and not outputs.intact(cell_id, view, cells_fd):
                action = actions[cell_id] = "regrade"  # its grade task refuses the output
            if action == "run":
                needs_run.append(cell)
            elif action == "skip" and kept_fault(view):
                kept += 1
    entries = forgotten.read(out)
    reuse: dict[str, str] = {}
    if needs_run:
        sources = reuse_index(out, {c.cell_id for c in plan.cells}, retry_transient)
        for cell in needs_run:
            source = sources.get(cell.run_key)
            if (
                source is not None
                and decide(recorded[cell.cell_id], retry_transient=retry_transient, reusable=True)
                == "reuse"
            ):
                reuse[cell.cell_id] = source
                actions[cell.cell_id] = "reuse"
    return Scan(
        recorded=recorded,
        actions=actions,
        reuse=reuse,
        kept_faults=kept,
        forgotten=forgotten.pending(entries, recorded) if entries else frozenset(),
        forgotten_file=bool(entries),
        receipts=index,
        outputs=outputs.index,
    )


def read_receipt_indexed(
    out: Path,
    cell_id: str,
    index: caches.Sidecar,
    cells_fd: int | None = None,
    eager: bool = False,
) -> ReceiptView | None:
    """The view of a cell's trusted receipt, from the receipt index while cell.json's stat
    still matches (taken before the file is read), or while its bytes do (a copied or
    restored directory: new inodes and ctimes), else from cell.json (indexed again).

    A view holds nothing of where the output directory is (`store.view_in`): a moved
    directory's views are its views. `eager`: the stat is expected to miss (the cells
    folder was copied): cell.json is opened at once, its stat taken from the open file.

    Run once per cell on every resume: kept to one stat, relative to `cells_fd`
    when given, and no needless allocation.
    """
    relative = f"{cell_id}/{store.RECEIPT_FILE}"
    data = None
    info: os.stat_result | None
    if eager and cells_fd is not None:
        try:
            info, data = fs.read_stat(relative, jsontext.MAX_BYTES, dir_fd=cells_fd)
        except OSError:
            info = caches.stat_of(relative, cells_fd)
        recorded = index.fresh(cell_id, info)
        if recorded is caches.MISS and data is not None:
            recorded = index.same_content(cell_id, info, data)
    else:
        if cells_fd is None:
            info = caches.stat_of(f"{out}/{store.CELLS_DIR}/{relative}")
        else:
            info = caches.stat_of(relative, cells_fd)
        recorded = index.fresh(cell_id, info)
        if recorded is caches.MISS and info is not None and index.digest(cell_id) is not None:
            data = _read_cell_file(out, relative, cells_fd)
            if data is not None:
                recorded = index.same_content(cell_id, info, data)
    if recorded is None:  # an untrusted receipt, as recorded
        return None
    view: ReceiptView | None
    if recorded is not caches.MISS:
        if type(recorded) is ReceiptView:  # (parsed earlier in this process)
            return recorded
        view = ReceiptView.from_json(recorded)
        if view is not None:
            index.parsed(cell_id, view, view.digest)  # parsed once per process
            return view
    if data is None:
        data = _read_cell_file(out, relative, cells_fd)
    try:
        doc = jsontext.parse(data) if data is not None else None
    except ValueError:
        doc = None
    digest = caches.content_digest(data) if data is not None else None
    view = store.view_in(cell_id, doc, digest)
    index.record(cell_id, info, view, digest)
    return view


def _read_cell_file(out: Path, relative: str, cells_fd: int | None) -> bytes | None:
    """A file of the cells folder (`relative` to it; opened relative to `cells_fd` when
    given), at most a JSON document's cap; None when it cannot be read."""
    try:
        if cells_fd is None:
            return fs.read_regular(f"{out}/{store.CELLS_DIR}/{relative}", jsontext.MAX_BYTES)
        return fs.read_regular(relative, jsontext.MAX_BYTES, dir_fd=cells_fd)
    except OSError:
        return None


class _Outputs:
    """The output index of one scan, opened when the first graded cell is checked."""

    __slots__ = ("out", "index", "eager", "wait", "answers")

    def __init__(self, out: Path, eager: bool = False) -> None:
        self.out = out
        self.index: caches.Sidecar | None = None
        self.eager = eager  # the cells folder was copied: every final.txt's stat is new
        # the wait for a helper's answers of the final.txt files (`wanted`), and them
        self.wait: Callable[[], digests.Answers] | None = None
        self.answers: digests.Answers | None = None

    def _index(self) -> caches.Sidecar:
        if self.index is None:
            self.index = caches.Sidecar(self.out / store.OUTPUT_INDEX, caches.cache_key())
        return self.index

    def wanted(
        self, plan: Plan, present: set[str], receipts: caches.Sidecar, fd: int
    ) -> digests.Job:
        """The final.txt of every graded cell as the receipt index recorded it, with the size
        the output index recorded (a cell whose receipt changed since reads its own)."""
        index = self._index()
        keys: list[str] = []
        attempts, limits = array("q"), array("q")
        for cell in plan.cells:
            cell_id = cell.cell_id
            entry = receipts.entries.get(cell_id)
            size = index.size(cell_id)
            if cell_id not in present or size is None or type(entry) is not list:
                continue
            if len(entry) < 3 or entry[2] is None:
                continue
            view = entry[2] if type(entry[2]) is ReceiptView else ReceiptView.from_json(entry[2])
            if view is None:
                continue
            receipts.parsed(cell_id, view, view.digest)  # parsed once per process
            attempt = view.attempt
            if (
                view.state in GRADED
                and view.output_digest
                and attempt is not None
                and 0 <= attempt < _LIMIT
                and size < _LIMIT  # (a planted cache's number fits no array: read here)
            ):
                keys.append(cell_id)
                attempts.append(attempt)
                limits.append(size)
        return digests.Job(fd, keys, attempts, limits, final_name)

    def intact(self, cell_id: str, receipt: ReceiptView | None, cells_fd: int | None) -> bool:
        """output_intact, with this scan's output index (and a helper's answers)."""
        if receipt is None or receipt.state not in GRADED or not receipt.output_digest:
            return True
        if self.answers is None and self.wait is not None:
            self.answers = self.wait().of(cells_fd)
        return output_intact(
            self.out, cell_id, receipt, self._index(), cells_fd, self.eager, self.answers
        )


def final_name(cell_id: str, attempt: int) -> str:
    """A cell's final.txt of an attempt, relative to the cells folder."""
    # string paths: building 10,000 Paths costs more than the stats themselves
    return f"{cell_id}/{store.ATTEMPTS_DIR}/{store.attempt_name(attempt)}/{store.RUN_DIR}/final.txt"


def output_intact(
    out: Path,
    cell_id: str,
    receipt: ReceiptView | None,
    index: caches.Sidecar,
    cells_fd: int | None = None,
    eager: bool = False,
    answers: digests.Answers | None = None,
) -> bool:
    """Whether a graded cell's run/final.txt still has the recorded output_digest.

    A file's digest is computed once; afterwards its unchanged stat vouches for
    it (the output index), so a no-op resume costs one stat per cell (relative
    to `cells_fd`, the cells folder, when given). `eager`: its stat is expected to
    miss (a copied cells folder): the file is opened and read at once, unless a
    helper's `answers` (outdir/digests, of the files of `cells_fd`) say it has
    that digest.
    """
    if receipt is None or receipt.state not in GRADED:
        return True
    expected, attempt = receipt.output_digest, receipt.attempt
    if not expected:
        return True
    if attempt is None:
        return False
    relative = final_name(cell_id, attempt)
    final = f"{out}/{store.CELLS_DIR}/{relative}"
    info: os.stat_result | None
    if answers and (known := answers.get(cell_id, attempt)) is not None:
        info, hexdigest = known
        if "sha256:" + hexdigest == expected:  # (only a match is taken: else it is read here)
            index.record(cell_id, info, expected)
            return True
    if eager and cells_fd is not None:
        try:
            info, data = fs.read_stat(relative, dir_fd=cells_fd)
        except OSError:
            return False
        # (the attempt is in the path: another attempt's final.txt is another file)
        if index.fresh(cell_id, info) != expected and store.digest(data) != expected:
            return False
        index.record(cell_id, info, expected)
        return True
    info = caches.stat_of(final) if cells_fd is None else caches.stat_of(relative, cells_fd)
    # (the attempt is in the path: another attempt's final.txt is another file, inode)
    if index.fresh(cell_id, info) == expected:
        index.parsed(cell_id, expected)  # the receipt's string held, not an equal second one
        return True
    if cells_fd is None:
        found = store.file_digest(final)
    else:
        try:
            found = store.digest(fs.read_regular(relative, dir_fd=cells_fd))
        except OSError:
            found = None
    if found != expected:
        return False
    index.record(cell_id, info, expected)
    return True


def reuse_index(out: Path, current: set[str], retry_transient: bool) -> dict[str, str]:
    """run_key -> cell_id of finished cells outside the plan whose seat run can be reused.

    Only receipts whose identity fields hash to their own cell_id are trusted.
    """
    index: dict[str, tuple[str, str]] = {}
    root = store.cells_root(out)
    try:
        names = [p.name for p in root.iterdir() if p.name not in current]
    except OSError:
        return {}
    for name in names:
        receipt = store.read_receipt(out, name)
        if receipt is None or not reusable_source(receipt, retry_transient=retry_transient):
            continue
        case, seat, specs = receipt.case or {}, receipt.seat, receipt.grader_specs
        case_id, prompt = case.get("id"), case.get("prompt")
        if (
            not isinstance(case_id, str)
            or not isinstance(prompt, str)
            or seat is None
            or receipt.trial is None
            or specs is None
            or receipt.execution_mode is None
        ):
            continue
        try:
            payload = identity_payload(
                case_id=case_id,
                prompt=prompt,
                seat=dict(seat),
                trial=receipt.trial,
                graders=[dict(spec) for spec in specs],
                execution_mode=receipt.execution_mode,
            )
        except (KeyError, TypeError):
            continue
        if hash_cell(payload) != name:
            continue
        key = run_key(payload)
        finished = receipt.finished_at or ""
        if key not in index or finished > index[key][1]:
            index[key] = (name, finished)
    return {key: value[0] for key, value in index.items()}
