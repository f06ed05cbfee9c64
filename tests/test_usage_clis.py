"""Usage of real CLIs (their fakes print exactly what the real ones print) end to end: from
the receipt into summary.json, `brigade show`, JUnit and the HTML report, and a budget that
stops on the cost a CLI reported."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from agents.fake_cli import install
from conftest import Project
from test_progress import masked

ANSWER = [{"type": "exact_output", "expected": "All good."}]
# codex reports tokens only (and names no model): the price table prices the seat's model
PRICES = {"gpt-test": {"input": 1.25, "cached_input": 0.125, "output": 10.0}}
CODEX_COST = ((52580 - 24832) * 1.25 + 24832 * 0.125 + 417 * 10.0) / 1_000_000
# claude reports its cost and the two models that answered (a background one too)
CLAUDE_MODELS = ["claude-haiku-4-5-20251001", "claude-sonnet-4-6"]


def fake_path(root: Path, *names: str) -> str:
    folder = root / "bin"
    folder.mkdir()
    for name in names:
        install(folder, name)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture(scope="module")
def clis(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A claude seat and a codex seat, one case each, run by `brigade run`."""
    project = Project(tmp_path_factory.mktemp("clis"))
    path = fake_path(project.root, "claude", "codex")
    seats = {
        "opus": {"cli": "claude", "model": "sonnet"},
        "gpt": {"cli": "codex", "model": "gpt-test"},
    }
    project.write_roster(seats, prices=PRICES)
    project.write_manifest([{"id": "ok", "prompt": "hi", "graders": ANSWER}], seats=tuple(seats))
    done = project.run(PATH=path)
    assert done.returncode == 0, done.stderr
    return project


def test_the_summary_names_each_seat_s_agent_and_what_it_spent(clis: Project) -> None:
    by_seat = clis.summary()["by_seat"]
    agents = {seat: dict(data["agent"]) for seat, data in by_seat.items()}
    for agent in agents.values():
        assert agent.pop("first_started_at") <= agent.pop("last_finished_at")
    assert agents == {
        "opus": {
            "cli": "claude",
            "model": "sonnet",
            "models_used": CLAUDE_MODELS,
            "cli_versions": ["claude 1.2.3 (fake)"],
        },
        "gpt": {
            "cli": "codex",
            "model": "gpt-test",
            "models_used": [],
            "cli_versions": ["codex 1.2.3 (fake)"],
        },
    }
    spent = {
        seat: {
            key: data["usage_all_attempts"][key]
            for key in ("input_tokens", "output_tokens", "turns", "cost_usd", "cost_sources")
        }
        for seat, data in by_seat.items()
    }
    assert spent == {
        "opus": {
            "input_tokens": 20839,
            "output_tokens": 15,
            "turns": 2,
            "cost_usd": 0.122623,
            "cost_sources": {"reported": 1, "priced": 0, "unknown": 0},
        },
        "gpt": {
            "input_tokens": 52580,
            "output_tokens": 417,
            "turns": 1,
            "cost_usd": round(CODEX_COST, 6),
            "cost_sources": {"reported": 0, "priced": 1, "unknown": 0},
        },
    }


def test_show_junit_and_the_report_show_it(clis: Project) -> None:
    shown = clis.brigade("show", str(clis.out))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split("\n\nseat ", 2)[-1].splitlines()[:3] == [
        "    cost  per cell  per accepted  tokens  unknown",
        "opus  $0.1226   $0.1226       $0.1226  20,854",
        "gpt   $0.0420   $0.0420       $0.0420  52,997",
    ]
    root = ET.fromstring((clis.out / "report" / "junit.xml").read_bytes())
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    costs = {
        name: (props["input_tokens"], props["output_tokens"], props["cost_usd"])
        for name, props in properties.items()
    }
    assert costs == {
        "ok:opus:1": ("20839", "15", "0.122623"),
        "ok:gpt:1": ("52580", "417", "0.041959"),
    }
    page = (clis.out / "report" / "index.html").read_text()
    agents = page.split('<table id="agents">', 1)[1].split("</table>", 1)[0]
    assert (
        "<tr><th>opus</th><td>claude</td><td>sonnet</td>"
        f"<td>{', '.join(CLAUDE_MODELS)}</td><td>claude 1.2.3 (fake)</td>"
    ) in agents
    assert "<tr><th>gpt</th><td>codex</td><td>gpt-test</td><td>–</td>" in agents


def test_a_budget_stops_on_the_cost_claude_reported(project: Project) -> None:
    path = fake_path(project.root, "claude")
    project.write_roster({"opus": {"cli": "claude", "model": "sonnet"}})
    cases = [{"id": f"c{n}", "prompt": "hi", "graders": ANSWER} for n in range(3)]
    project.write_manifest(cases, seats=("opus",))
    done = project.run("--max-cost", "0.1", PATH=path)
    assert done.returncode == 3, done.stderr
    assert project.states() == {"c0:opus:1": "accepted"}
    assert masked(done.stderr).splitlines()[-2:] == [
        "brigade: 3 cells: accepted 1, missing 2 -> incomplete (exit 3); <t>; report: "
        f"{project.out / 'report' / 'index.html'}",
        "brigade: stopped launching: the budget of $0.1000 was reached: $0.1226 spent by 1 seat "
        "run of this run; 2 cells not started",
    ]
