"""Output directories written by the original `brigade model trial` work with every command.

tests/original_outdir.py builds one by hand (see its docstring); every test here
works on a fresh copy, through the brigade CLI and through doit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import DODO, Project
from original_outdir import (
    FOREIGN_WORKSPACE,
    MANIFEST,
    MANIFEST_DIGEST,
    NAME,
    ROSTER_TOML,
    STARTED,
    OriginalCell,
    build,
    sha,
    snapshot,
)

from brigade.inputs import schemas

PROMPTS = [case["prompt"] for case in MANIFEST["cases"]] + ["answer: hey"]


class Carried:
    """A workspace the original tool ran in, with its roster.toml and output directory."""

    def __init__(self, root: Path) -> None:
        self.project = Project(root)
        self.workspace = self.project.workspace
        (self.workspace / ".brigade").mkdir()
        (self.workspace / ".brigade" / "roster.toml").write_text(ROSTER_TOML)
        self.manifest = self.workspace / "manifest.json"
        self.manifest.write_text(json.dumps(MANIFEST, indent=2))
        self.out = self.workspace / ".brigade" / "evals" / NAME
        self.cells = build(self.out)
        self.original = snapshot(self.out)

    def brigade(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.project.brigade(*args)

    def run(self, front: str) -> subprocess.CompletedProcess[str]:
        """Bring the plan up to date: no roster given (the workspace's roster.toml), the
        default output directory (the original tool's)."""
        # the fake agents report outside any sandbox (a roster.toml cannot turn it off)
        if front == "doit":
            argv = [sys.executable, "-m", "doit", "-f", str(DODO)]
            argv += [f"manifest={self.manifest}", f"workspace={self.workspace}", "sandbox=off"]
            return subprocess.run(
                argv, capture_output=True, text=True, env=self.project.env(), timeout=120
            )
        return self.brigade(
            "run", str(self.manifest), "--workspace", str(self.workspace), "--sandbox", "off"
        )

    def receipt(self, case: str) -> dict[str, Any]:
        return json.loads(self.cell_path(case, "cell.json").read_text())

    def cell_path(self, case: str, *parts: str) -> Path:
        return self.out.joinpath("cells", self.cells[case].cell_id, *parts)

    def changed(self) -> list[str]:
        """The original tool's files that are no longer as it wrote them."""
        now = snapshot(self.out)
        return sorted(name for name, data in self.original.items() if now.get(name) != data)

    def states(self) -> dict[str, tuple[str, int]]:
        return {
            case: (self.receipt(case)["state"], self.receipt(case)["attempt"])
            for case in self.cells
        }

    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())


@pytest.fixture
def carried(tmp_path: Path) -> Carried:
    return Carried(tmp_path)


def original_cell_files(cell: OriginalCell) -> list[str]:
    return sorted(cell.files)


def assert_no_foreign_or_secret_text(text: str, carried: Carried) -> None:
    assert "/nonexistent" not in text
    assert str(carried.project.root) not in text
    for prompt in PROMPTS:
        assert prompt not in text


# --- reading commands ------------------------------------------------------------------


def test_summary_of_the_original_directory(carried: Carried) -> None:
    done = carried.brigade("summary", str(carried.out), "--json")
    assert done.returncode == 3, done.stderr  # a grader_error and a running cell
    summary = json.loads(done.stdout)
    assert schemas.problems(summary, "brigade.eval_summary.v1") == []
    assert summary["counts"] == {
        "accepted": 1,
        "rejected": 1,
        "unscored": 1,
        "execution_error": 1,
        "adapter_error": 0,
        "grader_error": 1,
        "running": 1,
        "missing": 0,
    }
    assert summary["stale_counts"]["rejected"] == 1
    assert summary["measurement_failures"] == 1
    # cell scores of graded cells, from the original's grader results
    assert summary["scores"]["values"] == [1.0, 0.0]
    assert summary["partial_scores"]["values"] == [1.0]
    assert summary["durations"]["values"] == [1.25] * 5
    assert (summary["manifest_digest"], summary["outcome"]) == (MANIFEST_DIGEST, "incomplete")
    text = carried.brigade("summary", str(carried.out))
    assert text.returncode == 3
    assert text.stdout.splitlines()[:2] == [
        "legacy: 6 cells",
        "  accepted 1, rejected 1, unscored 1, execution_error 1, grader_error 1, running 1",
    ]
    assert carried.changed() == []


def test_show_the_original_directory(carried: Carried) -> None:
    done = carried.brigade("show", str(carried.out))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0] == "legacy: 6 cells, outcome incomplete"
    assert "agent" in done.stdout
    assert carried.changed() == []


def test_a_running_cell_of_the_original_tool_shows_no_grader_results(carried: Carried) -> None:
    """Regression: its running marker's `graders` (the specs) showed as a `None  None`
    grader row in show and on its report page."""
    done = carried.brigade("show", str(carried.out), "midway:agent:1")
    assert (done.returncode, done.stderr) == (0, "")
    assert "graders:" not in done.stdout
    assert "None" not in done.stdout
    reported = carried.brigade("report", str(carried.out))
    assert reported.returncode == 3, reported.stderr
    page = (
        carried.out
        / "report"
        / "index_files"
        / "cells"
        / (carried.cells["midway"].cell_id[:2] + ".html")
    )
    assert "<td>None</td>" not in page.read_text()


def test_export_of_the_original_directory(carried: Carried) -> None:
    done = carried.brigade("export", str(carried.out))
    assert (done.returncode, done.stderr) == (0, "")
    export = carried.out / "export"
    assert done.stdout == f"exported 8 file(s) to {export}\n"
    names = sorted(str(p.relative_to(export)) for p in export.rglob("*") if p.is_file())
    ids = sorted(carried.cells[c].cell_id for c in carried.cells if c != "stale")
    # (.brigade-export.json: the marker that the folder is brigade's export)
    assert names == [".brigade-export.json"] + [f"cells/{cell_id}.json" for cell_id in ids] + [
        "plan.json",
        "summary.json",
    ]
    for path in export.rglob("*.json"):
        assert_no_foreign_or_secret_text(path.read_text(), carried)
    for case, cell in carried.cells.items():
        if case == "stale":
            continue
        exported = json.loads((export / "cells" / f"{cell.cell_id}.json").read_text())
        assert schemas.problems(exported, "brigade.eval_cell.v1") == []
        assert exported["prompt_digest"] == sha(cell.prompt)
        assert "prompt" not in exported
    verify = json.loads((export / "cells" / f"{carried.cells['verify'].cell_id}.json").read_text())
    assert verify["run_dir"] == f"cells/{carried.cells['verify'].cell_id}/attempts/attempt-001/run"
    assert verify["output_digest"] == sha("done\n")
    assert verify["graders"][1]["detail"] == (
        "[Errno 2] No such file or directory: '<workspace>/receipts/verify.json'"
    )
    plan = json.loads((export / "plan.json").read_text())
    assert [cell["prompt_digest"] for cell in plan["cells"]] == [
        sha(case["prompt"]) for case in MANIFEST["cases"]
    ]
    assert carried.changed() == []


def test_report_of_the_original_directory(carried: Carried) -> None:
    done = carried.brigade("report", str(carried.out))
    assert done.returncode == 3, done.stderr  # the results' bucket; no leak
    assert "leak" not in done.stderr
    for name in ("junit.xml", "index.html"):
        assert_no_foreign_or_secret_text((carried.out / "report" / name).read_text(), carried)
    document = json.loads(carried.brigade("report", str(carried.out), "--json").stdout)
    cells = {cell["coordinate"]: cell for cell in document["cells"]}
    assert cells["verify:agent:1"]["run_dir"] == (
        f"cells/{carried.cells['verify'].cell_id}/attempts/attempt-001/run"
    )
    assert cells["midway:agent:1"]["state"] == "running"
    assert carried.changed() == []


# --- regrade ------------------------------------------------------------------------------


def test_regrade_of_the_original_directory(carried: Carried) -> None:
    receipts = carried.workspace / "receipts"
    receipts.mkdir()
    (receipts / "verify.json").write_text('{"status": "completed"}')
    done = carried.brigade("regrade", str(carried.out))
    assert done.returncode == 3, done.stderr  # the running cell has not finished
    assert done.stdout.startswith("regraded 4 cell(s) from stored output (1 changed state); ")
    verify = carried.receipt("verify")
    assert schemas.problems(verify, "brigade.eval_cell.v1") == []
    cell = carried.cells["verify"]
    # rewritten in the current format, with what the original's plan.json tells
    assert {key: verify[key] for key in ("state", "score", "output_digest", "run_dir")} == {
        "state": "accepted",
        "score": 1.0,
        "output_digest": sha("done\n"),
        "run_dir": str(carried.cell_path("verify", "attempts", "attempt-001", "run")),
    }
    assert verify["case"] == {"id": "verify", "prompt": "answer: done"}
    assert verify["grader_specs"] == cell.graders
    assert [g["grader_id"] for g in verify["graders"]] == ["exact_output:0", "verify_receipt:1"]
    assert (verify["seat"], verify["manifest_digest"], verify["started_at"]) == (
        "agent",
        MANIFEST_DIGEST,
        STARTED,
    )
    assert verify["acceptance"]["accepted"] is True
    # graded cells are rewritten by the regrade too; nothing else is
    touched = {f"cells/{carried.cells[c].cell_id}" for c in ("done", "wrong", "verify")}
    changed = set(carried.changed()) - {"summary.json"}
    assert {name.rsplit("/attempts", 1)[0].removesuffix("/cell.json") for name in changed} == (
        touched
    )
    assert (
        carried.cell_path("free", "cell.json").read_bytes()
        == carried.original[f"cells/{carried.cells['free'].cell_id}/cell.json"]
    )


@pytest.mark.parametrize("front", ["regrade", "doit", "brigade"])
def test_tampered_output_is_refused(carried: Carried, front: str) -> None:
    final = carried.cell_path("done", "attempts", "attempt-001", "run", "final.txt")
    final.write_text("hacked\n")
    before = snapshot(carried.out)
    done = (
        carried.brigade("regrade", str(carried.out)) if front == "regrade" else carried.run(front)
    )
    assert done.returncode == 2, done.stderr
    assert "done:agent:1: output digest mismatch" in done.stderr
    recorded = sha("hi\n")
    assert f"the receipt records {recorded}" in done.stderr
    assert "Traceback" not in done.stderr
    after = snapshot(carried.out)
    # a run writes its plan and may bring other cells up to date (the running one is
    # a new attempt); nothing else is touched
    moved = {"plan.json", f"cells/{carried.cells['midway'].cell_id}/cell.json"}
    kept = [name for name in before if front == "regrade" or name not in moved]
    assert {name: after[name] for name in kept} == {name: before[name] for name in kept}
    # (the running cell may have been brought up to date before the refusal)
    assert carried.project.launches() <= (0 if front == "regrade" else 1)


# --- bringing it up to date --------------------------------------------------------------


@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_run_carries_on_from_the_original_directory(carried: Carried, front: str) -> None:
    receipts = carried.workspace / "receipts"
    receipts.mkdir()
    (receipts / "verify.json").write_text('{"status": "completed"}')
    done = carried.run(front)
    assert done.returncode == 1, done.stderr  # rejected and a crashed seat; nothing else
    # only the cell that was running launches its seat; grader_error is regraded
    assert carried.project.launches() == 1
    assert carried.states() == {
        "done": ("accepted", 1),
        "wrong": ("rejected", 1),
        "free": ("unscored", 1),
        "crashed": ("execution_error", 1),
        "verify": ("accepted", 1),
        "midway": ("accepted", 3),
        "stale": ("rejected", 1),
    }
    midway = carried.receipt("midway")
    assert midway["started_at"] == STARTED
    assert sorted(p.name for p in carried.cell_path("midway", "attempts").iterdir()) == [
        "attempt-001",
        "attempt-002",
        "attempt-003",
    ]
    # nothing the original tool wrote is rewritten but by the new attempt and the regrade
    rewritten = {f"cells/{carried.cells[c].cell_id}/cell.json" for c in ("verify", "midway")}
    rewritten.add(f"cells/{carried.cells['verify'].cell_id}/attempts/attempt-001/cell.json")
    assert set(carried.changed()) == rewritten | {"plan.json", "summary.json"}
    for case in ("verify", "midway"):
        assert schemas.problems(carried.receipt(case), "brigade.eval_cell.v1") == []
    assert carried.receipt("verify")["seat"]["cli"].startswith("exec:")
    plan = json.loads((carried.out / "plan.json").read_text())
    assert plan["manifest_digest"] == MANIFEST_DIGEST
    assert [cell["cell_id"] for cell in plan["cells"]] == [
        carried.cells[case["id"]].cell_id for case in MANIFEST["cases"]
    ]
    assert plan["stale_cells"] == [
        {
            "coordinate": "wrong:agent:1",
            "previous_cell_id": carried.cells["stale"].cell_id,
            "cell_id": carried.cells["wrong"].cell_id,
        }
    ]
    summary = carried.summary()
    assert summary["stale_counts"]["rejected"] == 1
    assert (summary["exit_code"], summary["measurement_failures"]) == (1, 0)
    for path in (carried.out / "export").rglob("*.json"):
        assert_no_foreign_or_secret_text(path.read_text(), carried)
    # and again: nothing to do
    again = carried.run(front)
    assert again.returncode == 1, again.stderr
    assert carried.project.launches() == 1
    assert set(carried.changed()) == rewritten | {"plan.json", "summary.json"}
    assert FOREIGN_WORKSPACE not in (carried.out / "report" / "index.html").read_text()


def test_original_receipts_are_eval_cell_v1(carried: Carried) -> None:
    """eval_cell.v1 is the original's contract: its receipts (the running marker too) and
    grader results are valid as they are."""
    receipts = sorted(carried.out.glob("cells/*/cell.json")) + sorted(
        carried.out.glob("cells/*/attempts/*/cell.json")
    )
    assert len(receipts) == 13
    for path in receipts:
        receipt = json.loads(path.read_text())
        assert schemas.problems(receipt, "brigade.eval_cell.v1") == [], path
        assert "finished_at" not in receipt and "output_digest" not in receipt
        if receipt["state"] != "running":
            for result in receipt["graders"]:
                assert schemas.problems(result, "brigade.grader_result.v1") == []


# a `brigade run` in a process that counts the strings the legacy relocation rewrote
_COUNTING_RUN = """
import sys
from brigade.front import cli
from brigade.outdir import legacy

calls = []
plain = legacy.relocated
legacy.relocated = lambda value, moves: calls.append(1) or plain(value, moves)
try:
    code = cli.main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as handle:
        handle.write(str(len(calls)))
sys.exit(code)
"""


def test_relocation_happens_once_and_is_remembered(carried: Carried, tmp_path: Path) -> None:
    """The original tool's receipts name a run folder on its own machine: the first run
    views them here (relocated) and writes export and report; every later run, and a
    run after the directory moved again, relocates nothing and rewrites nothing."""
    counted = tmp_path / "relocations"

    def run(out: Path) -> int:
        argv = [sys.executable, "-c", _COUNTING_RUN, str(counted), "run", str(carried.manifest)]
        argv += ["--out", str(out), "--workspace", str(carried.workspace), "--sandbox", "off"]
        done = subprocess.run(
            argv, capture_output=True, text=True, env=carried.project.env(), timeout=120
        )
        assert done.returncode == 1, done.stderr  # rejected and a crashed seat
        return int(counted.read_text())

    def results(out: Path) -> dict[str, bytes]:  # what the run wrote, less its caches
        return {name: data for name, data in snapshot(out).items() if name[0] != "."}

    assert run(carried.out) > 0  # first sight: viewed here, projected, rendered
    written = results(carried.out)
    assert run(carried.out) == 0
    assert results(carried.out) == written
    moved = tmp_path / "elsewhere" / "evals"
    moved.parent.mkdir()
    carried.out.rename(moved)
    assert run(moved) == 0
    assert results(moved) == written
    for path in (moved / "export").rglob("*.json"):
        assert_no_foreign_or_secret_text(path.read_text(), carried)
