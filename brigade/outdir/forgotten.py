"""Cells `doit forget` asked to run again, recorded in the output directory (forgotten.json).

doit's own meaning of `forget` is "run this task next time". brigade never reads
doit's DB for that (deleting `.doit.db` re-runs nothing), so the request is kept
where the results are: each forgotten cell names the attempt it had, and runs
as a new attempt on the next run that selects it. An entry is done once its
cell has a later attempt; done entries are dropped when the file is next written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from brigade.core.clock import utc_now
from brigade.core.plan import Cell
from brigade.core.receipts import ReceiptView, view_of
from brigade.outdir import store

FORGOTTEN_FILE = "forgotten.json"
FORGOTTEN_SCHEMA = "brigade.forgotten.v1"


def read(out: Path) -> dict[str, dict[str, Any]]:
    """cell_id -> its entry ({coordinate, attempt, forgotten_at}); empty when there is none
    (or the file is not one brigade wrote)."""
    doc = store.read_json(out / FORGOTTEN_FILE)
    if not isinstance(doc, dict) or doc.get("schema") != FORGOTTEN_SCHEMA:
        return {}
    cells = doc.get("cells")
    if not isinstance(cells, dict):
        return {}
    return {
        cell_id: entry
        for cell_id, entry in cells.items()
        if isinstance(entry, dict) and type(entry.get("attempt")) is int
    }


def pending(
    entries: Mapping[str, Mapping[str, Any]], recorded: Mapping[str, ReceiptView | None]
) -> frozenset[str]:
    """The forgotten cells of the plan (`recorded`) that have no attempt since."""
    waiting = set()
    for cell_id, entry in entries.items():
        if cell_id not in recorded:
            continue
        view = recorded[cell_id]
        if view is None or view.attempt is None or view.attempt <= entry["attempt"]:
            waiting.add(cell_id)
    return frozenset(waiting)


def record(out: Path, cells: Iterable[Cell], recorded: Mapping[str, ReceiptView | None]) -> None:
    """Add cells to forgotten.json, with the attempt each has now (`recorded`); entries
    already done are dropped. The caller holds the output directory's lock."""
    entries = _undone(out)
    now = utc_now()
    for cell in cells:
        view = recorded.get(cell.cell_id)
        attempt = view.attempt if view is not None and view.attempt is not None else 0
        entries[cell.cell_id] = {
            "coordinate": cell.coordinate,
            "attempt": attempt,
            "forgotten_at": now,
        }
    write(out, entries)


def settle(out: Path) -> None:
    """Drop the entries whose cells have run since (the caller holds the lock)."""
    entries = read(out)
    if entries:
        undone = _undone(out, entries)
        if len(undone) != len(entries):
            write(out, undone)


def write(out: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Write forgotten.json with these entries; remove it when there are none."""
    path = out / FORGOTTEN_FILE
    if not entries:
        path.unlink(missing_ok=True)
        return
    out.mkdir(parents=True, exist_ok=True)
    store.write_json(
        path,
        {"schema": FORGOTTEN_SCHEMA, "cells": {k: dict(v) for k, v in entries.items()}},
        FORGOTTEN_SCHEMA,
    )


def _undone(
    out: Path, entries: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """The entries whose cells have no attempt since they were forgotten (as on disk)."""
    entries = read(out) if entries is None else entries
    views = {cell_id: view_of(store.read_receipt(out, cell_id)) for cell_id in entries}
    waiting = pending(entries, views)
    return {k: v for k, v in entries.items() if k in waiting}
