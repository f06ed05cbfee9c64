"""`brigade compare`: cells matched by case and trial, flips, the verdict, the CI gate, and its
outputs (text, JSON, markdown, the HTML page).

The unit tests feed core/compare plain sides; the end-to-end tests run real batteries through
the `brigade` CLI with `tests/agents/rated_agent.py`, a seat whose pass rate per case its roster
sets (so BASE and NEW behave as stated), and compare them through the CLI again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, brigade_command
from statsmodels.stats.contingency_tables import mcnemar

from brigade.core import compare as core
from brigade.core.compare import Outcome, Settings, Side, compare_sides, comparison_document
from brigade.inputs import schemas

RATED = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'rated_agent.py'}"
CASES = [f"c{i:02d}" for i in range(20)]
# a case id that is markup, a table cell break and inline code at once
HOSTILE = "<img src=x onerror=alert(1)>|`x`"
# BASE passes every case but the last three (hopeless for both)
BASE_RATES: dict[str, Any] = {case: 1 for case in CASES} | {c: 0 for c in CASES[17:]}


# -- pure ----------------------------------------------------------------------------------------


def outcome(case: str, trial: int, kind: str, fault: str | None = None) -> Outcome:
    return Outcome(case, trial, f"{case}:s:{trial}", f"{case}-{trial}-{kind}", kind, fault)  # type: ignore[arg-type]


def side(outcomes: list[Outcome], **fingerprints: str) -> Side:
    return Side("b", "d" * 64, "s", tuple(outcomes), fingerprints=fingerprints)


def test_cells_match_by_case_and_trial_and_cases_of_one_side_are_listed() -> None:
    base = side(
        [
            outcome("a", 1, "accepted"),
            outcome("a", 2, "accepted"),
            outcome("a", 3, "failed"),  # NEW has no trial 3: no flip from it
            outcome("gone", 1, "accepted"),
        ],
        a="x",
        gone="y",
    )
    new = side(
        [outcome("a", 1, "failed"), outcome("a", 2, "accepted"), outcome("added", 1, "failed")],
        a="edited",
        added="z",
    )
    doc = compare_sides(base, new)
    assert doc["cases"] == {
        "shared": 1,
        "compared": 1,
        "only_base": ["gone"],
        "only_new": ["added"],
        "edited": ["a"],
        "unmeasured": [],
        "unscored": [],
    }
    assert doc["flips"] == [
        {
            "case": "a",
            "trial": 1,
            "direction": "pass_to_fail",
            "base": {"coordinate": "a:s:1", "cell_id": "a-1-accepted"},
            "new": {"coordinate": "a:s:1", "cell_id": "a-1-failed"},
        }
    ]
    assert doc["trials"] == {"single": False, "pass_to_fail": 1, "fail_to_pass": 0, "unchanged": 1}
    rows = {row["case"]: row for row in doc["by_case"]}
    assert rows["a"]["change"] == "worse"
    assert rows["a"]["difference"] == pytest.approx(0.5 - 2 / 3)
    assert rows["gone"] == {
        "case": "gone",
        "change": "only_base",
        "base": {"accepted": 1, "scored": 1, "unmeasured": 0, "unscored": 0},
        "new": None,
        "difference": None,
        "edited": False,
    }
    assert rows["added"]["change"] == "only_new"


def test_measurement_failures_and_unfinished_cells_are_unmeasured_never_flips() -> None:
    base = side(
        [
            outcome("a", 1, "accepted"),
            outcome("b", 1, "accepted"),
            outcome("c", 1, "accepted"),
            outcome("d", 1, "unscored"),
            outcome("e", 1, "failed"),
        ]
    )
    new = side(
        [
            outcome("a", 1, "adapter_error", "rate_limited"),
            outcome("b", 1, "grader_error"),
            outcome("c", 1, "unfinished"),
            outcome("d", 1, "unscored"),
            outcome("e", 1, "timeout", "timeout"),
        ]
    )
    doc = compare_sides(base, new)
    assert doc["flips"] == []
    assert doc["cases"]["compared"] == 0
    assert doc["cases"]["unmeasured"] == ["a", "b", "c", "e"]
    assert doc["cases"]["unscored"] == ["d"]
    assert doc["unmeasured"]["kinds"] == {
        "grader_error": 1,
        "rate_limited": 1,
        "timeout": 1,
        "unfinished": 1,
    }
    assert [(c["side"], c["kind"]) for c in doc["unmeasured"]["list"]] == [
        ("new", "rate_limited"),
        ("new", "grader_error"),
        ("new", "unfinished"),
        ("new", "timeout"),
    ]
    assert doc["unscored"] == 2
    assert doc["verdict"] == "unmeasured"
    assert doc["gate"] == {"result": "unmeasured"}


def single_trials(worse: int, better: int, same: int) -> tuple[Side, Side]:
    cases = [f"k{i}" for i in range(worse + better + same)]
    base, new = [], []
    for index, case in enumerate(cases):
        before, after = (
            ("accepted", "failed")
            if index < worse
            else ("failed", "accepted")
            if index < worse + better
            else ("accepted", "accepted")
        )
        base.append(outcome(case, 1, before))
        new.append(outcome(case, 1, after))
    return side(base), side(new)


@pytest.mark.parametrize(("worse", "better", "same"), [(8, 0, 30), (5, 0, 30), (3, 9, 10)])
def test_single_trials_use_exact_mcnemar(worse: int, better: int, same: int) -> None:
    doc = compare_sides(*single_trials(worse, better, same))
    assert doc["test"] == "mcnemar_exact"
    assert doc["trials"]["single"] is True
    expected = mcnemar([[same, worse], [better, 0]], exact=True).pvalue
    assert doc["p_value"] == pytest.approx(expected)
    assert doc["difference"] == pytest.approx((better - worse) / (worse + better + same))


def test_verdict_needs_the_test_and_the_interval() -> None:
    worse = compare_sides(*single_trials(8, 0, 30))
    assert worse["verdict"] == "worse"
    assert worse["interval"][1] < 0 and worse["p_value"] < 0.05
    assert worse["verdict_text"].startswith("worse: NEW accepts 21.1 points less than BASE")
    # five cases of 35 moving one way: the bootstrap interval excludes zero, the exact test
    # does not call it (p = 0.0625): no detectable difference
    close = compare_sides(*single_trials(5, 0, 30))
    assert close["interval"][1] < 0
    assert close["p_value"] == pytest.approx(0.0625)
    assert close["verdict"] == "no detectable difference"
    assert "p = 0.062" in close["verdict_text"]
    better = compare_sides(*single_trials(0, 9, 20))
    assert better["verdict"] == "better"


def test_gate_margin_unmeasured_threshold_and_precedence() -> None:
    worse = compare_sides(*single_trials(8, 0, 30))
    high = worse["interval"][1] * 100  # the upper end, in points (below zero)
    on = Settings(fail_on_regression=True)
    assert core.gate([worse], on)["exit_code"] == 1
    assert core.gate([worse], Settings())["exit_code"] == 0  # no gate asked for
    within = Settings(fail_on_regression=True, margin=-high + 0.5)
    beyond = Settings(fail_on_regression=True, margin=-high - 0.5)
    assert compare_sides(*single_trials(8, 0, 30), within)["gate"]["result"] == "pass"
    assert compare_sides(*single_trials(8, 0, 30), beyond)["gate"]["result"] == "regression"
    unmeasured = compare_sides(
        side([outcome("a", 1, "accepted")]), side([outcome("a", 1, "grader_error")])
    )
    summary = core.gate([worse, unmeasured], on)
    assert (summary["result"], summary["exit_code"]) == ("unmeasured", 3)  # 3 dominates 1
    assert "no shared case has measured trials on both sides" in summary["reason"]


def test_unmeasured_threshold_is_a_share_of_the_shared_cells() -> None:
    base = side([outcome(f"k{i}", 1, "accepted") for i in range(10)])
    new = side(
        [outcome(f"k{i}", 1, "adapter_error", "overloaded") for i in range(2)]
        + [outcome(f"k{i}", 1, "accepted") for i in range(2, 10)]
    )
    doc = compare_sides(base, new)
    assert doc["unmeasured"]["percent"] == pytest.approx(10.0)  # 2 of 20 cells
    assert doc["gate"]["result"] == "pass"  # not more than 10%
    assert compare_sides(base, new, Settings(max_unmeasured=9.9))["gate"]["result"] == "unmeasured"


def comparison_of(worse: int, better: int, same: int) -> dict[str, Any]:
    """The whole document comparing two single-trial batteries (gate asked for)."""
    settings = Settings(fail_on_regression=True)
    cells = worse + better + same
    battery = {
        "name": "b",
        "manifest_digest": "d",
        "seats": ["s"],
        "cells": cells,
        "original": False,
    }
    pair = compare_sides(*single_trials(worse, better, same), settings)
    return comparison_document(battery, battery, [pair], settings)


def test_comparison_document_is_schema_valid_and_reproducible() -> None:
    docs = [comparison_of(8, 1, 29) for _ in range(2)]
    schemas.validator(core.COMPARE_SCHEMA).validate(docs[0])
    assert json.dumps(docs[0]) == json.dumps(docs[1])
    assert docs[0]["gate"]["exit_code"] == 1


# -- end to end ----------------------------------------------------------------------------------


def brigade(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*brigade_command(), *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def battery(
    root: Path,
    name: str,
    rates: dict[str, Any],
    *,
    cases: list[str] = CASES,
    trials: int = 1,
    seats: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """Run a battery whose seat `agent` passes each case at its rate; its output directory."""
    folder = root / name
    folder.mkdir()
    manifest = {
        "schema": "brigade.eval_manifest.v1",
        "name": "battery",
        "trials": trials,
        "seats": list(seats or {"agent": {}}),
        "cases": [
            {
                "id": case,
                "prompt": f"case: {case}",
                "graders": [{"type": "exact_output", "expected": "pass"}],
            }
            for case in cases
        ],
    }
    roster = {
        "schema": "brigade.roster.v1",
        "sandbox": "off",
        "seats": {
            seat: {
                "cli": RATED,
                "acknowledge_read_only": True,
                "env": {"RATES": json.dumps(seat_rates or rates)},
            }
            for seat, seat_rates in (
                (seat, spec.get("rates")) for seat, spec in (seats or {"agent": {}}).items()
            )
        },
    }
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (folder / "roster.yaml").write_text(yaml.safe_dump(roster, sort_keys=False))
    out = folder / "out"
    done = brigade(
        "run", str(folder / "manifest.yaml"), "--out", str(out), "--workspace", str(folder),
        "-q", "-n", "2",
    )  # fmt: skip
    assert done.returncode in (0, 1, 3), done.stderr
    return out


@pytest.fixture(scope="module")
def batteries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """BASE and four NEW batteries: identical, one case flipped, clearly worse, with faults."""
    root = tmp_path_factory.mktemp("compare")
    return {
        "base": battery(root, "base", BASE_RATES),
        "identical": battery(root, "identical", dict(BASE_RATES)),
        "one_flip": battery(root, "one_flip", BASE_RATES | {"c00": 0}),
        "worse": battery(root, "worse", BASE_RATES | {c: 0 for c in CASES[:8]}),
        "faults": battery(root, "faults", BASE_RATES | {c: "fault" for c in CASES[:5]}),
    }


def cell_ids(out: Path) -> dict[str, str]:
    """coordinate -> cell id, from an output directory's plan."""
    cells = json.loads((out / "plan.json").read_text())["cells"]
    return {cell["coordinate"]: cell["cell_id"] for cell in cells}


def compare_json(*args: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    done = brigade("compare", *args, "--json")
    assert done.returncode in (0, 1, 3), done.stderr
    doc = json.loads(done.stdout)
    schemas.validator(core.COMPARE_SCHEMA).validate(doc)
    return doc, done


def test_identical_batteries_pass_the_gate(batteries: dict[str, Path]) -> None:
    doc, done = compare_json(
        str(batteries["base"]), str(batteries["identical"]), "--fail-on-regression"
    )
    assert done.returncode == 0
    (pair,) = doc["comparisons"]
    assert pair["verdict"] == "no detectable difference"
    assert (pair["difference"], pair["interval"], pair["p_value"]) == (0.0, [0.0, 0.0], 1.0)
    assert pair["flips"] == [] and pair["unmeasured"]["cells"] == 0
    assert pair["detectable"] == pytest.approx(0.3)  # 6 cases of 20 moving
    assert doc["gate"] == {
        "enabled": True,
        "margin_points": 0.0,
        "max_unmeasured_percent": 10.0,
        "result": "pass",
        "reason": "no regression",
        "exit_code": 0,
    }
    md = brigade(
        "compare", str(batteries["base"]), str(batteries["identical"]), "--markdown",
        "--fail-on-regression",
    )  # fmt: skip
    assert md.returncode == 0
    assert md.stdout.startswith(
        "### brigade compare: no detectable difference — gate pass (exit 0)\n"
    )
    assert "| case |" not in md.stdout  # no case changed: no table


def test_one_flipped_case_is_listed_with_both_cells(batteries: dict[str, Path]) -> None:
    base, new = batteries["base"], batteries["one_flip"]
    doc, done = compare_json(str(base), str(new), "--fail-on-regression")
    assert done.returncode == 0
    (pair,) = doc["comparisons"]
    (flip,) = pair["flips"]
    ids = {
        name: {
            c["coordinate"]: c["cell_id"]
            for c in json.loads((out / "plan.json").read_text())["cells"]
        }
        for name, out in (("base", base), ("new", new))
    }
    assert flip == {
        "case": "c00",
        "trial": 1,
        "direction": "pass_to_fail",
        "base": {"coordinate": "c00:agent:1", "cell_id": ids["base"]["c00:agent:1"]},
        "new": {"coordinate": "c00:agent:1", "cell_id": ids["new"]["c00:agent:1"]},
    }
    assert (pair["trials"]["pass_to_fail"], pair["trials"]["fail_to_pass"]) == (1, 0)
    assert pair["p_value"] == 1.0  # McNemar on one discordant case
    assert pair["verdict"] == "no detectable difference"
    md = brigade("compare", str(base), str(new), "--markdown").stdout
    assert "| `c00` | 1/1 | 0/1 | pass → fail |" in md
    text = brigade("compare", str(base), str(new)).stdout
    assert "c00 trial 1: pass → fail  BASE c00:agent:1" in text


def test_a_clearly_worse_battery_fails_the_gate(batteries: dict[str, Path]) -> None:
    base, new = str(batteries["base"]), str(batteries["worse"])
    doc, done = compare_json(base, new, "--fail-on-regression")
    assert done.returncode == 1
    (pair,) = doc["comparisons"]
    assert pair["verdict"] == "worse"
    assert pair["p_value"] == pytest.approx(2**-7)  # exact McNemar, eight cases pass -> fail
    assert pair["difference"] == pytest.approx(-8 / 20)
    assert doc["gate"]["result"] == "regression"
    assert doc["gate"]["reason"].startswith("regression: NEW is worse: seat agent: -40.0 points")
    # the gate is asked for: without it the comparison exits 0 whatever it finds
    assert brigade("compare", base, new).returncode == 0
    # a margin wider than the interval's upper end lets it pass; a narrower one does not
    high = -pair["interval"][1] * 100
    assert (
        brigade("compare", base, new, "--fail-on-regression", "--margin", f"{high + 1}").returncode
        == 0
    )
    assert (
        brigade("compare", base, new, "--fail-on-regression", "--margin", f"{high - 1}").returncode
        == 1
    )
    md = brigade("compare", base, new, "--markdown", "--fail-on-regression")
    assert md.returncode == 1
    lines = md.stdout.splitlines()
    assert lines[0] == "### brigade compare: NEW is worse — gate regression (exit 1)"
    assert sum(line.startswith("| `c0") for line in lines) == 8
    assert "Cost: BASE cost unknown · NEW cost unknown" in md.stdout


def test_markdown_caps_the_table(batteries: dict[str, Path], tmp_path: Path) -> None:
    many = battery(tmp_path, "many", BASE_RATES | {c: 0 for c in CASES[:14]})
    md = brigade("compare", str(batteries["base"]), str(many), "--markdown").stdout
    assert sum(line.startswith("| `c") for line in md.splitlines()) == 10
    assert "\nand 4 more\n" in md
    assert len(md) < 4000


def test_adapter_faults_are_unmeasured_and_too_many_exit_3(batteries: dict[str, Path]) -> None:
    base, new = str(batteries["base"]), str(batteries["faults"])
    doc, done = compare_json(base, new, "--fail-on-regression")
    assert done.returncode == 3
    (pair,) = doc["comparisons"]
    assert pair["flips"] == []  # a fault is never a flip
    assert pair["unmeasured"]["kinds"] == {"provider_5xx": 5}
    assert pair["unmeasured"]["cells"] == 5 and pair["unmeasured"]["of"] == 40
    assert pair["cases"]["unmeasured"] == CASES[:5]
    assert pair["cases"]["compared"] == 15
    assert pair["verdict"] == "no detectable difference"  # what was measured is the same
    assert doc["gate"]["reason"] == (
        "too many unmeasured cells to tell: seat agent: 5 of 40 cells unmeasured "
        "(12.5% > 10%: provider_5xx 5)"
    )
    assert (
        brigade("compare", base, new, "--fail-on-regression", "--max-unmeasured", "13").returncode
        == 0
    )
    md = brigade("compare", base, new, "--markdown", "--fail-on-regression")
    assert md.returncode == 3
    assert "Unmeasured (not evidence): 5 of 40 cells (12.5%): provider_5xx 5" in md.stdout


def test_outputs_are_reproducible_byte_for_byte(batteries: dict[str, Path], tmp_path: Path) -> None:
    args = [str(batteries["base"]), str(batteries["worse"])]
    assert brigade("compare", *args, "--json").stdout == brigade("compare", *args, "--json").stdout
    pages = []
    for name in ("one.html", "two.html"):
        done = brigade("compare", *args, "--html", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
        pages.append((tmp_path / name).read_bytes())
    assert pages[0] == pages[1]


def test_two_seats_of_one_directory(tmp_path: Path) -> None:
    cases = CASES[:10]
    out = battery(
        tmp_path,
        "two",
        {},
        cases=cases,
        trials=3,
        seats={
            "old": {"rates": dict.fromkeys(cases, 1)},
            "new": {"rates": dict.fromkeys(cases, 1) | dict.fromkeys(cases[:6], 0)},
        },
    )
    doc, done = compare_json(str(out), "--seats", "old", "new", "--fail-on-regression")
    assert done.returncode == 1
    (pair,) = doc["comparisons"]
    assert (pair["base"]["seat"], pair["new"]["seat"]) == ("old", "new")
    assert pair["test"] == "sign_flip_exact"  # three trials a side: not McNemar
    assert pair["p_value"] == pytest.approx(2**-5)  # six cases of ten, all one way
    assert pair["trials"]["single"] is False
    assert pair["verdict"] == "worse"
    refused = brigade("compare", str(out))
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        "compare one output directory's seats with --seats A B (its seats: old, new), or give "
        "a second output directory"
    )
    typo = brigade("compare", str(out), "--seats", "old", "nwe")
    assert typo.returncode == 2
    assert "NEW has no seat 'nwe' (did you mean 'new'?) (its seats: old, new)" in typo.stderr


def test_bad_input_is_one_line_and_exit_2(batteries: dict[str, Path], tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    other = battery(tmp_path, "other", {}, cases=["z1", "z2"])
    for args, message in (
        ((str(plain), str(batteries["base"])), f"brigade: {plain}: no readable plan.json here"),
        ((str(tmp_path / "none"), str(batteries["base"])), "no such output directory"),
        ((str(batteries["base"]), str(other)), "share no case: nothing to compare"),
        ((str(batteries["base"]), str(other), "--json", "--markdown"), "not both"),
        ((str(batteries["base"]), str(other), "--margin", "-1"), "--margin: must not be negative"),
        ((str(batteries["base"]), str(other), "--max-unmeasured", "101"), "--max-unmeasured"),
        ((str(batteries["base"]), str(other), "--confidence", "1"), "--confidence"),
    ):
        done = brigade("compare", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_cases_only_in_one_side_are_listed_never_dropped(
    batteries: dict[str, Path], tmp_path: Path
) -> None:
    fewer = battery(tmp_path, "fewer", BASE_RATES | {"extra": 1}, cases=[*CASES[5:], "extra"])
    doc, done = compare_json(str(batteries["base"]), str(fewer))
    (pair,) = doc["comparisons"]
    assert pair["cases"]["only_base"] == CASES[:5]
    assert pair["cases"]["only_new"] == ["extra"]
    assert pair["cases"]["shared"] == 15
    text = brigade("compare", str(batteries["base"]), str(fewer)).stdout
    assert "only in BASE: c00, c01, c02, c03, c04" in text
    assert "only in NEW: extra" in text


def test_the_page_is_self_contained_escaped_and_links_both_cells(tmp_path: Path) -> None:
    cases = [*CASES[:8], HOSTILE]
    base = battery(tmp_path, "base", {HOSTILE: 1}, cases=cases)
    new = battery(tmp_path, "new", {HOSTILE: 0}, cases=cases)
    page = tmp_path / "pages" / "compare.html"
    done = brigade("compare", str(base), str(new), "--html", str(page), "--markdown")
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert "<script" not in text and "<img" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;|`x`" in text
    new_cell = json.loads((new / "plan.json").read_text())["cells"][-1]["cell_id"]
    assert f'href="../new/out/report/index_files/cells/{new_cell[:2]}.html#c-{new_cell}"' in text
    assert str(tmp_path) not in text
    # markdown: the id stays in one table cell, as inline code
    assert "| `<img src=x onerror=alert(1)>\\|'x'` | 1/1 | 0/1 | pass → fail |" in done.stdout


def test_the_page_refuses_links_and_output_directories(
    batteries: dict[str, Path], tmp_path: Path
) -> None:
    base, new = str(batteries["base"]), str(batteries["identical"])
    target = tmp_path / "kept.txt"
    target.write_text("mine")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    inside = batteries["base"] / "summary.json"
    before = inside.read_bytes()
    for page, message in ((link, "a symbolic link"), (inside, "inside the output directory")):
        done = brigade("compare", base, new, "--html", str(page))
        assert done.returncode == 2 and message in done.stderr, done.stderr
    assert target.read_text() == "mine" and inside.read_bytes() == before


def test_a_page_that_would_leak_is_not_written(batteries: dict[str, Path], tmp_path: Path) -> None:
    from brigade.outdir.comparison import compare_batteries, read_battery
    from brigade.report.compare import write_page

    base, new = read_battery(batteries["base"]), read_battery(batteries["one_flip"])
    doc = compare_batteries(base, new)
    # a text brigade writes naming where the battery lives (a bug it guards against)
    doc["comparisons"][0]["verdict_text"] = f"read from {batteries['base']}"
    result = write_page(doc, base, new, tmp_path / "leak.html")
    assert result.path is None
    assert [leak.kind for leak in result.leaks] == ["absolute path"]
    assert not (tmp_path / "leak.html").exists()


def test_original_tool_directories_compare_by_coordinate(tmp_path: Path) -> None:
    from original_outdir import build

    first = tmp_path / "first"
    cells = build(first)
    second = tmp_path / "second"
    shutil.copytree(first, second)
    doc, done = compare_json(str(first), str(second), "--fail-on-regression")
    assert doc["base"]["original"] is True and doc["new"]["original"] is True
    (pair,) = doc["comparisons"]
    # done (accepted), wrong (rejected), crashed (execution_error) are evidence; free is
    # unscored; verify (grader_error) and midway (running) are unmeasured
    assert pair["cases"]["compared"] == 3
    assert pair["cases"]["unmeasured"] == ["verify", "midway"]
    assert pair["unmeasured"]["kinds"] == {"grader_error": 2, "unfinished": 2}
    assert pair["unscored"] == 2
    assert pair["flips"] == [] and pair["trials"]["unchanged"] == 3
    assert done.returncode == 3  # 4 of 10 cells unmeasured
    assert "Traceback" not in done.stderr
    listed = {(c["side"], c["cell_id"]) for c in pair["unmeasured"]["list"]}
    assert ("base", cells["verify"].cell_id) in listed and (
        "new",
        cells["midway"].cell_id,
    ) in listed
