"""Which detail pages a report has, what each depends on, and rendering one from its cells'
records (read from the output directory, projected, with a skeleton for the leak check)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from brigade.core.plan import Cell, Plan
from brigade.core.projection import Secrets
from brigade.core.receipts import Receipt, ReceiptView
from brigade.outdir import store
from brigade.report import pages
from brigade.report.detail import FINAL, read_record, read_text
from brigade.report.views import (
    ANSWER_LIMIT,
    BLANK_SHOWN,
    CASE_ANSWER_LIMIT,
    blank_view,
    cell_view,
    shown,
)


@dataclass(frozen=True)
class PagePlan:
    """One detail page: which cells it shows and a stamp that changes whenever they do."""

    relative: str  # inside the files folder: cells/ab.html or cases/cd.html
    members: tuple[Cell, ...]
    stamp: str


def stamp(cell: Cell, view: ReceiptView | None) -> str:
    """Changes whenever what the report shows of a cell could: every receipt rewrite
    changes one of these fields (any edit of its bytes, the digest of a view read from
    them), and a run folder's files are written before its receipt."""
    seen = (
        (view.attempt, view.state, view.started_at, view.finished_at, view.graded_at, view.digest)
        if view is not None
        else (None,) * 6
    )
    return f"{cell.cell_id}|{cell.coordinate}|{'|'.join(map(str, seen))}\n"


def page_plans(plan: Plan, views: Mapping[str, ReceiptView | None], name: str) -> list[PagePlan]:
    """Every detail page of a plan: cell pages by cell id, case pages by case digest."""
    width = pages.shard_width(len(plan.cells))
    cell_groups: dict[str, list[Cell]] = {}
    case_groups: dict[str, list[Cell]] = {}
    for cell in plan.cells:
        cell_groups.setdefault(pages.cell_page(cell.cell_id, width), []).append(cell)
        case_groups.setdefault(pages.case_page(cell.case_id, width), []).append(cell)
    seats = list(dict.fromkeys(cell.seat.name for cell in plan.cells))
    result = []
    for groups, extra in ((cell_groups, ""), (case_groups, "|".join(seats))):
        for relative, members in sorted(groups.items()):
            digest = hashlib.sha256(f"{name}\n{extra}\n".encode())
            for cell in members:
                digest.update(stamp(cell, views.get(cell.cell_id)).encode())
            result.append(PagePlan(relative, tuple(members), digest.hexdigest()))
    return result


_PAGE_NAME = re.compile(r"^[0-9a-f]{2,3}\.html$")


def stale_pages(files_dir: Path, plans: Iterable[PagePlan]) -> list[Path]:
    """Page files in the files folder that no planned page names (left by earlier plans);
    nothing else there is ever touched."""
    planned = {page.relative for page in plans}
    stale = []
    for kind in (pages.CELLS, pages.CASES):
        try:
            names = os.listdir(files_dir / kind)
        except OSError:
            continue
        stale += [
            files_dir / kind / name
            for name in names
            if _PAGE_NAME.match(name) and f"{kind}/{name}" not in planned
        ]
    return stale


@dataclass(frozen=True)
class Sources:
    """Where a report's pages read from: the output directory and what it records."""

    out: Path
    plan: Plan
    receipts: Mapping[str, Receipt | None]
    secrets: Secrets
    workspace: Path | None
    name: str


@dataclass(frozen=True)
class RenderedPage:
    """A page's bytes, its skeleton (free text blanked) and the names it shows."""

    data: bytes
    skeleton: bytes
    names: frozenset[str]


def render_page(sources: Sources, page: PagePlan, back: str) -> RenderedPage:
    """Read the records of a page's cells and render the page and its skeleton."""
    out, secrets, name = sources.out, sources.secrets, sources.name
    width = pages.shard_width(len(sources.plan.cells))
    names = {name}
    for cell in page.members:
        names.update((cell.coordinate, cell.case_id, cell.seat.name))
    if page.relative.startswith(pages.CELLS + "/"):
        views = [
            cell_view(
                read_record(
                    out,
                    cell,
                    workspace=sources.workspace,
                    receipt=sources.receipts.get(cell.cell_id),
                    answer_limit=ANSWER_LIMIT * 4,
                ),
                out,
                secrets,
            )
            for cell in page.members
        ]
        data = pages.detail_page(name, views, width, back)
        bare = pages.detail_page(name, [blank_view(v) for v in views], width, back)
        return RenderedPage(data.encode(), bare.encode(), frozenset(names))
    seats = list(dict.fromkeys(cell.seat.name for cell in sources.plan.cells))
    by_case: dict[str, list[pages.CaseAnswer]] = {}
    for cell in page.members:
        by_case.setdefault(cell.case_id, []).append(_case_answer(sources, cell))
    sections, bare_sections = [], []
    for case_id, answers in by_case.items():
        sections.append(pages.case_section(case_id, seats, answers, width))
        blank = [
            dataclasses.replace(a, answer=None if a.answer is None else BLANK_SHOWN)
            for a in answers
        ]
        bare_sections.append(pages.case_section(case_id, seats, blank, width))
    data = pages.case_page_html(name, sections, back)
    bare = pages.case_page_html(name, bare_sections, back)
    return RenderedPage(data.encode(), bare.encode(), frozenset(names))


def _case_answer(sources: Sources, cell: Cell) -> pages.CaseAnswer:
    receipt = sources.receipts.get(cell.cell_id)
    state: str = receipt.state if receipt is not None else "missing"
    if receipt is None and store.has_cell_json(sources.out, cell.cell_id):
        state = "unreadable"
    reason = receipt.failure_reason if receipt is not None else None
    answer = None
    attempt = receipt.attempt if receipt is not None else None
    if receipt is not None and state != "running" and attempt is not None:
        final = store.run_dir(sources.out, cell.cell_id, attempt) / FINAL
        read = read_text(final, CASE_ANSWER_LIMIT * 4)
        if read is not None:
            answer = shown(read.text, sources.secrets, CASE_ANSWER_LIMIT, read.more)
    return pages.CaseAnswer(
        cell_id=cell.cell_id,
        seat=cell.seat.name,
        trial=cell.trial,
        state=state,
        failure_reason=reason if isinstance(reason, str) else None,
        label=f"{state} ({reason})" if reason else state,
        answer=answer,
    )
