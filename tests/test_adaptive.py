"""Adaptive trials in a run: `trials: {min, max, until}` plans the first `min` trials, adds one
round at a time where the rule is not met, and a later run with a larger `max` goes on.

The pure tests feed core/sequential.planned and the manifest reader plain values; the
end-to-end tests run real batteries through the `brigade` CLI and plain `doit` with
`tests/agents/rated_agent.py` (a seat whose pass rate per case its roster sets, each trial's
outcome fixed by its case and trial) and count the agent's launches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, brigade_command

from brigade.core.sequential import Rule, planned
from brigade.errors import InputError
from brigade.inputs import schemas
from brigade.inputs.manifest import manifest_from_document

RATED = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'rated_agent.py'}"
GRADERS = [{"type": "exact_output", "expected": "pass"}]


# -- pure ----------------------------------------------------------------------------------------


def test_planned_starts_with_min_and_keeps_recorded_trials() -> None:
    rule = Rule(min=2, max=6, ci_width=0.6)
    rules = {"new": rule, "easy": rule, "cut": rule}
    results = {
        "easy": {"s": ["accepted"] * 5},  # narrow enough: stops at 5
        "cut": {"s": ["accepted"]},  # trial 2 unfinished, trial 3 recorded: kept
    }
    counts, stops = planned(rules, ["s"], results, {("easy", "s"): 5, ("cut", "s"): 3})
    assert counts == {("new", "s"): 2, ("easy", "s"): 5, ("cut", "s"): 3}
    assert {stop.case: stop.reason for stop in stops} == {
        "new": "min",
        "easy": "ci_width",
        "cut": "min",
    }


def test_a_lower_max_never_plans_past_it() -> None:
    rule = Rule(min=1, max=3, ci_width=0.1)
    counts, _ = planned({"c": rule}, ["s"], {"c": {"s": ["failed"] * 3}}, {("c", "s"): 9})
    assert counts == {("c", "s"): 3}


def manifest_doc(trials: Any, case: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "schema": "brigade.eval_manifest.v1",
        "name": "m",
        "seats": ["a", "b"],
        "trials": trials,
        "cases": [{"id": "c", "prompt": "p", **(case or {})}, {"id": "d", "prompt": "q"}],
    }


def test_manifest_rules_on_the_manifest_and_a_case() -> None:
    doc = manifest_doc(
        {"min": 2, "max": 20, "until": {"decided": ["a", "b"]}},
        {"trials": {"min": 3, "max": 9, "until": {"ci_width": 0.2, "confidence": 0.9}}},
    )
    manifest = manifest_from_document(doc, Path("/x/m.yaml"), "m.yaml")
    first, second = manifest.cases
    assert first.rule == Rule(min=3, max=9, ci_width=0.2, confidence=0.9)
    assert first.trials == 3
    assert second.rule == Rule(min=2, max=20, decided=("a", "b"))
    assert second.trials == 2


@pytest.mark.parametrize(
    ("trials", "message"),
    [
        (
            {"min": 5, "max": 2, "until": {"ci_width": 0.1}},
            "m.yaml: trials.min: 5 is more than max 2",
        ),
        (
            {"min": 1, "max": 2, "until": {"decided": ["a", "zz"]}},
            "m.yaml: trials.until.decided[1]: 'zz' is not one of the manifest's seats (a, b)",
        ),
        (
            {"min": 1, "max": 2, "until": {}},
            "m.yaml: trials.until: needs one rule: ci_width (a width between 0 and 1) or "
            "decided (two seats)",
        ),
        ({"min": 1, "max": 2, "until": {"ci_width": 2}}, "m.yaml: trials.until.ci_width: "),
        ("3", "m.yaml: trials: expected an integer or a mapping, got a string"),
    ],
)
def test_bad_rules_are_one_line_each(trials: Any, message: str) -> None:
    with pytest.raises(InputError) as raised:
        manifest_from_document(manifest_doc(trials), Path("/x/m.yaml"), "m.yaml")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


# -- end to end ----------------------------------------------------------------------------------


def write_battery(
    folder: Path,
    trials: dict[str, Any],
    rates: dict[str, dict[str, Any]],
    cases: list[str],
) -> Path:
    """A manifest and roster of rated seats (seat -> case -> rate) in `folder`; the manifest."""
    folder.mkdir(exist_ok=True)
    manifest = {
        "schema": "brigade.eval_manifest.v1",
        "name": "adaptive",
        "trials": trials,
        "seats": list(rates),
        "cases": [{"id": case, "prompt": f"case: {case}", "graders": GRADERS} for case in cases],
    }
    log = folder / "launches.log"
    roster = {
        "schema": "brigade.roster.v1",
        "sandbox": "off",
        "seats": {
            seat: {
                "cli": RATED,
                "acknowledge_read_only": True,
                "env": {"RATES": json.dumps(seat_rates), "FAKE_AGENT_LOG": str(log)},
            }
            for seat, seat_rates in rates.items()
        },
    }
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (folder / "roster.yaml").write_text(yaml.safe_dump(roster, sort_keys=False))
    return folder / "manifest.yaml"


def launches(folder: Path) -> list[str]:
    """The coordinates the agents were launched for, in order."""
    log = folder / "launches.log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def run(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *brigade_command(), "run", str(folder / "manifest.yaml"), "--out",
            str(folder / "out"), "--workspace", str(folder), "-q", "-n", "2", *extra,
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def summary(folder: Path) -> dict[str, Any]:
    doc = json.loads((folder / "out" / "summary.json").read_text())
    schemas.validator("brigade.eval_summary.v1").validate(doc)
    return doc


def stops(doc: dict[str, Any]) -> dict[tuple[str, str], tuple[int, str]]:
    (entry,) = doc["adaptive"]
    return {(s["case"], s["seat"]): (s["trials"], s["reason"]) for s in entry["stops"]}


def set_max(folder: Path, value: int) -> None:
    path = folder / "manifest.yaml"
    manifest = yaml.safe_load(path.read_text())
    manifest["trials"]["max"] = value
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))


def test_easy_cases_stop_early_close_ones_go_on_and_a_larger_max_continues(
    tmp_path: Path,
) -> None:
    rates = {"agent": {"easy": 1, "hopeless": 0, "close": 0.5}}
    write_battery(
        tmp_path, {"min": 2, "max": 8, "until": {"ci_width": 0.6}}, rates, list(rates["agent"])
    )
    done = run(tmp_path)
    assert done.returncode == 1, done.stderr  # (the hopeless case's trials are rejected)
    assert "Traceback" not in done.stderr
    doc = summary(tmp_path)
    # 5 of 5 (or 0 of 5) make the always-valid interval 0.585 wide: at most 0.6
    assert stops(doc) == {
        ("easy", "agent"): (5, "ci_width"),
        ("hopeless", "agent"): (5, "ci_width"),
        ("close", "agent"): (8, "max"),
    }
    assert doc["adaptive"][0]["rule"] == {"min": 2, "max": 8, "until": {"ci_width": 0.6}}
    ran = launches(tmp_path)
    assert sorted(ran) == sorted(
        [f"easy:agent:{t}" for t in range(1, 6)]
        + [f"hopeless:agent:{t}" for t in range(1, 6)]
        + [f"close:agent:{t}" for t in range(1, 9)]
    )
    # trial numbers continue: the cells are ordinary cells of the plan
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert len(plan["cells"]) == 18 and doc["total_cells"] == 18
    assert plan["adaptive"] == [
        {"rule": {"min": 2, "max": 8, "until": {"ci_width": 0.6}}, "cases": list(rates["agent"])}
    ]
    report = (tmp_path / "out" / "report" / "index.html").read_text()
    assert "<h2>Adaptive trials</h2>" in report and "max 8 reached" in report

    # nothing more to do: nothing runs
    again = run(tmp_path)
    assert again.returncode == 1, again.stderr
    assert len(launches(tmp_path)) == 18

    # a larger max: the close case goes on from trial 9, the others stay as they stopped
    set_max(tmp_path, 10)
    more = run(tmp_path)
    assert more.returncode == 1, more.stderr
    assert launches(tmp_path)[18:] == ["close:agent:9", "close:agent:10"]
    assert stops(summary(tmp_path))[("close", "agent")] == (10, "max")
    assert stops(summary(tmp_path))[("easy", "agent")] == (5, "ci_width")


def test_a_decided_comparison_stops_every_case_under_plain_doit(tmp_path: Path) -> None:
    same = [f"same{i}" for i in range(4)]
    close = ["close0", "close1"]
    first = {case: 1 for case in same} | {case: 1 for case in close}
    second = {case: 1 for case in same} | {case: 0 for case in close}
    write_battery(
        tmp_path,
        {"min": 2, "max": 20, "until": {"decided": ["first", "second"]}},
        {"first": first, "second": second},
        same + close,
    )
    done = subprocess.run(
        [
            sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"),
            f"manifest={tmp_path / 'manifest.yaml'}", f"out={tmp_path / 'out'}",
            f"workspace={tmp_path}", "jobs=2",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # (second's close trials are rejected)
    doc = summary(tmp_path)
    found = stops(doc)
    # the cases where both seats pass stop after min: no discordant pair there
    for case in same:
        assert found[(case, "first")] == (2, "unanimous")
    # each close trial is a discordant pair first wins: 8 of them reach 2 / 0.05
    for case in close:
        assert found[(case, "first")] == (4, "decided")
        assert found[(case, "second")] == (4, "decided")
    comparison = doc["adaptive"][0]["comparison"]
    assert comparison["decided"] is True and comparison["better"] == "first"
    assert comparison["discordant"] == {"first_better": 8, "second_better": 0}
    assert len(launches(tmp_path)) == 2 * (4 * 2 + 2 * 4)
