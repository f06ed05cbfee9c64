"""A cell.json parsed once into a typed, frozen `Receipt` (core/receipts): each field typed or
None, never a crash; what is not a receipt is None."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from brigade.core.identity import CELL_SCHEMA
from brigade.core.receipts import AttemptUsage, Fault, Receipt, ReceiptView, view_of
from brigade.outdir import store

CELL_ID = "c" * 64


def doc(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema": CELL_SCHEMA,
        "cell_id": CELL_ID,
        "coordinate": "case:seat:1",
        "case_id": "case",
        "case": {"id": "case", "prompt": "do it"},
        "prompt": "do it",
        "seat": {"name": "seat", "cli": "claude"},
        "trial": 1,
        "execution_mode": "read-only",
        "state": "rejected",
        "attempt": 2,
        "started_at": "2026-01-01T00:00:00.000Z",
        "finished_at": "2026-01-01T00:00:05.000Z",
        "graded_at": "2026-01-01T00:00:06.000Z",
        "duration_seconds": 5.0,
        "exit_code": 0,
        "score": 0.5,
        "output_digest": "sha256:" + "a" * 64,
        "grader_specs": [{"type": "regex", "pattern": "x"}],
        "grader_keys": ["k0"],
        "graders": [{"grader_id": "g:0", "status": "scored", "score": 0.5}],
        "usage": {"output_tokens": 5},
        "attempts_usage": [{"attempt": 1, "usage": None}, {"attempt": 2, "usage": {"turns": 1}}],
        "notes": ["a note"],
        "cli_version": "1.0.0",
    }
    base.update(fields)
    return base


def test_every_field_read_has_its_type() -> None:
    receipt = Receipt.of(doc(fault={"kind": "rate_limited", "retry_after_seconds": 3}))
    assert receipt is not None
    assert (receipt.cell_id, receipt.state, receipt.attempt) == (CELL_ID, "rejected", 2)
    assert (receipt.case_id, receipt.prompt, receipt.trial) == ("case", "do it", 1)
    assert receipt.case == {"id": "case", "prompt": "do it"}
    assert receipt.seat == {"name": "seat", "cli": "claude"} and receipt.seat_name is None
    assert (receipt.duration_seconds, receipt.exit_code, receipt.score) == (5.0, 0, 0.5)
    assert receipt.fault == Fault(
        "rate_limited", None, 3, {"kind": "rate_limited", "retry_after_seconds": 3}
    )
    assert receipt.graders == ({"grader_id": "g:0", "status": "scored", "score": 0.5},)
    assert receipt.grader_specs == ({"type": "regex", "pattern": "x"},)
    assert receipt.grader_keys == ("k0",)
    assert receipt.attempts_usage == (AttemptUsage(1, None), AttemptUsage(2, {"turns": 1}))
    assert receipt.notes == ("a note",)
    assert receipt.document == doc(fault={"kind": "rate_limited", "retry_after_seconds": 3})


def test_a_receipt_is_frozen() -> None:
    receipt = Receipt.of(doc())
    assert receipt is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        receipt.state = "accepted"  # type: ignore[misc]


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        "text",
        {"schema": "other", "cell_id": CELL_ID, "state": "accepted"},
        {"schema": CELL_SCHEMA, "cell_id": 5, "state": "accepted"},
        {"schema": CELL_SCHEMA, "cell_id": CELL_ID, "state": "done"},
        {"schema": CELL_SCHEMA, "cell_id": CELL_ID, "state": ["accepted"]},
    ],
)
def test_what_is_not_a_receipt_is_none(value: Any) -> None:
    assert Receipt.of(value) is None


# a value of every wrong kind for each field a reader reads
WRONG = [None, True, "x", 1.5, -1, 0, [], {}, [1, "a"], {"a": [None]}]


@pytest.mark.parametrize("value", WRONG)
@pytest.mark.parametrize(
    "name",
    [
        "attempt", "coordinate", "case_id", "case", "prompt", "trial", "execution_mode",
        "seat", "started_at", "finished_at", "graded_at", "duration_seconds", "exit_code",
        "score", "failure_reason", "failure_detail", "fault", "graders", "grader_specs",
        "grader_keys", "reused_grades", "reused_run", "usage", "attempts_usage", "notes",
        "cli_version",
    ],
)  # fmt: skip
def test_a_field_of_the_wrong_type_is_absent_never_a_crash(name: str, value: Any) -> None:
    receipt = Receipt.of(doc(**{name: value}))
    assert receipt is not None
    field = getattr(receipt, name)
    expected = {
        "attempt": int, "trial": int, "exit_code": int, "duration_seconds": (int, float),
        "score": (int, float), "fault": Fault, "case": dict, "seat": dict, "reused_run": dict,
        "usage": dict, "graders": tuple, "grader_specs": tuple, "grader_keys": tuple,
        "reused_grades": tuple, "attempts_usage": tuple, "notes": tuple,
    }.get(name, str)  # fmt: skip
    assert field is None or (isinstance(field, expected) and type(field) is not bool)
    if name == "attempt":
        assert field is None or field > 0
    if name in ("graders", "reused_grades"):
        assert all(type(item) is dict for item in field)
    if name == "notes":
        assert all(type(item) is str for item in field)


def test_a_digest_recorded_as_no_string_matches_no_file() -> None:
    """A check against it fails instead of being skipped (as the dict's value did)."""
    for value in (5, [], {"a": 1}, True):
        receipt = Receipt.of(doc(output_digest=value, changes_digest=value))
        assert receipt is not None
        assert receipt.output_digest == "" and receipt.changes_digest == ""
    receipt = Receipt.of(doc(output_digest=None))
    assert receipt is not None and receipt.output_digest is None


def test_the_original_tools_receipt_names_its_seat() -> None:
    receipt = Receipt.of(doc(seat="alpha"))
    assert receipt is not None and receipt.seat is None and receipt.seat_name == "alpha"


def test_its_view_is_the_documents() -> None:
    receipt = Receipt.of(doc())
    assert receipt is not None
    assert receipt.view == ReceiptView.of(doc()) == view_of(receipt) == view_of(doc())


def test_the_store_parses_a_cell_json_once_where_it_is_read(tmp_path: Path) -> None:
    folder = store.cell_dir(tmp_path, CELL_ID)
    folder.mkdir(parents=True)
    (folder / store.RECEIPT_FILE).write_text(json.dumps(doc(duration_seconds="long")))
    receipt, attempt = store.read_cell_json(tmp_path, CELL_ID)
    assert isinstance(receipt, Receipt) and attempt == 2
    assert receipt.duration_seconds is None and receipt.state == "rejected"
    full, view = store.read_cell(tmp_path, CELL_ID)
    assert full == receipt and view is not None and view.digest is not None
    (folder / store.RECEIPT_FILE).write_text(json.dumps(doc(cell_id="d" * 64)))
    assert store.read_receipt(tmp_path, CELL_ID) is None  # another cell's receipt


def test_a_view_is_read_without_making_the_full_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary and the report's stamps read every cell's view: no Receipt is made."""
    folder = store.cell_dir(tmp_path, CELL_ID)
    folder.mkdir(parents=True)
    (folder / store.RECEIPT_FILE).write_text(json.dumps(doc()))

    def refused(*args: Any) -> None:
        raise AssertionError("a full receipt was made")

    monkeypatch.setattr(store, "receipt_in", refused)
    monkeypatch.setattr(Receipt, "of", refused)
    view = store.read_view(tmp_path, CELL_ID)
    assert view is not None and view.state == "rejected" and view.digest is not None


def test_a_receipt_recording_no_attempt_is_refused_when_its_output_is_verified(
    tmp_path: Path,
) -> None:
    """Its run folder cannot be named: one line, never a traceback from a bad attempt."""
    from types import SimpleNamespace

    from brigade.errors import TamperedOutput
    from brigade.run.runner import verify_output

    receipt = Receipt.of(doc(attempt="2"))
    assert receipt is not None and receipt.attempt is None
    with pytest.raises(TamperedOutput, match="records no attempt number"):
        verify_output(SimpleNamespace(out=tmp_path), receipt)  # type: ignore[arg-type]


def test_an_attempts_copy_of_its_receipt_is_parsed_by_the_store(tmp_path: Path) -> None:
    """What a crashed grading left in its attempt: trusted only when it is the cell's."""
    folder = store.attempt_dir(tmp_path, CELL_ID, 2)
    folder.mkdir(parents=True)
    (folder / store.RECEIPT_FILE).write_text(json.dumps(doc()))
    copy = store.attempt_receipt(tmp_path, CELL_ID, 2)
    assert copy is not None and copy.attempt == 2 and copy.document == doc()
    (folder / store.RECEIPT_FILE).write_text(json.dumps(doc(cell_id="d" * 64)))
    assert store.attempt_receipt(tmp_path, CELL_ID, 2) is None
    (folder / store.RECEIPT_FILE).write_text("[1, 2")
    assert store.attempt_receipt(tmp_path, CELL_ID, 2) is None
    assert store.attempt_receipt(tmp_path, CELL_ID, 3) is None
