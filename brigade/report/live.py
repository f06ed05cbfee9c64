"""One output directory as the viewer holds it: every planned cell's row, kept current from
the change feed a run writes, filtered and paged on the server.

Nothing here writes to the output directory. The rows hold only what the cell list
shows (states, names, numbers): the receipts stay on disk and a cell's page reads its
own. A row changes only when its cell's receipt is read again, which the change feed
(`outdir/feed`) names; a feed that is missing, rotated or far behind, or a plan.json
rewritten, costs one rescan (through the receipt index: a stat per cell). The summary
(statistics, costs) is computed again at most every SUMMARY_EVERY seconds while cells
change, and no more than a fifth of the time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.accounting import attempts_of
from brigade.core.plan import Cell, Plan
from brigade.core.receipts import ReceiptView
from brigade.core.stats import stable_round
from brigade.core.taxonomy import STATES
from brigade.core.usage import Price, money
from brigade.outdir import caches, feed, legacy, store
from brigade.outdir.comparison import Battery
from brigade.outdir.results import load_plan, read_plan_document, summarize
from brigade.outdir.scan import read_receipt_indexed
from brigade.report.model import state_class

# how often the summary may be computed again while cells change (seconds)
SUMMARY_EVERY = 2.0
# the changes remembered for pages asking what changed since a version
CHANGES_KEPT = 2000
# the finishes the ETA is estimated from: those of the last this many seconds
ETA_WINDOW = 600.0
PAGE_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Row:
    """One cell as the cell list shows it."""

    index: int  # in plan order
    cell_id: str
    coordinate: str
    case_id: str
    seat: str
    trial: int
    state: str  # a receipt state, or "missing"
    css: str  # accepted, failed, fault, other
    label: str  # the state with its fault kind or failure reason
    attempt: int | None
    duration: float | None
    score: float | None
    cost: float | None  # every attempt's, priced with the plan's prices; None: unknown
    text: str  # what the text filter searches (lower case)

    def document(self) -> list[Any]:
        """The row as the page's script gets it (a list: 100 rows stay small)."""
        return [
            self.cell_id,
            self.coordinate,
            self.case_id,
            self.seat,
            self.trial,
            self.state,
            self.css,
            self.label,
            self.attempt,
            self.duration,
            self.score,
            self.cost,
            money(self.cost),  # as every page shows money
        ]


ROW_FIELDS = (
    "cell_id",
    "coordinate",
    "case_id",
    "seat",
    "trial",
    "state",
    "css",
    "label",
    "attempt",
    "duration",
    "score",
    "cost",
    "cost_text",
)


# a cell with a cell.json brigade does not read (too big, too deep, a link, a FIFO, ...)
UNREADABLE = "unreadable"


def cost_of(
    docs: Iterable[Any] | None, prices: Mapping[str, Price], model: str | None
) -> float | None:
    """What a cell's attempts cost, priced as the summary prices them (`cell_usage`'s
    cost_usd, without the rest of its document: a row is made for every cell)."""
    total: float | None = None
    for usage in attempts_of(docs, prices, model) or ():
        if usage is not None and usage.cost_usd is not None:
            total = usage.cost_usd if total is None else total + usage.cost_usd
    return stable_round(float(total)) if total is not None else None


def make_row(
    index: int, cell: Cell, view: ReceiptView | None, plan: Plan, unreadable: bool = False
) -> Row:
    """The row of a cell from its receipt's view (None: no receipt yet, or `unreadable`:
    none that can be read)."""
    if view is None:
        state, reason, kind = UNREADABLE if unreadable else "missing", None, None
        attempt = duration = score = cost = None
    else:
        state, reason, kind = view.state, view.failure_reason, view.fault_kind
        attempt, duration, score = view.attempt, view.duration_seconds, view.score
        cost = cost_of(view.usage, plan.prices, cell.seat.model)
    why = kind or reason
    label = f"{state} ({why})" if why else state
    return Row(
        index=index,
        cell_id=cell.cell_id,
        coordinate=cell.coordinate,
        case_id=cell.case_id,
        seat=cell.seat.name,
        trial=cell.trial,
        state=state,
        css=state_class(state, reason),
        label=label,
        attempt=attempt,
        duration=duration if isinstance(duration, (int, float)) else None,
        score=score if isinstance(score, (int, float)) else None,
        cost=cost,
        text=f"{cell.coordinate} {label} {cell.cell_id[:12]}".lower(),
    )


@dataclass(frozen=True)
class Query:
    """A filter of the cell list: every given part must hold."""

    state: str = ""  # a state, or a class (accepted, failed, fault, other)
    seat: str = ""  # the seat's name, exactly
    case: str = ""  # a part of the case id
    text: str = ""  # words, each a part of the coordinate, the state or the cell id
    min_cost: float | None = None
    max_cost: float | None = None

    @classmethod
    def of(cls, params: Mapping[str, str]) -> Query:
        """From the query string's values (a cost that is no number is no bound)."""

        def number(name: str) -> float | None:
            try:
                value = float(params.get(name, ""))
            except ValueError:
                return None
            return value if value == value else None  # NaN is no bound

        return cls(
            state=params.get("state", ""),
            seat=params.get("seat", ""),
            case=params.get("case", "").lower(),
            text=params.get("q", "").lower(),
            min_cost=number("min_cost"),
            max_cost=number("max_cost"),
        )

    def select(self, rows: Iterable[Row]) -> list[Row]:
        """The rows this query keeps, in plan order."""
        kept = list(rows)
        if self.state:
            if self.state in STATES or self.state in ("missing", UNREADABLE):
                kept = [r for r in kept if r.state == self.state]
            else:
                kept = [r for r in kept if r.css == self.state]
        if self.seat:
            kept = [r for r in kept if r.seat == self.seat]
        if self.case:
            case = self.case
            kept = [r for r in kept if case in r.case_id.lower()]
        for word in self.text.split():
            kept = [r for r in kept if word in r.text]
        low, high = self.min_cost, self.max_cost
        if low is not None:
            kept = [r for r in kept if r.cost is not None and r.cost >= low]
        if high is not None:
            kept = [r for r in kept if r.cost is not None and r.cost <= high]
        return kept


def _linked_cells(out: Path) -> set[str]:
    """Names of the cell folders that are symbolic links."""
    try:
        with os.scandir(out / store.CELLS_DIR) as entries:
            return {entry.name for entry in entries if entry.is_symlink()}
    except OSError:
        return set()


class Watched:
    """An output directory, its plan and a row per planned cell, kept current."""

    def __init__(self, out: Path) -> None:
        self.out = out.absolute()
        self.lock = threading.RLock()
        self.version = 0
        self.tail = feed.Tail(self.out / feed.FEED_FILE)
        self.changes: list[tuple[int, str]] = []  # (version, cell id), the newest last
        self.finishes: list[float] = []  # when each cell seen finishing finished
        self.plan_stat: tuple[int, int, int] | None = None
        self._summary: dict[str, Any] | None = None
        self._summary_version = -1
        self._summary_at = 0.0
        self._summary_cost = 0.0
        self._query: tuple[Query, int] | None = None
        self._counts: tuple[int, dict[str, int]] | None = None
        self._summarizing = threading.Lock()
        self._selected: list[Row] = []
        self.load()
        self.tail.read()  # the feed up to now is what was loaded

    # -- loading ------------------------------------------------------------------------

    def load(self) -> None:
        """Read the plan and every cell's receipt (its view, through the receipt index)."""
        doc = read_plan_document(self.out)
        plan = load_plan(self.out, doc)
        self.plan_stat = self._plan_stat()
        self.original = doc.get("schema") == legacy.ORIGINAL_PLAN_SCHEMA
        index = caches.Sidecar(self.out / store.RECEIPT_INDEX, caches.cache_key())
        present = store.existing_cells(self.out)
        linked = _linked_cells(self.out)  # cell folders that are links: never read, unreadable
        views: dict[str, ReceiptView | None] = {}
        with store.opened_folder(store.cells_root(self.out)) as cells_fd:
            for cell in plan.cells:
                views[cell.cell_id] = (
                    read_receipt_indexed(self.out, cell.cell_id, index, cells_fd)
                    if cell.cell_id in present
                    else None
                )
        rows = [
            make_row(
                i,
                cell,
                views[cell.cell_id],
                plan,
                views[cell.cell_id] is None
                and (
                    cell.cell_id in linked
                    or (cell.cell_id in present and store.has_cell_json(self.out, cell.cell_id))
                ),
            )
            for i, cell in enumerate(plan.cells)
        ]
        with self.lock:
            self.plan = plan
            self.views = views
            self.rows = rows
            self.by_id = {row.cell_id: row.index for row in rows}
            self.seats = list(dict.fromkeys(cell.seat.name for cell in plan.cells))
            self.version += 1
            self.changes.clear()
            self._query = None

    def _plan_stat(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.out / store.PLAN_FILE)
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def refresh(self) -> bool:
        """Bring the rows up to date with the feed (or a rescan); True when any changed."""
        if self._plan_stat() != self.plan_stat:
            self.load()
            return True
        entries = self.tail.read()
        if entries is None:
            before = [(r.state, r.attempt) for r in self.rows]
            self.load()
            return before != [(r.state, r.attempt) for r in self.rows]
        if not entries:
            return False
        changed = False
        when = {entry["cell_id"]: entry.get("t") for entry in entries}
        for cell_id, at in when.items():
            index = self.by_id.get(cell_id)
            if index is None:
                continue
            # (never through a cell folder that is a link)
            receipt = store.read_receipt(self.out, cell_id)
            view = receipt.view if receipt is not None else None
            cell = self.plan.cells[index]
            unreadable = view is None and store.has_cell_json(self.out, cell_id)
            row = make_row(index, cell, view, self.plan, unreadable)
            with self.lock:
                old = self.rows[index]
                self.views[cell_id] = view
                self.rows[index] = row
                if (old.state, old.attempt, old.score) != (row.state, row.attempt, row.score):
                    changed = True
                    self.version += 1
                    self.changes.append((self.version, cell_id))
                    if old.state in ("missing", "running") and row.state not in (
                        "missing",
                        "running",
                    ):
                        self.finishes.append(at if isinstance(at, (int, float)) else time.time())
        with self.lock:
            del self.changes[:-CHANGES_KEPT]
            if changed:
                self._query = None
        return changed

    # -- what pages ask -----------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Cells per state (missing included), only the states some cell is in; counted
        again only when a row changed (every open page asks every second)."""
        with self.lock:
            if self._counts is not None and self._counts[0] == self.version:
                return dict(self._counts[1])
            version, rows = self.version, list(self.rows)
        found: dict[str, int] = {}
        for row in rows:
            found[row.state] = found.get(row.state, 0) + 1
        with self.lock:
            self._counts = (version, found)
        return dict(found)

    def eta(self, counts: Mapping[str, int], now: float | None = None) -> float | None:
        """Seconds until every cell has finished at the pace of the finishes of the last
        ETA_WINDOW seconds; None when nothing is left, or nothing finished lately."""
        now = time.time() if now is None else now
        left = counts.get("missing", 0) + counts.get("running", 0)
        recent = [t for t in self.finishes if t >= now - ETA_WINDOW]
        if not left or len(recent) < 2:
            return None
        span = max(now - recent[0], 1e-3)
        return left / (len(recent) / span)

    def since(self, version: int) -> list[str] | None:
        """The cells changed after `version`; None when that is too long ago to say."""
        with self.lock:
            if version >= self.version:
                return []
            if not self.changes or self.changes[0][0] > version + 1:
                return None
            return list(dict.fromkeys(cell_id for v, cell_id in self.changes if v > version))

    def page(self, query: Query, offset: int, limit: int) -> dict[str, Any]:
        """One page of the cells the query keeps, and how many it keeps."""
        limit = max(1, min(limit, PAGE_LIMIT))
        with self.lock:
            if self._query is None or self._query != (query, self.version):
                self._selected = query.select(self.rows)
                self._query = (query, self.version)
            selected = self._selected
            version = self.version
        offset = max(0, min(offset, max(0, len(selected) - 1)))
        return {
            "version": version,
            "total": len(self.rows),
            "matching": len(selected),
            "offset": offset,
            "fields": list(ROW_FIELDS),
            "rows": [row.document() for row in selected[offset : offset + limit]],
        }

    def summary(self) -> dict[str, Any]:
        """The summary document (summary.json's shape) of the rows as they are now,
        computed again at most every SUMMARY_EVERY seconds."""
        with self._summarizing:  # one page computes it; the others wait and take it
            return self._summary_now()

    def _summary_now(self) -> dict[str, Any]:
        with self.lock:
            # a summary that takes long is computed again less often (a fifth of the time)
            every = max(SUMMARY_EVERY, 5 * self._summary_cost)
            fresh = self._summary is not None and (
                self._summary_version == self.version or time.monotonic() - self._summary_at < every
            )
            if fresh:
                assert self._summary is not None
                return self._summary
            plan, views, version = self.plan, dict(self.views), self.version
        start = time.monotonic()
        summary = summarize(self.out, plan, views)
        with self.lock:
            self._summary, self._summary_version = summary, version
            self._summary_at = time.monotonic()
            self._summary_cost = self._summary_at - start
        return summary

    def battery(self) -> Battery:
        """The directory as `brigade compare` reads it (from the rows' receipts as now)."""
        with self.lock:
            plan, views = self.plan, dict(self.views)
        return Battery(self.out, plan, views, self.summary(), self.original)

    def cell(self, cell_id: str) -> Cell | None:
        """The planned cell of an id."""
        index = self.by_id.get(cell_id)
        return None if index is None else self.plan.cells[index]
