"""Reports people and CI can read: JUnit XML, a self-contained HTML page, a terminal matrix.

Reports leave the output directory, so they follow the export's rules: they are
built from projected receipts (no prompt text, paths relative to the output
directory, no seat env values) and every file written is checked for leaks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.plan import Plan
from brigade.core.projection import (
    GRADER_RESULT_ROLES,
    SUMMARY_ROLES,
    Leak,
    Secrets,
    blank_text,
    find_leaks_in_text,
    project_receipt,
    project_summary,
)
from brigade.core.receipts import ReceiptView
from brigade.outdir import caches, store
from brigade.outdir.export import secrets_for
from brigade.outdir.results import current_receipts
from brigade.report.model import ReportCell, failure_reasons

REPORT_DIR = "report"
JUNIT_FILE = "junit.xml"
HTML_FILE = "index.html"
STATE_FILE = ".report-state.json"
# what the report shows of a receipt; everything else never reaches the projection
# (names come from the plan, through the same display names as the statistics)
REPORT_FIELDS = (
    "cell_id",
    "state",
    "attempt",
    "duration_seconds",
    "run_dir",
    "score",
    "failure_reason",
    "failure_detail",
)
GRADER_FIELDS = ("grader_id", "status", "score", "detail")


def report_cells(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, dict[str, Any] | None],
    secrets: Secrets,
) -> list[ReportCell]:
    """Every planned cell, from its projected receipt (a stand-in for cells with none).

    Names (seats, cases, coordinates) are shown as they are: they are identifiers,
    never secrets; only free text is scrubbed.
    """
    out_text = str(out.absolute())
    cells = []
    for cell in plan.cells:
        receipt = receipts.get(cell.cell_id)
        shown: dict[str, Any] = {"cell_id": cell.cell_id, "state": "missing"}
        if receipt is not None:
            shown.update({k: receipt[k] for k in REPORT_FIELDS if k in receipt})
            shown["graders"] = [
                {k: g.get(k) for k in GRADER_FIELDS} for g in receipt.get("graders", [])
            ]
        projected = project_receipt(shown, out_text, secrets)
        cells.append(
            ReportCell(
                coordinate=cell.coordinate,
                case_id=cell.case_id,
                seat=cell.seat.name,
                trial=cell.trial,
                cell_id=projected["cell_id"],
                state=projected["state"],
                attempt=projected.get("attempt"),
                duration=projected.get("duration_seconds"),
                score=projected.get("score"),
                failure_reason=projected.get("failure_reason"),
                failure_detail=projected.get("failure_detail"),
                run_dir=projected.get("run_dir"),
                graders=tuple(projected.get("graders", [])),
            )
        )
    return cells


@dataclass(frozen=True)
class Report:
    """What every report shows, projected: the summary and the cells."""

    summary: dict[str, Any]
    cells: tuple[ReportCell, ...]
    secrets: Secrets


def build_report(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, dict[str, Any] | None],
    summary: Mapping[str, Any],
    *,
    workspace: Path | None = None,
    secrets: Secrets | None = None,
) -> Report:
    """The projected summary and cells of a plan (free text scrubbed, paths relative,
    no prompts)."""
    out = out.absolute()
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    return Report(
        summary=project_summary(summary, secrets),
        cells=tuple(report_cells(out, plan, receipts, secrets)),
        secrets=secrets,
    )


def report_names(report: Report) -> set[str]:
    """The identifiers a report shows as they are: its name, seats, cases, coordinates."""
    names = {str(report.summary.get("name", ""))}
    for cell in report.cells:
        names.update((cell.coordinate, cell.case_id, cell.seat))
    return names


# what free text becomes in a report's skeleton: not empty, so every line and
# element that shows free text is still there
BLANK = "·"


def skeleton(report: Report) -> Report:
    """The report with every free text replaced by a blank: what the page says whatever the
    agents and graders said. (Free text added to ReportCell must be blanked here too.)"""
    cells = tuple(
        dataclasses.replace(
            cell,
            failure_detail=BLANK if cell.failure_detail else cell.failure_detail,
            graders=tuple(blank_text(g, GRADER_RESULT_ROLES, BLANK) for g in cell.graders),
        )
        for cell in report.cells
    )
    return Report(blank_text(report.summary, SUMMARY_ROLES, BLANK), cells, report.secrets)


def report_document(report: Report) -> dict[str, Any]:
    """What `brigade report --json` prints: the summary's headline and trial statistics, cells."""

    summary, cells = report.summary, report.cells
    keys = (
        "name",
        "manifest_digest",
        "total_cells",
        "counts",
        "stale_counts",
        "measurement_failures",
        "measurement_failure_kinds",
        "failure_reasons",
        "trial_stats",
        "exit_code",
        "outcome",
    )
    return {
        **{key: summary[key] for key in keys},
        "measurement_failures_by_reason": failure_reasons(cells),
        "cells": [cell.document() for cell in cells],
    }


# -- writing and checking --------------------------------------------------------


@dataclass(frozen=True)
class ReportResult:
    """The report files written and the leaks found in them."""

    files: tuple[Path, ...]
    leaks: tuple[Leak, ...]


def check_report_file(
    path: Path,
    label: str,
    secrets: Secrets,
    skeleton: bytes | None = None,
    names: Iterable[str] = (),
) -> list[Leak]:
    """Leaks in a report file, in its text with XML/HTML escapes undone.

    Secrets inside `names` (identifiers) are not leaks; `skeleton` is the same report
    rendered without free text: a short secret that it holds as often as the file (a
    state or a word of the page equal to an env value) is not a leak.
    """
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return []
    bare = html.unescape(skeleton.decode("utf-8", "replace")) if skeleton is not None else None
    where = "(text, entities decoded)"
    return find_leaks_in_text(label, html.unescape(text), secrets, bare, where, names)


def _checked(out: Path, secrets: Secrets) -> caches.Sidecar:
    """What earlier runs wrote and found clean, per report file (kept beside the output):
    path -> {"digest": its content's, "inputs": the key of what it was rendered from}.

    A no-op run has the same inputs: when a report file is as it was written,
    neither rendering, writing nor the leak check runs again. A file rendered
    to the same bytes as a clean one skips the check. Keyed on brigade's code
    (a changed renderer renders again) and the secrets checked against.
    """
    return caches.Sidecar(out / STATE_FILE, caches.cache_key(secrets.digest))


def _field(recorded: Any, name: str) -> Any:
    return recorded.get(name) if type(recorded) is dict else None


def untouched(
    out: Path, plan: Plan, workspace: Path | None = None, secrets: Secrets | None = None
) -> bool:
    """The report files are exactly as this code last wrote and checked them."""
    out = out.absolute()
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    checked = _checked(out, secrets)
    folder = out / REPORT_DIR
    return all(
        checked.fresh_file(str(path), path) is not caches.MISS
        for path in (folder / JUNIT_FILE, folder / HTML_FILE)
    )


def _inputs_key(
    plan: Plan, views: Mapping[str, ReceiptView | None], summary: Mapping[str, Any]
) -> str:
    """Changes whenever the report could with the same code: plan, any receipt rewritten,
    stale counts (the code is in the state's key)."""
    digest = hashlib.sha256()
    head = [summary["name"], summary["manifest_digest"], summary["stale_counts"]]
    digest.update(json.dumps(head, sort_keys=True).encode())
    for cell in plan.cells:
        view = views.get(cell.cell_id)
        seen = (
            (view.attempt, view.state, view.started_at, view.finished_at, view.graded_at)
            if view is not None
            else (None,) * 5
        )
        stamp = f"{cell.cell_id}|{cell.coordinate}|{'|'.join(map(str, seen))}\n"
        digest.update(stamp.encode())
    return digest.hexdigest()


def write_report(
    out: Path,
    plan: Plan,
    views: Mapping[str, ReceiptView | None],
    summary: Mapping[str, Any],
    *,
    workspace: Path | None = None,
    secrets: Secrets | None = None,
    receipts: Mapping[str, dict[str, Any] | None] | None = None,
) -> ReportResult:
    """Write <out>/report/junit.xml and <out>/report/index.html and check them for leaks.

    Nothing is rendered while both files are as written from the same inputs
    (the views' stamps); otherwise the full `receipts` (read from the output
    directory unless given) are rendered: the report shows details views lack.
    """
    out = out.absolute()
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    folder = out / REPORT_DIR
    junit, html_file = folder / JUNIT_FILE, folder / HTML_FILE
    checked = _checked(out, secrets)
    inputs = _inputs_key(plan, views, summary)
    if all(
        _field(checked.fresh_file(str(path), path), "inputs") == inputs
        for path in (junit, html_file)
    ):
        return ReportResult(files=(junit, html_file), leaks=())
    if receipts is None:
        receipts = current_receipts(out, plan)
    report = build_report(out, plan, receipts, summary, secrets=secrets)
    return _write(out, report, [junit, html_file], checked, inputs)


def write_files(
    out: Path, report: Report, *, junit: Path | None = None, html_file: Path | None = None
) -> ReportResult:
    """Write the requested report files and check each for leaks."""
    out = out.absolute()
    checked = _checked(out, report.secrets)
    return _write(out, report, [junit, html_file], checked, None)


def _write(
    out: Path,
    report: Report,
    targets: list[Path | None],
    checked: caches.Sidecar,
    inputs: str | None,
) -> ReportResult:
    """Render each target (junit, html), write it and check it, unless unchanged and clean."""
    # the renderers are imported only when a report is written (not on a no-op resume)
    from brigade.report.junit import junit_xml
    from brigade.report.render import html_page

    bare = skeleton(report)
    renderers = (
        lambda shown: junit_xml(shown.summary["name"], shown.cells),
        lambda shown: html_page(shown.summary, shown.cells).encode("utf-8"),
    )
    written: list[Path] = []
    leaks: list[Leak] = []
    for target, render in zip(targets, renderers, strict=True):
        if target is None:
            continue
        target = target.absolute()
        data = render(report)
        digest = hashlib.sha256(data).hexdigest()
        written.append(target)
        name = str(target)
        info = caches.stat_of(target)
        if _field(checked.fresh(name, info), "digest") != digest:
            store.atomic_write_bytes(target, data, durable=False)
            info = caches.stat_of(target)  # of what this process wrote, before checking it
            relative = target.is_relative_to(out)
            label = target.relative_to(out).as_posix() if relative else target.name
            found = check_report_file(
                target, label, report.secrets, render(bare), report_names(report)
            )
            leaks.extend(found)
            if found:
                checked.forget(name)
                continue
        checked.record(name, info, {"digest": digest, "inputs": inputs})
    checked.save()
    return ReportResult(files=tuple(written), leaks=tuple(leaks))
