"""Reliability: hostile paths (prompt files, grader paths, symlinked output and cell folders).

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import Project
from reliability import ANSWER_ID, GRADERS, launched, load_json, one_line, tree_snapshot

from brigade.engine.session import load_inputs
from brigade.errors import BrigadeError
from brigade.outdir import store

# ---------------------------------------------------------------------------------------
# 4: hostile paths
# ---------------------------------------------------------------------------------------


def suite_with_outside(project: Project) -> Path:
    """Put the manifest in root/suite/ and create root/outside/ with files worth reaching."""
    (project.root / "suite").mkdir()
    project.manifest = project.root / "suite" / "manifest.yaml"
    outside = project.root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (outside / "receipt.json").write_text('{"status": "completed"}\n')
    return outside


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "symlinked folder"])
def test_prompt_file_escaping_the_manifest_folder_is_refused(project: Project, how: str) -> None:
    outside = suite_with_outside(project)
    suite = project.manifest.parent
    (suite / "link.txt").symlink_to(outside / "secret.txt")
    (suite / "linked").symlink_to(outside)
    relative = {
        "dotdot": "../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "symlink": "link.txt",
        "symlinked folder": "linked/secret.txt",
    }[how]
    project.write_manifest([{"id": "a", "prompt_file": relative}])
    with pytest.raises(BrigadeError, match="outside the manifest's folder"):
        load_inputs(project.manifest, project.roster)
    checked = project.brigade("validate", str(project.manifest), "--roster", str(project.roster))
    assert checked.returncode == 2
    assert "outside the manifest's folder" in one_line(checked.stderr)
    done = project.doit()
    assert done.returncode == 2
    assert "outside the manifest's folder" in one_line(done.stderr)
    assert not project.out.exists()


def test_grader_paths_escaping_their_roots_are_grader_errors(project: Project) -> None:
    outside = suite_with_outside(project)
    suite = project.manifest.parent
    (suite / "inside.txt").write_text("secret\n")
    (suite / "link.txt").symlink_to(outside / "secret.txt")
    (suite / "linked").symlink_to(outside)
    ws = project.workspace
    (ws / "present.txt").write_text("here\n")
    (ws / "receipt.json").write_text('{"status": "completed"}\n')
    (ws / "ws-link").symlink_to(outside / "secret.txt")
    (ws / "ws-receipt").symlink_to(outside / "receipt.json")
    (ws / "ws-linked").symlink_to(outside)
    escaping = {
        "expected_file": [
            "../outside/secret.txt",
            str(outside / "secret.txt"),
            "link.txt",
            "linked/secret.txt",
        ],
        "file_exists": [
            "../outside/secret.txt",
            str(outside / "secret.txt"),
            "ws-link",
            "ws-linked/secret.txt",
        ],
        "verify_receipt": [
            "../outside/receipt.json",
            str(outside / "receipt.json"),
            "ws-receipt",
            "ws-linked/receipt.json",
        ],
    }
    inside = {
        "expected_file": "inside.txt",
        "file_exists": "present.txt",
        "verify_receipt": "receipt.json",
    }
    cases = []
    for kind, paths in escaping.items():
        for index, path in enumerate(paths):
            grader = {"type": kind, "path": path}
            cases.append({"id": f"{kind}-{index}", "prompt": "answer: secret", "graders": [grader]})
        grader = {"type": kind, "path": inside[kind]}
        cases.append({"id": f"{kind}-inside", "prompt": "answer: secret", "graders": [grader]})
    project.write_manifest(cases)
    before = tree_snapshot(outside)
    done = project.doit()
    assert done.returncode == 3, done.stderr
    for coord, receipt in project.receipts().items():
        if coord.split(":")[0].endswith("-inside"):
            assert receipt["state"] == "accepted", (coord, receipt["graders"])
            continue
        assert receipt["state"] == "grader_error", coord
        detail = receipt["graders"][0]["detail"]
        assert "outside its folder" in detail or "must be a relative path" in detail, detail
    assert tree_snapshot(outside) == before


def test_output_dir_that_is_a_symlink_is_used_in_place(project: Project) -> None:
    real = project.root / "real-out"
    real.mkdir()
    project.out = project.root / "out-link"
    project.out.symlink_to(real)
    project.write_manifest([{"id": "a", "prompt": ANSWER_ID}, {"id": "b", "prompt": "answer: b"}])
    entries = set(os.listdir(project.root))
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert (real / "plan.json").exists() and (real / "summary.json").exists()
    assert set(os.listdir(project.root)) == entries | {"launches.log"}
    assert project.out.is_symlink()
    assert project.run().returncode == 0
    assert project.doit().returncode == 0
    assert len(launched(project)) == 2


@pytest.mark.parametrize("planted", ["running receipt", "finished receipt", "empty folder"])
@pytest.mark.parametrize("link", ["cell folder", "attempts folder"])
def test_symlinked_cell_folders_are_never_written_through(
    project: Project, planted: str, link: str
) -> None:
    project.write_manifest(
        [{"id": c, "prompt": ANSWER_ID, "graders": GRADERS["accept"]} for c in ("a", "b")]
    )
    assert project.doit().returncode == 0
    cell = project.cell_dir("a:agent:1")
    outside = project.root / "outside"
    target = outside / "planted"
    shutil.copytree(cell if link == "cell folder" else cell / "attempts", target)
    if planted == "empty folder":
        shutil.rmtree(target)
        target.mkdir()
    elif link == "cell folder":
        receipt = load_json(target / "cell.json")
        if planted == "running receipt":
            receipt["state"] = "running"
        (target / "cell.json").write_text(json.dumps(receipt))
    if link == "cell folder":
        shutil.rmtree(cell)
        cell.symlink_to(target)
    else:
        receipt = load_json(cell / "cell.json")
        if planted != "finished receipt":
            (cell / "cell.json").write_text(json.dumps({**receipt, "state": "running"}))
        shutil.rmtree(cell / "attempts")
        (cell / "attempts").symlink_to(target)
    before = tree_snapshot(outside)
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert tree_snapshot(outside) == before
    assert project.summary()["counts"]["accepted"] == 2
    receipt = project.receipt("a:agent:1")
    if link == "attempts folder" and planted == "finished receipt":
        assert len(launched(project)) == 2  # a finished receipt stands; nothing was written
        return
    assert len(launched(project)) == 3  # the linked cell ran again, in a real folder
    assert not cell.is_symlink() and not (cell / "attempts").is_symlink()
    final = store.run_dir(project.out, receipt["cell_id"], receipt["attempt"]) / "final.txt"
    assert final.read_text() == f"{receipt['cell_id']}\n"
