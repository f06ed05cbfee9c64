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

from brigade.core.accounting import judged_model, model_run


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
    # what each attempt of the cell whose seat ran consumed (its usage document, compact;
    # None: unknown); None when the receipt records none (written before usage was)
    usage: tuple[dict[str, Any] | None, ...] | None
    # of each grader result that ran a model (a judge that started): its usage document,
    # compact, priced as its judge's configured model when it names none; None: unknown
    grader_usage: tuple[dict[str, Any] | None, ...]
    cli_version: str | None
    # the sha256 of the cell.json bytes the view was made from (None: made from a receipt
    # in memory): any edit of the receipt, whatever field, changes its stamp
    digest: str | None = None

    @classmethod
    def of(cls, receipt: Mapping[str, Any], digest: str | None = None) -> ReceiptView:
        """The view of a full receipt (`digest`: of the bytes it was parsed from)."""
        state = receipt.get("state")
        attempts = receipt.get("attempts_usage")
        version = receipt.get("cli_version")
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
            (
                tuple(_compact(entry.get("usage")) for entry in attempts)
                if type(attempts) is list
                else None
            ),
            grader_usage_of(receipt),
            version if type(version) is str else None,
            digest,
        )

    @classmethod
    def from_json(cls, data: Any) -> ReceiptView | None:
        """From the receipt index's JSON list (the tuple as json.dumps wrote it); None when
        it is not one."""
        if type(data) is not list or len(data) != len(cls._fields):
            return None
        graders, usage, grader_usage = data[_GRADERS], data[_USAGE], data[_GRADER_USAGE]
        if type(graders) is not list or any(type(g) is not list or len(g) != 2 for g in graders):
            return None
        if type(data[1]) is not str or not (data[2] is None or type(data[2]) is int):
            return None
        if data[-1] is not None and type(data[-1]) is not str:
            return None
        if usage is not None and (
            type(usage) is not list or any(u is not None and type(u) is not dict for u in usage)
        ):
            return None
        if type(grader_usage) is not list or any(
            u is not None and type(u) is not dict for u in grader_usage
        ):
            return None
        data[1] = sys.intern(data[1])
        data[_GRADERS] = tuple(map(tuple, graders))
        data[_USAGE] = tuple(usage) if usage is not None else None
        data[_GRADER_USAGE] = tuple(grader_usage)
        return cls._make(data)

    def stamp(self) -> str:
        """Changes whenever its receipt is rewritten with new content (run, regrade), and
        with any edit of the bytes it was read from."""
        return f"{self.attempt}|{self.state}|{self.graded_at}|{self.digest}"


def grader_usage_of(receipt: Mapping[str, Any]) -> tuple[dict[str, Any] | None, ...]:
    """The usage of each grader result of a receipt that ran a model (a judge that started),
    compact, with its judge's configured model when it names none; None: unknown."""
    results = receipt.get("graders")
    if type(results) is not list:
        return ()
    specs = receipt.get("grader_specs")
    specs = specs if type(specs) is list else []
    found: list[dict[str, Any] | None] = []
    for index, result in enumerate(results):
        if type(result) is not dict:
            continue
        ran, doc = model_run(result)
        if not ran:
            continue
        usage = _compact(doc)
        model = judged_model(specs[index]) if index < len(specs) else None
        if usage is not None and "model" not in usage and model is not None:
            usage["model"] = model
        found.append(usage)
    return tuple(found)


def _fault_kind(fault: Any) -> str | None:
    kind = fault.get("kind") if isinstance(fault, Mapping) else None
    return sys.intern(kind) if type(kind) is str else None


_GRADERS = ReceiptView._fields.index("graders")
_USAGE = ReceiptView._fields.index("usage")
_GRADER_USAGE = ReceiptView._fields.index("grader_usage")
# what summing and pricing a usage never read (the index keeps the rest)
_UNSUMMED = frozenset({"session_id", "api_duration_seconds"})


def _compact(usage: Any) -> dict[str, Any] | None:
    """A usage document without its unknown (null) values and what no total needs."""
    if type(usage) is not dict:
        return None
    compact = {k: v for k, v in usage.items() if v is not None and k not in _UNSUMMED}
    models = compact.get("models")
    if type(models) is dict:
        if models:
            compact["models"] = {
                name: {k: v for k, v in share.items() if v is not None}
                if type(share) is dict
                else share
                for name, share in models.items()
            }
        else:
            del compact["models"]
    return compact


def view_of(receipt: Mapping[str, Any] | None) -> ReceiptView | None:
    """The view of a receipt, None for none."""
    return ReceiptView.of(receipt) if receipt is not None else None


def views_of(receipts: Mapping[str, Mapping[str, Any] | None]) -> dict[str, ReceiptView | None]:
    """cell_id -> view, for full receipts keyed by cell_id."""
    return {cell_id: view_of(receipt) for cell_id, receipt in receipts.items()}
