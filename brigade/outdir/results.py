"""Read a plan's recorded results from the output directory; write summary.json."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.core.clock import utc_now
from brigade.core.jsonpath import format_path
from brigade.core.plan import PLAN_SCHEMA, Plan, PlanShapeError, plan_from_document
from brigade.core.receipts import Receipt, ReceiptView
from brigade.core.taxonomy import fault_kind_of, measurement_kind
from brigade.errors import InputError
from brigade.outdir import caches, legacy, store

# cell_id -> a trusted receipt in full / its view (None: missing or untrusted)
Receipts = dict[str, Receipt | None]
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
        else (store.read_view(out, cell.cell_id) if cell.cell_id in present else None)
        for cell in plan.cells
    }


def stale_views(out: Path, plan: Plan) -> Views:
    """previous cell_id -> the view of its receipt, for every stale cell of the plan."""
    return {
        entry["previous_cell_id"]: store.read_view(out, entry["previous_cell_id"])
        for entry in plan.stale_cells
    }


def summarize(out: Path, plan: Plan, views: Views | None = None) -> dict[str, Any]:
    """The summary document of a plan as recorded on disk."""
    from brigade.core.summary import build_summary  # not needed by a no-op resume

    views = views if views is not None else current_views(out, plan)
    return build_summary(plan, views, stale_views(out, plan), utc_now())


def fault_kinds(views: Mapping[str, ReceiptView | None]) -> dict[str, int]:
    """Measurement failures by their precise kind, most frequent first: the fault kind of an
    adapter_error or a timed-out seat (`rate_limited`, `timeout`, ...), else `grader_error`."""
    kinds: dict[str, int] = {}
    for view in views.values():
        if view is None:
            continue
        measured = measurement_kind(view.state, view.failure_reason)
        if measured is None:
            continue
        kind = fault_kind_of(view.state, view.failure_reason, view.fault_kind) or measured
        kinds[kind] = kinds.get(kind, 0) + 1
    return _by_frequency(kinds)


def _by_frequency(kinds: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def kinds_text(kinds: Mapping[str, int]) -> str:
    """`rate_limited 3, timeout 1`."""
    return ", ".join(f"{kind} {n}" for kind, n in kinds.items())


def write_summary(out: Path, plan: Plan, views: Views | None = None) -> dict[str, Any]:
    """Compute and atomically write summary.json."""
    from brigade.core.summary import SUMMARY_SCHEMA

    summary = summarize(out, plan, views)
    on_disk = store.read_own_json(out / store.SUMMARY_FILE)
    if isinstance(on_disk, dict) and _but_generated_at(on_disk) == _but_generated_at(summary):
        return on_disk  # the same results: summary.json stays as it is (its mtime too)
    large = len(plan.cells) > LARGE_PLAN
    store.write_json(out / store.SUMMARY_FILE, summary, SUMMARY_SCHEMA, sample=large, compact=large)
    return summary


def _but_generated_at(summary: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in summary.items() if key != "generated_at"}


def read_plan_document(out: Path) -> dict[str, Any]:
    """plan.json of an output directory; InputError when there is none."""
    doc = store.read_own_json(out / store.PLAN_FILE)
    tags = (PLAN_SCHEMA, legacy.ORIGINAL_PLAN_SCHEMA)  # ours, or the original tool's
    if not isinstance(doc, dict) or doc.get("schema") not in tags:
        raise InputError(
            f"{out}: no readable plan.json here; is this a brigade output directory?"
            f"{_outputs_under(out)}"
        )
    return doc


def _outputs_under(folder: Path) -> str:
    """A hint naming the output directories of a project folder given instead of one (its
    `.brigade/evals/<name>/`, as `doit` writes them), or ""."""
    evals = Path(".brigade") / "evals"
    # (a workspace a seat may have written: no link followed, a bounded look at the names)
    try:
        names = sorted(_folder_names(folder / evals))
    except OSError:
        return ""
    if not names:
        return ""
    shown = ", ".join(str(evals / name) for name in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f" (the output directories under it: {shown}{more})"


def _folder_names(path: Path, limit: int = 1000) -> list[str]:
    """The names of the folders in `path` (none of its last two components a link), of its
    first `limit` entries."""
    top = fs.open_folder(path.parent)
    try:
        inner = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
    finally:
        os.close(top)
    try:
        with os.scandir(inner) as entries:
            return [
                entry.name
                for entry in itertools.islice(entries, limit)
                if entry.is_dir(follow_symlinks=False)
            ]
    finally:
        os.close(inner)


def load_plan(out: Path, doc: dict[str, Any] | None = None) -> Plan:
    """The plan an output directory records (from its plan.json `doc` when read already);
    InputError (one line naming plan.json and the JSON path) when it holds none or a broken one."""
    path = out / store.PLAN_FILE
    try:
        return plan_from_document(doc if doc is not None else read_plan_document(out))
    except PlanShapeError as exc:
        raise InputError(f"{path}: {format_path(exc.path)}: {exc.problem}") from None
    except KeyError as exc:  # a key of the plan itself
        key = exc.args[0] if exc.args and isinstance(exc.args[0], str) else "?"
        raise InputError(f"{path}: {format_path([key])}: is required but missing") from None
    except (TypeError, AttributeError, ValueError) as exc:
        raise InputError(f"{path}: not a valid plan ({type(exc).__name__}: {exc})") from None


SUMMARY_KEY = ".summary-key.json"  # a cache: which plan summary.json was made from, its headline


def _summary_sidecar(out: Path) -> caches.Sidecar:
    # keyed on brigade's code: a summary computed by other code is never taken as current
    return caches.Sidecar(out / SUMMARY_KEY, caches.cache_key())


def _recall_summary(out: Path, *, keep: bool = False) -> Any:
    sidecar = _summary_sidecar(out)
    recorded = sidecar.recall(store.SUMMARY_FILE, out / store.SUMMARY_FILE)
    if keep:  # (under the lock) the same bytes under a new stat, a copied directory's
        sidecar.save()
    return recorded


def summary_current(out: Path, plan_key: str) -> bool:
    """summary.json was written for this plan (by this code) and is untouched since."""
    recorded = _recall_summary(out, keep=True)
    return type(recorded) is dict and recorded.get("plan") == plan_key and "headline" in recorded


def remember_summary(out: Path, plan_key: str, summary: Mapping[str, Any]) -> None:
    """Record which plan summary.json was just written for, and its headline (while its
    stat, or its bytes, are those this process wrote)."""
    sidecar = caches.Sidecar(out / SUMMARY_KEY, caches.cache_key(), load=False)
    path = out / store.SUMMARY_FILE
    info = caches.stat_of(path)  # the file this process just wrote, before reading it
    try:
        digest: str | None = caches.content_digest(fs.read_regular(path))
    except OSError:
        digest = None
    sidecar.record(
        store.SUMMARY_FILE,
        info,
        {"plan": plan_key, "exit_code": summary["exit_code"], "headline": headline(summary)},
        digest,
    )
    sidecar.save()


def headline(summary: Mapping[str, Any]) -> str:
    """One line: cell counts, measurement failures, stale cells, outcome and exit code."""
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items() if v)
    failures = summary["measurement_failures"]
    kinds = summary_kinds(summary)
    detail = f" ({kinds_text(kinds)})" if failures and kinds else ""
    extra = f"; measurement failures {failures}{detail}" if failures else ""
    stale = sum(summary["stale_counts"].values())
    stale_note = f"; {stale} stale" if stale else ""
    total = summary["total_cells"]
    return (
        f"{total} cell{'' if total == 1 else 's'}: {counts or 'none'}{extra}{stale_note} "
        f"-> {summary['outcome']} (exit {summary['exit_code']})"
    )


def summary_kinds(summary: Mapping[str, Any]) -> dict[str, int]:
    """A summary's measurement failures by their precise kind, most frequent first
    (`fault_kinds` and the grader_error cells; empty for a summary that lacks them)."""
    faults = summary.get("fault_kinds")
    kinds: dict[str, int] = dict(faults) if isinstance(faults, dict) else {}
    split = summary.get("measurement_failure_kinds")
    graders = split.get("grader_error") if isinstance(split, dict) else None
    if isinstance(graders, int) and graders > 0:
        kinds["grader_error"] = graders
    return _by_frequency(kinds)


def summary_headline(out: Path) -> tuple[str, int] | None:
    """(headline, exit code) of summary.json: from its sidecar while summary.json is
    untouched since the sidecar was written (a large summary costs a while to parse)."""
    recorded = _recall_summary(out)
    if (
        type(recorded) is dict
        and isinstance(recorded.get("headline"), str)
        and type(recorded.get("exit_code")) is int
    ):
        return recorded["headline"], recorded["exit_code"]
    summary = store.read_own_json(out / store.SUMMARY_FILE)
    if not isinstance(summary, dict):
        return None
    try:
        return headline(summary), int(summary["exit_code"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not one brigade wrote (or not a summary at all)
