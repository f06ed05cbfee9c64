"""Reports people and CI can read: JUnit XML, a self-contained HTML page, a terminal matrix.

Reports leave the output directory, so they follow the export's rules: they are
built from projected receipts (no prompt text, paths relative to the output
directory, no seat env values) and every file written is checked for leaks.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import store, trials
from brigade.export import check_file, secrets_for
from brigade.identity import text_digest
from brigade.outcome import is_measurement_failure, is_real_failure
from brigade.plan import Plan
from brigade.projection import (
    Leak,
    Secrets,
    find_leaks_in_text,
    project_receipt,
    project_summary,
    scrub_text,
)
from brigade.results import current_receipts

REPORT_DIR = "report"
JUNIT_FILE = "junit.xml"
HTML_FILE = "index.html"
STATE_FILE = ".report-state.json"
# what the report shows of a receipt; everything else never reaches the projection
# (names come from the plan, through the same display names as the statistics)
REPORT_FIELDS = (
    "cell_id",
    "state",
    "attempt",
    "duration_seconds",
    "run_dir",
    "score",
    "failure_reason",
    "failure_detail",
)
GRADER_FIELDS = ("grader_id", "status", "score", "detail")
LEGEND = (
    "accepted/scored trials per seat x case; scored = accepted + rejected + execution_error "
    "(not timeout); mf = measurement failures (adapter_error, grader_error, timeout), never "
    "counted against the seat; unscored cells are not passes and not in the rate"
)
# characters XML 1.0 cannot carry, even escaped
_XML_ILLEGAL = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class ReportCell:
    """One planned cell as reports show it (projected: safe to leave the output directory)."""

    coordinate: str
    case_id: str
    seat: str
    trial: int
    cell_id: str
    state: str  # a receipt state, or "missing"
    attempt: int | None
    duration: float | None
    score: float | None
    failure_reason: str | None
    failure_detail: str | None
    run_dir: str | None
    graders: tuple[dict[str, Any], ...]

    @property
    def measurement_failure(self) -> bool:
        """An apparatus fault, not a statement about the seat."""
        return is_measurement_failure(self.state, self.failure_reason)

    @property
    def real_failure(self) -> bool:
        """rejected, or execution_error that is not a timeout."""
        return is_real_failure(self.state, self.failure_reason)

    @property
    def label(self) -> str:
        """The state, with its failure reason when there is one."""
        return f"{self.state} ({self.failure_reason})" if self.failure_reason else self.state

    def document(self) -> dict[str, Any]:
        """The cell as `brigade report --json` prints it."""
        return {
            "coordinate": self.coordinate,
            "case_id": self.case_id,
            "seat": self.seat,
            "trial": self.trial,
            "cell_id": self.cell_id,
            "state": self.state,
            "failure_reason": self.failure_reason,
            "failure_detail": self.failure_detail,
            "attempt": self.attempt,
            "duration_seconds": self.duration,
            "score": self.score,
            "run_dir": self.run_dir,
            "graders": list(self.graders),
        }


def display_names(names: Iterable[str], secrets: Secrets) -> dict[str, str]:
    """Name -> the name reports show: scrubbed, and kept unique when scrubbing made two equal."""
    shown: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        if name in shown:
            continue
        label = base = scrub_text(name, secrets)
        number = 2
        while label in taken:
            label, number = f"{base} ({number})", number + 1
        taken.add(label)
        shown[name] = label
    return shown


def report_cells(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, dict[str, Any] | None],
    secrets: Secrets,
    seats: Mapping[str, str],
    cases: Mapping[str, str],
) -> list[ReportCell]:
    """Every planned cell, from its projected receipt (a stand-in for cells with none)."""
    out_text = str(out.absolute())
    cells = []
    for cell in plan.cells:
        receipt = receipts.get(cell.cell_id)
        shown: dict[str, Any] = {"cell_id": cell.cell_id, "state": "missing"}
        if receipt is not None:
            shown.update({k: receipt[k] for k in REPORT_FIELDS if k in receipt})
            shown["graders"] = [
                {k: g.get(k) for k in GRADER_FIELDS} for g in receipt.get("graders", [])
            ]
        projected = project_receipt(shown, out_text, secrets)
        seat, case = seats[cell.seat.name], cases[cell.case_id]
        cells.append(
            ReportCell(
                coordinate=scrub_text(f"{case}:{seat}:{cell.trial}", secrets),
                case_id=case,
                seat=seat,
                trial=cell.trial,
                cell_id=projected["cell_id"],
                state=projected["state"],
                attempt=projected.get("attempt"),
                duration=projected.get("duration_seconds"),
                score=projected.get("score"),
                failure_reason=projected.get("failure_reason"),
                failure_detail=projected.get("failure_detail"),
                run_dir=projected.get("run_dir"),
                graders=tuple(projected.get("graders", [])),
            )
        )
    return cells


def _rename_stats(
    stats: Mapping[str, Any], seats: Mapping[str, str], cases: Mapping[str, str]
) -> dict[str, Any]:
    return {
        **stats,
        "by_seat": {seats[s]: group for s, group in stats["by_seat"].items()},
        "by_seat_case": [
            {**row, "seat": seats[row["seat"]], "case": cases[row["case"]]}
            for row in stats["by_seat_case"]
        ],
        "comparisons": [
            {**pair, "seats": [seats[s] for s in pair["seats"]]} for pair in stats["comparisons"]
        ],
    }


@dataclass(frozen=True)
class Report:
    """What every report shows, projected: the summary and the cells."""

    summary: dict[str, Any]
    cells: tuple[ReportCell, ...]
    secrets: Secrets


def build_report(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, dict[str, Any] | None],
    summary: Mapping[str, Any],
    *,
    workspace: Path | None = None,
    secrets: Secrets | None = None,
) -> Report:
    """The projected summary and cells of a plan (names scrubbed, paths relative, no prompts)."""
    out = out.absolute()
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    seats = display_names((c.seat.name for c in plan.cells), secrets)
    cases = display_names((c.case_id for c in plan.cells), secrets)
    renamed = {**summary, "trial_stats": _rename_stats(summary["trial_stats"], seats, cases)}
    return Report(
        summary=project_summary(renamed, secrets),
        cells=tuple(report_cells(out, plan, receipts, secrets, seats, cases)),
        secrets=secrets,
    )


# -- JUnit XML -----------------------------------------------------------------


def _xml_text(text: str) -> str:
    return _XML_ILLEGAL.sub("\ufffd", text)


def _seconds(value: float | None) -> str:
    return f"{value or 0.0:.3f}"


def _grader_lines(cell: ReportCell) -> list[str]:
    lines = []
    for grader in cell.graders:
        score = "" if grader.get("score") is None else f" {grader['score']:g}"
        lines.append(
            f"{grader.get('grader_id')}: {grader.get('status')}{score}: {grader.get('detail')}"
        )
    return lines


def _outcome_element(cell: ReportCell) -> tuple[str, dict[str, str]] | None:
    """The JUnit child that tells a cell's result: failure, error, skipped, or none (passed)."""
    detail = cell.failure_detail
    if cell.state == "accepted":
        return None
    if cell.real_failure:
        if cell.state == "rejected":
            failed = [
                g for g in cell.graders if g.get("status") == "scored" and g.get("score") != 1
            ]
            why = "; ".join(f"{g.get('grader_id')}: {g.get('detail')}" for g in failed)
            message = f"rejected: {why}" if why else "rejected"
        else:
            message = f"execution_error: {detail or 'the seat failed'}"
        return "failure", {"type": cell.state, "message": message}
    if cell.measurement_failure:
        kind = cell.failure_reason or cell.state
        message = f"measurement failure, not counted against the seat: {cell.label}"
        return "error", {"type": kind, "message": f"{message}: {detail}" if detail else message}
    reasons = {
        "unscored": "unscored: no graders (not a pass)",
        "running": "running: not finished (crashed or still in flight); re-runs on the next run",
        "missing": "missing: not run yet",
    }
    return "skipped", {"message": reasons.get(cell.state, f"{cell.state}: not finished")}


def junit_xml(name: str, cells: Sequence[ReportCell]) -> bytes:
    """JUnit XML: a testsuite per seat, a testcase per cell (name coordinate, classname case)."""
    root = ET.Element("testsuites", name=_xml_text(name))
    suites: dict[str, list[ReportCell]] = {}
    for cell in cells:
        suites.setdefault(cell.seat, []).append(cell)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for index, (seat, members) in enumerate(suites.items()):
        suite = ET.SubElement(root, "testsuite", name=_xml_text(seat), id=str(index))
        counts = {"tests": len(members), "failures": 0, "errors": 0, "skipped": 0}
        suite_time = 0.0
        for cell in members:
            case = ET.SubElement(
                suite,
                "testcase",
                name=_xml_text(cell.coordinate),
                classname=_xml_text(cell.case_id),
                time=_seconds(cell.duration),
            )
            suite_time += cell.duration or 0.0
            properties = ET.SubElement(case, "properties")
            for key, text in (
                ("cell_id", cell.cell_id),
                ("attempt", str(cell.attempt or 0)),
                ("state", cell.state),
            ):
                ET.SubElement(properties, "property", name=key, value=_xml_text(text))
            outcome = _outcome_element(cell)
            if outcome is not None:
                tag, attributes = outcome
                ET.SubElement(case, tag, {k: _xml_text(v) for k, v in attributes.items()})
                counts[{"failure": "failures", "error": "errors"}.get(tag, tag)] += 1
            lines = _grader_lines(cell)
            if cell.failure_detail:
                lines.append(f"detail: {cell.failure_detail}")
            if lines:
                ET.SubElement(case, "system-out").text = _xml_text("\n".join(lines))
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", _seconds(suite_time))
        total_time += suite_time
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_time))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


# -- HTML ----------------------------------------------------------------------


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
tr.accepted td.state{color:#176117}tr.failed td.state{color:#a11}
tr.fault td.state{color:#8a5a00}
"""

SCRIPT = """
(function () {
  var box = document.getElementById("filter");
  var count = document.getElementById("count");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#cells tbody tr"));
  function apply() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute("data-text") || "";
      var keep = words.every(function (word) { return text.indexOf(word) !== -1; });
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " cells shown";
  }
  box.addEventListener("input", apply);
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""


def _matrix(stats: Mapping[str, Any]) -> str:
    seats = list(stats["by_seat"])
    cases, cell = _grid(stats)
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
            tds.append(
                f'<td class="rate" style="background:{_colour(group["accepted_rate"])}" '
                f'title="{_e(title)}">{_e(_ratio(group))}'
                f"<small>{_e(_percent(group['accepted_rate']))}</small></td>"
            )
        rows.append(f"<tr><th>{_e(case)}</th>{''.join(tds)}</tr>")
    totals = "".join(
        f'<td class="rate" style="background:{_colour(stats["by_seat"][s]["accepted_rate"])}">'
        f"{_e(_ratio(stats['by_seat'][s]))}"
        f"<small>{_e(_percent(stats['by_seat'][s]['accepted_rate']))} "
        f"[{_e(_interval_text(stats['by_seat'][s]['interval']))}]</small></td>"
        for s in seats
    )
    return (
        f'<table id="matrix"><thead><tr><th>case \\ seat</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody>"
        f"<tfoot><tr><th>all cases</th>{totals}</tr></tfoot></table>"
        f'<p class="legend">{_e(LEGEND)}</p>'
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


def _seat_table(stats: Mapping[str, Any]) -> str:
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


def _pts_interval(interval: Sequence[float] | None) -> str:
    if interval is None:
        return "–"
    return f"{interval[0] * 100:+.0f} to {interval[1] * 100:+.0f} pts"


def failure_reasons(cells: Iterable[ReportCell]) -> dict[str, dict[str, int]]:
    """Measurement failures: reason -> seat -> count."""
    table: dict[str, dict[str, int]] = {}
    for cell in cells:
        if cell.measurement_failure:
            per_seat = table.setdefault(cell.label, {})
            per_seat[cell.seat] = per_seat.get(cell.seat, 0) + 1
    return dict(sorted(table.items()))


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


def _row_class(cell: ReportCell) -> str:
    if cell.state == "accepted":
        return "accepted"
    if cell.real_failure:
        return "failed"
    if cell.measurement_failure:
        return "fault"
    return "other"


def _cell_rows(cells: Sequence[ReportCell]) -> str:
    rows = []
    for cell in cells:
        graders = "".join(f"<li>{_e(line)}</li>" for line in _grader_lines(cell))
        detail = _e(cell.failure_detail or "")
        duration = "–" if cell.duration is None else f"{cell.duration:.2f} s"
        score = "–" if cell.score is None else f"{cell.score:.3f}"
        text = f"{cell.coordinate} {cell.label}".lower()
        rows.append(
            f'<tr class="{_row_class(cell)}" data-text="{_e(text)}">'
            f'<td>{_e(cell.coordinate)}</td><td class="state">{_e(cell.label)}</td>'
            f'<td class="num">{_e(cell.attempt if cell.attempt is not None else "–")}</td>'
            f'<td class="num">{_e(duration)}</td><td class="num">{_e(score)}</td>'
            f'<td><ul class="graders">{graders}</ul>{detail}</td></tr>'
        )
    return "".join(rows)


def html_page(summary: Mapping[str, Any], cells: Sequence[ReportCell]) -> str:
    """The HTML report: one self-contained file (inline CSS, JS and SVG; no network)."""
    stats = summary["trial_stats"]
    seats = list(stats["by_seat"])
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items() if v) or "no cells"
    stale = {k: v for k, v in summary["stale_counts"].items() if v}
    stale_text = (
        f"{sum(stale.values())} stale cell(s) from an earlier manifest, kept on disk and not "
        f"counted: {', '.join(f'{k} {v}' for k, v in stale.items())}"
        if stale
        else "No stale cells."
    )
    failures = summary["measurement_failures"]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>brigade report: {_e(summary["name"])}</title>
<style>{CSS}</style>
</head>
<body>
<h1>brigade report: {_e(summary["name"])}</h1>
<p id="overview">{summary["total_cells"]} cells: {_e(counts)}.
Outcome <strong>{_e(summary["outcome"])}</strong> (exit {_e(summary["exit_code"])}).
Measurement failures: {failures["total"]}. Manifest {_e(summary["manifest_digest"])}.</p>
<h2>Accepted rate by seat and case</h2>
{_matrix(stats)}
<h2>Accepted rate by seat (95% Wilson interval)</h2>
{_bar_chart(stats["by_seat"])}
{_seat_table(stats)}
<p class="note">pass@k: chance that at least one of k trials is accepted; pass^k: that all k \
are (unbiased estimators over scored trials, averaged over cases for a seat).</p>
<h2>Paired comparisons</h2>
{_comparisons(stats)}
<h2>Measurement failures by reason</h2>
{_failure_table(cells, seats)}
<h2>Stale cells</h2>
<p id="stale">{_e(stale_text)}</p>
<h2>Cells</h2>
<p><input id="filter" type="search" placeholder="filter by coordinate or state" \
aria-label="filter cells"> <span id="count"></span></p>
<table id="cells"><thead><tr><th>coordinate</th><th>state</th><th>attempt</th><th>duration</th>\
<th>score</th><th>graders</th></tr></thead>
<tbody>{_cell_rows(cells)}</tbody></table>
<script>{SCRIPT}</script>
</body>
</html>
"""


def report_document(report: Report) -> dict[str, Any]:
    """What `brigade report --json` prints: the summary's headline and trial statistics, cells."""
    summary, cells = report.summary, report.cells
    keys = (
        "name",
        "manifest_digest",
        "total_cells",
        "counts",
        "stale_counts",
        "measurement_failures",
        "failure_reasons",
        "trial_stats",
        "exit_code",
        "outcome",
    )
    return {
        **{key: summary[key] for key in keys},
        "measurement_failures_by_reason": failure_reasons(cells),
        "cells": [cell.document() for cell in cells],
    }


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


# -- writing and checking --------------------------------------------------------


@dataclass(frozen=True)
class ReportResult:
    """The report files written and the leaks found in them."""

    files: tuple[Path, ...]
    leaks: tuple[Leak, ...]


def check_report_file(path: Path, label: str, secrets: Secrets) -> list[Leak]:
    """Leaks in a report file, in its text as stored and with XML/HTML escapes undone."""
    found = check_file(path, label, secrets)
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return found
    for leak in find_leaks_in_text(label, html.unescape(text), secrets):
        if all(leak.kind != known.kind for known in found):
            found.append(Leak(leak.file, "(text, entities decoded)", leak.kind))
    return found


class _Checked:
    """What earlier runs wrote and found clean, per report file (kept beside the output).

    A no-op run has the same inputs: when a report file is as it was written
    (same size and mtime), neither rendering, writing nor the leak check runs
    again. A file rendered to the same bytes as a clean one skips the check.
    """

    def __init__(self, out: Path, key: str) -> None:
        self.path = out / STATE_FILE
        previous = store.read_json(self.path)
        valid = isinstance(previous, dict) and previous.get("key") == key
        files = previous.get("files") if valid and isinstance(previous, dict) else None
        self.key = key
        self.files: dict[str, dict[str, Any]] = files if isinstance(files, dict) else {}
        self.changed = False

    def _entry(self, path: Path) -> dict[str, Any]:
        entry = self.files.get(str(path))
        return entry if isinstance(entry, dict) else {}

    def current(self, path: Path, inputs: str) -> bool:
        """The file was written from these inputs, found clean, and is untouched since."""
        entry = self._entry(path)
        return entry.get("inputs") == inputs and entry.get("stat") == _file_stat(path)

    def clean(self, path: Path, digest: str) -> bool:
        """The file holds exactly this content, found clean before."""
        entry = self._entry(path)
        return entry.get("digest") == digest and entry.get("stat") == _file_stat(path)

    def record(self, path: Path, digest: str | None, inputs: str | None) -> None:
        """Remember a clean file (digest) or forget one that leaked (None)."""
        entry = {"digest": digest, "stat": _file_stat(path), "inputs": inputs}
        if digest is None:
            self.changed |= self.files.pop(str(path), None) is not None
        elif self.files.get(str(path)) != entry:
            self.files[str(path)] = entry
            self.changed = True

    def save(self) -> None:
        """Write the state when it changed."""
        if self.changed:
            data = json.dumps({"key": self.key, "files": self.files}).encode()
            store.atomic_write_bytes(self.path, data, durable=False)


def _file_stat(path: Path) -> list[int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def _secrets_key(secrets: Secrets) -> str:
    material = {
        "prompts": sorted(text_digest(p) for p in secrets.prompts),
        "paths": [list(pair) for pair in secrets.paths],
        "env": sorted(text_digest(v) for v in secrets.env_values),
    }
    return text_digest(json.dumps(material, sort_keys=True))


def _inputs_key(
    plan: Plan, receipts: Mapping[str, dict[str, Any] | None], summary: Mapping[str, Any]
) -> str:
    """Changes whenever the report could: code, plan, any receipt rewritten, stale counts."""
    digest = hashlib.sha256()
    for module in (__file__, trials.__file__):
        digest.update(Path(module).read_bytes())
    head = [summary["name"], summary["manifest_digest"], summary["stale_counts"]]
    digest.update(json.dumps(head, sort_keys=True).encode())
    for cell in plan.cells:
        receipt = receipts.get(cell.cell_id) or {}
        stamp = (
            f"{cell.cell_id}|{cell.coordinate}|{receipt.get('attempt')}|{receipt.get('state')}|"
            f"{receipt.get('started_at')}|{receipt.get('finished_at')}|{receipt.get('graded_at')}\n"
        )
        digest.update(stamp.encode())
    return digest.hexdigest()


def write_report(
    out: Path,
    plan: Plan,
    receipts: Mapping[str, dict[str, Any] | None],
    summary: Mapping[str, Any],
    *,
    workspace: Path | None = None,
) -> ReportResult:
    """Write <out>/report/junit.xml and <out>/report/index.html and check them for leaks."""
    out = out.absolute()
    secrets = secrets_for(out, plan, workspace)
    folder = out / REPORT_DIR
    junit, html_file = folder / JUNIT_FILE, folder / HTML_FILE
    checked = _Checked(out, _secrets_key(secrets))
    inputs = _inputs_key(plan, receipts, summary)
    if checked.current(junit, inputs) and checked.current(html_file, inputs):
        return ReportResult(files=(junit, html_file), leaks=())
    if any(r is not None and r.get("slim") for r in receipts.values()):
        receipts = current_receipts(out, plan)  # the report shows details slim views lack
    report = build_report(out, plan, receipts, summary, secrets=secrets)
    return _write(out, report, [junit, html_file], checked, inputs)


def write_files(
    out: Path, report: Report, *, junit: Path | None = None, html_file: Path | None = None
) -> ReportResult:
    """Write the requested report files and check each for leaks."""
    out = out.absolute()
    checked = _Checked(out, _secrets_key(report.secrets))
    return _write(out, report, [junit, html_file], checked, None)


def _write(
    out: Path, report: Report, targets: list[Path | None], checked: _Checked, inputs: str | None
) -> ReportResult:
    """Render each target (junit, html), write it and check it, unless unchanged and clean."""
    renderers = (
        lambda: junit_xml(report.summary["name"], report.cells),
        lambda: html_page(report.summary, report.cells).encode("utf-8"),
    )
    written: list[Path] = []
    leaks: list[Leak] = []
    for target, render in zip(targets, renderers, strict=True):
        if target is None:
            continue
        target = target.absolute()
        data = render()
        digest = hashlib.sha256(data).hexdigest()
        written.append(target)
        if not checked.clean(target, digest):
            store.atomic_write_bytes(target, data, durable=False)
            relative = target.is_relative_to(out)
            label = target.relative_to(out).as_posix() if relative else target.name
            found = check_report_file(target, label, report.secrets)
            leaks.extend(found)
            if found:
                checked.record(target, None, None)
                continue
        checked.record(target, digest, inputs)
    checked.save()
    return ReportResult(files=tuple(written), leaks=tuple(leaks))
