"""plan.json and its index: the current plan against the one on disk; writing both.

The index (`.plan-index.json`, a cache) vouches for plan.json while its stat is
unchanged: the key of the plan it holds, its stale cells, and the cell ids with
the key of the inputs they were expanded from, so a resume of unchanged inputs
neither parses plan.json nor hashes a cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.plan import (
    PLAN_SCHEMA,
    Cell,
    Counts,
    Plan,
    cells_key,
    expand,
    expansion_key,
    len_cells,
    rules_of,
    stale_cells,
)
from brigade.core.specs import Manifest, Roster
from brigade.outdir import caches, store


@dataclass(frozen=True)
class PlanOnDisk:
    """The current plan, and how it relates to the plan.json already on disk."""

    plan: Plan
    key: str
    current: bool  # plan.json already holds exactly this plan
    resumed: bool  # there was a plan.json (this output directory was used before)
    indexed: bool = False  # plan.json's index is valid too
    inputs: str | None = None  # expansion_key of the inputs, recorded in the plan index
    stale_changed: bool = False  # its stale cells differ from those plan.json lists

    @property
    def written(self) -> bool:
        """Whether plan.json and its index on disk already hold this plan."""
        return self.current and self.indexed


def _index(out: Path) -> caches.Sidecar:
    return caches.Sidecar(out / store.PLAN_INDEX, caches.cache_key())


def plan_against_disk(
    manifest: Manifest,
    roster: Roster,
    label: str,
    out: Path,
    context: dict[str, str],
    *,
    compare: bool = True,
    counts: Counts | None = None,
    keep_index: bool = True,
) -> PlanOnDisk:
    """Expand the manifest; stale cells and currency from the previous plan.json.

    plan.json is only parsed when its index does not vouch for it holding this plan.
    `counts`: the trials each adaptive case's seat has so far (outdir/rounds).
    `keep_index`: a plan.json whose bytes vouch for it under a new stat (a copied
    directory) is recorded so in its index (False: nothing is written).
    """
    plan_path = out / store.PLAN_FILE
    info = caches.stat_of(plan_path)  # before plan.json is read
    # (its bytes decide when the stat misses: a copied directory's plan.json is as it was)
    sidecar = _index(out)
    recorded = sidecar.recall(store.PLAN_FILE, plan_path)
    if keep_index:
        sidecar.save()  # the same bytes under a new stat: the next run is warm again
    index = recorded if type(recorded) is dict else None
    inputs = expansion_key(manifest, roster, context, counts)
    cells, key = _expand_cached(manifest, roster, label, context, inputs, index, counts)
    rules = rules_of(manifest)
    if (
        index is not None
        and index.get("key") == key
        and index.get("inputs") == inputs
        and isinstance(index.get("stale_cells"), list)
    ):
        stale = [dict(entry) for entry in index["stale_cells"]]
        plan = Plan(
            manifest.name,
            manifest.digest,
            tuple(cells),
            tuple(stale),
            context,
            roster.prices,
            roster.secret_env,
            rules,
        )
        return PlanOnDisk(plan, key, current=True, resumed=True, indexed=True, inputs=inputs)
    previous = store.read_json(plan_path)
    previous = previous if isinstance(previous, dict) else None
    stale = stale_cells(cells, previous)
    if stale:  # only cells kept on disk are stale (not those of a copied or unrun plan)
        present = store.existing_cells(out)
        stale = [entry for entry in stale if entry["previous_cell_id"] in present]
    plan = Plan(
        name=manifest.name,
        manifest_digest=manifest.digest,
        cells=tuple(cells),
        stale_cells=tuple(stale),
        context=context,
        prices=roster.prices,
        secret_env=roster.secret_env,
        rules=rules,
    )
    current = compare and previous is not None and previous == plan.document()
    before = previous.get("stale_cells") if previous is not None else []
    return PlanOnDisk(
        plan,
        key,
        current=current,
        resumed=info is not None,
        inputs=inputs,
        stale_changed=before != list(plan.stale_cells),
    )


def _expand_cached(
    manifest: Manifest,
    roster: Roster,
    label: str,
    context: dict[str, str],
    inputs: str | None,
    index: dict[str, Any] | None,
    counts: Counts | None = None,
) -> tuple[list[Cell], str]:
    """The cells and their key; hashing skipped when the plan index holds the cell ids of
    an expansion of these very inputs and they still add up to its recorded key."""
    if (
        inputs is not None
        and index is not None
        and index.get("inputs") == inputs
        and isinstance(index.get("ids"), list)
        and len(index["ids"]) == len_cells(manifest, counts)
        and all(isinstance(pair, list) and len(pair) == 2 for pair in index["ids"])
    ):
        cells = expand(manifest, roster, label, known=index["ids"], counts=counts)
        key = _key(manifest, roster, cells, context)
        if key == index.get("key"):
            return cells, key
    cells = expand(manifest, roster, label, counts=counts)
    return cells, _key(manifest, roster, cells, context)


def _key(manifest: Manifest, roster: Roster, cells: list[Cell], context: dict[str, str]) -> str:
    return cells_key(
        manifest.name,
        manifest.digest,
        cells,
        context,
        roster.prices,
        roster.secret_env,
        rules_of(manifest),
    )


def write_plan(out: Path, plan: Plan, key: str, inputs: str | None = None) -> None:
    """Write plan.json (the output directory is created here) and its index."""
    document = plan.document()
    out.mkdir(parents=True, exist_ok=True)
    plan_path = out / store.PLAN_FILE
    data = store.write_json(plan_path, document, PLAN_SCHEMA, sample=True, compact=True)
    index = caches.Sidecar(out / store.PLAN_INDEX, caches.cache_key(), load=False)
    index.record(
        store.PLAN_FILE,
        caches.stat_of(plan_path),  # the file this process just wrote
        {
            "key": key,
            "stale_cells": document["stale_cells"],
            "inputs": inputs,
            "ids": [[cell.cell_id, cell.run_key] for cell in plan.cells],
        },
        caches.content_digest(data),
    )
    index.save()
