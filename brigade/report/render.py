"""Render report data for people: the self-contained HTML page and the terminal matrix."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brigade.report.costs import (
    COST_HEADINGS,
    COST_NOTE,
    agents_table,
    cost_chart,
    cost_columns,
    cost_table_text,
)
from brigade.report.model import (
    ReportCell,
    cost_text,
    failure_reasons,
    grader_lines,
    state_class,
)
from brigade.report.pages import case_anchor, case_page, cell_anchor, cell_page

# a matrix entry links each trial's detail up to this many trials
TRIAL_LINKS = 12


@dataclass(frozen=True)
class Links:
    """Where the index page links to: its detail pages' folder and how they are named."""

    folder: str  # beside the page: index_files
    width: int  # hex digits naming a page

    def cell(self, cell_id: str) -> str:
        """The link to a cell's detail."""
        return f"{self.folder}/{cell_page(cell_id, self.width)}#{cell_anchor(cell_id)}"

    def case(self, case_id: str) -> str:
        """The link to a case's answers side by side."""
        return f"{self.folder}/{case_page(case_id, self.width)}#{case_anchor(case_id)}"


LEGEND = (
    "accepted/scored trials per seat x case; scored = accepted + rejected + execution_error "
    "(not timeout); mf = measurement failures (adapter_error, grader_error, timeout), never "
    "counted against the seat; unscored cells are not passes and not in the rate"
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f}%"


def _interval_text(interval: Sequence[float] | None) -> str:
    if interval is None:
        return "–"
    return f"{interval[0] * 100:.0f}–{interval[1] * 100:.0f}%"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.0f} pts"


def _colour(rate: float | None) -> str:
    """Red (0) to green (1) by accepted rate; grey when there is no rate."""
    if rate is None:
        return "#e5e5e5"
    return f"hsl({rate * 120:.0f},65%,78%)"


def _ratio(group: Mapping[str, Any]) -> str:
    """`3/5`, with measurement failures and unscored / unfinished cells noted."""
    head = f"{group['accepted']}/{group['scored']}" if group["scored"] else "–"
    notes = []
    if group["measurement_failures"]:
        notes.append(f"{group['measurement_failures']} mf")
    if group["unscored"]:
        notes.append(f"{group['unscored']} unscored")
    if group["unfinished"]:
        notes.append(f"{group['unfinished']} not run")
    return f"{head} ({', '.join(notes)})" if notes else head


def _grid(stats: Mapping[str, Any]) -> tuple[list[str], dict[tuple[str, str], Any]]:
    """Cases in plan order, and (seat, case) -> statistics."""
    rows = stats["by_seat_case"]
    cases = list(dict.fromkeys(row["case"] for row in rows))
    return cases, {(row["seat"], row["case"]): row for row in rows}


def _ks(estimates: Sequence[float | None]) -> str:
    shown = [f"{k}: {_percent(v)}" for k, v in enumerate(estimates, 1) if v is not None]
    return ", ".join(shown) or "–"


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
#matrix td.rate{text-align:center;min-width:6em}
#matrix small{display:block;color:#444}
.legend,.note{color:#555;font-size:.9em}
#filter{width:30em;max-width:100%;padding:.3em}
ul.graders{margin:0;padding-left:1.1em}
#cells{width:100%}#cells td{overflow-wrap:anywhere}
#cells td.state,#cells td.num{overflow-wrap:normal;white-space:nowrap}
tr.accepted td.state{color:#176117}tr.failed td.state{color:#a11}
tr.fault td.state{color:#8a5a00}
.trials{display:block;margin-top:.2em}.trials a.t{display:inline-block;min-width:1.3em;
margin:0 .1em;border-radius:3px;background:#fff;text-decoration:none;font-size:.85em}
a.accepted{color:#176117}a.failed{color:#a11}a.fault{color:#8a5a00}a.other{color:#555}
"""

SCRIPT = """
(function () {
  var STEP = 2000;
  function more(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : [];
  }
  // the cells: the first rows are in the page, the others are rendered when asked for
  var box = document.getElementById("filter");
  var seatBox = document.getElementById("seat-filter");
  var count = document.getElementById("count");
  var button = document.getElementById("more-cells");
  var extra = document.getElementById("cells-extra");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#cells tbody.static tr"));
  var waiting = Number(extra.getAttribute("data-count"));
  var items = null;
  var limit = 0;
  function apply() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var seat = seatBox ? seatBox.value : "";
    var asked = words.length || seat;
    function keep(text, itsSeat) {
      return (!seat || itsSeat === seat) &&
        words.every(function (word) { return text.indexOf(word) !== -1; });
    }
    var shown = 0;
    rows.forEach(function (row) {
      var kept = keep(row.getAttribute("data-text") || "", row.getAttribute("data-seat"));
      row.hidden = !kept;
      if (kept) { shown += 1; }
    });
    var matching = shown;
    var parts = [];
    var want = asked ? Math.max(limit, STEP) : limit;
    if (waiting && (want > 0 || asked)) {
      items = items || more("cells-more");
      items.forEach(function (item) {
        if (keep(item[0], item[2])) {
          matching += 1;
          if (parts.length < want) { parts.push(item[1]); }
        }
      });
    } else {
      matching += waiting;
    }
    extra.innerHTML = parts.join("");
    shown += parts.length;
    count.textContent = shown + " of " + (rows.length + waiting) + " cells shown" +
      (matching > shown ? " (" + matching + " match)" : "");
    button.hidden = matching <= shown;
  }
  box.addEventListener("input", function () { limit = 0; apply(); });
  if (seatBox) { seatBox.addEventListener("change", function () { limit = 0; apply(); }); }
  button.addEventListener("click", function () { limit += STEP; apply(); });
  // the matrix: cases past the first are rendered when asked for
  var cases = document.getElementById("more-cases");
  function allCases() {
    document.getElementById("matrix-extra").innerHTML = more("matrix-more").join("");
    cases.hidden = true;
  }
  if (cases) { cases.addEventListener("click", allCases); }
  // a link may ask for a filter (#filter=words) or for everything (#all)
  var hash = decodeURIComponent(window.location.hash.slice(1));
  if (hash.indexOf("filter=") === 0) { box.value = hash.slice(7); }
  if (hash === "all") {
    limit = rows.length + waiting;
    if (cases) { allCases(); }
  }
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""
# the page's one script, allowed by its hash: a script or handler that reached the page
# any other way (through a fault of escaping) does not run
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; "
    f"script-src '{SCRIPT_HASH}'; img-src data:; base-uri 'none'; form-action 'none'"
)
# rows (cells, matrix cases) in the page itself; the others wait in the page's data
STATIC_ROWS = 300


def _embedded(node_id: str, items: Sequence[Any]) -> str:
    """JSON data for the page's script, safe inside <script>: no `</` or `<!` in it (the
    rows' text is HTML-escaped, so every `<` is markup)."""
    data = json.dumps(items, ensure_ascii=False, separators=(",", ":"))
    data = data.replace("</", "<\\/").replace("<!", "<\\u0021")
    return f'<script type="application/json" id="{node_id}">{data}</script>'


def _trial_links(members: Sequence[ReportCell], links: Links) -> str:
    """A link per trial to its detail, named by its number and coloured by its state."""
    if not members or len(members) > TRIAL_LINKS:
        return ""
    anchors = []
    for cell in members:
        css = state_class(cell.state, cell.failure_reason)
        anchors.append(
            f'<a class="t {css}" href="{_e(links.cell(cell.cell_id))}" '
            f'title="{_e(cell.coordinate)}: {_e(cell.label)}">{cell.trial}</a>'
        )
    return f'<span class="trials">{"".join(anchors)}</span>'


def _matrix(
    stats: Mapping[str, Any], cells: Sequence[ReportCell] = (), links: Links | None = None
) -> str:
    seats = list(stats["by_seat"])
    cases, cell = _grid(stats)
    members: dict[tuple[str, str], list[ReportCell]] = {}
    for one in cells:
        members.setdefault((one.seat, one.case_id), []).append(one)
    head = "".join(f"<th>{_e(seat)}</th>" for seat in seats)
    rows = []
    for case in cases:
        tds = []
        for seat in seats:
            group = cell.get((seat, case))
            if group is None:
                tds.append('<td class="rate">–</td>')
                continue
            title = (
                f"{case} on {seat}: accepted {group['accepted']} of {group['scored']} scored; "
                f"95% interval {_interval_text(group['interval'])}; "
                f"measurement failures {group['measurement_failures']}; "
                f"unscored {group['unscored']}; not run {group['unfinished']}"
            )
            ratio = _e(_ratio(group))
            trials = ""
            if links is not None:
                ratio = f'<a href="{_e(links.case(case))}">{ratio}</a>'
                trials = _trial_links(members.get((seat, case), []), links)
            tds.append(
                f'<td class="rate" style="background:{_colour(group["accepted_rate"])}" '
                f'title="{_e(title)}">{ratio}'
                f"<small>{_e(_percent(group['accepted_rate']))}</small>{trials}</td>"
            )
        head_cell = _e(case)
        if links is not None:
            head_cell = f'<a href="{_e(links.case(case))}">{head_cell}</a>'
        rows.append(f"<tr><th>{head_cell}</th>{''.join(tds)}</tr>")
    rest = rows[STATIC_ROWS:]
    more = ""
    if rest:
        more = (
            f'<tbody id="matrix-extra"></tbody>'
            f'<tbody><tr><td colspan="{len(seats) + 1}"><button id="more-cases" type="button">'
            f"show the other {len(rest)} cases</button></td></tr></tbody>"
        )
    totals = "".join(
        f'<td class="rate" style="background:{_colour(stats["by_seat"][s]["accepted_rate"])}">'
        f"{_e(_ratio(stats['by_seat'][s]))}"
        f"<small>{_e(_percent(stats['by_seat'][s]['accepted_rate']))} "
        f"[{_e(_interval_text(stats['by_seat'][s]['interval']))}]</small></td>"
        for s in seats
    )
    return (
        f'<table id="matrix"><thead><tr><th>case \\ seat</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows[:STATIC_ROWS])}</tbody>{more}"
        f"<tfoot><tr><th>all cases</th>{totals}</tr></tfoot></table>"
        + (_embedded("matrix-more", rest) if rest else "")
        + f'<p class="legend">{_e(LEGEND)}</p>'
    )


def _bar_chart(by_seat: Mapping[str, Mapping[str, Any]]) -> str:
    """Accepted rate per seat as horizontal bars with Wilson interval whiskers (inline SVG)."""
    label_width, plot, row = 170, 420, 30
    height = row * len(by_seat) + 30
    parts = [
        f'<svg id="rates" xmlns="http://www.w3.org/2000/svg" width="{label_width + plot + 150}" '
        f'height="{height}" role="img" aria-label="accepted rate per seat">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label_width + tick * plot
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{height - 6}" font-size="11" text-anchor="middle">'
            f"{tick * 100:.0f}%</text>"
        )
    for index, (seat, group) in enumerate(by_seat.items()):
        y = index * row + 6
        rate, interval = group["accepted_rate"], group["interval"]
        label = seat if len(seat) <= 24 else seat[:23] + "…"
        parts.append(
            f'<g class="bar"><title>{_e(seat)}: {_e(_percent(rate))} of {group["scored"]} '
            f"scored, 95% interval {_e(_interval_text(interval))}</title>"
            f'<text x="{label_width - 8}" y="{y + 14}" font-size="12" text-anchor="end">'
            f"{_e(label)}</text>"
        )
        if rate is None:
            parts.append(
                f'<text x="{label_width + 4}" y="{y + 14}" font-size="12" fill="#666">'
                "no scored trials</text></g>"
            )
            continue
        parts.append(
            f'<rect x="{label_width}" y="{y}" width="{rate * plot:.1f}" height="18" '
            f'fill="{_colour(rate)}" stroke="#777"/>'
        )
        if interval is not None:
            low, high = (label_width + v * plot for v in interval)
            middle = y + 9
            parts.append(
                f'<line x1="{low:.1f}" y1="{middle}" x2="{high:.1f}" y2="{middle}" stroke="#222"/>'
                f'<line x1="{low:.1f}" y1="{y + 3}" x2="{low:.1f}" y2="{y + 15}" stroke="#222"/>'
                f'<line x1="{high:.1f}" y1="{y + 3}" x2="{high:.1f}" y2="{y + 15}" stroke="#222"/>'
            )
        parts.append(
            f'<text x="{label_width + plot + 8}" y="{y + 14}" font-size="12">'
            f"{_e(_percent(rate))} (n={group['scored']})</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _seat_table(summary: Mapping[str, Any]) -> str:
    stats = summary["trial_stats"]
    rows = []
    for seat, group in stats["by_seat"].items():
        mean = "–" if group["mean_score"] is None else f"{group['mean_score']:.3f}"
        cells = [
            group["trials"] + group["unfinished"],
            group["trials"],
            group["scored"],
            group["accepted"],
            _percent(group["accepted_rate"]),
            _interval_text(group["interval"]),
            group["unscored"],
            group["measurement_failures"],
            group["unfinished"],
            mean,
            *cost_columns(summary, seat),
        ]
        rows.append(
            f"<tr><th>{_e(seat)}</th>"
            + "".join(f'<td class="num">{_e(v)}</td>' for v in cells)
            + f"<td>{_e(_ks(group['pass_at_k']))}</td><td>{_e(_ks(group['pass_hat_k']))}</td></tr>"
        )
    head = (
        "seat",
        "cells",
        "trials",
        "scored",
        "accepted",
        "rate",
        "95% interval",
        "unscored",
        "meas. failures",
        "not run",
        "mean score",
        *COST_HEADINGS,
        "pass@k",
        "pass^k",
    )
    return (
        '<table id="seats"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _comparisons(stats: Mapping[str, Any]) -> str:
    if not stats["comparisons"]:
        return '<p class="note">One seat: nothing to compare.</p>'
    rows = "".join(
        f"<tr><td>{_e(c['seats'][0])} − {_e(c['seats'][1])}</td>"
        f'<td class="num">{c["cases"]}</td><td class="num">{_e(_signed(c["difference"]))}</td>'
        f'<td class="num">{_e(_pts_interval(c["interval"]))}</td></tr>'
        for c in stats["comparisons"]
    )
    return (
        '<table id="comparisons"><thead><tr><th>seats</th><th>shared cases</th>'
        "<th>difference in accepted rate</th><th>95% interval</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        '<p class="note">Paired by case: mean of the per-case differences in accepted rate over '
        "the cases both seats have scored trials of, with a Student t interval "
        "(no interval under two shared cases).</p>"
    )


def _adaptive(summary: Mapping[str, Any]) -> str:
    """Adaptive trials: each rule, its comparison (a `decided` rule) and why each case's seat
    stopped (summary.json's `adaptive`); nothing for a plan without adaptive cases."""
    rules = summary.get("adaptive")
    if not rules:
        return ""
    parts = ["<h2>Adaptive trials</h2>"]
    for entry in rules:
        rule = entry["rule"]
        until = rule["until"]
        asked = (
            f"until the {until.get('confidence', 0.95):.0%} interval of the accepted rate is at "
            f"most {until['ci_width']:g} wide"
            if "ci_width" in until
            else f"until {' or '.join(until['decided'])} is decided better"
        )
        parts.append(
            f'<p class="note">{len(entry["cases"])} case(s): {rule["min"]} trials to start, '
            f"then a round at a time up to {rule['max']}, {_e(asked)}.</p>"
        )
        comparison = entry.get("comparison")
        if comparison is not None:
            first, second = comparison["seats"]
            pairs = comparison["discordant"]
            said = (
                f"decided: {comparison['better']} is better"
                if comparison["decided"]
                else "not decided"
            )
            parts.append(
                f"<p>{_e(first)} vs {_e(second)}: {_e(said)} ({pairs['first_better']} trials "
                f"only {_e(first)} passed, {pairs['second_better']} only {_e(second)}).</p>"
            )
        rows = "".join(
            f"<tr><td>{_e(stop['case'])}</td><td>{_e(stop['seat'])}</td>"
            f'<td class="num">{stop["trials"]}</td><td>{_e(stop["reason"])}</td>'
            f"<td>{_e(stop['detail'])}</td></tr>"
            for stop in entry["stops"]
        )
        parts.append(
            '<table class="adaptive"><thead><tr><th>case</th><th>seat</th><th>trials</th>'
            f"<th>stopped</th><th>why</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    return "\n".join(parts)


def _pts_interval(interval: Sequence[float] | None) -> str:
    if interval is None:
        return "–"
    return f"{interval[0] * 100:+.0f} to {interval[1] * 100:+.0f} pts"


def _failure_table(cells: Sequence[ReportCell], seats: Sequence[str]) -> str:
    table = failure_reasons(cells)
    if not table:
        return '<p class="note" id="failures">No measurement failures.</p>'
    head = "".join(f"<th>{_e(seat)}</th>" for seat in seats)
    rows = "".join(
        f"<tr><th>{_e(reason)}</th>"
        + "".join(f'<td class="num">{per_seat.get(seat, 0)}</td>' for seat in seats)
        + f'<td class="num">{sum(per_seat.values())}</td></tr>'
        for reason, per_seat in table.items()
    )
    return (
        f'<table id="failures"><thead><tr><th>reason</th>{head}<th>total</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _cell_table(cells: Sequence[ReportCell], links: Links | None = None) -> str:
    """The cell list: the first rows in the page, the others as data the script renders."""
    rows = _cell_rows(cells, links)
    rest = rows[STATIC_ROWS:]
    static = "".join(row for _, row, _ in rows[:STATIC_ROWS])
    return (
        '<table id="cells"><thead><tr><th>coordinate</th><th>state</th><th>attempt</th>'
        "<th>duration</th><th>score</th><th>cost</th><th>graders</th></tr></thead>"
        f'<tbody class="static">{static}</tbody>'
        f'<tbody id="cells-extra" data-count="{len(rest)}"></tbody></table>'
        '<p><button id="more-cells" type="button" hidden>show more cells</button></p>'
        + (_embedded("cells-more", [list(row) for row in rest]) if rest else "")
    )


def _cell_rows(
    cells: Sequence[ReportCell], links: Links | None = None
) -> list[tuple[str, str, str]]:
    """(filter text, table row, seat) of every cell."""
    rows = []
    for cell in cells:
        graders = "".join(f"<li>{_e(line)}</li>" for line in grader_lines(cell))
        detail = _e(cell.failure_detail or "")
        duration = "–" if cell.duration is None else f"{cell.duration:.2f} s"
        score = "–" if cell.score is None else f"{cell.score:.3f}"
        text = f"{cell.coordinate} {cell.label}".lower()
        row = (
            f'<tr class="{state_class(cell.state, cell.failure_reason)}" data-text="{_e(text)}" '
            f'data-seat="{_e(cell.seat)}">'
            f"<td>{_coordinate(cell, links)}</td>"
            f'<td class="state">{_e(cell.label)}</td>'
            f'<td class="num">{_e(cell.attempt if cell.attempt is not None else "–")}</td>'
            f'<td class="num">{_e(duration)}</td><td class="num">{_e(score)}</td>'
            f'<td class="num">{_e(cost_text(cell.usage))}</td>'
            f'<td><ul class="graders">{graders}</ul>{detail}</td></tr>'
        )
        rows.append((text, row, cell.seat))
    return rows


def _coordinate(cell: ReportCell, links: Links | None) -> str:
    if links is None:
        return _e(cell.coordinate)
    return f'<a href="{_e(links.cell(cell.cell_id))}">{_e(cell.coordinate)}</a>'


def html_page(
    summary: Mapping[str, Any], cells: Sequence[ReportCell], links: Links | None = None
) -> str:
    """The HTML report: one self-contained file (inline CSS, JS and SVG; no network), with
    links to its detail pages when `links` says where they are."""
    stats = summary["trial_stats"]
    seats = list(stats["by_seat"])
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items() if v) or "no cells"
    stale = {k: v for k, v in summary["stale_counts"].items() if v}
    stale_text = (
        f"{sum(stale.values())} stale cell(s) from an earlier plan, kept on disk and not "
        f"counted: {', '.join(f'{k} {v}' for k, v in stale.items())}"
        if stale
        else "No stale cells."
    )
    failures = summary["measurement_failures"]
    seat_options = "".join(f'<option value="{_e(seat)}">{_e(seat)}</option>' for seat in seats)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>brigade report: {_e(summary["name"])}</title>
<style>{CSS}</style>
</head>
<body>
<h1>brigade report: {_e(summary["name"])}</h1>
<p id="overview">{summary["total_cells"]} cells: {_e(counts)}.
Outcome <strong>{_e(summary["outcome"])}</strong> (exit {_e(summary["exit_code"])}).
Measurement failures: {failures}. Manifest {_e(summary["manifest_digest"])}.</p>
{agents_table(summary)}
<h2>Accepted rate by seat and case</h2>
{_matrix(stats, cells, links)}
<h2>Accepted rate by seat (95% Wilson interval)</h2>
{_bar_chart(stats["by_seat"])}
{_seat_table(summary)}
<p class="note">pass@k: chance that at least one of k trials is accepted; pass^k: that all k \
are (unbiased estimators over scored trials, averaged over cases for a seat). \
{_e(COST_NOTE)}</p>
<h2>Accepted rate against cost</h2>
{cost_chart(summary)}
<h2>Paired comparisons</h2>
{_comparisons(stats)}
{_adaptive(summary)}
<h2>Measurement failures by reason</h2>
{_failure_table(cells, seats)}
<h2>Stale cells</h2>
<p id="stale">{_e(stale_text)}</p>
<h2>Cells</h2>
<p><input id="filter" type="search" placeholder="filter by coordinate or state" \
aria-label="filter cells"> <label>seat <select id="seat-filter" aria-label="seat">\
<option value="">any</option>{seat_options}</select></label> <span id="count"></span></p>
{_cell_table(cells, links)}
<script>{SCRIPT}</script>
</body>
</html>
"""


def text_matrix(summary: Mapping[str, Any]) -> str:
    """The seat x case matrix as text: `accepted/scored` with measurement failures noted."""
    stats = summary["trial_stats"]
    seats = list(stats["by_seat"])
    cases, cell = _grid(stats)
    grid = [["case", *seats]]
    for case in cases:
        grid.append([case] + [_ratio(cell[s, case]) if (s, case) in cell else "–" for s in seats])
    grid.append(
        ["all"]
        + [
            f"{_ratio(stats['by_seat'][s])} {_percent(stats['by_seat'][s]['accepted_rate'])}"
            for s in seats
        ]
    )
    widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
    lines = [
        "  ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip() for row in grid
    ]
    return "\n".join([*lines, *textwrap.wrap(LEGEND, 88)])


def text_costs(summary: Mapping[str, Any]) -> str:
    """Cost per seat as text (printed under the matrix by `brigade show`)."""
    return cost_table_text(summary)
