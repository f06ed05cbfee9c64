"""Adaptive trials on disk: how many trials each adaptive case's seat has now, read from the
receipts of its cells (trial 1 up to the rule's `max`) and decided by core/sequential.

`trial_counts` runs before the plan is built (the plan holds the trials the rule asked for so
far) and again after every round of a run (`engine/session.next_round`): the output directory is
the truth, so a later run with a larger `max` goes on where the last one stopped.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from brigade.core.plan import Counts, expand, rules_of
from brigade.core.receipts import ReceiptView
from brigade.core.sequential import planned
from brigade.core.specs import Manifest, Roster
from brigade.core.taxonomy import decide
from brigade.core.trials import trial_kind
from brigade.outdir import caches, store
from brigade.outdir.scan import read_receipt_indexed


def trial_counts(
    out: Path, manifest: Manifest, roster: Roster, label: str, *, retry_transient: bool = False
) -> Counts | None:
    """(case id, seat) -> the trials the plan gives each seat of an adaptive case now; None
    when the manifest has no adaptive case. Writes nothing."""
    rules = rules_of(manifest)
    if not rules:
        return None
    widest = dataclasses.replace(
        manifest,
        cases=tuple(
            case._replace(trials=case.rule.max) for case in manifest.cases if case.rule is not None
        ),
    )
    candidates = expand(widest, roster, label)
    present = store.existing_cells(out)
    views: dict[str, ReceiptView | None] = {}
    if present:
        index = caches.Sidecar(out / store.RECEIPT_INDEX, caches.cache_key())
        with store.opened_folder(store.cells_root(out)) as cells_fd:
            for cell in candidates:
                if cell.cell_id in present:
                    views[cell.cell_id] = read_receipt_indexed(out, cell.cell_id, index, cells_fd)
    results: dict[str, dict[str, list[str]]] = {}
    recorded: dict[tuple[str, str], int] = {}
    open_prefix: set[tuple[str, str]] = set()  # a trial of it was not finished: no further
    again = {"retry_transient": retry_transient, "reusable": False}
    for cell in candidates:  # (case-major, then seat, then trial)
        key = (cell.case_id, cell.seat.name)
        kinds = results.setdefault(cell.case_id, {}).setdefault(cell.seat.name, [])
        view = views.get(cell.cell_id)
        if view is not None:
            recorded[key] = cell.trial
        if key in open_prefix or view is None or decide(view, **again) == "run":
            open_prefix.add(key)
            continue
        kinds.append(trial_kind(view))
    counts, _ = planned(rules, manifest.seats, results, recorded)
    return counts
