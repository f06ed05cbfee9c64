"""Usage end to end: each adapter's usage read from its (fake) CLI's real output format into
run.json and the receipt; prices filling costs the CLI does not report; an exec program's
usage file, valid and not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents.fake_cli import BINARIES, install
from conftest import FAKE_CLI, REPO, Project
from test_adapters import USAGE

from brigade.core.usage import usage_document

ALL_CLIS = sorted(BINARIES)
ANSWER = [{"type": "exact_output", "expected": "All good."}]


def install_fake(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    install(folder, name)
    return folder


def path_with(folder: Path) -> str:
    import os

    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def fake_seat(name: str, model: str = "m-1") -> dict[str, str]:
    if name == "ollama":
        return {"cli": "ollama:llama3.2"}
    return {"cli": name, "model": model}


def run_doc(receipt: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(Path(receipt["run_dir"], "run.json").read_text())
    return doc


@pytest.mark.parametrize("name", ALL_CLIS)
def test_each_cli_s_usage_reaches_run_json_and_the_receipt(
    project: Project, tmp_path: Path, name: str
) -> None:
    folder = install_fake(tmp_path, name)
    project.write_roster({"s": fake_seat(name)})
    project.write_manifest([{"id": "ok", "prompt": "hi", "graders": ANSWER}], seats=("s",))
    done = project.doit(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("ok:s:1")
    expected = USAGE[name]
    document = usage_document(expected) if expected is not None else None
    assert run_doc(receipt)["usage"] == document
    assert run_doc(receipt)["notes"] == []
    assert receipt.get("usage") == document
    assert receipt["attempts_usage"] == [{"attempt": 1, "usage": document}]
    assert receipt["cli_version"] == f"{name} 1.2.3 (fake)"
    assert "notes" not in receipt


def test_claude_run_answered_by_two_models(project: Project, tmp_path: Path) -> None:
    folder = install_fake(tmp_path, "claude")
    project.write_roster({"s": fake_seat("claude", "sonnet")})
    project.write_manifest([{"id": "ok", "prompt": "hi", "graders": ANSWER}], seats=("s",))
    assert project.doit(PATH=path_with(folder)).returncode == 0
    usage = project.receipt("ok:s:1")["usage"]
    # the models that actually answered, not the roster's alias, each with its share
    assert usage["model"] == "claude-sonnet-4-6"
    assert usage["models"] == {
        "claude-haiku-4-5-20251001": {
            "input_tokens": 504,
            "cached_input_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 11,
            "reasoning_tokens": None,
            "cost_usd": 0.000559,
        },
        "claude-sonnet-4-6": {
            "input_tokens": 20335,
            "cached_input_tokens": 0,
            "cache_write_tokens": 20333,
            "output_tokens": 4,
            "reasoning_tokens": None,
            "cost_usd": 0.12206399999999999,
        },
    }
    assert (usage["cost_usd"], usage["cost_source"], usage["turns"]) == (0.122623, "reported", 2)
    assert (usage["input_tokens"], usage["output_tokens"]) == (20839, 15)


def test_codex_stream_of_several_turns(project: Project, tmp_path: Path) -> None:
    folder = install_fake(tmp_path, "codex")
    project.write_roster({"s": fake_seat("codex")})
    project.write_manifest(
        [{"id": "turns", "prompt": "SCENARIO:turns", "graders": ANSWER}], seats=("s",)
    )
    assert project.doit(PATH=path_with(folder)).returncode == 0
    usage = project.receipt("turns:s:1")["usage"]
    # each turn.completed holds the thread's total so far: the run's usage is the last one
    assert {k: v for k, v in usage.items() if v is not None and v != {}} == {
        "input_tokens": 85681,
        "cached_input_tokens": 16384,
        "cache_write_tokens": 0,
        "output_tokens": 530,
        "reasoning_tokens": 192,
        "turns": 2,
        "cost_source": "unknown",
        "session_id": usage["session_id"],
    }


def test_a_price_table_fills_the_cost_a_cli_does_not_report(
    project: Project, tmp_path: Path
) -> None:
    folder = install_fake(tmp_path, "codex")
    # codex reports tokens only; it names no model, so the seat's model is priced
    prices = {"gpt-test": {"input": 1.25, "cached_input": 0.125, "output": 10.0}}
    project.write_roster({"s": fake_seat("codex", "gpt-test")}, prices=prices)
    project.write_manifest([{"id": "ok", "prompt": "hi", "graders": ANSWER}], seats=("s",))
    assert project.doit(PATH=path_with(folder)).returncode == 0
    receipt = project.receipt("ok:s:1")
    # 52580 input of which 24832 cached, 417 output (reasoning included)
    cost = ((52580 - 24832) * 1.25 + 24832 * 0.125 + 417 * 10.0) / 1_000_000
    assert receipt["usage"]["cost_usd"] == pytest.approx(cost, abs=1e-12)
    assert receipt["usage"]["cost_source"] == "priced"
    # run.json keeps what the CLI said; the price table is kept with the plan
    assert (run_doc(receipt)["usage"]["cost_usd"], run_doc(receipt)["usage"]["cost_source"]) == (
        None,
        "unknown",
    )
    assert project.plan()["prices"] == prices


def test_exec_usage_file(project: Project) -> None:
    usage = {
        "input_tokens": 1200,
        "cached_input_tokens": 800,
        "output_tokens": 90,
        "cost_usd": 0.004,
        "model": "local-7b",
    }
    project.write_manifest(
        [
            {"id": "good", "prompt": f"answer: fine\nusage: {json.dumps(usage)}"},
            {"id": "typo", "prompt": 'answer: fine\nusage: {"input_tokens": -3}'},
            {"id": "garbage", "prompt": "answer: fine\nusage: not json at all"},
            {"id": "none", "prompt": "answer: fine"},
        ]
    )
    done = project.doit()
    assert done.returncode == 0, done.stderr
    receipts = project.receipts()
    # bad usage data changes nothing but a note: same state, no usage
    assert {c: r["state"] for c, r in receipts.items()} == dict.fromkeys(receipts, "unscored")
    good = receipts["good:agent:1"]
    assert good["usage"] == {
        "input_tokens": 1200,
        "cached_input_tokens": 800,
        "cache_write_tokens": None,
        "output_tokens": 90,
        "reasoning_tokens": None,
        "turns": None,
        "cost_usd": 0.004,
        "cost_source": "reported",
        "model": "local-7b",
        "models": {},
        "session_id": None,
        "api_duration_seconds": None,
    }
    assert "notes" not in good
    typo = receipts["typo:agent:1"]
    assert "usage" not in typo
    assert typo["attempts_usage"] == [{"attempt": 1, "usage": None}]
    assert typo["notes"] == [
        "usage ignored: usage.json.input_tokens: must be a whole number of 0 or more, or null"
    ]
    assert run_doc(typo)["notes"] == typo["notes"]
    garbage = receipts["garbage:agent:1"]
    assert garbage["notes"] == [
        "usage ignored: usage.json: not JSON (Expecting value: line 1 column 1 (char 0))"
    ]
    assert receipts["none:agent:1"]["attempts_usage"] == [{"attempt": 1, "usage": None}]
    assert "notes" not in receipts["none:agent:1"]


def test_show_prints_a_cell_s_notes(project: Project) -> None:
    project.write_manifest([{"id": "typo", "prompt": 'answer: fine\nusage: {"turns": "2"}'}])
    assert project.doit().returncode == 0
    shown = project.brigade("show", str(project.out), "typo:agent:1")
    assert shown.returncode == 0, shown.stderr
    assert (
        "\nnotes:\n  usage ignored: usage.json.turns: must be a whole number of 0 or more, "
        "or null\n" in shown.stdout
    )


RETRIED_AGENT = """
import json, os, sys
first = "attempt-001" in os.environ["BRIGADE_RUN_DIR"]
usage = {"input_tokens": 100 if first else 200, "output_tokens": 10 if first else 20,
         "turns": 1, "cost_usd": 0.01 if first else 0.02, "model": "m-7"}
with open(os.environ["BRIGADE_USAGE_FILE"], "w") as handle:
    json.dump(usage, handle)
if first:
    print("rate_limited: 429 from the provider", file=sys.stderr)
    sys.exit(75)
print("fine")
"""


def test_every_attempt_counts_in_the_summary(project: Project, tmp_path: Path) -> None:
    agent = tmp_path / "retried.py"
    agent.write_text(RETRIED_AGENT)
    project.write_roster({"agent": {"cli": f"exec:{{python}} {agent}", "model": "m-7"}})
    project.write_manifest(
        [{"id": "ok", "prompt": "hi", "graders": [{"type": "exact_output", "expected": "fine"}]}]
    )
    assert project.doit().returncode == 3
    assert project.doit("retry_transient=1").returncode == 0
    receipt = project.receipt("ok:agent:1")
    assert receipt["state"] == "accepted"
    assert [(a["attempt"], a["usage"]["cost_usd"]) for a in receipt["attempts_usage"]] == [
        (1, 0.01),
        (2, 0.02),
    ]
    usage = project.summary()["by_seat"]["agent"]["usage_all_attempts"]
    assert usage == {
        "cells": 1,
        "attempts": 2,
        "cells_tokens_unknown": 0,
        "cells_cost_unknown": 0,
        "partial": False,
        "input_tokens": 300,
        "cached_input_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": 30,
        "reasoning_tokens": None,
        "turns": 2,
        "total_tokens": 330,
        "cost_usd": 0.03,
        "cost_sources": {"reported": 2, "priced": 0, "unknown": 0},
        "mean_tokens_per_cell": 330.0,
        "mean_cost_usd_per_cell": 0.03,
        "turns_per_cell": 2.0,
        "accepted": 1,
        "tokens_per_accepted": 330.0,
        "cost_usd_per_accepted": 0.03,
        "models": ["m-7"],
    }
    assert project.summary()["usage_all_attempts"] == usage


def test_a_changed_price_re_runs_nothing_and_reprices_summary_and_report(
    project: Project, tmp_path: Path
) -> None:
    folder = install_fake(tmp_path, "codex")
    project.write_roster({"s": fake_seat("codex", "gpt-test")})
    project.write_manifest([{"id": "ok", "prompt": "hi", "graders": ANSWER}], seats=("s",))
    assert project.doit(PATH=path_with(folder)).returncode == 0
    calls = (folder / "codex.calls.jsonl").read_text()
    cell_json = (project.cell_dir("ok:s:1") / "cell.json").read_text()
    usage = project.summary()["by_seat"]["s"]["usage_all_attempts"]
    assert (usage["cost_usd"], usage["cells_cost_unknown"], usage["total_tokens"]) == (
        None,
        1,
        52580 + 417,
    )
    report = project.out / "report"
    assert '<td class="num">– (1 of 1 cells unknown)</td>' in (report / "index.html").read_text()
    for input_price in (1.0, 2.0):
        prices = {"gpt-test": {"input": input_price, "output": 10.0}}
        project.write_roster({"s": fake_seat("codex", "gpt-test")}, prices=prices)
        assert project.doit(PATH=path_with(folder)).returncode == 0
        # nothing ran again, no receipt changed: only the totals are priced anew
        assert (folder / "codex.calls.jsonl").read_text() == calls
        assert (project.cell_dir("ok:s:1") / "cell.json").read_text() == cell_json
        usage = project.summary()["by_seat"]["s"]["usage_all_attempts"]
        cost = (52580 * input_price + 417 * 10.0) / 1_000_000
        assert (usage["cost_usd"], usage["cost_sources"]["priced"]) == (
            pytest.approx(cost, abs=1e-9),
            1,
        )
        # the report is made again: its cost column and its testcases' cost
        seats = (report / "index.html").read_text().split('<table id="seats">')[1]
        assert f'<td class="num">${cost:.4f}</td>' in seats.split("</table>")[0]
        assert f'<property name="cost_usd" value="{cost!r}"' in (report / "junit.xml").read_text()
    shown = project.brigade("summary", str(project.out), "--json")
    assert json.loads(shown.stdout)["by_seat"]["s"]["usage_all_attempts"] == usage


def test_a_judge_s_usage_is_recorded_apart_from_the_seat_s(project: Project) -> None:
    judge = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'fake_judge.py'}"
    spent = {"input_tokens": 900, "output_tokens": 40, "cost_usd": 0.003}
    seat = {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001}
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI},
            "critic": {"cli": judge, "model": "pass", "env": {"JUDGE_USAGE": json.dumps(spent)}},
        }
    )
    project.write_manifest(
        [{"id": "hello", "prompt": f"answer: hello\nusage: {json.dumps(seat)}"}],
        graders=[{"type": "judge", "seat": "critic", "rubric": "Greets the user."}],
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("hello:agent:1")
    [result] = receipt["graders"]
    assert {k: v for k, v in result["usage"].items() if v not in (None, {})} == {
        **spent,
        "cost_source": "reported",
    }
    assert receipt["usage"]["cost_usd"] == 0.001  # the seat's own
    by_seat = project.summary()["by_seat"]["agent"]
    assert (
        by_seat["usage_all_attempts"]["cost_usd"],
        by_seat["usage_all_attempts"]["input_tokens"],
    ) == (
        0.001,
        100,
    )
    assert by_seat["grader_usage"] == {
        "results": 1,
        "results_cost_unknown": 0,
        "input_tokens": 900,
        "cached_input_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": 40,
        "reasoning_tokens": None,
        "turns": None,
        "cost_usd": 0.003,
    }


def test_what_judges_spent_is_shown_everywhere(project: Project) -> None:
    """summary.json (per seat and for the plan), `brigade show`'s cost table and the cell's
    graders, the report's seat table and cell page, JUnit properties."""
    judge = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'fake_judge.py'}"
    spent = {"input_tokens": 900, "output_tokens": 40, "cost_usd": 0.25}
    seat = {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001}
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI},
            "critic": {"cli": judge, "model": "pass", "env": {"JUDGE_USAGE": json.dumps(spent)}},
            "silent": {"cli": judge, "model": "pass"},  # reports no usage
        }
    )
    graders = [
        {"type": "judge", "seat": "critic", "rubric": "Greets the user."},
        {"type": "judge", "seat": "silent", "rubric": "Greets the user."},
    ]
    project.write_manifest(
        [{"id": f"c{n}", "prompt": f"answer: hello\nusage: {json.dumps(seat)}"} for n in (1, 2)],
        graders=graders,
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    summary = project.summary()
    totals = {key: summary["grader_usage"][key] for key in ("results", "results_cost_unknown")}
    assert (totals, summary["grader_usage"]["cost_usd"]) == (
        {"results": 4, "results_cost_unknown": 2},
        0.5,
    )
    assert summary["by_seat"]["agent"]["grader_usage"] == summary["grader_usage"]
    shown = project.brigade("show", str(project.out))
    assert shown.stdout.split("\n\nseat ", 2)[-1].splitlines()[:2] == [
        "       cost   per cell  per accepted  tokens   judges  unknown",
        "agent  $0.002000  $0.001000     $0.001000     220  $0.5000  2 of 4 judge runs",
    ]
    cell = project.brigade("show", str(project.out), "c1:agent:1").stdout
    assert "    spent   900 input tokens, 40 output tokens, $0.2500 (reported)\n" in cell
    assert "    spent   unknown: the judge reported no usage\n" in cell
    report = project.out / "report"
    seats = (report / "index.html").read_text().split('id="seats"', 1)[1].split("</table>")[0]
    assert "judges&#x27; cost" in seats or "judges' cost" in seats
    assert "$0.5000 (2 of 4 judge runs unknown)" in seats
    junit = (report / "junit.xml").read_text()
    assert junit.count('<property name="grader_cost_usd" value="0.25" />') == 2
    assert junit.count('<property name="grader_runs" value="2" />') == 2
    receipt = project.receipt("c1:agent:1")
    page = report / "index_files" / "cells" / f"{receipt['cell_id'][:2]}.html"
    text = page.read_text()
    assert '<td class="spent">900 input tokens, 40 output tokens, $0.2500 (reported)</td>' in text
    assert '<td class="spent">unknown: the judge reported no usage</td>' in text
