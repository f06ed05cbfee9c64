"""What a reader sees in the viewer and in the static report alike: the cost chart's labels
apart and its axis at one precision, the state column whole, a cost column and a seat
filter, a grader's pattern as written, usage over every attempt, a reused seat run marked,
what the judges spent, and the prompt only in the viewer and only when asked
(`--show-prompts`). Each is checked in both, the layout ones in Chromium."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import FAKE_CLI, REPO, Project
from test_view import Served, browser, shot  # noqa: F401 (browser: the module's Chromium)

from brigade.report.serve import open_viewer

FAKE_JUDGE = f"exec:{{python}} {REPO / 'tests' / 'agents' / 'fake_judge.py'}"
DOLLAR = '{"input_tokens": 1000, "output_tokens": 50, "cost_usd": 1.0}'
SPENT = '{"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.02}'
PATTERN = r'"ok"\s*:\s*true\b'
PROMPT_MARK = "prompt-flaw-3e7a"


def roster(project: Project, judge_model: str) -> None:
    """Two seats alike (the same cost and rate: one point of the chart) and a $1 judge."""
    retry = {"max": 1, "backoff_seconds": 0}
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI, "retry": retry},
            "twin": {"cli": FAKE_CLI, "retry": retry},
            "critic": {"cli": FAKE_JUDGE, "model": judge_model, "env": {"JUDGE_USAGE": DOLLAR}},
        }
    )


def manifest(project: Project, rubric_of_two: str) -> None:
    """Two cases on both seats, graded by a pattern and a judge."""
    prompt = f'usage: {SPENT}\ntempfail_before: 2 rate_limited: busy\nanswer: {{"ok": true}}'
    cases = [
        {
            "id": case,
            "prompt": f"{prompt}\n{PROMPT_MARK} {case}",
            "graders": [
                {"type": "regex_output", "pattern": PATTERN},
                {"type": "judge", "seat": "critic", "rubric": rubric},
            ],
        }
        for case, rubric in (("one", "Says ok."), ("two", rubric_of_two))
    ]
    project.write_manifest(cases, seats=("agent", "twin"))


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """Each cell two attempts of $0.02 (a rate limit, then the answer) and a $1 judge; then
    case two's judge changed (new cells, which reuse their seat runs and are judged again)."""
    project = Project(tmp_path_factory.mktemp("flaws"))
    roster(project, "pass")
    manifest(project, "Says ok.")
    cache = str(tmp_path_factory.mktemp("cache"))
    done = project.run(BRIGADE_CACHE_DIR=cache)
    assert done.returncode == 0, done.stderr
    manifest(project, "Says ok, plainly.")
    done = project.run(BRIGADE_CACHE_DIR=cache)
    assert done.returncode == 0, done.stderr
    yield project


def report_pages(project: Project) -> tuple[str, str, str]:
    """The static report's index and the detail pages of one:agent:1 and two:agent:1."""
    report = project.out / "report"
    index = (report / "index.html").read_text()
    pages = [page.read_text() for page in (report / "index_files").rglob("*.html")]
    details = [page for page in pages if 'class="detail' in page]

    def detail(coordinate: str) -> str:
        return next(page for page in details if f"<h2>{coordinate} <" in page)

    return index, detail("one:agent:1"), detail("two:agent:1")


def cell_id(project: Project, coordinate: str) -> str:
    plan = json.loads((project.out / "plan.json").read_text())
    return next(c["cell_id"] for c in plan["cells"] if c["coordinate"] == coordinate)


def text_of(page: str) -> str:
    """A page's text as a reader sees it (tags out, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def chart_of(page: str) -> str:
    return page.split('<svg id="cost-chart"', 1)[1].split("</svg>", 1)[0]


def check_statistics(page: str, where: str) -> None:
    """The chart, its axis and the seat table as the index shows them (report or viewer)."""
    chart = chart_of(page)
    labels = re.findall(r'<text x="[\d.]+" y="[\d.]+" font-size="12">([^<]*)</text>', chart)
    assert labels == ["agent, twin"], (where, labels)  # one point, one label
    ticks = re.findall(r'text-anchor="middle">\$([\d.]+)</text>', chart)
    assert len(ticks) == 5 and len({len(t.split(".")[-1]) for t in ticks[1:]}) == 1, ticks
    seats = page.split('<table id="seats">', 1)[1].split("</table>", 1)[0]
    assert "<th>judges&#x27; cost</th>" in seats or "<th>judges' cost</th>" in seats, where
    for row in re.findall(r"<tr><th>(?:agent|twin)</th>.*?</tr>", seats):
        assert '<td class="num">$2.0000</td>' in row, (where, row)  # a $1 judge on each cell


def check_cells(one: str, two: str, where: str) -> None:
    """Cells' details (report or viewer): the pattern as written, usage over both attempts
    (one), the reused seat run marked (two), what the judge spent."""
    for page in (one, two):
        text = text_of(page)
        assert f"pattern /{PATTERN}/ found" in text, where
        assert PATTERN.replace("\\", "\\\\") not in text, where  # never escaped again
        graders = page.split("<th>spent (judges)</th>", 1)[1].split("</table>", 1)[0]
        assert "$1.0000" in graders, where
    text = text_of(one)
    assert "over its 2 attempts: 200 input tokens, 20 output tokens" in text, where
    assert "$0.0400" in text, where
    assert re.search(r"reused run of cell [0-9a-f]{12}, attempt \d", text_of(two)), where


def test_the_static_report_shows_them_and_never_the_prompt(judged: Project) -> None:
    index, one, two = report_pages(judged)
    check_statistics(index, "report")
    check_cells(one, two, "report")
    cells = index.split('<table id="cells">', 1)[1].split("</table>", 1)[0]
    assert "<th>cost</th>" in cells and 'id="seat-filter"' in index
    row = re.search(r'<tr [^>]*data-text="one:agent:1 [^"]*".*?</tr>', cells)
    assert row is not None and '<td class="num">$0.0400</td>' in row[0]
    for page in (judged.out / "report").rglob("*"):
        if page.is_file():
            assert PROMPT_MARK not in page.read_text(errors="replace"), page


def test_the_viewer_shows_them_and_the_prompt_only_when_asked(judged: Project) -> None:
    one, two = cell_id(judged, "one:agent:1"), cell_id(judged, "two:agent:1")
    for show in (False, True):
        served = Served(open_viewer([judged.out], show_prompts=show))
        try:
            stats = served.under("0/api/stats")[2].decode()
            cell = served.under(f"0/cell/{one}")[2].decode()
            other = served.under(f"0/cell/{two}")[2].decode()
            index = served.under("0/")[2].decode()
            listed = served.json("0/api/cells")
        finally:
            served.close()
        # the fragment is a tree of nodes: its text as the page builds it
        check_statistics(nodes_html(json.loads(stats)["nodes"]), "viewer")
        check_cells(cell, other, "viewer")
        assert "<th>cost</th>" in index and 'id="f-seat"' in index
        # the cell list's cost as every page shows money (case one: both attempts)
        costs = {row[1]: row[listed["fields"].index("cost_text")] for row in listed["rows"]}
        assert costs["one:agent:1"] == "$0.0400" == costs["one:twin:1"], costs
        assert ('<pre class="prompt">' in cell) is show
        assert (PROMPT_MARK in cell) is show and (PROMPT_MARK in other) is show
        assert PROMPT_MARK not in stats and PROMPT_MARK not in index


def nodes_html(nodes: list[Any]) -> str:
    """The HTML a tree of nodes stands for (attributes escaped as the report writes them)."""
    parts = []
    for node in nodes:
        if isinstance(node, str):
            parts.append(html.escape(node, quote=True))
            continue
        tag, attrs, *children = node
        shown = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in attrs.items())
        parts.append(f"<{tag}{shown}>{nodes_html(children)}</{tag}>")
    return "".join(parts)


# a state cell's text on one line: its text's boxes are one line high
ONE_LINE = """(cells) => cells.map((cell) => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  const lines = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
  return [cell.textContent, lines.size];
})"""


def test_the_state_column_never_breaks_a_word_in_a_narrow_window(
    judged: Project,
    browser: Any,  # noqa: F811
) -> None:
    """In a window too narrow for the cell list, the state column keeps each state whole, in
    the viewer's index and in the report's."""
    served = Served(open_viewer([judged.out]))
    page = browser.new_page(viewport={"width": 420, "height": 900})
    try:
        page.goto(served.url + "0/")
        page.wait_for_selector("body[data-stats='1']")
        states = page.locator("#rows td.state").evaluate_all(ONE_LINE)
        assert states and all(lines == 1 for _, lines in states), states
        assert {text for text, _ in states} == {"accepted"}
        shot(page, "index-narrow")
        page.goto((judged.out / "report" / "index.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        states = page.locator("#cells tbody.static td.state").evaluate_all(ONE_LINE)
        assert states and all(lines == 1 for _, lines in states), states
        shot(page, "report-narrow")
    finally:
        page.close()
        served.close()
