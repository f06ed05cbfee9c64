"""Carrying over what users of the original `brigade model trial` have: its summary readers."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DODO, FAKE_CLI, REPO, Project

from brigade.inputs.manifest import load_manifest
from brigade.inputs.roster import load_roster

STATS_KEYS = ["values", "count", "mean", "median", "min", "max", "stdev"]


def seed_exit_bucket(summary: dict[str, Any]) -> int:
    """The exit bucket as the original tool's readers compute it
    (docs/contracts/outcome-taxonomy.md): from `measurement_failures` and `counts` alone."""
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


# --- the original roster.toml -----------------------------------------------------

CARRIED = REPO / "tests" / "data" / "carried"
CARRIED_MANIFEST = {
    "schema": "brigade.eval_manifest.v1",
    "name": "carried-over",
    "trials": 2,
    "seats": ["worker", "reviewer", "acp", "spare"],
    "execution": {"mode": "read-only"},
    "graders": [{"type": "exit_status"}],
    "cases": [
        {
            "id": "hello",
            "prompt": "Say hello",
            "graders": [{"type": "exact_output", "expected": "hello"}],
        },
        {"id": "review", "prompt_file": "cases/review.prompt.md", "trials": 1},
    ],
}
# the original tool's plan.json of CARRIED_MANIFEST with tests/data/carried/roster.toml
ORIGINAL_PLAN = {
    "manifest_digest": "48db538d48f40cdf59a4c488bf7da9bdc5c738540bc6198150f41167ad661caf",
    "cells": {
        "hello:worker:1": "3b97a2d7c1aece469559013d9c89f038f75725af5c96505f555b176622238081",
        "hello:worker:2": "197852f71e3d4f74687ef67613f575e74248d932284f25730ddff1462d3de1a0",
        "hello:reviewer:1": "b1c6b528dbe843476e77c748cecb867d9b6ddd8a39e884b8b07673a6aa875878",
        "hello:reviewer:2": "6c850ca8ca0b466e38dc0c793086e5adaca8b1a44baf8f2f653784149cdf7be3",
        "hello:acp:1": "c2c2ac9d349e0cdd1d06ea13e6cb0935b0681f7883c9873ab6f82afa276f8a19",
        "hello:acp:2": "1b8e5b4a5ce31f90dbd08e736dc47a0ce0166019d5475a33d4c80ee9ded7526b",
        "hello:spare:1": "a20556d2fd8383b32c265630ccfd8dfd402445662f213e96d121dec39859238d",
        "hello:spare:2": "5cb3bd2c195e9ad31761307cf1055c46f5d48271d484065f880371e690994a94",
        "review:worker:1": "4f3dbca8c2c13c9fb49bd4041069c3bc16ae1b2fd2b35db918c8be0c234b2094",
        "review:reviewer:1": "cc9a8a2c4f52e40e07db563a1e5274f505bf064a51ff36d4e90502f3f6227e2b",
        "review:acp:1": "e011aa3de45f5193a49f0b2cd447f34957460f04bce4bdbe5b22521412b2fc3a",
        "review:spare:1": "24fd2ef74bfb4e5fb58cc450b473163eba033a840bbf796c90ffc034e3e1722d",
    },
}


def carried_workspace(root: Path, roster_text: str | None = None) -> Path:
    """A workspace with the original tool's .brigade/roster.toml and CARRIED_MANIFEST."""
    workspace = root / "workspace"
    (workspace / ".brigade").mkdir(parents=True)
    roster = workspace / ".brigade" / "roster.toml"
    roster.write_text(roster_text or (CARRIED / "roster.toml").read_text())
    (workspace / "cases").mkdir()
    (workspace / "cases" / "review.prompt.md").write_bytes(
        b"Review the diff.\r\nReply with ok.\r\n"
    )
    (workspace / "manifest.json").write_text(json.dumps(CARRIED_MANIFEST, indent=2))
    return workspace


def plan_of(project: Project, *args: str) -> dict[str, Any]:
    done = project.brigade("plan", "manifest.json", *args)
    assert (done.returncode, done.stderr) == (0, "")
    return json.loads(done.stdout)


def original_view(plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "manifest_digest": plan["manifest_digest"],
        "cells": {cell["coordinate"]: cell["cell_id"] for cell in plan["cells"]},
    }


def test_roster_toml_gives_the_original_cell_ids(tmp_path: Path) -> None:
    project = Project(tmp_path)
    carried_workspace(tmp_path)
    assert original_view(plan_of(project, "--roster", ".brigade/roster.toml")) == ORIGINAL_PLAN
    # no roster given and no roster.yaml beside the manifest: the workspace's roster.toml
    assert original_view(plan_of(project)) == ORIGINAL_PLAN
    # as the original derives each seat: fields stripped, transport direct by default,
    # env as written, codex_transport on the codex seat only
    seats = {cell["seat"]["seat"]: cell["seat"] for cell in plan_of(project)["cells"]}
    assert seats["worker"] == {
        "seat": "worker",
        "cli": "codex",
        "model": "gpt-5-codex",
        "reasoning": "high",
        "transport": "direct",
        "transport_version": None,
        "env": None,
        "codex_transport": "app-server",
    }
    assert (seats["reviewer"]["cli"], seats["reviewer"]["env"]) == (
        "claude",
        {"REVIEW_MODE": "strict"},
    )
    assert (seats["acp"]["transport"], seats["acp"]["transport_version"]) == ("acpx", "0.12.0")


def test_roster_toml_seats_and_timeouts(tmp_path: Path) -> None:
    roster = load_roster(CARRIED / "roster.toml")
    # every agent with a cli brigade has an adapter for (the orchestrator too: a seat only
    # when a manifest names it); the others are refused only when a manifest names them
    assert list(roster.seats) == ["boss", "worker", "reviewer", "acp", "spare"]
    assert sorted(roster.unusable) == ["oracle", "search"]
    assert roster.seats["reviewer"].timeout_seconds == 900  # its own
    assert roster.seats["worker"].timeout_seconds == 1200  # [limits] timeout_seconds


@pytest.mark.parametrize(
    "seat, message",
    [
        (
            "oracle",
            "manifest.json: seats[0]: .brigade/roster.toml: agents.oracle.cli: unknown cli "
            "'grok'; use one of aider, claude, codex, copilot, cursor, gemini, goose, opencode, "
            "qwen, ollama:<model> or exec:<command line>",
        ),
        (
            "search",
            "manifest.json: seats[0]: .brigade/roster.toml: agents.search: agent 'search' has no "
            "cli (an endpoint seat); brigade runs agent CLIs only",
        ),
    ],
)
def test_roster_toml_agent_brigade_cannot_run(tmp_path: Path, seat: str, message: str) -> None:
    project = Project(tmp_path)
    workspace = carried_workspace(tmp_path)
    (workspace / "manifest.json").write_text(json.dumps({**CARRIED_MANIFEST, "seats": [seat]}))
    done = project.brigade("plan", "manifest.json", "--roster", ".brigade/roster.toml")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"brigade: {message}\n")


def test_roster_toml_orchestrator_is_a_seat_when_named(tmp_path: Path) -> None:
    project = Project(tmp_path)
    workspace = carried_workspace(tmp_path)
    (workspace / "manifest.json").write_text(json.dumps({**CARRIED_MANIFEST, "seats": ["boss"]}))
    cells = plan_of(project)["cells"]
    assert {cell["seat"]["seat"] for cell in cells} == {"boss"}
    assert cells[0]["seat"]["model"] == "claude-opus-4-1"


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            'orchestrator = "boss"\n[agents.boss\n',
            "line 2 column 13: Expected ']' at the end of a table declaration",
        ),
        ('orchestrator = "boss"\n', "agents: is required but missing"),
        (
            "[agents.worker]\ncli = 'codex'\nmodel = 5\n",
            "agents.worker.model: must be a non-empty string",
        ),
        ("[agents.worker]\ncli = ''\n", "agents.worker.cli: must be a non-empty string"),
        (
            "[agents.worker]\ncli = 'codex'\ntransport = 'ssh'\n",
            'agents.worker.transport: must be one of "direct", "acpx"; got "ssh"',
        ),
        (
            "[agents.worker]\ncli = 'codex'\n[limits]\ntimeout_seconds = 0\n",
            "limits.timeout_seconds: must be greater than 0, got 0",
        ),
        (
            "[agents.worker]\ncli = 'codex'\nwhen = 1979-05-27\n",
            "agents.worker.when: a date value is not allowed",
        ),
        (
            "[agents.worker]\ncli = 'codex'\nenv = {A = 1}\n",
            "agents.worker.env.A: expected a string, got an integer",
        ),
    ],
)
def test_roster_toml_problems_are_one_line(tmp_path: Path, text: str, problem: str) -> None:
    project = Project(tmp_path)
    carried_workspace(tmp_path, roster_text=text)
    done = project.brigade("plan", "manifest.json", "--roster", ".brigade/roster.toml")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"brigade: .brigade/roster.toml: {problem}\n"


FAKE_ROSTER_TOML = f"""
orchestrator = "lead"

[agents.lead]
cli = "claude"
role = "orchestrator"

[agents.agent]
cli = "{FAKE_CLI}"
role = "worker"
model = "fake-1"
fallback = []
caveats = ["a fake"]

[agents.agent.stats]
speed = "fast"

[limits]
max_workers = 1
timeout_seconds = 60
"""


@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_runs_with_the_workspace_roster_toml(project: Project, front: str) -> None:
    (project.workspace / ".brigade").mkdir()
    (project.workspace / ".brigade" / "roster.toml").write_text(FAKE_ROSTER_TOML)
    project.roster.unlink()  # no roster.yaml beside the manifest
    project.write_manifest([{"id": "a", "prompt": "answer: hi", "graders": []}])
    if front == "doit":
        variables = [v for v in project.variables() if not v.startswith("roster=")]
        done = subprocess.run(
            [sys.executable, "-m", "doit", "-f", str(DODO), *variables],
            capture_output=True,
            text=True,
            env=project.env(),
            timeout=120,
        )
    else:
        args = ["run", str(project.manifest), "--out", str(project.out)]
        done = project.brigade(*args, "--workspace", str(project.workspace))
    assert done.returncode == 0, done.stderr
    assert project.states() == {"a:agent:1": "unscored"}
    [cell] = project.plan()["cells"]
    assert cell["seat"]["model"] == "fake-1"
    assert project.plan()["context"]["roster"] == str(
        project.workspace / ".brigade" / "roster.toml"
    )


def test_no_roster_anywhere_names_every_place(project: Project) -> None:
    project.roster.unlink()
    project.write_manifest([{"id": "a", "prompt": "answer: hi"}])
    done = project.brigade("plan", str(project.manifest))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"brigade: {project.manifest}: no roster found (there is no roster.yaml beside it and "
        f"no .brigade/roster.toml in the workspace {project.workspace}); pass --roster "
        "(doit: roster=PATH)\n"
    )
