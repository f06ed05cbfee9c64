"""Usage in the reports: each seat's agent in the header, cost columns, the accepted rate
against cost chart with its Pareto front (rendered in headless Chromium), JUnit properties,
and cost per seat under `brigade show`'s matrix; unknown shown as unknown, never 0."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from conftest import CHROMIUM, REPO, Project, chromium

from brigade.core.usage import money
from brigade.report.costs import Point, pareto_front

JUNIT_XSD = REPO / "tests" / "data" / "junit.xsd"

AGENT = """
import json, os, sys
case = sys.stdin.read().strip()
cost = os.environ.get("COST")
if cost:
    usage = {"input_tokens": 1000, "output_tokens": 100, "cost_usd": float(cost),
             "model": os.environ["BRIGADE_MODEL"] + "-2025"}
    with open(os.environ["BRIGADE_USAGE_FILE"], "w") as handle:
        json.dump(usage, handle)
print("yes" if case in os.environ["GOOD"].split(",") else "no")
"""


@pytest.fixture(scope="module")
def costly(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """Four seats over four cases: cheap (25% at $0.01 a cell), mid (75% at $0.02), pricey
    (50% at $0.05: worse and dearer than mid) and mystery (100%, cost unknown)."""
    project = Project(tmp_path_factory.mktemp("costly"))
    agent = project.root / "agent.py"
    agent.write_text(AGENT)
    cli = f"exec:{{python}} {agent}"
    seats = {
        "cheap": {"cli": cli, "model": "m-cheap", "env": {"COST": "0.01", "GOOD": "a"}},
        "mid": {"cli": cli, "model": "m-mid", "env": {"COST": "0.02", "GOOD": "a,b,c"}},
        "pricey": {"cli": cli, "model": "m-big", "env": {"COST": "0.05", "GOOD": "a,b"}},
        "mystery": {"cli": cli, "env": {"GOOD": "a,b,c,d"}},
    }
    project.write_roster(seats)
    yes = [{"type": "exact_output", "expected": "yes"}]
    project.write_manifest(
        [{"id": case, "prompt": case, "graders": yes} for case in "abcd"], seats=tuple(seats)
    )
    done = project.doit()
    assert done.returncode == 1, done.stderr
    return project


def test_the_summary_prices_every_seat(costly: Project) -> None:
    by_seat = costly.summary()["by_seat"]
    shown = {
        seat: (
            data["usage_all_attempts"]["cost_usd"],
            data["usage_all_attempts"]["cost_usd_per_accepted"],
            data["usage_all_attempts"]["cells_cost_unknown"],
            data["agent"]["models_used"],
        )
        for seat, data in by_seat.items()
    }
    assert shown == {
        "cheap": (0.04, 0.04, 0, ["m-cheap-2025"]),
        "mid": (0.08, pytest.approx(0.08 / 3), 0, ["m-mid-2025"]),
        "pricey": (0.2, 0.1, 0, ["m-big-2025"]),
        "mystery": (None, None, 4, []),
    }


def test_the_html_header_table_and_chart(costly: Project) -> None:
    page = (costly.out / "report" / "index.html").read_text()
    agents = page.split('<table id="agents">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><th>([^<]*)</th>(.*?)</tr>", agents)
    cells = {seat: re.findall(r"<td>([^<]*)</td>", rest) for seat, rest in rows}
    day = costly.summary()["by_seat"]["mid"]["agent"]["first_started_at"][:10]
    cli = "exec:{python} &lt;manifest-dir&gt;/agent.py"  # projected: no path of this machine
    assert cells["mid"] == [cli, "m-mid", "m-mid-2025", "–", day]
    assert cells["mystery"][1:3] == ["(the CLI&#x27;s default)", "–"]
    seats = page.split('<table id="seats">', 1)[1].split("</table>", 1)[0]
    assert "<th>cost</th><th>tokens</th><th>cost per accepted</th>" in seats
    mid = seats.split("<tr><th>mid</th>", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">$0.0800</td><td class="num">4,400</td>' in mid
    assert '<td class="num">$0.0267</td>' in mid
    mystery = seats.split("<tr><th>mystery</th>", 1)[1].split("</tr>", 1)[0]
    # unknown stays unknown: never $0
    assert '<td class="num">– (4 of 4 cells unknown)</td>' in mystery
    assert "$0.0000" not in page
    chart = page.split('<svg id="cost-chart"', 1)[1].split("</svg>", 1)[0]
    groups = re.findall(r'<g class="seat( pareto)?" data-seat="([^"]+)">', chart)
    assert {seat: bool(front) for front, seat in groups} == {
        "cheap": True,
        "mid": True,
        "pricey": False,  # dearer and less accurate than mid
    }
    assert "Not plotted: mystery (cost unknown)." in page


def test_junit_carries_tokens_and_cost(costly: Project) -> None:
    data = (costly.out / "report" / "junit.xml").read_bytes()
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(data.decode())
    root = ET.fromstring(data)
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert {k: v for k, v in properties["b:mid:1"].items() if k not in ("cell_id",)} == {
        "attempt": "1",
        "state": "accepted",
        "input_tokens": "1000",
        "output_tokens": "100",
        "total_tokens": "1100",
        "cost_usd": "0.02",
        "usage_attempts": "1",
    }
    # unknown usage: no token or cost property at all (never 0), and the total says partial
    assert {k: v for k, v in properties["a:mystery:1"].items() if k != "cell_id"} == {
        "attempt": "1",
        "state": "accepted",
        "usage_attempts": "1",
        "usage_partial": "true",
    }


def test_show_prints_cost_per_seat_under_the_matrix(costly: Project) -> None:
    shown = costly.brigade("show", str(costly.out))
    assert shown.returncode == 0, shown.stderr
    costs = shown.stdout.split("\n\nseat ", 2)[-1]
    assert "seat " + costs == (
        "seat        cost  per cell  per accepted  tokens  unknown\n"
        "cheap    $0.0400   $0.0100       $0.0400   4,400\n"
        "mid      $0.0800   $0.0200       $0.0267   4,400\n"
        "pricey   $0.2000   $0.0500       $0.1000   4,400\n"
        "mystery        –         –             –       –  4 of 4 cells\n"
        "cost per seat over every attempt (failed and retried ones too); unknown: cells whose\n"
        "cost is unknown (left out of the totals)\n"
    )


def test_report_json_has_the_usage(costly: Project) -> None:
    shown = costly.brigade("report", str(costly.out), "--json")
    assert shown.returncode == 1, shown.stderr  # the results' exit code: rejected cells
    document = json.loads(shown.stdout)
    assert document["usage_all_attempts"]["cells_cost_unknown"] == 4
    [cell] = [c for c in document["cells"] if c["coordinate"] == "a:mystery:1"]
    assert cell["usage_all_attempts"]["cost_usd"] is None


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_cost_chart_renders_in_headless_chromium(costly: Project, tmp_path: Path) -> None:
    page = costly.out / "report" / "index.html"
    done = chromium(tmp_path / "profile", "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'data-ready="1"' in dom  # the page's script ran to its end
    chart = dom.split('<svg id="cost-chart"', 1)[1].split("</svg>", 1)[0]
    assert chart.count("<circle ") == 3
    assert chart.count('class="seat pareto"') == 2
    assert '<polyline class="front"' in chart
    shot = tmp_path / "chart.png"
    done = chromium(
        tmp_path / "profile", "--window-size=1200,2000", f"--screenshot={shot}", page.as_uri()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pareto_front() -> None:
    points = [
        Point("a", 0.01, 0.25, None, False),
        Point("b", 0.02, 0.75, None, False),
        Point("c", 0.05, 0.5, None, False),
        Point("d", 0.02, 0.75, None, False),  # a tie is not beaten
        Point("e", 0.01, 0.1, None, False),  # as cheap as a, less accurate
    ]
    assert pareto_front(points) == {"a", "b", "d"}
    assert pareto_front([]) == set()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"),
        (0, "$0.0000"),
        (0.04, "$0.0400"),
        (0.000559, "$0.000559"),
        (1e-9, "<$0.000001"),
        (1234.5, "$1,234.50"),
    ],
)
def test_money(value: float | None, text: str) -> None:
    assert money(value) == text


def test_axis_labels_share_one_precision() -> None:
    from brigade.report.costs import tick_digits, tick_text

    top = 0.01
    digits = tick_digits(top / 4)
    labels = [tick_text(top * step / 4, digits) for step in range(5)]
    assert labels == ["$0", "$0.0025", "$0.0050", "$0.0075", "$0.0100"]
    assert [tick_text(v, tick_digits(0.5)) for v in (0.5, 1.0, 2.0)] == ["$0.50", "$1.00", "$2.00"]
    # a quarter of $0.05 is shown as it is, not rounded away from its gridline
    digits = tick_digits(0.05 / 4)
    labels = [tick_text(0.05 * step / 4, digits) for step in range(5)]
    assert labels == ["$0", "$0.0125", "$0.0250", "$0.0375", "$0.0500"]
    assert [tick_text(v, tick_digits(2.5)) for v in (2.5, 5, 7.5)] == ["$2.50", "$5.00", "$7.50"]


def test_labels_of_seats_at_one_point_are_one_label_and_near_ones_move_apart() -> None:
    from brigade.report.costs import LABEL_HEIGHT, place_labels

    placed = place_labels([(100, 50, "opus"), (100, 50, "sonnet"), (102, 52, "haiku")])
    assert placed[0][2] == "opus, sonnet, haiku" and placed[1][2] is None
    placed = place_labels([(100, 50, "opus"), (110, 55, "sonnet"), (400, 50, "far")])
    (x1, y1, _), (x2, y2, _), (_, y3, _) = placed
    assert abs(y2 - y1) >= LABEL_HEIGHT and y3 == 54


def test_the_cell_list_has_a_cost_column_and_a_seat_filter(costly: Project, tmp_path: Path) -> None:
    page = (costly.out / "report" / "index.html").read_text()
    cells = page.split('<table id="cells">', 1)[1].split("</table>", 1)[0]
    assert "<th>score</th><th>cost</th><th>graders</th>" in cells
    row = re.search(r'<tr [^>]*data-seat="mid">.*?</tr>', cells)
    assert row is not None and '<td class="num">$0.0200</td>' in row[0]
    options = re.findall(r'<option value="([^"]*)">', page.split('id="seat-filter"', 1)[1])
    assert options[:5] == ["", "cheap", "mid", "pricey", "mystery"]
    if CHROMIUM is None:
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as manager:
        browser = manager.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page()
        tab.goto((costly.out / "report" / "index.html").as_uri())
        tab.wait_for_selector("body[data-ready='1']")
        tab.select_option("#seat-filter", "mid")
        tab.wait_for_selector("#count:text-matches('^4 of 16 cells shown')")
        assert tab.locator("#cells tr[data-seat='mid']:visible").count() == 4
        assert tab.locator("#cells tr[data-seat]:not([data-seat='mid']):visible").count() == 0
        browser.close()
