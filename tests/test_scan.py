"""outdir/scan.py: every planned cell's receipt through the receipt index, its output
through the output index, what bringing it up to date needs, reusable seat runs."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import BATTERY, Project

from brigade.engine.session import Options, plan_only
from brigade.outdir import caches, store
from brigade.outdir.scan import Scan, read_receipt_indexed, scan


def scanned(project: Project, **extra: object) -> tuple[Scan, dict[str, str]]:
    """The scan of the project's output directory, and cell_id by coordinate."""
    options = Options(
        manifest=project.manifest,
        roster=project.roster,
        out=project.out,
        workspace=project.workspace,
    )
    plan, out = plan_only(options)
    ids = {cell.coordinate: cell.cell_id for cell in plan.cells}
    return scan(out, plan, **extra), ids  # type: ignore[arg-type]


def actions(project: Project, **extra: object) -> dict[str, str]:
    found, ids = scanned(project, **extra)
    return {coordinate: found.actions[cell_id] for coordinate, cell_id in ids.items()}


def edit_receipt(project: Project, coordinate: str, **fields: object) -> None:
    path = project.cell_dir(coordinate) / "cell.json"
    receipt = json.loads(path.read_text())
    receipt.update(fields)
    path.write_text(json.dumps(receipt))


def test_a_new_output_directory_has_nothing_recorded(battery: Project) -> None:
    found, _ = scanned(battery)
    assert set(found.actions.values()) == {"run"}
    assert set(found.recorded.values()) == {None}
    assert (found.reuse, found.kept_faults, found.forgotten_file) == ({}, 0, False)
    assert not battery.out.exists()  # scanning writes nothing


def test_the_resume_table_row_by_row(finished_battery: Project) -> None:
    edit_receipt(finished_battery, "ok:agent:1", state="running")
    edit_receipt(finished_battery, "no:agent:1", state="grader_error")
    edit_receipt(finished_battery, "free:agent:1", cell_id="0" * 64)  # another cell's
    (finished_battery.cell_dir("crash:agent:1") / "cell.json").write_text("{")
    assert actions(finished_battery) == {
        "ok:agent:1": "run",
        "no:agent:1": "regrade",
        "free:agent:1": "run",
        "crash:agent:1": "run",
        "fault:agent:1": "skip",
    }
    retried = actions(finished_battery, retry_transient=True)
    assert retried["fault:agent:1"] == "run"


def test_a_tampered_output_sends_its_cell_to_the_grade_task(finished_battery: Project) -> None:
    receipt = finished_battery.receipt("ok:agent:1")
    final = Path(receipt["run_dir"]) / "final.txt"
    final.write_text("tampered")
    assert actions(finished_battery)["ok:agent:1"] == "regrade"


def test_the_receipt_index_vouches_only_for_unchanged_files(finished_battery: Project) -> None:
    assert finished_battery.doit().returncode == 3  # writes the receipt index
    index_path = finished_battery.out / store.RECEIPT_INDEX
    assert scanned(finished_battery)[0].changed is False
    # an index entry that lies is not believed once the file's stat moved on
    sidecar = json.loads(index_path.read_text())
    cell_id = finished_battery.receipt("ok:agent:1")["cell_id"]
    entry = sidecar["entries"][cell_id]
    entry[caches.VALUE][1] = "rejected"  # what the index claims; cell.json still says accepted
    index_path.write_text(json.dumps(sidecar))
    assert scanned(finished_battery)[0].recorded[cell_id].state == "rejected"  # stat unchanged
    edit_receipt(finished_battery, "ok:agent:1")  # rewritten (other bytes, same fields)
    fresh = scanned(finished_battery)[0]
    assert fresh.recorded[cell_id].state == "accepted"
    assert fresh.changed is True


def test_a_warm_scan_holds_each_digest_once(finished_battery: Project) -> None:
    """A resume keeps every cell's view and index entries in memory: the digests its
    indexes record beside a view (of cell.json's bytes, of final.txt's) are the view's own
    strings, not equal copies (at 100,000 cells each copy costs about 12 MB)."""
    assert finished_battery.doit().returncode == 3  # writes the indexes
    found, ids = scanned(finished_battery)
    assert found.changed is False and found.outputs is not None
    checked = 0
    for cell_id in ids.values():
        view = found.recorded[cell_id]
        assert view is not None and view.digest is not None
        assert found.receipts.entries[cell_id][caches.DIGEST] is view.digest
        if view.output_digest and cell_id in found.outputs.entries:
            assert found.outputs.entries[cell_id][caches.VALUE] is view.output_digest
            checked += 1
    assert checked


def test_read_receipt_indexed_records_untrusted_receipts_as_none(tmp_path: Path) -> None:
    cell_id = "a" * 64
    folder = store.cell_dir(tmp_path, cell_id)
    folder.mkdir(parents=True)
    (folder / "cell.json").write_text('{"schema": "brigade.eval_cell.v1"}')
    index = caches.Sidecar(tmp_path / store.RECEIPT_INDEX, caches.cache_key())
    assert read_receipt_indexed(tmp_path, cell_id, index) is None
    assert index.fresh(cell_id, caches.stat_of(folder / "cell.json")) is None
    assert read_receipt_indexed(tmp_path, cell_id, index) is None
    assert read_receipt_indexed(tmp_path, "b" * 64, index) is None


def test_reuse_needs_a_verified_source_differing_only_in_graders(
    finished_battery: Project,
) -> None:
    previous = finished_battery.cell_dir("ok:agent:1").name
    edited = [dict(case) for case in BATTERY]
    edited[0]["graders"] = [{"type": "exit_status"}]
    finished_battery.write_manifest(edited)
    found, ids = scanned(finished_battery)
    assert found.actions[ids["ok:agent:1"]] == "reuse"
    assert found.reuse == {ids["ok:agent:1"]: previous}
