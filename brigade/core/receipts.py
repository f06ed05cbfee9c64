"""What a receipt says about its cell's outcome: the view the resume table, the summary and
the trial statistics read (and the receipt index keeps for every cell).

Full receipts (plain dicts, as cell.json holds them) are what the export, the
report and the runner need; a `ReceiptView` is the frozen, compact part of one
that deciding, summarising and stamping a cell need. A no-op resume of
100,000 cells holds one per cell: a named tuple keeps that to a fraction of a
dict's memory, and it is stored in the index as a JSON list.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NamedTuple


class ReceiptView(NamedTuple):
    """The outcome fields of a trusted receipt (failure_reason None when absent)."""

    cell_id: str
    state: str
    attempt: int | None  # None when the receipt records none that is a positive int
    started_at: str | None
    finished_at: str | None
    graded_at: str | None
    exit_code: int | None
    duration_seconds: float | None
    score: float | None
    output_digest: str | None
    failure_reason: str | None
    fault_kind: str | None  # the kind of the receipt's `fault`, None when it records none
    graders: tuple[tuple[str, float | None], ...]  # (status, score) of each grader result

    @classmethod
    def of(cls, receipt: Mapping[str, Any]) -> ReceiptView:
        """The view of a full receipt."""
        state = receipt.get("state")
        return cls(
            receipt.get("cell_id"),  # type: ignore[arg-type]  # (trusted receipts have all)
            sys.intern(state) if type(state) is str else state,  # type: ignore[arg-type]
            attempt if type(attempt := receipt.get("attempt")) is int and attempt > 0 else None,
            receipt.get("started_at"),
            receipt.get("finished_at"),
            receipt.get("graded_at"),
            receipt.get("exit_code"),
            receipt.get("duration_seconds"),
            receipt.get("score"),
            receipt.get("output_digest"),
            receipt.get("failure_reason"),
            _fault_kind(receipt.get("fault")),
            tuple((g.get("status"), g.get("score")) for g in receipt.get("graders") or ()),
        )

    @classmethod
    def from_json(cls, data: Any) -> ReceiptView | None:
        """From the receipt index's JSON list (the tuple as json.dumps wrote it); None when
        it is not one."""
        if type(data) is not list or len(data) != len(cls._fields):
            return None
        graders = data[-1]
        if type(graders) is not list or any(type(g) is not list or len(g) != 2 for g in graders):
            return None
        if type(data[1]) is not str or not (data[2] is None or type(data[2]) is int):
            return None
        data[1] = sys.intern(data[1])
        data[-1] = tuple(map(tuple, graders))
        return cls._make(data)

    def stamp(self) -> str:
        """Changes whenever its receipt is rewritten with new content (run, regrade)."""
        return f"{self.attempt}|{self.state}|{self.graded_at}"


def _fault_kind(fault: Any) -> str | None:
    kind = fault.get("kind") if isinstance(fault, Mapping) else None
    return sys.intern(kind) if type(kind) is str else None


def view_of(receipt: Mapping[str, Any] | None) -> ReceiptView | None:
    """The view of a receipt, None for none."""
    return ReceiptView.of(receipt) if receipt is not None else None


def views_of(receipts: Mapping[str, Mapping[str, Any] | None]) -> dict[str, ReceiptView | None]:
    """cell_id -> view, for full receipts keyed by cell_id."""
    return {cell_id: view_of(receipt) for cell_id, receipt in receipts.items()}
