"""The report's detail pages: every cell's detail and every case's answers side by side.

The index page stays small on big batteries by linking, not embedding: cell
details live in `<stem>_files/cells/<xx>.html` and case views in
`<stem>_files/cases/<xx>.html` beside it, grouped by the first hex digits of
the cell id (of the case id's digest), so a battery of 10,000 cells has 256
pages of each kind, and a changed cell re-renders only its own page. A page
holds several sections; the one a link names (`#c-<cell id>`, `#k-<case
digest>`) is shown alone, by CSS (`:target`), so pages work without script.
Every page is self-contained (inline CSS, no network).
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brigade.report.model import failed_checks, grader_spent, seconds_text, state_class
from brigade.report.views import ENTRIES_TAIL, CellView, Shown, scrubbed_kinds

CELLS = "cells"
CASES = "cases"
# hex digits naming a page: 2 (256 pages) up to this many cells, 3 above
SHARD_CELLS = 50_000


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def files_folder(html_name: str) -> str:
    """The folder of a page's detail pages, beside it: `index.html` -> `index_files`."""
    stem = html_name.rsplit(".", 1)[0] if "." in html_name else html_name
    return f"{stem}_files"


def shard_width(cells: int) -> int:
    """How many hex digits name a page for a plan of this many cells."""
    return 2 if cells <= SHARD_CELLS else 3


def case_key(case_id: str) -> str:
    """The case's anchor key: the start of the sha256 of its id (ids may hold anything)."""
    return hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def cell_page(cell_id: str, width: int) -> str:
    """The page (relative to the files folder) holding a cell's detail."""
    return f"{CELLS}/{cell_id[:width]}.html"


def case_page(case_id: str, width: int) -> str:
    """The page (relative to the files folder) holding a case's view."""
    return f"{CASES}/{case_key(case_id)[:width]}.html"


def cell_anchor(cell_id: str) -> str:
    """The id of a cell's section on its page."""
    return f"c-{cell_id}"


def case_anchor(case_id: str) -> str:
    """The id of a case's section on its page."""
    return f"k-{case_key(case_id)}"


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222;max-width:110em}
h1{font-size:1.3em}h2{font-size:1.15em;margin:0 0 .3em}h3{font-size:1em;margin:1.2em 0 .3em}
section{border-top:2px solid #ccc;padding-top:.8em;margin-top:1.2em}
body:has(section:target) section:not(:target){display:none}
body:has(section:target) p.all{display:block}p.all{display:none}
table{border-collapse:collapse;margin:.3em 0}
th,td{border:1px solid #ccc;padding:.2em .45em;text-align:left;vertical-align:top}
th{background:#f4f4f4}
pre{background:#f7f7f7;border:1px solid #e2e2e2;padding:.5em;margin:.2em 0;
white-space:pre-wrap;overflow-wrap:anywhere;max-height:40em;overflow:auto}
.note,.meta{color:#555;font-size:.9em}.scrubbed{color:#7a4b00;font-size:.9em}
.accepted{color:#176117}.failed{color:#a11}.fault{color:#8a5a00}
ol.transcript{padding-left:1.6em}ol.transcript li{margin:.4em 0}
li.message b{color:#1d4f91}li.tool_call b,li.tool_result b{color:#5b3a8c}
li.error b{color:#a11}li.reasoning pre{color:#555}
.diff .add{color:#176117}.diff .del{color:#a11}.diff .hunk{color:#1d4f91}
table.side td{min-width:16em;max-width:40em}table.side pre{max-height:20em}
"""


def _shell(title: str, back: str, body: str, sections: int) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{CSS}</style>
</head>
<body>
<p><a href="{_e(back)}">← the report</a></p>
{_SEVERAL if sections > 1 else ""}{body}
</body>
</html>
"""


_SEVERAL = '<p class="all note">One of several on this page; the others are hidden.</p>\n'

KIND_WORDS = {
    "prompt": "the prompt (replaced by its digest)",
    "env value": "env values (<redacted>)",
    "absolute path": "this machine's paths (made relative)",
    "binary patch": "binary file data (shown as 'binary file changed')",
}


def _scrub_note(kinds: Iterable[str]) -> str:
    words = [KIND_WORDS.get(kind, kind) for kind in kinds]
    if not words:
        return ""
    return f'<p class="scrubbed">Scrubbed: {_e(", ".join(words))}.</p>'


def _text_block(value: Shown, css: str, what: str, where: str | None) -> str:
    notes = ""
    if value.cut:
        place = f" (the whole {what} is in {where})" if where else ""
        notes += (
            f'<p class="note">Truncated: the first {len(value.text):,} characters are shown'
            f"{_e(place)}.</p>"
        )
    notes += _scrub_note(value.scrubbed)
    return f'<pre class="{css}">{_e(value.text)}</pre>{notes}'


def _diff_block(value: Shown, where: str | None) -> str:
    lines = []
    for line in value.text.split("\n"):
        if line.startswith("+++") or line.startswith("---"):
            css = "file"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        elif line.startswith("@@"):
            css = "hunk"
        else:
            css = ""
        lines.append(f'<span class="{css}">{_e(line)}</span>' if css else _e(line))
    notes = ""
    if value.cut:
        place = f" (the changed files are in {where})" if where else ""
        notes = (
            f'<p class="note">Truncated: the first {len(value.text):,} characters of the diff '
            f"are shown{_e(place)}.</p>"
        )
    return f'<pre class="diff">{chr(10).join(lines)}</pre>{notes}{_scrub_note(value.scrubbed)}'


def _failed_checks(grader: Mapping[str, Any]) -> str:
    """A grader's failed component checks under its detail (projected with the result)."""
    failed, more = failed_checks(grader)
    if not failed:
        return ""
    items = "".join(f"<li>failed: {_e(line)}</li>" for line in failed)
    if more:
        items += f"<li>and {more} more failed check(s)</li>"
    return f'<ul class="checks">{items}</ul>'


def _graders(view: CellView) -> str:
    if not view.graders:
        return '<p class="note">No graders.</p>'
    rows = "".join(
        f"<tr><td>{_e(g.get('grader_id'))}</td><td>{_e(g.get('status'))}</td>"
        f"<td>{_e('–' if g.get('score') is None else g.get('score'))}</td>"
        f"<td>{_e(g.get('detail') or '')}{_failed_checks(g)}{_reused(view, g)}</td>"
        f'<td class="spent">{_e(grader_spent(g) or "")}</td></tr>'
        for g in view.graders
    )
    return (
        '<table class="graders"><thead><tr><th>grader</th><th>status</th><th>score</th>'
        f"<th>detail</th><th>spent (judges)</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _reused(view: CellView, grader: dict[str, Any]) -> str:
    said = view.reused_grades.get(str(grader.get("grader_id")))
    return f'<p class="note reused">{_e(said)}</p>' if said else ""


def _attempts(view: CellView) -> str:
    if not view.attempts:
        return '<p class="note">No attempt yet.</p>'
    rows = "".join(
        f"<tr><td>{a.number}</td><td>{_e(a.state)}"
        + (f' <span class="note reused">({_e(a.reused)})</span>' if a.reused else "")
        + f"</td><td>{_e(a.started_at or '–')}</td>"
        f"<td>{_e(seconds_text(a.duration))}</td>"
        f"<td>{_e(a.fault.text) if a.fault else ''}</td>"
        f'<td class="usage">{_e(a.usage or "–")}</td></tr>'
        for a in view.attempts
    )
    return (
        '<table class="attempts"><thead><tr><th>attempt</th><th>state</th><th>started</th>'
        "<th>duration</th><th>fault</th><th>usage</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _transcript(view: CellView, where: str | None) -> str:
    if view.transcript is None:
        return ""
    items = []
    for index, entry in enumerate(view.transcript):
        if view.omitted_entries and index == len(view.transcript) - ENTRIES_TAIL:
            items.append(
                f'<li class="omitted note">… {view.omitted_entries} entries left out …</li>'
            )
        notes = ""
        if entry.body.cut:
            notes = f'<p class="note">Truncated: {len(entry.body.text):,} characters shown.</p>'
        items.append(
            f'<li class="{_e(entry.kind)}"><b>{_e(entry.label)}</b>'
            f"<pre>{_e(entry.body.text)}</pre>{notes}</li>"
        )
    count = len(view.transcript) + view.omitted_entries
    kinds = scrubbed_kinds(e.body for e in view.transcript)
    place = f" (all of it: {where}/transcript.json)" if where else ""
    head = f"<h3>Transcript ({count} entries{_e(place)})</h3>"
    return f'{head}<ol class="transcript">{"".join(items)}</ol>{_scrub_note(kinds)}'


def _changes(view: CellView, where: str | None) -> str:
    if view.changed is None:
        return ""
    files = [f"<li>changed {_e(p)}</li>" for p in view.changed]
    files += [f"<li>deleted {_e(p)}</li>" for p in view.deleted]
    listing = f"<ul>{''.join(files)}</ul>" if files else '<p class="note">No files changed.</p>'
    diff = ""
    if view.diff is not None:
        diff = _diff_block(view.diff, f"{where}/changes" if where else None)
    elif view.diff_note and files:
        diff = f'<p class="note">No diff: {_e(view.diff_note)}.</p>'
    return f"<h3>Changed files</h3>{listing}{diff}"


def detail_section(view: CellView, case_href: str) -> str:
    """One cell's detail: state and why, answer, fault, graders, attempts, usage,
    transcript and changes."""
    where = view.run_dir
    parts = [
        f'<section class="detail" id="{cell_anchor(view.cell_id)}">',
        f"<h2>{_e(view.coordinate)} "
        f'<span class="{state_class(view.state, view.failure_reason)}">'
        f"{_e(view.label)}</span></h2>",
        f'<p class="why">{_e(view.reason.text)}</p>{_scrub_note(view.reason.scrubbed)}',
        f'<p class="meta">case <a href="{_e(case_href)}">{_e(view.case_id)}</a> · seat '
        f"{_e(view.seat)} · trial {view.trial} · {_e(view.execution_mode)} · cell "
        f"{_e(view.cell_id)}"
        + (f" · {_e(view.workspace)}" if view.workspace else "")
        + (f" · run folder {_e(where)}" if where else "")
        + "</p>",
    ]
    if view.answer is not None:
        parts.append("<h3>Answer</h3>")
        parts.append(_text_block(view.answer, "answer", "answer", f"{where}/final.txt"))
    if view.fault is not None:
        parts.append(f'<h3>Fault</h3><p class="fault">{_e(view.fault.text)}</p>')
        parts.append(_scrub_note(view.fault.scrubbed))
    if view.stderr is not None and view.stderr.text:
        parts.append("<h3>stderr (the last lines)</h3>")
        parts.append(_text_block(view.stderr, "stderr", "log", f"{where}/stderr.log"))
    parts.append("<h3>Graders</h3>" + _graders(view))
    parts.append("<h3>Attempts</h3>" + _attempts(view))
    if view.usage:
        parts.append(f'<h3>Usage</h3><p class="usage">{_e(view.usage)}</p>')
    parts.append(_transcript(view, where))
    parts.append(_changes(view, where))
    parts.append("</section>")
    return "".join(parts)


def detail_page(name: str, views: Sequence[CellView], width: int, back: str) -> str:
    """A page of cell details (`back`: the index page, relative to this page)."""
    sections = "".join(
        detail_section(view, f"../{case_page(view.case_id, width)}#{case_anchor(view.case_id)}")
        for view in views
    )
    return _shell(f"brigade report: {name}: cells", back, sections, len(views))


@dataclass(frozen=True)
class CaseAnswer:
    """One cell's answer as a case view shows it."""

    cell_id: str
    seat: str
    trial: int
    state: str
    failure_reason: str | None
    label: str
    answer: Shown | None


def case_section(
    case_id: str,
    seats: Sequence[str],
    answers: Sequence[CaseAnswer],
    width: int,
    cell_href: Callable[[str], str] | None = None,
) -> str:
    """Every seat's answer to one case, side by side (a column per seat, a row per trial);
    `cell_href`: a cell id -> the link to its detail (default: the report's page)."""
    by_place: Mapping[tuple[int, str], CaseAnswer] = {(a.trial, a.seat): a for a in answers}
    trials = sorted({a.trial for a in answers})
    head = "".join(f"<th>{_e(seat)}</th>" for seat in seats)
    rows = []
    for trial in trials:
        tds = []
        for seat in seats:
            found = by_place.get((trial, seat))
            if found is None:
                tds.append("<td>–</td>")
                continue
            href = (
                cell_href(found.cell_id)
                if cell_href is not None
                else f"../{cell_page(found.cell_id, width)}#{cell_anchor(found.cell_id)}"
            )
            reason = found.failure_reason
            if found.answer is not None:
                answer = _text_block(found.answer, "answer", "answer", None)
            else:
                answer = '<p class="note">No answer recorded.</p>'
            tds.append(
                f'<td><a class="{state_class(found.state, reason)}" href="{_e(href)}">'
                f"{_e(found.label)}</a>{answer}</td>"
            )
        rows.append(f"<tr><th>{trial}</th>{''.join(tds)}</tr>")
    return (
        f'<section class="case" id="{case_anchor(case_id)}"><h2>case {_e(case_id)}</h2>'
        '<p class="note">Every seat\'s answer to this case, side by side; a state opens the '
        "cell's detail.</p>"
        f'<table class="side"><thead><tr><th>trial</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def case_page_html(name: str, sections: Sequence[str], back: str) -> str:
    """A page of case views."""
    return _shell(f"brigade report: {name}: cases", back, "".join(sections), len(sections))
