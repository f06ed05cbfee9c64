"""outdir/store.py: the output directory's layout, atomic validated writes, receipts, attempts.

(What cell.json is trusted for and attempt numbering are in test_resume.py.)
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from brigade.core.identity import CELL_SCHEMA
from brigade.inputs.schemas import InvalidDocument
from brigade.outdir import store

CELL_ID = "c" * 64


def receipt(state: str = "unscored", attempt: int = 1, **extra: object) -> dict[str, object]:
    """A receipt that validates against eval_cell.v1 (as the runner writes them)."""
    doc: dict[str, object] = {
        "schema": CELL_SCHEMA,
        "cell_id": CELL_ID,
        "coordinate": "c:s:1",
        "case_id": "c",
        "case": {"id": "c", "prompt": "p"},
        "prompt": "p",
        "seat": {
            "seat": "s",
            "cli": "exec:true",
            "model": None,
            "reasoning": None,
            "transport": None,
            "transport_version": None,
            "env": {},
            "codex_transport": None,
        },
        "trial": 1,
        "execution_mode": "read-only",
        "grader_specs": [],
        "state": state,
        "attempt": attempt,
        "started_at": "2026-01-01T00:00:00.000Z",
        "manifest_digest": "0" * 64,
    }
    if state != "running":  # what the runner adds once the cell has its result
        doc.update(
            {
                "finished_at": "2026-01-01T00:00:01.000Z",
                "exit_code": 0,
                "duration_seconds": 1.0,
                "run_dir": f"/o/cells/{CELL_ID}/attempts/attempt-001/run",
                "graders": [],
                "output_digest": None,
                "score": None,
                "acceptance": None,
                "graded_at": "2026-01-01T00:00:01.000Z",
            }
        )
    doc.update(extra)
    return doc


def test_layout() -> None:
    out = Path("/o")
    assert store.cell_dir(out, CELL_ID) == Path(f"/o/cells/{CELL_ID}")
    assert store.attempt_name(7) == "attempt-007"
    assert store.run_dir(out, CELL_ID, 12) == Path(f"/o/cells/{CELL_ID}/attempts/attempt-012/run")


def test_atomic_write_creates_folders_and_ordinary_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.json"
    store.atomic_write_bytes(target, b"one")
    assert target.read_bytes() == b"one"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    store.atomic_write_bytes(target, b"two", durable=False)
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    target.write_bytes(b"old")

    with pytest.raises((TypeError, AttributeError)):
        store.atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]


def test_write_json_validates_before_writing(tmp_path: Path) -> None:
    target = tmp_path / "cell.json"
    with pytest.raises(InvalidDocument):
        store.write_json(target, {"schema": CELL_SCHEMA}, CELL_SCHEMA)
    assert not target.exists()
    store.write_json(target, receipt(), CELL_SCHEMA)
    assert json.loads(target.read_text()) == receipt()
    assert target.read_text().startswith('{\n  "schema"')  # indented for people


def test_sampled_cuts_every_list() -> None:
    doc = {"a": list(range(500)), "b": {"c": [[1] * 300]}}
    cut = store.sampled(doc)
    assert len(cut["a"]) == store.SAMPLE_ITEMS
    assert len(cut["b"]["c"][0]) == store.SAMPLE_ITEMS
    assert len(doc["a"]) == 500  # a copy


@pytest.mark.parametrize("content", [None, b"", b"{", b"\xff", b"[1]"], ids=repr)
def test_read_json(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "doc.json"
    if content is not None:
        path.write_bytes(content)
    assert store.read_json(path) == ([1] if content == b"[1]" else None)
    assert store.read_json(tmp_path) is None  # a folder


def test_temp_names_are_exactly_an_atomic_writes(tmp_path: Path) -> None:
    assert store.is_temp_name(".cell.json.k2j3h7qa.tmp")
    assert store.is_temp_name(".run.json.a8d7_x0b.tmp")
    for name in ("cell.json.k2j3h7qa.tmp", ".notes.tmp", ".cell.json.short.tmp", "x.tmp"):
        assert not store.is_temp_name(name)
    for name in (".cell.json.k2j3h7qa.tmp", ".notes.tmp"):
        (tmp_path / name).write_text("x")
    (tmp_path / ".dir.abcdefgh.tmp").mkdir()
    assert store.remove_stale_temps(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dir.abcdefgh.tmp", ".notes.tmp"]
    assert store.remove_stale_temps(tmp_path / "missing") == 0


def test_existing_cells_leaves_out_symlinked_folders(tmp_path: Path) -> None:
    assert store.existing_cells(tmp_path) == set()
    (tmp_path / "cells" / "a").mkdir(parents=True)
    (tmp_path / "cells" / "b").symlink_to(tmp_path / "cells" / "a")
    assert store.existing_cells(tmp_path) == {"a"}


def test_opened_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with store.opened_folder(tmp_path) as fd:
        assert fd is not None
        assert os.stat("f", dir_fd=fd).st_size == 1
    with store.opened_folder(tmp_path / "missing") as fd:
        assert fd is None


def test_file_digest(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"hello\n")
    assert store.file_digest(tmp_path / "f") == (
        "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    )
    assert store.file_digest(tmp_path / "missing") is None


def test_a_terminal_receipt_is_also_kept_in_its_attempt(tmp_path: Path) -> None:
    number = store.new_attempt(tmp_path, CELL_ID, None)
    assert number == 1
    assert (store.run_dir(tmp_path, CELL_ID, 1)).is_dir()
    running = receipt("running")
    store.write_receipt(tmp_path, running)
    attempt_copy = store.attempt_dir(tmp_path, CELL_ID, 1) / store.RECEIPT_FILE
    assert not attempt_copy.exists()
    read = store.read_receipt(tmp_path, CELL_ID)
    assert read is not None and read.document == running
    done = receipt("unscored", run_dir=str(store.run_dir(tmp_path, CELL_ID, 1)))
    store.write_receipt(tmp_path, done, durable=False)
    assert json.loads(attempt_copy.read_text()) == done
    read, attempt = store.read_cell_json(tmp_path, CELL_ID)
    assert read is not None and read.document == done and attempt == 1


def test_an_invalid_receipt_is_never_written(tmp_path: Path) -> None:
    with pytest.raises(InvalidDocument):
        store.write_receipt(tmp_path, receipt(state="finished"))
    assert not store.cell_dir(tmp_path, CELL_ID).exists()


def test_a_receipt_read_through_a_symlinked_cell_folder_is_not_trusted(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / store.RECEIPT_FILE).write_text(json.dumps(receipt()))
    (tmp_path / "out" / "cells").mkdir(parents=True)
    store.cell_dir(tmp_path / "out", CELL_ID).symlink_to(elsewhere)
    assert store.read_cell_json(tmp_path / "out", CELL_ID) == (None, None)


def test_new_attempt_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "out" / "cells").mkdir(parents=True)
    store.cell_dir(tmp_path / "out", CELL_ID).symlink_to(target)
    assert store.new_attempt(tmp_path / "out", CELL_ID, None) == 1
    assert list(target.iterdir()) == []  # the link went, its target stays untouched
    assert store.cell_dir(tmp_path / "out", CELL_ID).is_dir()


def test_plan_json_larger_than_the_seat_file_cap_is_still_read(tmp_path: Path) -> None:
    # A plan of 100,000 cells is larger than the cap on seat-writable JSON: the viewer and
    # `brigade report` said "no readable plan.json" for it.
    from brigade.core import jsontext
    from brigade.core.plan import PLAN_SCHEMA
    from brigade.outdir.results import read_plan_document

    pad = "x" * (jsontext.MAX_BYTES + 1024)
    body = json.dumps({"schema": PLAN_SCHEMA, "pad": pad})
    (tmp_path / store.PLAN_FILE).write_text(body)
    (tmp_path / store.SUMMARY_FILE).write_text(body)
    assert read_plan_document(tmp_path)["schema"] == PLAN_SCHEMA
    assert store.read_own_json(tmp_path / store.SUMMARY_FILE) is not None
    # seat-writable files keep the cap
    assert store.read_json(tmp_path / store.SUMMARY_FILE) is None
