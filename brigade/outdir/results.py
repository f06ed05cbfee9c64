"""Read a plan's recorded results from the output directory; write summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from brigade.core.clock import utc_now
from brigade.core.plan import PLAN_SCHEMA, Plan
from brigade.core.receipts import ReceiptView, view_of
from brigade.errors import InputError
from brigade.outdir import caches, legacy, store

# cell_id -> a trusted receipt in full / its view (None: missing or untrusted)
Receipts = dict[str, dict[str, Any] | None]
Views = dict[str, ReceiptView | None]
# above this many cells summary.json is written compact and validated by sample
LARGE_PLAN = 1000


def current_receipts(out: Path, plan: Plan) -> Receipts:
    """cell_id -> trusted receipt in full (None when missing or untrusted), every planned cell."""
    present = store.existing_cells(out)
    return {
        cell.cell_id: store.read_receipt(out, cell.cell_id) if cell.cell_id in present else None
        for cell in plan.cells
    }


def current_views(
    out: Path, plan: Plan, known: Mapping[str, ReceiptView | None] | None = None
) -> Views:
    """cell_id -> the view of its trusted receipt (None when missing or untrusted).

    `known` views (read under this lock, unchanged since) are used instead of re-reading.
    """
    known = known or {}
    if all(cell.cell_id in known for cell in plan.cells):
        return {cell.cell_id: known[cell.cell_id] for cell in plan.cells}
    present = store.existing_cells(out)
    return {
        cell.cell_id: known[cell.cell_id]
        if cell.cell_id in known
        else (view_of(store.read_receipt(out, cell.cell_id)) if cell.cell_id in present else None)
        for cell in plan.cells
    }


def stale_views(out: Path, plan: Plan) -> Views:
    """previous cell_id -> the view of its receipt, for every stale cell of the plan."""
    return {
        entry["previous_cell_id"]: view_of(store.read_receipt(out, entry["previous_cell_id"]))
        for entry in plan.stale_cells
    }


def summarize(out: Path, plan: Plan, views: Views | None = None) -> dict[str, Any]:
    """The summary document of a plan as recorded on disk."""
    from brigade.core.summary import build_summary  # not needed by a no-op resume

    views = views if views is not None else current_views(out, plan)
    return build_summary(plan, views, stale_views(out, plan), utc_now())


def write_summary(out: Path, plan: Plan, views: Views | None = None) -> dict[str, Any]:
    """Compute and atomically write summary.json."""
    from brigade.core.summary import SUMMARY_SCHEMA

    summary = summarize(out, plan, views)
    large = len(plan.cells) > LARGE_PLAN
    store.write_json(out / store.SUMMARY_FILE, summary, SUMMARY_SCHEMA, sample=large, compact=large)
    return summary


def read_plan_document(out: Path) -> dict[str, Any]:
    """plan.json of an output directory; InputError when there is none."""
    doc = store.read_json(out / store.PLAN_FILE)
    tags = (PLAN_SCHEMA, legacy.ORIGINAL_PLAN_SCHEMA)  # ours, or the original tool's
    if not isinstance(doc, dict) or doc.get("schema") not in tags:
        raise InputError(f"{out}: no readable plan.json here; is this a brigade output directory?")
    return doc


SUMMARY_KEY = ".summary-key.json"  # a cache: which plan summary.json was made from, its headline


def _summary_sidecar(out: Path) -> caches.Sidecar:
    # keyed on brigade's code: a summary computed by other code is never taken as current
    return caches.Sidecar(out / SUMMARY_KEY, caches.cache_key())


def summary_current(out: Path, plan_key: str) -> bool:
    """summary.json was written for this plan (by this code) and is untouched since."""
    recorded = _summary_sidecar(out).fresh_file(store.SUMMARY_FILE, out / store.SUMMARY_FILE)
    return type(recorded) is dict and recorded.get("plan") == plan_key and "headline" in recorded


def remember_summary(out: Path, plan_key: str, summary: Mapping[str, Any]) -> None:
    """Record which plan summary.json was just written for, and its headline."""
    sidecar = caches.Sidecar(out / SUMMARY_KEY, caches.cache_key(), load=False)
    sidecar.record(
        store.SUMMARY_FILE,
        caches.stat_of(out / store.SUMMARY_FILE),  # the file this process just wrote
        {"plan": plan_key, "exit_code": summary["exit_code"], "headline": headline(summary)},
    )
    sidecar.save()


def headline(summary: Mapping[str, Any]) -> str:
    """One line: cell counts, measurement failures, stale cells, outcome and exit code."""
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items() if v)
    failures = summary["measurement_failures"]
    extra = f"; measurement failures {failures}" if failures else ""
    stale = sum(summary["stale_counts"].values())
    stale_note = f"; {stale} stale" if stale else ""
    total = summary["total_cells"]
    return (
        f"{total} cell{'' if total == 1 else 's'}: {counts or 'none'}{extra}{stale_note} "
        f"-> {summary['outcome']} (exit {summary['exit_code']})"
    )


def summary_headline(out: Path) -> tuple[str, int] | None:
    """(headline, exit code) of summary.json: from its sidecar while summary.json is
    untouched since the sidecar was written (a large summary costs a while to parse)."""
    info = caches.stat_of(out / store.SUMMARY_FILE)  # before summary.json is read
    recorded = _summary_sidecar(out).fresh(store.SUMMARY_FILE, info)
    if (
        type(recorded) is dict
        and isinstance(recorded.get("headline"), str)
        and type(recorded.get("exit_code")) is int
    ):
        return recorded["headline"], recorded["exit_code"]
    summary = store.read_json(out / store.SUMMARY_FILE)
    if not isinstance(summary, dict):
        return None
    try:
        return headline(summary), int(summary["exit_code"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not one brigade wrote (or not a summary at all)
