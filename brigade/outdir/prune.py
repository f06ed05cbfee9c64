"""Stale cells: the folders of cells no current plan holds, listed and removed on request.

A manifest edit keeps the cells it replaced on disk (stale, listed in
plan.json `stale_cells`); cells of earlier generations, or of cases and
seats since removed, stay too. `brigade prune` lists them all and, when
asked, removes their folders and clears plan.json's stale list; the caller
then finishes the output directory again (summary, export, report). Built
workspaces (`workspaces/<key>/`) no current cell starts from, those of a case
whose setup or commit changed, are listed and removed with them.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from brigade import fs
from brigade.core.identity import world_key
from brigade.core.plan import PLAN_SCHEMA, Plan
from brigade.outdir import caches, forgotten, store

_CELL_ID = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class StaleCell:
    """A cell folder no current cell owns."""

    cell_id: str
    coordinate: str | None  # as its receipt or plan.json's stale list says (None: unknown)
    state: str  # its receipt's state ("missing": none to read)
    listed: bool  # in plan.json's stale_cells (else of an earlier generation or removed)


def stale_cells(out: Path, plan: Plan) -> list[StaleCell]:
    """Every cell folder of the output directory that the current plan does not hold."""
    current = {cell.cell_id for cell in plan.cells}
    listed = {entry.get("previous_cell_id"): entry.get("coordinate") for entry in plan.stale_cells}
    found = []
    for name in sorted(store.existing_cells(out)):
        if name in current or not _CELL_ID.match(name):
            continue
        receipt = store.read_receipt(out, name)
        coordinate = listed.get(name) or (receipt.coordinate if receipt is not None else None)
        found.append(
            StaleCell(
                cell_id=name,
                coordinate=coordinate if isinstance(coordinate, str) else None,
                state=receipt.state if receipt is not None else "missing",
                listed=name in listed,
            )
        )
    return sorted(found, key=lambda cell: (not cell.listed, cell.coordinate or "", cell.cell_id))


WORKSPACES_DIR = "workspaces"  # as run/workspaces builds them: <out>/workspaces/<key>/


def stale_workspaces(out: Path, plan: Plan) -> list[str]:
    """The built workspaces (`workspaces/<name>`, sorted) no current cell starts from: those
    of a setup or a commit since changed, and what a build that was killed left."""
    current = {world_key(world) for cell in plan.cells if (world := cell.world()) is not None}
    try:
        entries = list(os.scandir(out / WORKSPACES_DIR))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(entry.name for entry in entries if entry.name not in current)


def remove_workspaces(out: Path, names: list[str]) -> None:
    """Remove these built workspaces (the caller holds the lock; a link only as a link)."""
    root = out / WORKSPACES_DIR
    for name in names:
        folder = root / name
        if os.path.islink(folder) or not folder.is_dir():
            fs.remove(folder)
            continue
        _writable(folder)
        shutil.rmtree(folder)


def _writable(root: Path) -> None:
    """Owner write access back on every folder under `root` (a setup may have taken it off),
    so it can be removed; no link followed."""
    for folder, dirs, _ in os.walk(root):
        info = os.lstat(folder)
        if stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
            os.chmod(folder, stat.S_IMODE(info.st_mode) | 0o700)
        dirs[:] = [name for name in dirs if not os.path.islink(os.path.join(folder, name))]


def remove(out: Path, cells: list[StaleCell]) -> Plan | None:
    """Remove the folders of these cells and clear plan.json's stale list (the caller holds
    the lock); the plan without stale cells, or None when plan.json is not brigade's own."""
    root = store.cells_root(out)
    for cell in cells:
        folder = root / cell.cell_id
        if os.path.islink(folder):  # never through a link: only the link is brigade's
            os.unlink(folder)
        elif folder.is_dir():
            shutil.rmtree(folder)
    gone = {cell.cell_id for cell in cells}
    entries = forgotten.read(out)
    if any(cell_id in gone for cell_id in entries):
        forgotten.write(out, {k: v for k, v in entries.items() if k not in gone})
    return _clear_stale_list(out)


def _clear_stale_list(out: Path) -> Plan | None:
    from brigade.core.plan import plan_from_document

    path = out / store.PLAN_FILE
    info = caches.stat_of(path)  # before plan.json is read
    doc = store.read_own_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        return None  # the original tool's plan.json lists no stale cells
    index = caches.Sidecar(out / store.PLAN_INDEX, caches.cache_key())
    recorded = index.fresh(store.PLAN_FILE, info)
    doc["stale_cells"] = []
    store.write_json(path, doc, PLAN_SCHEMA, sample=True, compact=True)
    if isinstance(recorded, dict):  # what the index knew of this plan still holds
        index.record(store.PLAN_FILE, caches.stat_of(path), {**recorded, "stale_cells": []})
        index.save()
    return plan_from_document(doc)
