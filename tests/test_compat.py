"""Carrying over what users of the original `brigade model trial` have: its summary readers."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FAKE_CLI, REPO, Project

from brigade.inputs.manifest import load_manifest

STATS_KEYS = ["values", "count", "mean", "median", "min", "max", "stdev"]


def seed_exit_bucket(summary: dict[str, Any]) -> int:
    """The exit bucket as the original tool's readers compute it (seeds/outcome-taxonomy.md):
    from `measurement_failures` and `counts` alone."""
    if int(summary.get("measurement_failures", 0) or 0) > 0:
        return 3
    counts = summary["counts"]
    if counts.get("rejected", 0) > 0 or counts.get("execution_error", 0) > 0:
        return 1
    return 0


def assert_original_shapes(summary: dict[str, Any]) -> None:
    """The original eval_summary.v1 keys keep their shapes."""
    assert summary["schema"] == "brigade.eval_summary.v1"
    for key in ("counts", "stale_counts"):
        assert all(type(n) is int for n in summary[key].values()), key
    assert type(summary["measurement_failures"]) is int
    for key in ("scores", "partial_scores", "durations"):
        assert list(summary[key]) == STATS_KEYS, key
        assert summary[key]["count"] == len(summary[key]["values"])


BATTERIES: dict[str, tuple[list[dict[str, Any]], int]] = {
    "clean": (
        [
            {
                "id": "ok",
                "prompt": "answer: hi",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {"id": "free", "prompt": "answer: anything", "graders": []},
        ],
        0,
    ),
    "rejected": (
        [
            {
                "id": "ok",
                "prompt": "answer: hi",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {
                "id": "no",
                "prompt": "answer: ho",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {"id": "crash", "prompt": "exit: 4", "graders": []},
        ],
        1,
    ),
    "apparatus": (
        [
            {
                "id": "no",
                "prompt": "answer: ho",
                "graders": [{"type": "exact_output", "expected": "hi"}],
            },
            {"id": "drop", "prompt": "tempfail: connection reset by peer", "graders": []},
            {
                "id": "broken",
                "prompt": "answer: x",
                "graders": [{"type": "regex_output", "pattern": "("}],
            },
        ],
        3,
    ),
    "timeout": (
        [
            {"id": "ok", "prompt": "answer: hi", "graders": []},
            {"id": "slow", "prompt": "sleep: 30", "graders": []},
        ],
        3,
    ),
}


@pytest.mark.parametrize("front", ["doit", "brigade"])
@pytest.mark.parametrize("battery", list(BATTERIES))
def test_seed_readers_get_the_process_exit_code(project: Project, front: str, battery: str) -> None:
    cases, expected = BATTERIES[battery]
    project.write_roster({"agent": {"cli": FAKE_CLI, "timeout_seconds": 1}})
    project.write_manifest(cases)
    done = project.doit() if front == "doit" else project.run()
    assert done.returncode == expected, done.stderr
    summary = project.summary()
    assert_original_shapes(summary)
    assert seed_exit_bucket(summary) == done.returncode
    assert summary["exit_code"] == done.returncode


# --- manifest_digest ------------------------------------------------------------

DATA = REPO / "tests" / "data" / "compat"
# what the original tool records as manifest_digest for the seed manifests
ORIGINAL_DIGESTS = {
    "prompt-injection": "0a4d404b284aa74914d69bd2b16706bea3790bade1b0d0652cc19b98e44a4200",
    "failed-verification": "f40e037325eebd4917469706f09b7c51d4e5fab143157d39f70e064c633e47e4",
    "unsafe-command": "819f710fdd906485d92c7ca14c2b17276d688eb2ef93a90cc647ce77dfe7dad2",
    "untrusted-evidence": "25e232b3802f2674f4fe145129dae23b077dced2d64edb55bf91aeebdcd81a39",
}


def seed_manifest_digest(doc: Any) -> str:
    """The seed's rule: sha256 of the canonical JSON (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("name", list(ORIGINAL_DIGESTS))
def test_manifest_digest_is_the_original_value(tmp_path: Path, name: str) -> None:
    source = DATA / name / "manifest.json"
    doc = json.loads(source.read_text())
    assert seed_manifest_digest(doc) == ORIGINAL_DIGESTS[name]
    assert load_manifest(source).digest == ORIGINAL_DIGESTS[name]
    # the same manifest spelled in YAML, beside the same prompt files: one digest
    shutil.copytree(DATA / name, tmp_path / name)
    spelled = tmp_path / name / "manifest.yaml"
    spelled.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert load_manifest(spelled).digest == ORIGINAL_DIGESTS[name]


def test_manifest_digest_in_plan_receipts_and_summary(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: hi"}], trials=2)
    expected = seed_manifest_digest(yaml.safe_load(project.manifest.read_text()))
    planned = project.brigade("plan", str(project.manifest), "--roster", str(project.roster))
    assert json.loads(planned.stdout)["manifest_digest"] == expected
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.plan()["manifest_digest"] == expected
    assert [r["manifest_digest"] for r in project.receipts().values()] == [expected, expected]
    assert project.summary()["manifest_digest"] == expected


def test_prompt_file_enters_the_manifest_digest_by_name(project: Project) -> None:
    """ "As loaded" is the document as written: a prompt_file is its name, not its text
    (as the original tool hashes it); the text enters each cell's id instead."""
    (project.root / "cases").mkdir()
    prompt = project.root / "cases" / "a.md"
    prompt.write_text("answer: hi\n")
    project.write_manifest([{"id": "a", "prompt_file": "cases/a.md"}])
    assert project.run().returncode == 0
    first_digest, [first_id] = project.plan()["manifest_digest"], cell_ids(project)
    # new text in the prompt file: the same manifest digest, a new cell
    prompt.write_text("answer: ho\n")
    assert project.run().returncode == 0
    assert project.plan()["manifest_digest"] == first_digest
    [second_id] = cell_ids(project)
    assert second_id != first_id
    assert project.launches() == 2
    # the same text inline: another manifest digest, the same cell (nothing runs)
    project.write_manifest([{"id": "a", "prompt": "answer: ho\n"}])
    assert project.run().returncode == 0
    assert project.plan()["manifest_digest"] != first_digest
    assert cell_ids(project) == [second_id]
    assert project.launches() == 2


def cell_ids(project: Project) -> list[str]:
    return [cell["cell_id"] for cell in project.plan()["cells"]]
