"""A comparison (`brigade.compare.v1`) for people: terminal text, a PR-comment-sized markdown
summary, and a self-contained HTML page in the report's style (its CSP, escaping and leak
check)."""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.compare import TEST_NAMES, pair_name, points
from brigade.core.projection import Leak, Secrets, find_leaks_in_text, make_secrets
from brigade.core.usage import money
from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.outdir.comparison import Battery
from brigade.outdir.export import secrets_for

# the markdown summary lists this many changed cases, then says how many more
MARKDOWN_ROWS = 10
# the terminal lists this many flips and unmeasured cells per pair
TEXT_ROWS = 50
# the page lists this many rows per table (the JSON has all of them)
PAGE_ROWS = 2000
ARROWS = {"pass_to_fail": "pass → fail", "fail_to_pass": "fail → pass"}
CHANGES = {
    "worse": "worse",
    "better": "better",
    "same": "same",
    "unmeasured": "unmeasured",
    "unscored": "unscored",
    "only_base": "only in BASE",
    "only_new": "only in NEW",
}


def _ratio(rate: Mapping[str, Any]) -> str:
    if not rate["scored"]:
        return "–"
    return f"{rate['accepted']}/{rate['scored']} ({rate['rate'] * 100:.1f}%)"


def _tally(side: Mapping[str, Any] | None) -> str:
    if side is None:
        return "–"
    text = f"{side['accepted']}/{side['scored']}" if side["scored"] else "–"
    notes = []
    if side["unmeasured"]:
        notes.append(f"{side['unmeasured']} unmeasured")
    if side["unscored"]:
        notes.append(f"{side['unscored']} unscored")
    return f"{text} ({', '.join(notes)})" if notes else text


def _interval(pair: Mapping[str, Any]) -> str:
    interval = pair["interval"]
    if interval is None:
        return "–"
    return f"[{points(interval[0])}, {points(interval[1])}] points"


def cost_line(costs: Mapping[str, Any] | None) -> str:
    """`$1.2000 in all, $0.0600 per cell, $0.0800 per accepted` (unknown costs said)."""
    if costs is None or costs.get("cost_usd") is None:
        return "cost unknown"
    text = (
        f"{money(costs['cost_usd'])} in all, {money(costs['cost_usd_per_cell'])} per cell, "
        f"{money(costs['cost_usd_per_accepted'])} per accepted"
    )
    unknown = costs.get("cells_cost_unknown") or 0
    return f"{text} ({unknown} cell(s) of unknown cost)" if unknown else text


def _changed(pair: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The cases whose rate changed, the largest change first (worse before better)."""
    rows = [row for row in pair["by_case"] if row["change"] in ("worse", "better")]
    return sorted(rows, key=lambda row: (row["change"] != "worse", -abs(row["difference"])))


def _change(row: Mapping[str, Any]) -> str:
    """`pass → fail` for a case of one trial a side, else `worse (-40.0 points)`."""
    base, new = row["base"], row["new"]
    if base["scored"] == 1 and new["scored"] == 1:
        return ARROWS["pass_to_fail" if row["change"] == "worse" else "fail_to_pass"]
    return f"{row['change']} ({points(row['difference'])} points)"


def _listed(names: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- terminal ----------------------------------------------------------------------------------


def text(doc: Mapping[str, Any]) -> str:
    """The comparison as terminal text: per pair of seats, then the gate."""
    base, new = doc["base"], doc["new"]
    lines = [f"brigade compare: BASE {base['name']} -> NEW {new['name']}"]
    for pair in doc["comparisons"]:
        lines += ["", *_pair_text(pair)]
    gate = doc["gate"]
    lines.append("")
    if gate["enabled"]:
        lines.append(f"gate: {gate['result']} (exit {gate['exit_code']}): {gate['reason']}")
    else:
        lines.append(f"gate (not asked for, --fail-on-regression): {gate['reason']}")
    return "\n".join(lines)


def _pair_text(pair: Mapping[str, Any]) -> list[str]:
    cases, trials, rate = pair["cases"], pair["trials"], pair["accepted_rate"]
    lines = [
        f"seat {pair_name(pair)}",
        f"  cases: {cases['shared']} shared, {cases['compared']} compared",
    ]
    for key, label in (
        ("only_base", "only in BASE"),
        ("only_new", "only in NEW"),
        ("edited", "edited (prompt or graders differ; compared by id)"),
        ("unmeasured", "not compared (unmeasured on a side)"),
        ("unscored", "not compared (no graders on a side)"),
    ):
        if cases[key]:
            lines.append(f"  {label}: {_listed(cases[key])}")
    lines.append(f"  accepted: BASE {_ratio(rate['base'])}, NEW {_ratio(rate['new'])}")
    if pair["difference"] is not None:
        lines.append(
            f"  difference: {points(pair['difference'])} points, "
            f"interval {_interval(pair)}, p = {pair['p_value']:.4g} ({TEST_NAMES[pair['test']]})"
        )
    lines.append(f"  verdict: {pair['verdict_text']}")
    lines.append(
        f"  flips: {trials['pass_to_fail']} pass -> fail, {trials['fail_to_pass']} fail -> pass, "
        f"{trials['unchanged']} unchanged trial(s)"
    )
    for flip in pair["flips"][:TEXT_ROWS]:
        lines.append(
            f"    {flip['case']} trial {flip['trial']}: {ARROWS[flip['direction']]}  "
            f"BASE {flip['base']['coordinate']} (cells/{flip['base']['cell_id'][:12]})  "
            f"NEW {flip['new']['coordinate']} (cells/{flip['new']['cell_id'][:12]})"
        )
    if len(pair["flips"]) > TEXT_ROWS:
        lines.append(f"    and {len(pair['flips']) - TEXT_ROWS} more (--json lists every flip)")
    unmeasured = pair["unmeasured"]
    if unmeasured["cells"]:
        kinds = ", ".join(f"{kind} {n}" for kind, n in unmeasured["kinds"].items())
        lines.append(
            f"  unmeasured: {unmeasured['cells']} of {unmeasured['of']} cells "
            f"({unmeasured['percent']:.1f}%): {kinds}"
        )
        for cell in unmeasured["list"][:TEXT_ROWS]:
            lines.append(f"    {cell['side'].upper()} {cell['coordinate']}  {cell['kind']}")
        if len(unmeasured["list"]) > TEXT_ROWS:
            more = len(unmeasured["list"]) - TEXT_ROWS
            lines.append(f"    and {more} more (--json lists every one)")
    else:
        lines.append("  unmeasured: none")
    lines.append(f"  cost BASE: {cost_line(pair['costs']['base'])}")
    lines.append(f"  cost NEW:  {cost_line(pair['costs']['new'])}")
    return lines


# -- markdown ----------------------------------------------------------------------------------


def _md(value: str, limit: int = 60) -> str:
    """A name as inline code in a markdown table: no pipe, backtick or line break breaks it."""
    flat = " ".join(str(value).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return "`" + flat.replace("`", "'").replace("|", "\\|") + "`"


HEADLINES = {
    "better": "NEW is better",
    "worse": "NEW is worse",
    "no detectable difference": "no detectable difference",
    "unmeasured": "nothing measured to compare",
}


def markdown(doc: Mapping[str, Any], rows: int = MARKDOWN_ROWS) -> str:
    """A summary for a pull-request comment or a CI step summary: the headline, a capped table
    of the cases that changed, unmeasured cells and the cost line, per pair; the gate."""
    gate = doc["gate"]
    pairs = doc["comparisons"]
    verdicts = [pair["verdict"] for pair in pairs]
    worst = next(
        (v for v in ("worse", "unmeasured", "better") if v in verdicts), "no detectable difference"
    )
    title = f"### brigade compare: {HEADLINES[worst]}"
    if gate["enabled"]:
        title += f" — gate {gate['result']} (exit {gate['exit_code']})"
    lines = [
        title,
        "",
        f"BASE {_md(doc['base']['name'])} → NEW {_md(doc['new']['name'])}",
    ]
    for pair in pairs:
        lines += ["", *_pair_markdown(pair, rows)]
    lines += ["", f"Gate: {gate['reason']}."]
    return "\n".join(lines) + "\n"


def _pair_markdown(pair: Mapping[str, Any], rows: int) -> list[str]:
    rate, cases = pair["accepted_rate"], pair["cases"]
    lines = [
        f"**{_md(pair_name(pair))}: {pair['verdict']}** — BASE {_ratio(rate['base'])}, "
        f"NEW {_ratio(rate['new'])} over {cases['compared']} case(s)",
        "",
        pair["verdict_text"],
    ]
    changed = _changed(pair)
    if changed:
        lines += ["", "| case | BASE | NEW | change |", "|---|---|---|---|"]
        for row in changed[:rows]:
            lines.append(
                f"| {_md(row['case'])} | {_tally(row['base'])} | {_tally(row['new'])} | "
                f"{_change(row)} |"
            )
        if len(changed) > rows:
            lines += ["", f"and {len(changed) - rows} more"]
    for key, label in (("only_base", "Only in BASE"), ("only_new", "Only in NEW")):
        if cases[key]:
            names = ", ".join(_md(name, 40) for name in cases[key][:rows])
            more = f" and {len(cases[key]) - rows} more" if len(cases[key]) > rows else ""
            lines += ["", f"{label}: {names}{more}"]
    unmeasured = pair["unmeasured"]
    if unmeasured["cells"]:
        kinds = ", ".join(f"{kind} {n}" for kind, n in unmeasured["kinds"].items())
        lines += [
            "",
            f"Unmeasured (not evidence): {unmeasured['cells']} of {unmeasured['of']} cells "
            f"({unmeasured['percent']:.1f}%): {kinds}",
        ]
    costs = pair["costs"]
    lines += ["", f"Cost: BASE {cost_line(costs['base'])} · NEW {cost_line(costs['new'])}"]
    return lines


# -- the page ----------------------------------------------------------------------------------

CSS_EXTRA = """
.verdict{font-size:1.1em;padding:.5em .7em;border-left:4px solid #888;background:#f7f7f7}
.verdict.worse{border-color:#a11}.verdict.better{border-color:#176117}
.verdict.unmeasured{border-color:#8a5a00}
tr.worse td.change{color:#a11}tr.better td.change{color:#176117}
tr.unmeasured td.change{color:#8a5a00}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


Link = Callable[[str, Mapping[str, Any]], str | None]


def _cell_link(side: str, cell: Mapping[str, Any], link: Link | None) -> str:
    href = link(side, cell) if link is not None else None
    label = _e(cell["coordinate"])
    return f'<a href="{_e(href)}">{label}</a>' if href else label


def _table(head: Sequence[str], rows: Sequence[str], what: str, table_id: str) -> str:
    """A table of the first PAGE_ROWS rows, then how many more there are."""
    if not rows:
        return f'<p class="note">No {what}.</p>'
    body = "".join(rows[:PAGE_ROWS])
    more = len(rows) - PAGE_ROWS
    note = (
        f'<p class="note">and {more} more {what} (brigade compare --json lists every one)</p>'
        if more > 0
        else ""
    )
    heads = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (
        f'<table id="{table_id}"><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>{note}'
    )


CASE_HEADS = ("case", "BASE", "NEW", "change", "difference", "note")


def _pair_html(index: int, pair: Mapping[str, Any], link: Link | None, level: str) -> str:
    rate, cases, costs = pair["accepted_rate"], pair["cases"], pair["costs"]

    def side_row(label: str, key: str) -> str:
        r = rate[key]
        interval = r["interval"]
        wilson = (
            f"{interval[0] * 100:.1f}–{interval[1] * 100:.1f}%" if interval is not None else "–"
        )
        return (
            f"<tr><th>{label}</th><td>{_e(pair[key]['name'])}</td><td>{_e(pair[key]['seat'])}</td>"
            f'<td class="num">{_e(_ratio(r))}</td><td class="num">{_e(wilson)}</td>'
            f"<td>{_e(cost_line(costs[key]))}</td></tr>"
        )

    flips = [
        f'<tr class="{"worse" if flip["direction"] == "pass_to_fail" else "better"}">'
        f'<td>{_e(flip["case"])}</td><td class="num">{flip["trial"]}</td>'
        f'<td class="change">{_e(ARROWS[flip["direction"]])}</td>'
        f"<td>{_cell_link('base', flip['base'], link)}</td>"
        f"<td>{_cell_link('new', flip['new'], link)}</td></tr>"
        for flip in pair["flips"]
    ]
    ordered = _changed(pair) + [
        row for row in pair["by_case"] if row["change"] not in ("worse", "better")
    ]
    case_rows = [
        f'<tr class="{_e(row["change"])}"><td>{_e(row["case"])}</td>'
        f'<td class="num">{_e(_tally(row["base"]))}</td>'
        f'<td class="num">{_e(_tally(row["new"]))}</td>'
        f'<td class="change">{_e(CHANGES[row["change"]])}</td>'
        f'<td class="num">'
        f"{_e(points(row['difference']) if row['difference'] is not None else '–')}</td>"
        f"<td>{'edited' if row['edited'] else ''}</td></tr>"
        for row in ordered
    ]
    unmeasured = pair["unmeasured"]
    unmeasured_rows = [
        f"<tr><td>{_e(cell['side'].upper())}</td><td>{_cell_link(cell['side'], cell, link)}</td>"
        f"<td>{_e(cell['kind'])}</td></tr>"
        for cell in unmeasured["list"]
    ]
    kinds = ", ".join(f"{kind} {n}" for kind, n in unmeasured["kinds"].items()) or "none"
    stats = (
        f"Difference in accepted rate (NEW − BASE, mean over {cases['compared']} compared "
        f"case(s)): <strong>{_e(points(pair['difference']))} points</strong>, "
        f"{level} interval {_e(_interval(pair))} (cluster bootstrap over cases); "
        f"p = {pair['p_value']:.4g} ({_e(TEST_NAMES[pair['test']])})."
        if pair["difference"] is not None
        else "No case has measured trials on both sides."
    )
    detectable = pair["detectable"]
    can = (
        f" This battery detects differences of about {detectable * 100:.1f} points."
        if detectable is not None
        else ""
    )
    return f"""<section id="pair-{index}">
<h2>Seat {_e(pair_name(pair))}</h2>
<p class="verdict {_e(pair["verdict"].split()[0])}">{_e(pair["verdict_text"])}</p>
<table class="sides"><thead><tr><th></th><th>battery</th><th>seat</th><th>accepted</th>\
<th>{level} Wilson interval</th><th>cost</th></tr></thead>
<tbody>{side_row("BASE", "base")}{side_row("NEW", "new")}</tbody></table>
<p>{stats}{can}</p>
<p class="note">{cases["shared"]} shared case(s), {cases["compared"]} compared; \
{len(cases["only_base"])} only in BASE, {len(cases["only_new"])} only in NEW, \
{len(cases["edited"])} edited (compared by id). Unmeasured cells: {unmeasured["cells"]} of \
{unmeasured["of"]} ({unmeasured["percent"]:.1f}%): {_e(kinds)}; never flips, never evidence.</p>
<h3>Flips</h3>
{_table(("case", "trial", "change", "BASE cell", "NEW cell"), flips, "flips", f"flips-{index}")}
<h3>Cases</h3>
{_table(CASE_HEADS, case_rows, "cases", f"cases-{index}")}
<h3>Unmeasured cells</h3>
{_table(("side", "cell", "kind"), unmeasured_rows, "unmeasured cells", f"unmeasured-{index}")}
</section>"""


def html_page(doc: Mapping[str, Any], link: Link | None = None) -> str:
    """The comparison as one self-contained HTML page (inline CSS, no script, no network)."""
    from brigade.report.render import CSS

    gate = doc["gate"]
    gate_text = (
        f"Gate: {gate['result']} (exit {gate['exit_code']}): {gate['reason']}."
        if gate["enabled"]
        else f"Gate (not asked for): {gate['reason']}."
    )
    level = f"{doc['confidence'] * 100:g}%"
    pairs = "\n".join(
        _pair_html(index, pair, link, level) for index, pair in enumerate(doc["comparisons"], 1)
    )
    base, new = doc["base"], doc["new"]
    title = f"brigade compare: {base['name']} → {new['name']}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{CSS}{CSS_EXTRA}</style>
</head>
<body>
<h1>{_e(title)}</h1>
<p id="overview">BASE {_e(base["name"])} ({base["cells"]} cells, manifest \
{_e(base["manifest_digest"])}) against NEW {_e(new["name"])} ({new["cells"]} cells, manifest \
{_e(new["manifest_digest"])}). Confidence {doc["confidence"] * 100:g}%.</p>
<p id="gate">{_e(gate_text)}</p>
{pairs}
<p class="note">Cells are matched by case and trial. Measurement failures (adapter_error, \
grader_error, timeout) and unfinished cells are unmeasured: never flips, never evidence. The \
interval is a percentile bootstrap over cases ({doc["method"]["resamples"]} resamples, seed \
{doc["method"]["seed"]}); the verdict needs the test's p-value below \
{(1 - doc["confidence"]):.2g} and the interval on one side of zero.</p>
</body>
</html>
"""


# -- writing the page --------------------------------------------------------------------------


@dataclass(frozen=True)
class PageResult:
    """The page written (None when a leak kept it from being written) and the leaks found."""

    path: Path | None
    leaks: tuple[Leak, ...]


def _secrets(batteries: Iterable[Battery]) -> Secrets:
    parts = []
    for battery in batteries:
        workspace = (battery.plan.context or {}).get("workspace")
        parts.append(secrets_for(battery.out, battery.plan, Path(workspace) if workspace else None))
    return make_secrets(
        prompts=[p for s in parts for p in s.prompts],
        paths=[pair for s in parts for pair in s.paths],
        env_values=[v for s in parts for v in s.env_values],
        homes=[h for s in parts for h in s.homes],
        roots=[r for s in parts for r in s.roots],
    )


def _names(doc: Mapping[str, Any]) -> set[str]:
    """The identifiers the page shows as they are: case ids, seats, coordinates, names."""
    names = {doc["base"]["name"], doc["new"]["name"], *doc["base"]["seats"], *doc["new"]["seats"]}
    for pair in doc["comparisons"]:
        names.update(row["case"] for row in pair["by_case"])
        for flip in pair["flips"]:
            names.update((flip["base"]["coordinate"], flip["new"]["coordinate"]))
        names.update(cell["coordinate"] for cell in pair["unmeasured"]["list"])
    return names


def _blanked(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document with every identifier blanked: the page's skeleton for the leak check."""
    blank = {"case", "coordinate", "name", "seat"}

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if key in ("seats", "only_base", "only_new", "edited", "unmeasured"):
                return ["" if isinstance(item, str) else walk(item) for item in value]
            return [walk(item) for item in value]
        if isinstance(value, str) and key in blank:
            return ""
        return value

    return walk(doc)


def _report_link(battery: Battery, page_dir: Path, secrets: Secrets) -> Callable[[str], str | None]:
    """A cell id -> the relative link to its detail page in the battery's report (None when
    the battery has no report, or when the link would name a path of this machine)."""
    from brigade.report.build import HTML_FILE, REPORT_DIR
    from brigade.report.pages import cell_anchor, cell_page, files_folder, shard_width

    folder = battery.out.absolute() / REPORT_DIR
    if not (folder / HTML_FILE).is_file():
        return lambda cell_id: None
    width = shard_width(len(battery.plan.cells))
    files = files_folder(HTML_FILE)

    def link(cell_id: str) -> str | None:
        target = folder / files / cell_page(cell_id, width)
        if not target.is_file():
            return None
        href = os.path.relpath(target, page_dir).replace(os.sep, "/") + "#" + cell_anchor(cell_id)
        return None if secrets.matcher.first(href) else href

    return link


def write_page(doc: Mapping[str, Any], base: Battery, new: Battery, page: Path) -> PageResult:
    """Render the page, check it for leaks (prompts, paths of this machine, env values of
    either battery) and write it atomically when clean; a destination brigade may not write
    (a link, not a file, inside an output directory outside its report/ folder) is refused."""
    from brigade.report.build import claim_destinations

    page = page.absolute()
    for battery in (base, new):
        claim_destinations(battery.out.absolute(), [page], None)
    if page.parent.exists() and not page.parent.is_dir():
        raise EnvironmentProblem(f"{page.parent}: not a folder, where the page goes")
    secrets = _secrets((base, new))
    links = {
        "base": _report_link(base, page.parent, secrets),
        "new": _report_link(new, page.parent, secrets),
    }

    def link(side: str, cell: Mapping[str, Any]) -> str | None:
        return links[side](cell["cell_id"])

    rendered = html_page(doc, link)
    skeleton = html.unescape(html_page(_blanked(doc), link))
    leaks = find_leaks_in_text(
        page.name,
        html.unescape(rendered),
        secrets,
        skeleton,
        "(text, entities decoded)",
        _names(doc),
    )
    if leaks:
        return PageResult(None, tuple(leaks))
    page.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write_bytes(page, rendered.encode("utf-8"), durable=False)
    return PageResult(page, ())
