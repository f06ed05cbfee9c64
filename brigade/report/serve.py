"""`brigade view`: a local web server over output directories, live while a run writes.

The server (the standard library's ThreadingHTTPServer) listens on loopback and answers
only paths under a random token (`/<token>/...`): another local user or a web page
cannot read it without the URL it prints. Every answer carries the report's Content
Security Policy (plus `connect-src 'self'` for the page's own requests), no-referrer,
nosniff and no framing. It reads the output directories named and nothing else: files
only under their `cells/` folders, every path component opened without following a
link, regular files only, size-bounded.

Pages: the index of each directory (its matrix, statistics and cost chart, and the cell
list, filtered and paged on the server: the browser never holds every row), a page per
cell and per case, and a comparison (`brigade compare`'s). The index and a cell's page
ask for what changed every second (`api/changes`, answered from the change feed the
run writes) and update what they show. What the pages show is projected like the
report (prompts replaced, env values redacted, paths relative); `show_prompts` shows the
prompts too.
"""

from __future__ import annotations

import hmac
import html
import json
import os
import re
import secrets as random_tokens
import stat
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from brigade.core.projection import Secrets, make_secrets, project_summary
from brigade.errors import InputError
from brigade.outdir import store
from brigade.outdir.export import secrets_for
from brigade.report import pages, render
from brigade.report.live import Query, Watched
from brigade.report.tree import BUILD_SCRIPT, tree

# the report's policy, but scripts only of this response (a fresh nonce each: no inline
# handler, no `javascript:` URL and no script in text of a receipt runs), and the page's
# own requests to this server
NONCE_MARK = "<nonce>"  # `_e` escapes `<`: text of a receipt can never hold it
META_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-" + NONCE_MARK + "'; "
    "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'self'"
)
# the header adds what a <meta> policy cannot say: no page may frame these
CSP = META_CSP + "; frame-ancestors 'none'"


def policy(nonce: str) -> str:
    """The Content-Security-Policy header of a response whose scripts carry `nonce`."""
    return CSP.replace(NONCE_MARK, nonce)


# what a file of a cell folder shows at most
FILE_LIMIT = 4 * 1024 * 1024
POLL_SECONDS = 0.5
MATRIX_ROWS = 100
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_CELL_ID = re.compile(r"^[0-9a-f]{8,64}$")
_CASE_KEY = re.compile(r"^[0-9a-f]{16}$")
_NAME = re.compile(r"^[^/\\\x00]+$")

SHOW_PROMPTS_NOTE = (
    "Prompts are not shown (the viewer shows what the report does): start it with "
    "`brigade view DIR --show-prompts` to see them."
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


@dataclass
class Viewer:
    """What the server serves: the watched directories, its token, whether prompts show."""

    dirs: list[Watched]
    token: str = field(default_factory=lambda: random_tokens.token_urlsafe(24))
    show_prompts: bool = False
    _secrets: dict[int, tuple[int, Secrets]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def secrets(self, index: int) -> Secrets:
        """What the pages of a directory scrub (its plan's prompts unless shown)."""
        watched = self.dirs[index]
        plan = watched.plan
        known = self._secrets.get(index)
        if known is not None and known[0] == id(plan):
            return known[1]
        workspace = (plan.context or {}).get("workspace")
        found = secrets_for(watched.out, plan, Path(workspace) if workspace else None)
        if self.show_prompts:
            found = make_secrets(
                prompts=(),
                paths=found.paths,
                env_values=found.env_values,
                homes=found.homes,
                roots=found.roots,
            )
        self._secrets[index] = (id(plan), found)
        return found

    def watch(self) -> None:
        """Keep every directory current from its change feed until `stop`."""
        while not self._stop.wait(POLL_SECONDS):
            for watched in self.dirs:
                try:
                    watched.refresh()
                except (OSError, InputError):
                    continue  # a plan being rewritten: read again at the next poll

    def stop(self) -> None:
        """End the watching thread."""
        self._stop.set()


def open_viewer(dirs: Sequence[Path], *, show_prompts: bool = False) -> Viewer:
    """Read each output directory (InputError when one is none)."""
    watched = []
    for out in dirs:
        if not out.is_dir():
            raise InputError(f"{out}: no such output directory")
        store.check_layout(out)
        watched.append(Watched(out))
    return Viewer(watched, show_prompts=show_prompts)


class ViewServer(ThreadingHTTPServer):
    """The HTTP server of a viewer."""

    daemon_threads = True
    viewer: Viewer


def make_server(viewer: Viewer, host: str = "127.0.0.1", port: int = 0) -> ViewServer:
    """A server bound to host:port (port 0: a free one), not yet serving."""
    if ":" in host:
        import socket

        class Server6(ViewServer):
            address_family = socket.AF_INET6

        server: ViewServer = Server6((host, port), Handler)
    else:
        server = ViewServer((host, port), Handler)
    server.viewer = viewer
    return server


def url_of(server: ViewServer) -> str:
    """The URL the viewer's index is at (with its token)."""
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/{server.viewer.token}/"


# -- pages ------------------------------------------------------------------------------


def _shell(title: str, body: str, script: str = "", css: str = "") -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{META_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{_e(title)}</title>
<style>{render.CSS}{css}</style>
</head>
<body>
{body}
{f'<script nonce="{NONCE_MARK}">{script}</script>' if script else ""}
</body>
</html>
"""


VIEW_CSS = """
nav{margin-bottom:.6em}nav a{margin-right:1em}
#live{background:#f4f7fb;border:1px solid #d6e0ee;padding:.4em .6em;display:inline-block}
#filters label{margin-right:.8em;white-space:nowrap}#filters input{width:9em}
#filters input#q{width:16em}#filters input.cost{width:6em}
#cells td.state{white-space:nowrap}#cells td.num{white-space:nowrap}
tr.running td.state{color:#1d4f91}tr.missing td.state{color:#777}
tr.unreadable td.state{color:#8a5a00}
#pager button{margin:0 .3em}
pre.prompt{background:#fbf8ef;border:1px solid #e6dcc0;padding:.5em;white-space:pre-wrap;
overflow-wrap:anywhere;max-height:30em;overflow:auto}
"""


def _nav(index: int, viewer: Viewer) -> str:
    links = ['<a href="../">all directories</a>'] if len(viewer.dirs) > 1 else []
    links.append(f'<a href="../{index}/">index</a>')
    links.append(f'<a href="../compare?base={index}&amp;new={index}">compare seats</a>')
    return f"<nav>{''.join(links)}</nav>"


def index_page(viewer: Viewer, index: int) -> str:
    """A directory's index: the live line, statistics (loaded), filters and the cell list."""
    watched = viewer.dirs[index]
    name = watched.plan.name
    seats = "".join(f'<option value="{_e(s)}">{_e(s)}</option>' for s in watched.seats)
    states = "".join(
        f'<option value="{_e(s)}">{_e(s)}</option>'
        for s in (
            "accepted",
            "rejected",
            "execution_error",
            "adapter_error",
            "grader_error",
            "unscored",
            "running",
            "missing",
            "unreadable",
        )
    )
    classes = "".join(
        f'<option value="{c}">{c} (any state)</option>' for c in ("failed", "fault", "other")
    )
    prompts = "Prompts are shown (--show-prompts)." if viewer.show_prompts else SHOW_PROMPTS_NOTE
    body = f"""{_nav(index, viewer)}
<h1>brigade view: {_e(name)}</h1>
<p id="live" data-version="0">loading…</p>
<p class="note">{_e(prompts)}</p>
<div id="stats"><p class="note">statistics loading…</p></div>
<h2>Accepted rate by seat and case</h2>
<div id="matrix"><p class="note">matrix loading…</p></div>
<h2>Cells</h2>
<form id="filters">
<label>state <select id="f-state"><option value="">any</option>{states}{classes}</select></label>
<label>seat <select id="f-seat"><option value="">any</option>{seats}</select></label>
<label>case <input id="f-case" type="search" aria-label="case"></label>
<label>text <input id="q" type="search" placeholder="coordinate, state, id" \
aria-label="text"></label>
<label>cost from $<input id="f-min" class="cost" type="number" step="any" min="0" \
aria-label="lowest cost"></label>
<label>to $<input id="f-max" class="cost" type="number" step="any" min="0" \
aria-label="highest cost"></label>
</form>
<p id="pager"><button id="prev" type="button">← previous</button><span id="count"></span>\
<button id="next" type="button">next →</button></p>
<table id="cells"><thead><tr><th>coordinate</th><th>state</th><th>attempt</th><th>duration</th>\
<th>score</th><th>cost</th></tr></thead><tbody id="rows"></tbody></table>
"""
    return _shell(f"brigade view: {name}", body, INDEX_SCRIPT, VIEW_CSS)


INDEX_SCRIPT = (
    r"""
(function () {
"""
    + BUILD_SCRIPT
    + r"""
  var PAGE = 100;
  var offset = 0, version = -1, seq = 0, statsAt = 0, statsWanted = false;
  function $(id) { return document.getElementById(id); }
  function query() {
    var p = new URLSearchParams();
    [["state", "f-state"], ["seat", "f-seat"], ["case", "f-case"], ["q", "q"],
     ["min_cost", "f-min"], ["max_cost", "f-max"]].forEach(function (pair) {
      var v = $(pair[1]).value.trim();
      if (v) { p.set(pair[0], v); }
    });
    return p;
  }
  function td(text, css) {
    var node = document.createElement("td");
    node.textContent = text;
    if (css) { node.className = css; }
    return node;
  }
  function render(data) {
    var body = $("rows");
    var fresh = document.createDocumentFragment();
    data.rows.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.className = r[6] + " " + r[5];
      tr.setAttribute("data-cell", r[0]);
      var first = document.createElement("td");
      var a = document.createElement("a");
      a.href = "cell/" + r[0];
      a.textContent = r[1];
      first.appendChild(a);
      tr.appendChild(first);
      tr.appendChild(td(r[7], "state"));
      tr.appendChild(td(r[8] === null ? "–" : String(r[8]), "num"));
      tr.appendChild(td(r[9] === null ? "–" : r[9].toFixed(2) + " s", "num"));
      tr.appendChild(td(r[10] === null ? "–" : r[10].toFixed(3), "num"));
      tr.appendChild(td(r[12], "num"));
      fresh.appendChild(tr);
    });
    body.replaceChildren(fresh);
    var end = Math.min(data.offset + data.rows.length, data.matching);
    $("count").textContent = data.matching ?
      "cells " + (data.offset + 1) + "–" + end + " of " + data.matching +
      (data.matching < data.total ? " matching (" + data.total + " in all)" : "") :
      "no cell matches (" + data.total + " in all)";
    $("prev").disabled = data.offset === 0;
    $("next").disabled = end >= data.matching;
    document.body.setAttribute("data-rows", String(data.rows.length));
    document.body.setAttribute("data-matching", String(data.matching));
  }
  function load() {
    var mine = ++seq;
    var p = query();
    p.set("offset", String(offset));
    p.set("limit", String(PAGE));
    return fetch("api/cells?" + p.toString()).then(function (r) { return r.json(); })
      .then(function (data) {
        if (mine !== seq) { return; }
        offset = data.offset;
        render(data);
        document.body.setAttribute("data-shown", String(mine));
      });
  }
  function fragment(id, url) {
    return fetch(url).then(function (r) { return r.json(); }).then(function (data) {
      fill($(id), data.nodes);
    });
  }
  var matrixOffset = 0;
  function matrix() {
    return fragment("matrix", "api/matrix?offset=" + matrixOffset).then(function () {
      document.querySelectorAll("#matrix button[data-offset]").forEach(function (b) {
        b.addEventListener("click", function () {
          matrixOffset = Number(b.getAttribute("data-offset"));
          matrix();
        });
      });
    });
  }
  function stats() {
    statsAt = Date.now();
    statsWanted = false;
    return Promise.all([fragment("stats", "api/stats"), matrix()]);
  }
  function live(data) {
    var c = data.counts, parts = [];
    Object.keys(c).sort().forEach(function (k) { parts.push(k + " " + c[k]); });
    var eta = data.eta_seconds === null ? "" :
      " · ETA " + (data.eta_seconds < 90 ? Math.round(data.eta_seconds) + " s" :
      Math.round(data.eta_seconds / 60) + " min");
    $("live").textContent = data.total + " cells: " + parts.join(", ") +
      " · running " + (c.running || 0) + " · finished " + data.finished + eta;
    $("live").setAttribute("data-version", String(data.version));
  }
  function poll() {
    fetch("api/changes?since=" + version).then(function (r) { return r.json(); })
      .then(function (data) {
        live(data);
        if (data.version !== version) {
          var first = version === -1;
          version = data.version;
          if (!first) { load(); statsWanted = true; }
        }
        if (statsWanted && Date.now() - statsAt > 3000) { stats(); }
      }).catch(function () {}).then(function () { setTimeout(poll, 1000); });
  }
  ["f-state", "f-seat"].forEach(function (id) {
    $(id).addEventListener("change", function () { offset = 0; load(); });
  });
  ["f-case", "q", "f-min", "f-max"].forEach(function (id) {
    $(id).addEventListener("input", function () { offset = 0; load(); });
  });
  $("filters").addEventListener("submit", function (event) { event.preventDefault(); });
  $("prev").addEventListener("click", function () { offset = Math.max(0, offset - PAGE); load(); });
  $("next").addEventListener("click", function () { offset += PAGE; load(); });
  var hash = decodeURIComponent(window.location.hash.slice(1));
  if (hash.indexOf("filter=") === 0) { $("q").value = hash.slice(7); }
  // the rows first: the statistics of a big battery take the server longer
  load().then(function () {
    document.body.setAttribute("data-ready", "1");
    return stats();
  }).then(function () { document.body.setAttribute("data-stats", "1"); });
  poll();
})();
"""
)


def stats_fragment(viewer: Viewer, index: int) -> str:
    """The statistics of a directory as they are now (the report's tables and charts)."""
    from brigade.report.costs import COST_NOTE, agents_table, cost_chart
    from brigade.report.render import _bar_chart, _comparisons, _seat_table

    whole = viewer.dirs[index].summary()
    # what these tables and charts read (by seat, never by seat and case, nor every score
    # and duration): projecting only that is what keeps a big battery's statistics quick
    shown = {key: value for key, value in whole.items() if key not in ("scores", "durations")}
    shown["trial_stats"] = dict(whole["trial_stats"], by_seat_case=[])
    summary = project_summary(shown, viewer.secrets(index))
    stats = summary["trial_stats"]
    return (
        agents_table(summary)
        + "<h2>Accepted rate by seat (95% Wilson interval)</h2>"
        + _bar_chart(stats["by_seat"])
        + _seat_table(summary)
        + f'<p class="note">{_e(COST_NOTE)}</p>'
        + "<h2>Accepted rate against cost</h2>"
        + cost_chart(summary)
        + "<h2>Paired comparisons</h2>"
        + _comparisons(stats)
    )


class _ViewLinks(render.Links):
    """Links from the index to the viewer's own pages."""

    def cell(self, cell_id: str) -> str:
        return f"cell/{cell_id}"

    def case(self, case_id: str) -> str:
        return f"case/{pages.case_key(case_id)}"


def matrix_fragment(viewer: Viewer, index: int, offset: int) -> str:
    """MATRIX_ROWS cases of the seat x case matrix from `offset`, with buttons for the rest."""
    watched = viewer.dirs[index]
    summary = watched.summary()
    stats = summary["trial_stats"]
    cases = list(dict.fromkeys(row["case"] for row in stats["by_seat_case"]))
    offset = max(0, min(offset, max(0, len(cases) - 1)))
    shown = set(cases[offset : offset + MATRIX_ROWS])
    part = dict(stats, by_seat_case=[r for r in stats["by_seat_case"] if r["case"] in shown])
    members = [
        row for row in watched.rows if row.case_id in shown
    ]  # trial links: one per cell of the cases shown
    cells = [_report_cell(row) for row in members]
    table = render._matrix(part, cells, _ViewLinks("", 2))
    buttons = []
    if offset > 0:
        buttons.append(
            f'<button type="button" data-offset="{max(0, offset - MATRIX_ROWS)}">'
            "← previous cases</button>"
        )
    if offset + MATRIX_ROWS < len(cases):
        buttons.append(
            f'<button type="button" data-offset="{offset + MATRIX_ROWS}">next cases →</button>'
        )
    head = ""
    if len(cases) > MATRIX_ROWS:
        end = min(offset + MATRIX_ROWS, len(cases))
        head = f'<p class="note">cases {offset + 1}–{end} of {len(cases)} {"".join(buttons)}</p>'
    return head + table


def _report_cell(row: Any) -> Any:
    from brigade.report.model import ReportCell

    return ReportCell(
        coordinate=row.coordinate,
        case_id=row.case_id,
        seat=row.seat,
        trial=row.trial,
        cell_id=row.cell_id,
        state=row.state,
        attempt=row.attempt,
        duration=row.duration,
        score=row.score,
        failure_reason=None,
        failure_detail=None,
        run_dir=None,
        graders=(),
    )


def cell_section(viewer: Viewer, index: int, cell_id: str) -> str | None:
    """A cell's detail as the report shows it, and its prompt when prompts are shown."""
    from brigade.report.detail import read_record
    from brigade.report.views import ANSWER_LIMIT, cell_view

    watched = viewer.dirs[index]
    cell = watched.cell(cell_id)
    if cell is None:
        return None
    workspace = (watched.plan.context or {}).get("workspace")
    record = read_record(
        watched.out,
        cell,
        workspace=Path(workspace) if workspace else None,
        answer_limit=ANSWER_LIMIT * 4,
    )
    view = cell_view(record, watched.out, viewer.secrets(index))
    section = pages.detail_section(view, f"../case/{pages.case_key(cell.case_id)}")
    if viewer.show_prompts:
        prompt = f'<h3>Prompt</h3><pre class="prompt">{_e(cell.prompt)}</pre>'
    else:
        prompt = f'<h3>Prompt</h3><p class="note prompt-hidden">{_e(SHOW_PROMPTS_NOTE)}</p>'
    files = ""
    if view.run_dir:
        names = ("final.txt", "stdout.log", "stderr.log", "transcript.json", "run.json")
        links = " · ".join(
            f'<a href="../file/{_e(quote(view.run_dir))}/{name}">{name}</a>' for name in names
        )
        files = f'<p class="meta">files of this attempt: {links}</p>'
    return section.replace("</section>", prompt + files + "</section>", 1)


def cell_page(viewer: Viewer, index: int, cell_id: str) -> str | None:
    """A cell's page, which updates itself when the cell changes."""
    section = cell_section(viewer, index, cell_id)
    if section is None:
        return None
    body = f'{_nav(index, viewer)}<div id="cell" data-cell="{_e(cell_id)}">{section}</div>'
    return _shell(
        f"brigade view: {viewer.dirs[index].plan.name}: cell",
        body,
        CELL_SCRIPT,
        pages.CSS + VIEW_CSS,
    )


CELL_SCRIPT = (
    r"""
(function () {
"""
    + BUILD_SCRIPT
    + r"""
  var box = document.getElementById("cell");
  var id = box.getAttribute("data-cell");
  var version = -1;
  function poll() {
    fetch("../api/changes?since=" + version).then(function (r) { return r.json(); })
      .then(function (data) {
        var mine = data.changed === null || data.changed.indexOf(id) !== -1;
        var first = version === -1;
        version = data.version;
        document.body.setAttribute("data-version", String(version));
        if (!first && mine) {
          return fetch("../api/cell/" + id).then(function (r) { return r.json(); })
            .then(function (data) { fill(box, data.nodes); });
        }
      }).catch(function () {}).then(function () { setTimeout(poll, 1000); });
  }
  document.body.setAttribute("data-ready", "1");
  poll();
})();
"""
)


def case_page(viewer: Viewer, index: int, key: str) -> str | None:
    """Every seat's answer to one case side by side."""
    from brigade.report.paging import Sources, _case_answer

    watched = viewer.dirs[index]
    members = [c for c in watched.plan.cells if pages.case_key(c.case_id) == key]
    if not members:
        return None
    workspace = (watched.plan.context or {}).get("workspace")
    sources = Sources(
        out=watched.out,
        plan=watched.plan,
        receipts={c.cell_id: store.read_receipt(watched.out, c.cell_id) for c in members},
        secrets=viewer.secrets(index),
        workspace=Path(workspace) if workspace else None,
        name=watched.plan.name,
    )
    answers = [_case_answer(sources, cell) for cell in members]
    section = pages.case_section(
        members[0].case_id, watched.seats, answers, 2, cell_href=lambda cid: f"../cell/{cid}"
    )
    if viewer.show_prompts:
        prompt = f'<h3>Prompt</h3><pre class="prompt">{_e(members[0].prompt)}</pre>'
    else:
        prompt = f'<p class="note prompt-hidden">{_e(SHOW_PROMPTS_NOTE)}</p>'
    body = f"{_nav(index, viewer)}{prompt}{section}"
    return _shell(f"brigade view: {watched.plan.name}: case", body, "", pages.CSS + VIEW_CSS)


def directories_page(viewer: Viewer) -> str:
    """The directories served, and a form to compare two of them (or two seats)."""
    rows = "".join(
        f'<li><a href="{i}/">{_e(w.plan.name)}</a> ({len(w.rows)} cells; seats '
        f"{_e(', '.join(w.seats))})</li>"
        for i, w in enumerate(viewer.dirs)
    )
    options = "".join(
        f'<option value="{i}">{i}: {_e(w.plan.name)}</option>' for i, w in enumerate(viewer.dirs)
    )
    body = f"""<h1>brigade view</h1><ul id="dirs">{rows}</ul>
<h2>Compare</h2>
<form action="compare" method="get">
<label>BASE <select name="base">{options}</select></label>
<label>NEW <select name="new">{options}</select></label>
<label>seats (optional) <input name="a" placeholder="seat of BASE"> <input name="b"
placeholder="seat of NEW"></label> <button type="submit">compare</button></form>"""
    return _shell("brigade view", body)


def compare_page(viewer: Viewer, params: Mapping[str, str]) -> str:
    """`brigade compare`'s page for two directories, or two seats of one."""
    from brigade.outdir.comparison import compare_batteries
    from brigade.report.compare import html_page

    def number(name: str) -> int:
        try:
            value = int(params.get(name, "0"))
        except ValueError:
            value = -1
        if not 0 <= value < len(viewer.dirs):
            raise InputError(f"{name}: no directory {params.get(name)!r}")
        return value

    base_i, new_i = number("base"), number("new")
    base = viewer.dirs[base_i].battery()
    same = base_i == new_i
    new = base if same else viewer.dirs[new_i].battery()
    a, b = params.get("a", "").strip(), params.get("b", "").strip()
    seats = (a, b) if a and b else None
    if same and seats is None:
        if len(base.seats) < 2:
            raise InputError("one seat only: nothing to compare in this directory")
        seats = (base.seats[0], base.seats[1])
    doc = compare_batteries(base, new, seats, same=same)

    def link(side: str, cell: Mapping[str, Any]) -> str | None:
        where = base_i if side == "base" else new_i
        return f"{where}/cell/{cell['cell_id']}"

    page = html_page(doc, link)
    choose = ""
    if same:
        options = "".join(f'<option value="{_e(s)}">{_e(s)}</option>' for s in base.seats)
        choose = (
            f'<form action="compare" method="get"><input type="hidden" name="base" '
            f'value="{base_i}"><input type="hidden" name="new" value="{new_i}">'
            f'<label>seat A <select name="a">{options}</select></label> '
            f'<label>seat B <select name="b">{options}</select></label> '
            '<button type="submit">compare</button></form>'
        )
    nav = f'<nav><a href="{base_i}/">index</a></nav>{choose}'
    return page.replace("<body>\n", f"<body>\n{nav}", 1)


# -- files of a cell folder -------------------------------------------------------------


def open_inside(root: Path, parts: Sequence[str]) -> int:
    """A file descriptor of root/parts..., every component opened without following a link
    (a link anywhere on the way, or anything but a regular file at the end: OSError)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        last = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(last).st_mode):
        os.close(last)
        raise store.NotRegularFile(parts[-1])
    return last


def safe_parts(path: str) -> list[str] | None:
    """The components of a relative path under cells/, None for anything else (`..`, `.`,
    empty components, backslashes, NUL, absolute)."""
    parts = path.split("/")
    if not parts or parts[0] != store.CELLS_DIR or len(parts) < 2 or len(parts) > 12:
        return None
    if any(p in ("", ".", "..") or not _NAME.match(p) for p in parts):
        return None
    return parts


def file_text(viewer: Viewer, index: int, path: str) -> bytes | None:
    """A file of a cell folder as the viewer shows it: projected unless prompts are shown
    (then as it is); None when it is not one to serve."""
    from brigade.report.views import shown

    parts = safe_parts(path)
    if parts is None:
        return None
    try:
        fd = open_inside(viewer.dirs[index].out, parts)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(FILE_LIMIT + 1)
    more = len(data) > FILE_LIMIT
    text = data[:FILE_LIMIT].decode("utf-8", "replace")
    secrets = viewer.secrets(index)
    view = shown(text, secrets, FILE_LIMIT, more)
    note = "\n[truncated]\n" if view.cut else ""
    return (view.text + note).encode("utf-8")


# -- the handler ------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    """Answers GET requests under the viewer's token; nothing else."""

    server: ViewServer
    protocol_version = "HTTP/1.1"
    # the headers and the body go out as two writes: with Nagle's algorithm on, the body
    # waits for the browser's delayed acknowledgement of the headers (about 40 ms a request)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        """Quiet: requests are not logged on the terminal."""

    def _send(
        self,
        status: int,
        body: bytes,
        kind: str,
        extra: Mapping[str, str] = {},
        nonce: str | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        nonce = nonce or random_tokens.token_urlsafe(16)
        self.send_header("Content-Security-Policy", policy(nonce))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, text: str) -> None:
        nonce = random_tokens.token_urlsafe(16)
        body = text.replace(NONCE_MARK, nonce).encode("utf-8")
        self._send(200, body, "text/html; charset=utf-8", nonce=nonce)

    def _json(self, doc: Any) -> None:
        data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._send(200, data, "application/json")

    def _not_found(self) -> None:
        self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        """As GET, without the body."""
        self.do_GET()

    def do_POST(self) -> None:  # noqa: N802
        """Refused: the viewer only reads."""
        self._send(405, b"the viewer only reads\n", "text/plain; charset=utf-8", {"Allow": "GET"})

    do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815

    def do_GET(self) -> None:  # noqa: N802
        """Route a request under the token."""
        viewer = self.server.viewer
        if not self._host_allowed():
            self._send(421, b"unknown host\n", "text/plain; charset=utf-8")
            return
        split = urlsplit(self.path)
        raw = split.path
        prefix = f"/{viewer.token}/"
        given = raw[1 : 1 + len(viewer.token)]
        if not hmac.compare_digest(given.encode(), viewer.token.encode()) or not raw.startswith(
            prefix
        ):
            if raw == f"/{viewer.token}":
                self._send(301, b"", "text/plain", {"Location": prefix})
                return
            self._not_found()
            return
        rest = raw[len(prefix) :]
        params = {k: v[-1] for k, v in parse_qs(split.query).items()}
        try:
            self._route(viewer, rest, params)
        except InputError as exc:
            self._send(400, f"{exc}\n".encode(), "text/plain; charset=utf-8")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # one request's failure (a hostile receipt), never the server's
            problem = f"this page could not be made ({type(exc).__name__})\n"
            try:
                self._send(500, problem.encode(), "text/plain; charset=utf-8")
            except OSError:
                pass

    def _host_allowed(self) -> bool:
        """The Host header names this server (127.0.0.1, localhost or the address it is bound
        to, with its port): a page of another origin reaching it through a rebound DNS name
        is refused. Bound to every address (`--host 0.0.0.0` or `::`, which the user chose
        to reach it from other machines, under whatever name they use), any name with the
        port is accepted: the token alone keeps others out then."""
        bound, port = str(self.server.server_address[0]), int(self.server.server_address[1])
        given = self.headers.get("Host", "").strip().lower()
        if bound in ("0.0.0.0", "::"):
            name, colon, given_port = given.rpartition(":")
            return bool(colon and name) and given_port == str(port)
        names = {"127.0.0.1", "localhost", "[::1]", bound, f"[{bound}]"}
        return given in {f"{name}:{port}" for name in names}

    def _route(self, viewer: Viewer, rest: str, params: Mapping[str, str]) -> None:
        if rest == "":
            if len(viewer.dirs) == 1:
                self._send(302, b"", "text/plain", {"Location": "0/"})
            else:
                self._html(directories_page(viewer))
            return
        if rest == "compare":
            self._html(compare_page(viewer, params))
            return
        head, _, tail = rest.partition("/")
        if not head.isdigit() or int(head) >= len(viewer.dirs):
            self._not_found()
            return
        index = int(head)
        watched = viewer.dirs[index]
        if tail == "":
            self._html(index_page(viewer, index))
        elif tail == "api/cells":
            offset, limit = _int(params.get("offset"), 0), _int(params.get("limit"), 100)
            self._json(watched.page(Query.of(params), offset, limit))
        elif tail == "api/changes":
            counts = watched.counts()
            since = _int(params.get("since"), -1)
            changed = watched.since(since) if since >= 0 else None
            unfinished = ("missing", "running", "unreadable")
            finished = len(watched.rows) - sum(counts.get(state, 0) for state in unfinished)
            self._json(
                {
                    "version": watched.version,
                    "total": len(watched.rows),
                    "counts": counts,
                    "finished": finished,
                    "eta_seconds": watched.eta(counts),
                    "changed": changed,
                }
            )
        elif tail == "api/stats":
            self._json({"nodes": tree(stats_fragment(viewer, index))})
        elif tail == "api/matrix":
            matrix = matrix_fragment(viewer, index, _int(params.get("offset"), 0))
            self._json({"nodes": tree(matrix)})
        elif tail.startswith("cell/") or tail.startswith("api/cell/"):
            cell_id = tail.rsplit("/", 1)[1]
            if not _CELL_ID.match(cell_id):
                self._not_found()
                return
            if tail.startswith("cell/"):
                found = cell_page(viewer, index, cell_id)
                self._html(found) if found is not None else self._not_found()
            else:
                found = cell_section(viewer, index, cell_id)
                self._json({"nodes": tree(found)}) if found is not None else self._not_found()
        elif tail.startswith("case/"):
            key = tail[len("case/") :]
            found = case_page(viewer, index, key) if _CASE_KEY.match(key) else None
            self._html(found) if found is not None else self._not_found()
        elif tail.startswith("file/"):
            data = file_text(viewer, index, unquote(tail[len("file/") :]))
            if data is None:
                self._not_found()
            else:
                self._send(
                    200,
                    data,
                    "text/plain; charset=utf-8",
                    {"Content-Security-Policy": "sandbox; default-src 'none'"},
                )
        else:
            self._not_found()


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def serve(
    viewer: Viewer,
    host: str,
    port: int,
    say: Callable[[str], None],
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted (KeyboardInterrupt ends it), watching the directories."""
    server = make_server(viewer, host, port)
    watcher = threading.Thread(target=viewer.watch, name="brigade-view-watch", daemon=True)
    watcher.start()
    url = url_of(server)
    what = (
        "1 output directory" if len(viewer.dirs) == 1 else f"{len(viewer.dirs)} output directories"
    )
    say(f"brigade view: serving {what} at {url}")
    say("  (the URL holds a random token: share it only with who may read these results)")
    if not viewer.show_prompts:
        say("  prompts are not shown; --show-prompts shows them")
    if ready is not None:
        ready(url)
    try:
        server.serve_forever(poll_interval=0.25)
    finally:
        viewer.stop()
        server.server_close()
