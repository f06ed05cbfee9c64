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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brigade import fs
from brigade.core.accounting import attempts_of, cell_usage, grader_spending
from brigade.core.plan import Plan, prices_document
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
from brigade.core.receipts import Receipt, ReceiptView, grader_usage_of, views_of
from brigade.errors import EnvironmentProblem, InputError
from brigade.outdir import caches, store
from brigade.outdir.export import clean_here, movable_digest, moved_secrets, secrets_for
from brigade.report.model import ReportCell, failure_reasons

if TYPE_CHECKING:
    from brigade.report.paging import PagePlan

    # the files folder, every page of the plan, the pages to render, their inputs (None: any)
    PageWork = tuple[Path, list[PagePlan], list[PagePlan], dict[str, str] | None]

REPORT_DIR = "report"
JUNIT_FILE = "junit.xml"
HTML_FILE = "index.html"
STATE_FILE = ".report-state.json"
# in a `<stem>_files` folder beside a page written with --html: the folder is brigade's, and
# the pages in it are replaced and removed by the next report written there
REPORT_MARKER = ".brigade-report"
_MARKER_TEXT = b"Detail pages of a brigade report: brigade replaces and removes its pages here.\n"
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
    "attempts_usage",
)
GRADER_FIELDS = ("grader_id", "status", "score", "detail")
FAULT_LIMIT = 2000


def _answer(out: Path, receipt: Receipt, secrets: Secrets) -> str | None:
    """A finished cell's answer as JUnit shows it: projected, cut with a note."""
    from brigade.report.detail import FINAL, read_text
    from brigade.report.views import JUNIT_ANSWER_LIMIT, shown

    attempt = receipt.attempt
    if receipt.state == "running" or attempt is None:
        return None
    final = store.run_dir(out, receipt.cell_id, attempt) / FINAL
    read = read_text(final, JUNIT_ANSWER_LIMIT * 4)
    if read is None:
        return None
    answer = shown(read.text, secrets, JUNIT_ANSWER_LIMIT, read.more)
    if answer.cut:
        return f"{answer.text}\n[truncated: the first {len(answer.text):,} characters are shown]"
    return answer.text


def report_cells(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, Receipt | None],
    secrets: Secrets,
    rows: Rows | None = None,
) -> list[ReportCell]:
    """Every planned cell, from its projected receipt (a stand-in for cells with none), with
    its projected answer and fault.

    Names (seats, cases, coordinates) are shown as they are: they are identifiers,
    never secrets; only free text is scrubbed. `rows`: the rows of earlier reports by
    their cells' stamps; a cell whose stamp is unchanged is not read again.
    """
    from brigade.report.detail import fault_text
    from brigade.report.views import shown

    out_text = str(out.absolute())
    cells = []
    for cell in plan.cells:
        if rows is not None:
            row = rows.row(cell.cell_id)
            if row is not None:
                cells.append(row)
                continue
        receipt = receipts.get(cell.cell_id)
        fault = fault_text(receipt.document) if receipt is not None else None
        shown_fault = shown(fault, secrets, FAULT_LIMIT).text if fault else None
        answer = _answer(out, receipt, secrets) if receipt is not None else None
        fields: dict[str, Any] = {"cell_id": cell.cell_id, "state": "missing"}
        if receipt is not None:
            # the fields shown, as the receipt holds them: the projection decides their roles
            document = receipt.document
            fields.update({k: document[k] for k in REPORT_FIELDS if k in document})
            fields["graders"] = [{k: g.get(k) for k in GRADER_FIELDS} for g in receipt.graders]
        projected = project_receipt(fields, out_text, secrets)
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
                answer=answer,
                fault=shown_fault,
                fault_kind=_fault_kind(receipt),
                usage=_cell_usage(projected.get("attempts_usage"), plan, cell.seat.model),
                grader_usage=_grader_usage(receipt, plan),
            )
        )
        if rows is not None:
            rows.keep(cells[-1])
    return cells


ROWS_FILE = ".report-rows.json"


class Rows:
    """The report's rows of every cell as last shown (a cache beside the output directory):
    cell_id -> [the cell's stamp (paging.stamp: any rewrite or edit of its receipt changes
    it), the row]. A changed cell is read, projected and kept again; the others are not
    read at all. Keyed on brigade's code, the secrets and the plan's prices (a row is
    projected and priced); the pages made from the rows are checked for leaks whole."""

    __slots__ = ("sidecar", "stamps", "seen")

    def __init__(self, out: Path, plan: Plan, secrets: Secrets, stamps: Mapping[str, str]):
        """The rows kept at `out`, for cells whose stamps are now `stamps`."""
        prices = json.dumps(prices_document(plan.prices), sort_keys=True)
        key = caches.cache_key(
            movable_digest(secrets, out), hashlib.sha256(prices.encode()).hexdigest()
        )
        self.sidecar = caches.Table(out / ROWS_FILE, key)
        self.stamps = stamps
        self.seen: set[str] = set()

    def row(self, cell_id: str) -> ReportCell | None:
        """The row kept for a cell whose stamp is unchanged; None otherwise."""
        self.seen.add(cell_id)
        entry = self.sidecar.entries.get(cell_id)
        if type(entry) is not list or len(entry) != 2 or entry[0] != self.stamps.get(cell_id):
            return None
        return _row_of(entry[1])

    def keep(self, row: ReportCell) -> None:
        """Keep a row made now, under its cell's stamp."""
        stamp = self.stamps.get(row.cell_id)
        if stamp is not None:
            self.sidecar.entries[row.cell_id] = [stamp, _row_doc(row)]
            self.sidecar.changed = True

    def save(self) -> None:
        """Forget the rows of cells no longer planned and write the cache when it changed."""
        gone = [cell_id for cell_id in self.sidecar.entries if cell_id not in self.seen]
        for cell_id in gone:
            del self.sidecar.entries[cell_id]
        self.sidecar.changed = self.sidecar.changed or bool(gone)
        self.sidecar.save()


_ROW_FIELDS = tuple(field.name for field in dataclasses.fields(ReportCell))


def _row_doc(row: ReportCell) -> list[Any]:
    return [getattr(row, name) for name in _ROW_FIELDS]


def _row_of(doc: Any) -> ReportCell | None:
    """A kept row as it was made (None: not one this code keeps)."""
    if type(doc) is not list or len(doc) != len(_ROW_FIELDS):
        return None
    fields = dict(zip(_ROW_FIELDS, doc, strict=True))
    graders = fields["graders"]
    if type(graders) is not list or any(type(g) is not dict for g in graders):
        return None
    fields["graders"] = tuple(graders)
    try:
        return ReportCell(**fields)
    except TypeError:
        return None


def _fault_kind(receipt: Receipt | None) -> str | None:
    return receipt.fault.kind if receipt is not None and receipt.fault is not None else None


def _cell_usage(attempts: Any, plan: Plan, model: str | None) -> dict[str, Any] | None:
    """What a cell spent over every attempt, priced with the plan's prices (None: unknown)."""
    if not isinstance(attempts, list):
        return None
    return cell_usage(
        (entry.get("usage") if isinstance(entry, dict) else None for entry in attempts),
        plan.prices,
        model,
    )


def _grader_usage(receipt: Receipt | None, plan: Plan) -> dict[str, Any] | None:
    """What a cell's judges spent, priced with the plan's prices (None: no judge ran)."""
    docs = grader_usage_of(receipt.document) if receipt is not None else ()
    if not docs:
        return None
    return grader_spending(attempts_of(docs, plan.prices, None) or ())


@dataclass(frozen=True)
class Report:
    """What every report shows, projected: the summary and the cells; and where the cells'
    records are, for the detail pages."""

    summary: dict[str, Any]
    cells: tuple[ReportCell, ...]
    secrets: Secrets
    out: Path | None = None
    plan: Plan | None = None
    receipts: Mapping[str, Receipt | None] | None = None
    workspace: Path | None = None


def build_report(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, Receipt | None],
    summary: Mapping[str, Any],
    *,
    workspace: Path | None = None,
    secrets: Secrets | None = None,
    rows: Rows | None = None,
) -> Report:
    """The projected summary and cells of a plan (free text scrubbed, paths relative,
    no prompts; `rows`: kept rows of unchanged cells, see Rows)."""
    out = out.absolute()
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    return Report(
        summary=project_summary(summary, secrets),
        cells=tuple(report_cells(out, plan, receipts, secrets, rows)),
        secrets=secrets,
        out=out,
        plan=plan,
        receipts=receipts,
        workspace=workspace if workspace is not None else _plan_workspace(plan),
    )


def _plan_workspace(plan: Plan) -> Path | None:
    workspace = (plan.context or {}).get("workspace")
    return Path(workspace) if workspace else None


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
            answer=BLANK if cell.answer else cell.answer,
            fault=BLANK if cell.fault else cell.fault,
            graders=tuple(blank_text(g, GRADER_RESULT_ROLES, BLANK) for g in cell.graders),
        )
        for cell in report.cells
    )
    return dataclasses.replace(
        report, summary=blank_text(report.summary, SUMMARY_ROLES, BLANK), cells=cells
    )


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
        "usage_all_attempts": summary.get("usage_all_attempts"),
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
        text = store.read_regular(path).decode("utf-8", "replace")
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
    (a changed renderer renders again) and the secrets checked against. Holds
    JUnit, the index and every detail page.
    """
    return caches.Sidecar(out / STATE_FILE, caches.cache_key(movable_digest(secrets, out)))


def _field(recorded: Any, name: str) -> Any:
    return recorded.get(name) if type(recorded) is dict else None


def untouched(
    out: Path, plan: Plan, workspace: Path | None = None, secrets: Secrets | None = None
) -> bool:
    """The report files (JUnit, the index and every detail page) are exactly as this code
    last wrote and checked them."""
    out = out.absolute()
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    checked = _checked(out, secrets)
    moved = moved_secrets(checked, out)
    folder = out / REPORT_DIR
    required = (_name(out, folder / JUNIT_FILE), _name(out, folder / HTML_FILE))
    if not all(name in checked.entries for name in required):
        return False
    inside = f"{REPORT_DIR}/"
    # a leaking page is never recorded, and its index is forgotten with it (see _write)
    same = all(
        _recall(checked, out, out / name, moved) is not caches.MISS
        for name in list(checked.entries)
        if name in required or name.startswith(inside)
    )
    if same:
        checked.save()  # the new stats of the same bytes (a copied report)
    return same


def _name(out: Path, path: Path) -> str:
    """A report file's name in the report state: relative to the output directory when it
    is inside it (moving the output directory is no change), else its absolute path."""
    if path.is_relative_to(out):
        return path.relative_to(out).as_posix()
    return str(path)


def _recall(checked: caches.Sidecar, out: Path, path: Path, moved: Secrets | None) -> Any:
    """What the state records of a report file, while its stat or its bytes are as then
    (and, checked at another path of the output directory, it holds nothing of this one:
    searched in the same bytes, one read)."""
    name = _name(out, path)
    if moved is None:
        return checked.recall(name, path)
    return checked.recall(name, path, check=lambda data: clean_here(data, name, moved, markup=True))


def _inputs_key(
    plan: Plan, views: Mapping[str, ReceiptView | None], summary: Mapping[str, Any]
) -> str:
    """Changes whenever the report could with the same code: plan, its prices (costs are
    priced when the report is made), any receipt rewritten, stale counts (the code is in
    the state's key)."""
    from brigade.report.paging import stamp

    digest = hashlib.sha256()
    head = [
        summary["name"],
        summary["manifest_digest"],
        summary["stale_counts"],
        prices_document(plan.prices),
    ]
    digest.update(json.dumps(head, sort_keys=True).encode())
    for cell in plan.cells:
        digest.update(stamp(cell, views.get(cell.cell_id)).encode())
    return digest.hexdigest()


class _Receipts(Mapping[str, "Receipt | None"]):
    """The planned cells' trusted receipts in full (as `current_receipts`), each read the
    first time it is asked for."""

    def __init__(self, out: Path, plan: Plan) -> None:
        self._out = out
        self._planned = {cell.cell_id for cell in plan.cells}
        self._present: set[str] | None = None
        self._read: dict[str, Receipt | None] = {}

    def __getitem__(self, cell_id: str) -> Receipt | None:
        if cell_id not in self._planned:
            raise KeyError(cell_id)
        if cell_id not in self._read:
            if self._present is None:
                self._present = store.existing_cells(self._out)
            present = cell_id in self._present
            self._read[cell_id] = store.read_receipt(self._out, cell_id) if present else None
        return self._read[cell_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._planned)

    def __len__(self) -> int:
        return len(self._planned)


def write_report(
    out: Path,
    plan: Plan,
    views: Mapping[str, ReceiptView | None],
    summary: Mapping[str, Any],
    *,
    workspace: Path | None = None,
    secrets: Secrets | None = None,
    receipts: Mapping[str, Receipt | None] | None = None,
) -> ReportResult:
    """Write <out>/report/junit.xml, <out>/report/index.html and its detail pages, and check
    them for leaks.

    Nothing is rendered while a file is as written from the same inputs (the views'
    stamps: a detail page's are its own cells'); otherwise the full `receipts` (read
    from the output directory unless given) are rendered: the report shows details
    views lack.
    """
    from brigade.report.pages import files_folder
    from brigade.report.paging import page_plans, stale_pages, stamp

    out = out.absolute()
    unlink_planted_links(out)
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    folder = out / REPORT_DIR
    junit, html_file = folder / JUNIT_FILE, folder / HTML_FILE
    files_dir = folder / files_folder(HTML_FILE)
    checked = _checked(out, secrets)
    moved = moved_secrets(checked, out)
    inputs = _inputs_key(plan, views, summary)
    plans = page_plans(plan, views, str(summary["name"]))
    index_current = all(
        _field(_recall(checked, out, path, moved), "inputs") == inputs
        for path in (junit, html_file)
    )
    todo = [
        page
        for page in plans
        if _field(_recall(checked, out, files_dir / page.relative, moved), "inputs") != page.stamp
    ]
    if index_current and not todo and not stale_pages(files_dir, plans):
        return ReportResult(files=(junit, html_file), leaks=())
    if receipts is None:
        # read as asked for: only the changed cells' rows and the pages to write need them
        receipts = _Receipts(out, plan)
    workspace = workspace if workspace is not None else _plan_workspace(plan)
    rows = None
    if index_current:
        # only pages to write: the cells' rows are not needed
        report = Report(
            project_summary(summary, secrets), (), secrets, out, plan, receipts, workspace
        )
    else:
        stamps = {cell.cell_id: stamp(cell, views.get(cell.cell_id)) for cell in plan.cells}
        rows = Rows(out, plan, secrets, stamps)
        report = build_report(
            out, plan, receipts, summary, secrets=secrets, workspace=workspace, rows=rows
        )
    targets: list[Path | None] = [None, None] if index_current else [junit, html_file]
    pages = {page.relative: page.stamp for page in plans}
    detail = (files_dir, plans, todo, pages)
    result = _write(out, report, targets, checked, inputs, detail, moved)
    if rows is not None:
        rows.save()
    files = (junit, html_file) if index_current else result.files
    return ReportResult(files=files, leaks=result.leaks)


def write_files(
    out: Path, report: Report, *, junit: Path | None = None, html_file: Path | None = None
) -> ReportResult:
    """Write the requested report files (the HTML page with its detail pages in the
    `<stem>_files` folder beside it) and check each for leaks; a destination brigade may
    not write is refused first (`claim_destinations`)."""
    from brigade.report.pages import files_folder
    from brigade.report.paging import page_plans

    out = out.absolute()
    junit = junit.absolute() if junit is not None else None
    html_file = html_file.absolute() if html_file is not None else None
    files_dir = html_file.parent / files_folder(html_file.name) if html_file else None
    fresh = claim_destinations(out, [p for p in (junit, html_file) if p is not None], files_dir)
    checked = _checked(out, report.secrets)
    detail = None
    if html_file is not None and files_dir is not None and report.plan is not None:
        views = views_of(report.receipts or {})
        plans = page_plans(report.plan, views, str(report.summary["name"]))
        detail = (files_dir, plans, plans, None)
        if fresh:
            store.atomic_write_bytes(files_dir / REPORT_MARKER, _MARKER_TEXT, durable=False)
    moved = moved_secrets(checked, out)
    return _write(out, report, [junit, html_file], checked, None, detail, moved)


def _own_folders(out: Path) -> tuple[Path, Path]:
    """The output directory's report folder and its detail pages' folder."""
    from brigade.report.pages import files_folder

    folder = out / REPORT_DIR
    return folder, folder / files_folder(HTML_FILE)


def unlink_planted_links(out: Path) -> None:
    """Remove symbolic links planted as the output directory's own report folders or files
    (their targets are left as they are): the report never writes through one."""
    from brigade.report.pages import CASES, CELLS

    folder, files_dir = _own_folders(out)
    for path in (
        folder,
        folder / JUNIT_FILE,
        folder / HTML_FILE,
        files_dir,
        files_dir / CELLS,
        files_dir / CASES,
    ):
        if path.is_symlink():
            path.unlink()


def claim_destinations(out: Path, files: list[Path], files_dir: Path | None) -> bool:
    """Refuse report destinations brigade may not write (exit 2, before anything is
    written): a symbolic link, anything but a file, a file inside the output directory
    outside its report/ folder, a `<stem>_files` folder that is a link or holds anything
    but an earlier report's pages (no REPORT_MARKER). True when the files folder is new
    (or empty) and gets the marker."""
    from brigade.report.pages import CASES, CELLS

    real_out = out.resolve()
    own, own_files = _own_folders(out)
    for path in files:
        if path.is_symlink():
            raise EnvironmentProblem(
                f"{path}: a symbolic link; brigade never writes a report through one "
                "(name the real file)"
            )
        if path.exists() and not path.is_file():
            raise EnvironmentProblem(f"{path}: not a file; name a file for the report")
        real = path.parent.resolve() / path.name
        if real == real_out or real_out in real.parents:
            if own.is_symlink() or real_out / REPORT_DIR not in real.parents:
                raise InputError(
                    f"{path}: inside the output directory {out}; name a file outside it "
                    f"(or in its {REPORT_DIR}/ folder)"
                )
    if files_dir is None:
        return False
    for folder in (files_dir, files_dir / CELLS, files_dir / CASES):
        if folder.is_symlink():
            raise EnvironmentProblem(
                f"{folder}: a symbolic link; brigade never writes a report's pages through "
                "one (remove it, or name another file)"
            )
    if files_dir.exists() and not files_dir.is_dir():
        raise EnvironmentProblem(f"{files_dir}: not a folder, where the report's pages go")
    if files_dir.parent.resolve() / files_dir.name == own_files.resolve():
        return False  # the output directory's own report folder
    if not files_dir.exists() or not any(files_dir.iterdir()):
        return True
    if (files_dir / REPORT_MARKER).is_file():
        return False
    raise EnvironmentProblem(
        f"{files_dir}: not empty, and not a report's pages folder brigade wrote (it has no "
        f"{REPORT_MARKER}); name another file for the report, or move that folder away"
    )


def _write(
    out: Path,
    report: Report,
    targets: list[Path | None],
    checked: caches.Sidecar,
    inputs: str | None,
    detail: PageWork | None = None,
    moved: Secrets | None = None,
) -> ReportResult:
    """Render each target (junit, html) and each detail page, write it and check it, unless
    unchanged and clean."""
    # the renderers are imported only when a report is written (not on a no-op resume)
    from brigade.report.junit import junit_xml
    from brigade.report.pages import shard_width
    from brigade.report.paging import Sources, render_page, stale_pages
    from brigade.report.render import Links, html_page

    links = None
    if detail is not None and report.plan is not None and targets[1] is not None:
        links = Links(detail[0].name, shard_width(len(report.plan.cells)))
    bare = skeleton(report)
    renderers = (
        lambda shown: junit_xml(shown.summary["name"], shown.cells),
        lambda shown: html_page(shown.summary, shown.cells, links).encode("utf-8"),
    )
    written: list[Path] = []
    leaks: list[Leak] = []
    for target, render in zip(targets, renderers, strict=True):
        if target is None:
            continue
        target = target.absolute()
        data = render(report)
        written.append(target)
        names = report_names(report)
        leaks += _put(out, target, data, render(bare), names, report, checked, inputs, moved)
    if detail is not None:
        files_dir, plans, todo, page_inputs = detail
        html_name = targets[1].name if targets[1] is not None else HTML_FILE
        back = f"../../{html_name}"
        found: list[Leak] = []
        assert report.out is not None and report.plan is not None
        sources = Sources(
            out=report.out,
            plan=report.plan,
            receipts=report.receipts or {},
            secrets=report.secrets,
            workspace=report.workspace,
            name=str(report.summary.get("name", "")),
        )
        for page in todo:
            rendered = render_page(sources, page, back)
            target = files_dir / page.relative
            given = page_inputs.get(page.relative) if page_inputs is not None else None
            found += _put(
                out, target, rendered.data, rendered.skeleton, rendered.names, report, checked,
                given, moved,
            )  # fmt: skip
        for path in stale_pages(files_dir, plans):
            path.unlink(missing_ok=True)
            checked.forget(_name(out, path))
        if found:
            # the index vouches for its pages: the next finish must check them all again
            checked.forget(_name(out, files_dir.parent / html_name))
        leaks += found
    checked.save()
    return ReportResult(files=tuple(written), leaks=tuple(leaks))


def _put(
    out: Path,
    target: Path,
    data: bytes,
    bare: bytes,
    names: Iterable[str],
    report: Report,
    checked: caches.Sidecar,
    inputs: str | None,
    moved: Secrets | None = None,
) -> list[Leak]:
    """Write one report file unless it already holds these bytes (its mtime stays), found
    clean (`moved`: and holding nothing of the output directory's new path); check it."""
    digest = hashlib.sha256(data).hexdigest()
    name = _name(out, target)
    info = caches.stat_of(target)
    if moved is not None and not clean_here(data, name, moved, markup=True):
        checked.forget(name)  # checked in full below
    if _field(checked.fresh(name, info), "digest") == digest:
        checked.record(name, info, {"digest": digest, "inputs": inputs}, digest)
        return []
    try:
        same = info is not None and fs.read_regular(target, len(data)) == data
    except OSError:
        same = False
    if same and checked.digest(name) == digest:
        # these very bytes were checked clean (a copied or restored report)
        checked.record(name, info, {"digest": digest, "inputs": inputs}, digest)
        return []
    if not same:
        store.atomic_write_bytes(target, data, durable=False)
        info = caches.stat_of(target)  # of what this process wrote, before checking it
    if target.is_relative_to(out):
        label = target.relative_to(out).as_posix()
    elif target.parent.parent.name.endswith("_files"):  # a detail page beside a custom page
        label = target.relative_to(target.parent.parent.parent).as_posix()
    else:
        label = target.name
    found = check_report_file(target, label, report.secrets, bare, names)
    if found:
        checked.forget(name)
    else:
        checked.record(name, info, {"digest": digest, "inputs": inputs}, digest)
    return found
