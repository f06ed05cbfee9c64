"""Reliability: tampered outputs, receipts and plans are refused or never trusted.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import shutil

from conftest import Project
from reliability import ANSWER_ID, GRADERS, launched, one_line

from brigade.outdir import store

# ---------------------------------------------------------------------------------------
# 5: tampering
# ---------------------------------------------------------------------------------------


def test_edited_final_txt_is_refused_by_regrade_and_by_doit(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "good", "prompt": ANSWER_ID, "graders": GRADERS["accept"]},
            {"id": "broken", "prompt": ANSWER_ID, "graders": GRADERS["grader_error"]},
        ]
    )
    assert project.doit().returncode == 3
    receipts = {p: p.read_bytes() for p in project.out.glob("cells/**/cell.json")}
    summary = (project.out / "summary.json").read_bytes()
    for coordinate in ("good:agent:1", "broken:agent:1"):
        receipt = project.receipt(coordinate)
        final = store.run_dir(project.out, receipt["cell_id"], receipt["attempt"]) / "final.txt"
        original = final.read_bytes()
        final.write_text("forged\n")
        regraded = project.brigade("regrade", str(project.out))
        assert regraded.returncode == 2
        assert "output digest mismatch" in one_line(regraded.stderr)
        resumed = project.doit()
        assert resumed.returncode == 2
        assert any("output digest mismatch" in line for line in resumed.stderr.splitlines())
        assert "Traceback" not in resumed.stderr
        assert {p: p.read_bytes() for p in project.out.glob("cells/**/cell.json")} == receipts
        final.write_bytes(original)
    assert (project.out / "summary.json").read_bytes() == summary
    assert len(launched(project)) == 2


def test_receipt_naming_another_cell_is_never_trusted(project: Project) -> None:
    project.write_manifest(
        [{"id": c, "prompt": ANSWER_ID, "graders": GRADERS["accept"]} for c in ("a", "b")]
    )
    assert project.doit().returncode == 0
    a_receipt = project.cell_dir("a:agent:1") / "cell.json"
    original = a_receipt.read_bytes()
    b_dir = project.cell_dir("b:agent:1")
    shutil.copyfile(a_receipt, b_dir / "cell.json")
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert [coord for coord, _ in launched(project)] == ["a:agent:1", "b:agent:1", "b:agent:1"]
    receipt = project.receipt("b:agent:1")
    assert (receipt["cell_id"], receipt["state"], receipt["attempt"]) == (
        b_dir.name,
        "accepted",
        2,
    )
    assert a_receipt.read_bytes() == original
    assert project.summary()["counts"]["accepted"] == 2


def test_plan_json_of_another_manifest_makes_no_bogus_stale_cells(project: Project) -> None:
    mine = [{"id": c, "prompt": f"answer: {c}"} for c in ("a", "b", "c")]
    theirs = [{"id": "a", "prompt": "answer: other"}, {"id": "d", "prompt": "answer: d"}]
    other = project.root / "other-out"
    project.write_manifest(theirs)
    project.out, first = other, project.out
    assert project.doit().returncode == 0
    project.out = first
    project.write_manifest(mine)
    assert project.doit().returncode == 0
    shutil.copyfile(other / "plan.json", project.out / "plan.json")
    for _ in range(2):
        done = project.doit()
        assert done.returncode == 0, done.stderr
        assert "stale" not in done.stderr
        plan = project.plan()
        assert [c["coordinate"] for c in plan["cells"]] == ["a:agent:1", "b:agent:1", "c:agent:1"]
        assert plan["stale_cells"] == []
        summary = project.summary()
        assert summary["counts"]["unscored"] == 3 and summary["total_cells"] == 3
        assert set(summary["stale_counts"].values()) == {0}
    assert len(launched(project)) == 5
