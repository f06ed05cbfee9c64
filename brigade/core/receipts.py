"""What a receipt says: in full (`Receipt`, what the runner, the report and the export read)
and about its cell's outcome (`ReceiptView`, what the resume table, the summary and the
trial statistics read, and the receipt index keeps for every cell).

A cell.json is a file a seat could have written: it is parsed once, where it is read
(outdir/store), into a frozen `Receipt` whose fields have their types or are None (a
field of the wrong type is absent, never a crash); its `document` is the receipt as
read, for what must write or project it as it is. A `ReceiptView` is the frozen, compact
part of one that deciding, summarising and stamping a cell need. A no-op resume of
100,000 cells holds one per cell: a named tuple keeps that to a fraction of a dict's
memory, and it is stored in the index as a JSON list.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from brigade.core.accounting import judged_model, model_run
from brigade.core.identity import CELL_SCHEMA
from brigade.core.taxonomy import STATES, State


def _str(value: Any) -> str | None:
    return value if type(value) is str else None


def _count(value: Any) -> int | None:
    """A positive int (an attempt number), else None (a bool is no number)."""
    return value if type(value) is int and value > 0 else None


def _digest(value: Any) -> str | None:
    """A recorded digest; `""` (which no file's digest equals) when it is recorded as
    something else than a string, so a check against it fails rather than being skipped."""
    return value if type(value) is str or value is None else ""


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _number(value: Any) -> float | None:
    return value if type(value) in (int, float) else None


# The objects of a receipt (grader results, usage, ...) are its document's own, typed
# read-only (`Mapping`) and never changed: the usage and projection code they are handed to
# takes JSON objects as they are, and a copy per receipt would cost a large report its time.


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if type(value) is dict else None


def _mappings(value: Any) -> tuple[Mapping[str, Any], ...]:
    """The objects of a JSON list (anything else in it left out); () for no list."""
    if type(value) is not list:
        return ()
    return tuple(item for item in value if type(item) is dict)


def _objects(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    """A JSON list of objects, None when it is no list or holds anything else."""
    if type(value) is not list or any(type(item) is not dict for item in value):
        return None
    return tuple(value)


@dataclass(frozen=True, slots=True)
class Fault:
    """The apparatus fault a receipt records (`fault`): its kind, message, the provider's
    retry hint, and the object as read."""

    kind: str | None
    message: str | None
    retry_after_seconds: float | None
    document: Mapping[str, Any]

    @classmethod
    def of(cls, value: Any) -> Fault | None:
        """The fault of a receipt's `fault` value, None when it is no object."""
        if type(value) is not dict:
            return None
        kind = value.get("kind")
        return cls(
            sys.intern(kind) if type(kind) is str else None,
            _str(value.get("message")),
            _number(value.get("retry_after_seconds")),
            value,
        )


@dataclass(frozen=True, slots=True)
class AttemptUsage:
    """One entry of a receipt's `attempts_usage`: an attempt whose seat ran and its usage
    (None: unknown)."""

    attempt: int
    usage: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Receipt:
    """A trusted cell.json, parsed once: each field typed, None (or empty) when the receipt
    lacks it or records it with the wrong type; `document` is the receipt as read (with
    what outdir/legacy derives), never to be changed."""

    cell_id: str
    state: State
    attempt: int | None  # a positive int
    coordinate: str | None
    case: Mapping[str, Any] | None  # `{id, prompt}`: what the cell's identity holds of its case
    case_id: str | None
    prompt: str | None
    trial: int | None
    execution_mode: str | None
    seat: Mapping[str, Any] | None  # the seat's spec (the original tool's receipts: a name)
    seat_name: str | None  # the original tool's receipts name the seat only
    started_at: str | None
    finished_at: str | None
    graded_at: str | None
    duration_seconds: float | None
    exit_code: int | None
    score: float | None
    output_digest: str | None  # `""`: recorded, but as no string (see `_digest`)
    changes_digest: str | None  # (as output_digest)
    failure_reason: str | None
    failure_detail: str | None
    fault: Fault | None
    graders: tuple[Mapping[str, Any], ...]  # the grader results that are objects
    grader_specs: tuple[Mapping[str, Any], ...] | None  # None: no list of objects
    grader_keys: tuple[str | None, ...] | None  # None: the receipt records no list
    reused_grades: tuple[Mapping[str, Any], ...]
    reused_run: Mapping[str, Any] | None
    usage: Mapping[str, Any] | None
    attempts_usage: tuple[AttemptUsage, ...]  # the entries with an attempt number
    notes: tuple[str, ...]
    cli_version: str | None
    document: Mapping[str, Any]

    @classmethod
    def of(cls, doc: Any) -> Receipt | None:
        """The receipt a parsed cell.json is (its schema tag, a cell id and a known state),
        else None: what is not a receipt is never read as one."""
        if (
            type(doc) is not dict
            or doc.get("schema") != CELL_SCHEMA
            or type(cell_id := doc.get("cell_id")) is not str
            or (state := doc.get("state")) not in STATES
        ):
            return None
        seat = doc.get("seat")
        keys = doc.get("grader_keys")
        fields = doc.get("attempts_usage")
        notes = doc.get("notes")
        return cls(
            cell_id=cell_id,
            state=sys.intern(state),  # type: ignore[arg-type]  # (one of STATES)
            attempt=_count(doc.get("attempt")),
            coordinate=_str(doc.get("coordinate")),
            case=_mapping(doc.get("case")),
            case_id=_str(doc.get("case_id")),
            prompt=_str(doc.get("prompt")),
            trial=_int(doc.get("trial")),
            execution_mode=_str(doc.get("execution_mode")),
            seat=_mapping(seat),
            seat_name=_str(seat),
            started_at=_str(doc.get("started_at")),
            finished_at=_str(doc.get("finished_at")),
            graded_at=_str(doc.get("graded_at")),
            duration_seconds=_number(doc.get("duration_seconds")),
            exit_code=_int(doc.get("exit_code")),
            score=_number(doc.get("score")),
            output_digest=_digest(doc.get("output_digest")),
            changes_digest=_digest(doc.get("changes_digest")),
            failure_reason=_str(doc.get("failure_reason")),
            failure_detail=_str(doc.get("failure_detail")),
            fault=Fault.of(doc.get("fault")),
            graders=_mappings(doc.get("graders")),
            grader_specs=_objects(doc.get("grader_specs")),
            grader_keys=tuple(map(_str, keys)) if type(keys) is list else None,
            reused_grades=_mappings(doc.get("reused_grades")),
            reused_run=_mapping(doc.get("reused_run")),
            usage=_mapping(doc.get("usage")),
            attempts_usage=tuple(
                AttemptUsage(entry["attempt"], _mapping(entry.get("usage")))
                for entry in (fields if type(fields) is list else ())
                if type(entry) is dict and type(entry.get("attempt")) is int
            ),
            notes=tuple(n for n in notes if type(n) is str) if type(notes) is list else (),
            cli_version=_str(doc.get("cli_version")),
            document=doc,
        )

    @property
    def view(self) -> ReceiptView:
        """Its outcome view (`ReceiptView`), made from the document (no digest)."""
        return ReceiptView.of(self.document)


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


def view_of(receipt: Receipt | Mapping[str, Any] | None) -> ReceiptView | None:
    """The view of a receipt (parsed, or a document), None for none."""
    if isinstance(receipt, Receipt):
        return receipt.view
    return ReceiptView.of(receipt) if receipt is not None else None


def views_of(
    receipts: Mapping[str, Receipt | Mapping[str, Any] | None],
) -> dict[str, ReceiptView | None]:
    """cell_id -> view, for full receipts keyed by cell_id."""
    return {cell_id: view_of(receipt) for cell_id, receipt in receipts.items()}
