"""The resume table (core.taxonomy); what cell.json and attempt folders are trusted for (store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brigade.core.receipts import ReceiptView, view_of
from brigade.core.taxonomy import Action
from brigade.core.taxonomy import decide as decide_view
from brigade.core.taxonomy import is_transient as is_transient_view
from brigade.core.taxonomy import reusable_source as reusable_view
from brigade.outdir import store

CELL_ID = "a" * 64
OTHER_ID = "b" * 64


def receipt(state: str, **extra: Any) -> dict[str, Any]:
    return {"schema": "brigade.eval_cell.v1", "cell_id": CELL_ID, "state": state, **extra}


# the resume table reads the view of a receipt the store trusts (an untrusted one: none)
def view(doc: Any) -> ReceiptView | None:
    return view_of(store.trusted_receipt(doc, CELL_ID))


def decide(doc: Any, *, retry_transient: bool, reusable: bool) -> Action:
    return decide_view(view(doc), retry_transient=retry_transient, reusable=reusable)


def is_transient(doc: Any) -> bool:
    trusted = view(doc)
    assert trusted is not None
    return is_transient_view(trusted)


def reusable_source(doc: Any, *, retry_transient: bool) -> bool:
    return reusable_view(view(doc), retry_transient=retry_transient)


# --- decide: one test per row of the table -----------------------------------

TERMINAL_STANDS = [
    receipt("accepted"),
    receipt("rejected"),
    receipt("unscored"),
    receipt("execution_error"),
    receipt("execution_error", failure_reason="timeout"),
    receipt("adapter_error", failure_reason="transport_drop"),
    receipt("adapter_error", failure_reason="provider_5xx"),
    receipt("adapter_error"),
]
TERMINAL_IDS = [
    "accepted",
    "rejected",
    "unscored",
    "execution_error",
    "execution_error-timeout",
    "adapter_error-transport_drop",
    "adapter_error-provider_5xx",
    "adapter_error",
]


@pytest.mark.parametrize("reusable", [False, True])
@pytest.mark.parametrize("recorded", TERMINAL_STANDS, ids=TERMINAL_IDS)
def test_terminal_states_are_up_to_date(recorded: dict[str, Any], reusable: bool) -> None:
    assert decide(recorded, retry_transient=False, reusable=reusable) == "skip"


@pytest.mark.parametrize("retry", [False, True])
@pytest.mark.parametrize("reusable", [False, True])
def test_grader_error_is_regraded(retry: bool, reusable: bool) -> None:
    assert decide(receipt("grader_error"), retry_transient=retry, reusable=reusable) == "regrade"


NEEDS_RUN = [
    receipt("running"),
    None,
    receipt("finished"),
    receipt(""),
    receipt("Accepted"),
    {"cell_id": CELL_ID},
    {"state": None},
    {"state": 3},
]
NEEDS_RUN_IDS = [
    "running",
    "missing",
    "unknown state",
    "empty state",
    "wrong case",
    "no state",
    "null state",
    "number state",
]


@pytest.mark.parametrize("retry", [False, True])
@pytest.mark.parametrize("recorded", NEEDS_RUN, ids=NEEDS_RUN_IDS)
def test_other_states_run_a_new_attempt(recorded: dict[str, Any] | None, retry: bool) -> None:
    assert decide(recorded, retry_transient=retry, reusable=False) == "run"


@pytest.mark.parametrize("retry", [False, True])
@pytest.mark.parametrize("recorded", NEEDS_RUN, ids=NEEDS_RUN_IDS)
def test_other_states_reuse_when_reusable(recorded: dict[str, Any] | None, retry: bool) -> None:
    assert decide(recorded, retry_transient=retry, reusable=True) == "reuse"


def test_unhashable_state_runs() -> None:
    assert decide(receipt(["accepted"]), retry_transient=False, reusable=False) == "run"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "recorded, action",
    [
        (receipt("adapter_error", failure_reason="transport_drop"), "run"),
        (receipt("adapter_error", failure_reason="provider_5xx"), "run"),
        (receipt("adapter_error"), "run"),
        (receipt("execution_error", failure_reason="timeout"), "run"),
        (receipt("execution_error"), "skip"),
        (receipt("accepted"), "skip"),
        (receipt("rejected"), "skip"),
        (receipt("unscored"), "skip"),
        (receipt("grader_error"), "regrade"),
        (receipt("running"), "run"),
    ],
    ids=[
        "adapter_error-transport_drop",
        "adapter_error-provider_5xx",
        "adapter_error",
        "execution_error-timeout",
        "execution_error",
        "accepted",
        "rejected",
        "unscored",
        "grader_error",
        "running",
    ],
)
@pytest.mark.parametrize("reusable", [False, True])
def test_retry_transient(recorded: dict[str, Any], action: str, reusable: bool) -> None:
    if action == "run" and recorded["state"] == "running" and reusable:
        action = "reuse"
    # a transient fault is re-run for real, never satisfied from another cell's run
    assert decide(recorded, retry_transient=True, reusable=reusable) == action


def test_is_transient() -> None:
    assert is_transient(receipt("adapter_error")) is True
    assert is_transient(receipt("execution_error", failure_reason="timeout")) is True
    assert is_transient(receipt("execution_error")) is False
    assert is_transient(receipt("execution_error", failure_reason="transport_drop")) is False
    assert is_transient(receipt("grader_error")) is False
    assert is_transient(receipt("running")) is False


@pytest.mark.parametrize(
    "recorded, plain, retrying",
    [
        (receipt("accepted"), True, True),
        (receipt("rejected"), True, True),
        (receipt("unscored"), True, True),
        (receipt("grader_error"), True, True),
        (receipt("execution_error"), True, True),
        (receipt("execution_error", failure_reason="timeout"), True, False),
        (receipt("adapter_error"), True, False),
        (receipt("running"), False, False),
        (receipt("bogus"), False, False),
        (None, False, False),
    ],
)
def test_reusable_source(recorded: dict[str, Any] | None, plain: bool, retrying: bool) -> None:
    assert reusable_source(recorded, retry_transient=False) is plain
    assert reusable_source(recorded, retry_transient=True) is retrying


# --- store.trusted_receipt, store.recorded_attempt ------------------------------


def test_recorded_trusted_receipt() -> None:
    doc = receipt("accepted", attempt=2)
    assert store.trusted_receipt(doc, CELL_ID) is doc
    assert store.recorded_attempt(doc) == 2


def test_recorded_cell_id_mismatch_is_untrusted() -> None:
    doc = receipt("accepted", attempt=4)
    assert store.trusted_receipt(doc, OTHER_ID) is None
    # its attempt number still counts, so numbers never go backwards
    assert store.recorded_attempt(doc) == 4


@pytest.mark.parametrize(
    "doc",
    [
        {**receipt("accepted"), "schema": "brigade.eval_cell.v0"},
        {k: v for k, v in receipt("accepted").items() if k != "schema"},
        {k: v for k, v in receipt("accepted").items() if k != "cell_id"},
        receipt("finished"),
        receipt(""),
        {k: v for k, v in receipt("accepted").items() if k != "state"},
        {**receipt("accepted"), "state": ["accepted"]},
        {**receipt("accepted"), "cell_id": CELL_ID.upper()},
    ],
    ids=[
        "wrong schema",
        "no schema",
        "no cell_id",
        "unknown state",
        "empty state",
        "no state",
        "list state",
        "cell_id case",
    ],
)
def test_recorded_untrusted_documents(doc: dict[str, Any]) -> None:
    assert store.trusted_receipt(doc, CELL_ID) is None
    assert store.recorded_attempt(doc) is None


@pytest.mark.parametrize("doc", [None, [], ["accepted"], "accepted", 3, 1.5, True], ids=repr)
def test_recorded_corrupt_values(doc: Any) -> None:
    assert store.trusted_receipt(doc, CELL_ID) is None
    assert store.recorded_attempt(doc) is None


@pytest.mark.parametrize("attempt", [0, -1, True, False, 2.0, "3", None, [1]], ids=repr)
def test_recorded_attempt_ignored_unless_positive_int(attempt: Any) -> None:
    doc = receipt("running", attempt=attempt)
    assert store.recorded_attempt(doc) is None
    assert store.trusted_receipt(doc, CELL_ID) is doc  # the receipt itself is still this cell's
    trusted = view(doc)
    assert trusted is not None and trusted.attempt is None


def test_recorded_running_is_trusted() -> None:
    doc = receipt("running", attempt=1, started_at="2025-01-01T00:00:00Z")
    assert store.trusted_receipt(doc, CELL_ID) is doc


def write_cell_json(out: Path, text: str) -> None:
    folder = store.cell_dir(out, CELL_ID)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / store.RECEIPT_FILE).write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "text", ["", "{", '{"state": "accepted"', "\x00\x01", "null", "[]"], ids=repr
)
def test_read_receipt_unreadable_or_corrupt(tmp_path: Path, text: str) -> None:
    write_cell_json(tmp_path, text)
    assert store.read_cell_json(tmp_path, CELL_ID) == (None, None)


def test_read_receipt_missing(tmp_path: Path) -> None:
    assert store.read_cell_json(tmp_path, CELL_ID) == (None, None)


def test_read_receipt_ok(tmp_path: Path) -> None:
    write_cell_json(
        tmp_path,
        '{"schema": "brigade.eval_cell.v1", "cell_id": "%s", "state": "grader_error", '
        '"attempt": 3}' % CELL_ID,
    )
    receipt, attempt = store.read_cell_json(tmp_path, CELL_ID)
    assert receipt is not None and receipt.state == "grader_error"
    assert attempt == 3


# --- store.new_attempt -------------------------------------------------------


def attempts_dir(out: Path) -> Path:
    return store.cell_dir(out, CELL_ID) / store.ATTEMPTS_DIR


def make(out: Path, *names: str) -> None:
    for name in names:
        (attempts_dir(out) / name).mkdir(parents=True)


def listing(out: Path) -> list[str]:
    return sorted(p.name for p in attempts_dir(out).iterdir())


def test_first_attempt(tmp_path: Path) -> None:
    assert store.new_attempt(tmp_path, CELL_ID, None) == 1
    assert listing(tmp_path) == ["attempt-001"]
    assert (attempts_dir(tmp_path) / "attempt-001" / "run").is_dir()
    assert store.run_dir(tmp_path, CELL_ID, 1) == attempts_dir(tmp_path) / "attempt-001" / "run"


def test_numbers_are_never_reused(tmp_path: Path) -> None:
    assert [store.new_attempt(tmp_path, CELL_ID, None) for _ in range(3)] == [1, 2, 3]
    assert listing(tmp_path) == ["attempt-001", "attempt-002", "attempt-003"]


def test_gaps_use_the_highest_folder(tmp_path: Path) -> None:
    make(tmp_path, "attempt-001", "attempt-004")
    assert store.new_attempt(tmp_path, CELL_ID, None) == 5
    assert listing(tmp_path) == ["attempt-001", "attempt-004", "attempt-005"]


def test_non_matching_names_are_ignored(tmp_path: Path) -> None:
    make(
        tmp_path,
        "attempt-002",
        "attempt-abc",
        "attempt-009.bak",
        "old-attempt-050",
        "attempt-",
        "Attempt-070",
        "notes",
    )
    (attempts_dir(tmp_path) / "attempt-080.txt").write_text("x")
    assert store.new_attempt(tmp_path, CELL_ID, None) == 3


def test_unpadded_and_wide_numbers_count(tmp_path: Path) -> None:
    make(tmp_path, "attempt-7", "attempt-0012")
    assert store.new_attempt(tmp_path, CELL_ID, None) == 13
    assert "attempt-013" in listing(tmp_path)


def test_recorded_attempt_above_folders(tmp_path: Path) -> None:
    # the highest folder was deleted; cell.json still remembers attempt 6
    make(tmp_path, "attempt-001", "attempt-002")
    assert store.new_attempt(tmp_path, CELL_ID, 6) == 7


def test_folders_above_recorded_attempt(tmp_path: Path) -> None:
    make(tmp_path, "attempt-001", "attempt-008")
    assert store.new_attempt(tmp_path, CELL_ID, 3) == 9


def test_recorded_attempt_without_folders(tmp_path: Path) -> None:
    assert store.new_attempt(tmp_path, CELL_ID, 2) == 3
    assert listing(tmp_path) == ["attempt-003"]


def test_recorded_attempt_from_untrusted_receipt_counts(tmp_path: Path) -> None:
    doc = receipt("accepted", attempt=5)
    assert store.trusted_receipt(doc, OTHER_ID) is None
    assert store.new_attempt(tmp_path, CELL_ID, store.recorded_attempt(doc)) == 6


def test_ignored_recorded_attempt_falls_back_to_folders(tmp_path: Path) -> None:
    make(tmp_path, "attempt-002")
    doc = receipt("running", attempt=-4)
    assert store.new_attempt(tmp_path, CELL_ID, store.recorded_attempt(doc)) == 3


def test_existing_target_is_skipped(tmp_path: Path) -> None:
    # a folder created between the scan and mkdir is never taken over
    make(tmp_path, "attempt-001")
    (attempts_dir(tmp_path) / "attempt-002").write_text("a racing writer's file")
    assert store.new_attempt(tmp_path, CELL_ID, None) == 3


def test_attempt_numbers_listing(tmp_path: Path) -> None:
    make(tmp_path, "attempt-003", "x", "attempt-001")
    assert sorted(store.attempt_numbers(store.cell_dir(tmp_path, CELL_ID))) == [1, 3]
    assert store.attempt_numbers(tmp_path / "nowhere") == []
