"""The report lets you read every cell: detail pages, case views, JUnit answers and faults;
everything projected (an echoed prompt or env value never shows), only changed pages
rewritten, rendered in headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from agents.fake_cli import install
from conftest import CHROMIUM, FAKE_CLI, Project, chromium, git_workspace
from test_report import (
    JUNIT_XSD,
    LONG,
    NOW,
    PROMPT,
    SECRET_ENV,
    TRANSCRIPT_PATH,
    WEIRD_CASE,
    WEIRD_SEAT,
    parsed,
    unit_report,
)

from brigade.core.plan import Plan
from brigade.core.receipts import views_of
from brigade.core.summary import build_summary
from brigade.report import pages as pages_module
from brigade.report import render as render_module
from brigade.report.build import untouched, write_report
from brigade.report.pages import case_anchor, case_page, cell_anchor, cell_page


def write(out: Path, plan: Plan, receipts: dict[str, Any], summary: Any, **extra: Any) -> Any:
    """write_report with the full receipts (and their views, as a finished run has them)."""
    return write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts), **extra)


def ids(plan: Plan) -> dict[str, str]:
    return {cell.coordinate: cell.cell_id for cell in plan.cells}


def detail_of(out: Path, cell_id: str) -> str:
    """The HTML of one cell's section on its page."""
    page = (out / "report" / "index_files" / cell_page(cell_id, 2)).read_text()
    start = page.index(f'<section class="detail" id="{cell_anchor(cell_id)}">')
    return page[start : page.index("</section>", start)]


def case_of(out: Path, case_id: str) -> str:
    page = (out / "report" / "index_files" / case_page(case_id, 2)).read_text()
    start = page.index(f'<section class="case" id="{case_anchor(case_id)}">')
    return page[start : page.index("</section>", start)]


def report_files(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): p.read_text()
        for p in sorted((out / "report").rglob("*"))
        if p.is_file()
    }


# --- JUnit ------------------------------------------------------------------------


def test_junit_holds_each_answer_and_fault(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    assert write(out, plan, receipts, summary).leaks == ()
    junit = out / "report" / "junit.xml"
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}

    def parts(coordinate: str) -> tuple[str | None, str | None]:
        case = cases[coordinate]
        return case.findtext("system-out"), case.findtext("system-err")

    assert parts("ok:alpha:1") == ("the answer of ok:alpha:1\n", None)
    # the agent echoed its prompt and an env value: both are replaced
    said, _ = parts("ok:alpha:2")
    assert said is not None and said.startswith("You asked: <prompt sha256:")
    assert said.endswith("and my token is <redacted>")
    assert "pwned" not in said and SECRET_ENV not in said
    # a long answer is cut, and says so
    said, _ = parts("faults:alpha:1")
    assert said == "x" * 4000 + "\n[truncated: the first 4,000 characters are shown]"
    assert parts("faults:alpha:2") == (
        "the answer of faults:alpha:2\n",
        "timeout: the seat hit its time limit",
    )
    assert parts("faults:alpha:3") == (
        "the answer of faults:alpha:3\n",
        "transport_drop: connection reset while sending <redacted>",
    )
    assert parts(f"faults:{WEIRD_SEAT}:1")[1] == "provider_5xx: HTTP 503 from the provider"
    assert parts(f"ok:{WEIRD_SEAT}:2") == (None, None)  # running: no answer yet
    assert parts(f"faults:{WEIRD_SEAT}:3") == (None, None)  # missing


# --- detail pages -------------------------------------------------------------------


def test_every_cell_has_a_detail_linked_from_the_matrix_and_the_list(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    index = (out / "report" / "index.html").read_text()
    for cell in plan.cells:
        link = f"index_files/{cell_page(cell.cell_id, 2)}#{cell_anchor(cell.cell_id)}"
        # the list row's coordinate and the matrix's trial number both open the detail
        assert index.count(f'href="{link}"') == 2, cell.coordinate
        assert (
            f'id="{cell_anchor(cell.cell_id)}"'
            in (out / "report" / "index_files" / cell_page(cell.cell_id, 2)).read_text()
        )
    for case in ("ok", WEIRD_CASE, "faults"):
        link = f"index_files/{case_page(case, 2)}#{case_anchor(case)}"
        assert f'href="{html.escape(link)}"' in index
    pages = sorted(p.name for p in (out / "report" / "index_files" / "cells").iterdir())
    assert pages == sorted({f"{cell.cell_id[:2]}.html" for cell in plan.cells})


def test_a_detail_shows_answer_graders_attempts_transcript_and_scrubs(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    cell = ids(plan)
    ok = detail_of(out, cell["ok:alpha:1"])
    assert '<h2>ok:alpha:1 <span class="accepted">accepted</span></h2>' in ok
    assert '<p class="why">all 1 grader(s) passed</p>' in ok
    assert '<pre class="answer">the answer of ok:alpha:1\n</pre>' in ok
    assert "<td>regex_output:0</td><td>scored</td><td>1.0</td><td>found</td>" in ok
    assert (
        "<tr><td>1</td><td>accepted</td><td>–</td><td>1.25 s</td><td></td>"
        '<td class="usage">–</td></tr>'
    ) in ok
    run = f"cells/{cell['ok:alpha:1']}/attempts/attempt-001/run"
    assert f" · run folder {run}</p>" in ok
    # the transcript: messages, reasoning, tool calls and results, in order
    assert f"<h3>Transcript (5 entries (all of it: {run}/transcript.json))</h3>" in ok
    items = re.findall(r'<li class="([a-z_]+)"><b>([^<]*)</b><pre>([^<]*)</pre>', ok)
    assert items == [
        ("message", "user", items[0][2]),
        ("reasoning", "reasoning", "I should read the notes first."),
        ("tool_call", "tool call: Read", html.escape('{\n "file_path": "<path>"\n}')),
        ("tool_result", "tool result: Read (error)", "no such file"),
        ("message", "assistant", "the answer of ok:alpha:1"),
    ]
    assert re.fullmatch("&lt;prompt sha256:[0-9a-f]{64}&gt;", items[0][2])
    assert TRANSCRIPT_PATH not in ok
    assert (
        '<p class="scrubbed">Scrubbed: this machine&#x27;s paths (made relative), the prompt '
        "(replaced by its digest).</p>"
    ) in ok

    echo = detail_of(out, cell["ok:alpha:2"])
    assert '<pre class="answer">You asked: &lt;prompt sha256:' in echo
    assert "and my token is &lt;redacted&gt;</pre>" in echo
    assert (
        '<p class="scrubbed">Scrubbed: env values (&lt;redacted&gt;), the prompt (replaced by its '
        "digest).</p>"
    ) in echo
    assert "<td>pattern not found in &lt;prompt sha256:" in echo

    long = detail_of(out, cell["faults:alpha:1"])
    assert f'<pre class="answer">{"x" * 8000}</pre>' in long
    assert (
        '<p class="note">Truncated: the first 8,000 characters are shown (the whole answer is in '
        f"cells/{cell['faults:alpha:1']}/attempts/attempt-001/run/final.txt).</p>"
    ) in long
    assert LONG not in long

    drop = detail_of(out, cell["faults:alpha:3"])
    assert '<span class="fault">adapter_error (transport_drop)</span>' in drop
    assert (
        '<h3>Fault</h3><p class="fault">transport_drop: connection reset while sending '
        "&lt;redacted&gt;</p>"
    ) in drop
    assert (
        '<pre class="stderr">retrying\nconnection reset while sending &lt;redacted&gt;</pre>'
        in (drop)
    )
    assert "<tr><td>3</td><td>adapter_error (transport_drop)</td>" in drop

    changed = detail_of(out, cell[f"ok:{WEIRD_SEAT}:1"])
    assert "<h3>Changed files</h3><ul><li>changed src/app.py</li></ul>" in changed
    assert (
        '<span class="del">-print(&#x27;v1&#x27;)</span>\n<span class="add">+print(&#x27;v2&#x27;)'
        "</span>"
    ) in changed

    running = detail_of(out, cell[f"ok:{WEIRD_SEAT}:2"])
    assert "has not finished" in running and "<h3>Answer</h3>" not in running
    missing = detail_of(out, cell[f"faults:{WEIRD_SEAT}:3"])
    assert '<p class="why">not run yet</p>' in missing
    assert '<p class="note">No attempt yet.</p>' in missing


def test_a_case_view_shows_every_seats_answers_side_by_side(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    cell = ids(plan)
    view = case_of(out, "ok")
    head = f"<thead><tr><th>trial</th><th>alpha</th><th>{html.escape(WEIRD_SEAT)}</th></tr></thead>"
    assert head in view
    rows = re.findall(r"<tr><th>(\d)</th>(.*?)</tr>", view, re.S)
    assert [trial for trial, _ in rows] == ["1", "2"]
    first = rows[0][1]
    link = f"../{cell_page(cell['ok:alpha:1'], 2)}#{cell_anchor(cell['ok:alpha:1'])}"
    assert first.startswith(
        f'<td><a class="accepted" href="{link}">accepted</a>'
        '<pre class="answer">the answer of ok:alpha:1\n</pre></td>'
    )
    assert f"the answer of ok:{html.escape(WEIRD_SEAT)}:1" in first
    second = rows[1][1]
    assert "You asked: &lt;prompt sha256:" in second and SECRET_ENV not in second
    assert '>running</a><p class="note">No answer recorded.</p></td>' in second
    faults = case_of(out, "faults")
    assert faults.count("<tr><th>") == 1 + 4  # the head and a row per trial
    assert '<p class="note">Truncated: the first 1,500 characters are shown.</p>' in faults


def test_report_files_leak_nothing(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    result = write(out, plan, receipts, summary, workspace=tmp_path)
    assert result.leaks == ()
    files = report_files(out)
    assert len(files) > 10
    for name, raw in files.items():
        for text in (raw, html.unescape(raw)):
            assert "pwned" not in text, name
            assert SECRET_ENV not in text, name
            assert str(tmp_path) not in text, name
            assert TRANSCRIPT_PATH not in text, name


def test_a_leaking_detail_page_is_reported_and_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    real = pages_module.detail_page

    def leaky(name, views, width, back):  # type: ignore[no-untyped-def]
        return real(name, views, width, back).replace("</body>", f"{PROMPT}</body>")

    monkeypatch.setattr(pages_module, "detail_page", leaky)
    result = write(out, plan, receipts, summary)
    assert result.leaks
    assert {leak.file.split("/")[1] for leak in result.leaks} == {"index_files"}
    assert {leak.kind for leak in result.leaks} == {"prompt"}
    # nothing vouches for the leaking pages: the next finish checks again
    assert not untouched(out, plan)
    monkeypatch.setattr(pages_module, "detail_page", real)
    assert write(out, plan, receipts, summary).leaks == ()
    assert untouched(out, plan)


# --- incremental ----------------------------------------------------------------------


def mtimes(out: Path) -> dict[str, int]:
    return {
        p.relative_to(out).as_posix(): p.stat().st_mtime_ns
        for p in (out / "report").rglob("*")
        if p.is_file()
    }


def test_only_the_pages_of_changed_cells_are_written_again(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    before = mtimes(out)
    assert write(out, plan, receipts, summary).leaks == ()
    assert mtimes(out) == before
    assert untouched(out, plan)
    # a receipt rewritten the same: nothing shown changed, nothing is written
    cell_id = ids(plan)["ok:alpha:1"]
    receipts[cell_id] = {**receipts[cell_id], "graded_at": "2030-01-01T00:00:00.000Z"}
    write(out, plan, receipts, summary)
    assert mtimes(out) == before
    # one cell re-graded to another verdict: its detail page, its case page, the index and
    # JUnit change
    receipts[cell_id] = {
        **receipts[cell_id],
        "state": "rejected",
        "graded_at": "2030-01-02T00:00:00.000Z",
        "graders": [{**receipts[cell_id]["graders"][0], "score": 0.0, "detail": "now wrong"}],
    }
    summary = build_summary(plan, views_of(receipts), {}, NOW)
    write(out, plan, receipts, summary)
    after = mtimes(out)
    changed = {name for name in after if after[name] != before[name]}
    assert changed == {
        "report/junit.xml",
        "report/index.html",
        f"report/index_files/{cell_page(cell_id, 2)}",
        f"report/index_files/{case_page('ok', 2)}",
    }
    # a page edited or removed by hand is written again, the rest stays
    page = out / "report" / "index_files" / cell_page(cell_id, 2)
    page.write_text("edited")
    assert not untouched(out, plan)
    write(out, plan, receipts, summary)
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert untouched(out, plan)


def test_pages_of_cells_no_longer_planned_are_removed(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    folder = out / "report" / "index_files" / "cells"
    mine = folder / "notes.txt"  # not a page: never touched
    mine.write_text("mine")
    kept = [cell for cell in plan.cells if cell.seat.name == "alpha"]
    smaller = Plan(plan.name, plan.manifest_digest, tuple(kept), (), plan.context)
    write(out, smaller, receipts, build_summary(smaller, views_of(receipts), {}, NOW))
    pages = sorted(p.name for p in folder.iterdir())
    assert pages == sorted({f"{cell.cell_id[:2]}.html" for cell in kept} | {"notes.txt"})
    assert mine.read_text() == "mine"


# --- end to end -------------------------------------------------------------------


def test_doit_reports_answers_transcripts_and_diffs_without_leaks(
    project: Project, tmp_path: Path
) -> None:
    git_workspace(project)
    folder = tmp_path / "bin"
    folder.mkdir()
    install(folder, "claude")
    echo = "Repeat this prompt, which is long enough to be found when echoed back."
    parrot = project.root / "parrot.py"  # an agent that answers with its prompt
    parrot.write_text("import sys\nsys.stdout.write(sys.stdin.read())\n")
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI, "env": {"TOKEN": SECRET_ENV}},
            "claude": {"cli": "claude"},
            "parrot": {"cli": f"exec:{{python}} {parrot}"},
        }
    )
    project.write_manifest(
        [
            {"id": "echo", "prompt": echo},
            {"id": "secret", "prompt": "env: TOKEN"},
            {"id": "edit", "prompt": "write: src/app.py=print('v2')\nanswer: edited"},
        ],
        seats=("agent", "claude", "parrot"),
        execution={"mode": "writable-worktree"},
    )
    path = f"{folder}:{project.env()['PATH']}"
    done = project.doit(PATH=path)
    assert done.returncode == 0, done.stderr
    plan = json.loads((project.out / "plan.json").read_text())
    cell = {c["coordinate"]: c["cell_id"] for c in plan["cells"]}
    echoed = detail_of(project.out, cell["echo:parrot:1"])
    assert re.search('<pre class="answer">&lt;prompt sha256:[0-9a-f]{64}&gt;</pre>', echoed)
    assert "Scrubbed: the prompt (replaced by its digest)." in echoed
    secret = detail_of(project.out, cell["secret:agent:1"])
    assert '<pre class="answer">&lt;redacted&gt;\n</pre>' in secret
    edit = detail_of(project.out, cell["edit:agent:1"])
    assert "<h3>Changed files</h3><ul><li>changed src/app.py</li></ul>" in edit
    assert (
        '<span class="del">-print(&#x27;v1&#x27;)</span>\n'
        '<span class="add">+print(&#x27;v2&#x27;)</span>'
    ) in edit
    claude = detail_of(project.out, cell["echo:claude:1"])
    assert '<ol class="transcript"><li class="system"><b>system</b>' in claude
    assert '<li class="tool_call"><b>tool call: Read</b>' in claude
    assert '<li class="message"><b>assistant</b><pre>All good.</pre></li>' in claude
    junit = ET.parse(project.out / "report" / "junit.xml").getroot()
    outs = {c.get("name"): c.findtext("system-out") for c in junit.iter("testcase")}
    assert outs["secret:agent:1"] == "<redacted>\n"
    assert outs["echo:claude:1"] == "All good."
    for name, raw in report_files(project.out).items():
        for text in (raw, html.unescape(raw)):
            assert SECRET_ENV not in text, name
            assert "long enough to be found" not in text, name
            assert str(project.root) not in text, name
    # brigade show prints the same cell as recorded (the user's own view)
    shown = project.brigade("show", str(project.out), "secret:agent:1")
    assert f"answer (final.txt, 1 line(s)):\n  {SECRET_ENV}\n" in shown.stdout


# --- headless Chromium -------------------------------------------------------------------


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_cell_detail_and_a_case_view_render_in_headless_chromium(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    cell_id = ids(plan)["ok:alpha:2"]
    files = out / "report" / "index_files"
    detail = f"{(files / cell_page(cell_id, 2)).as_uri()}#{cell_anchor(cell_id)}"
    case = f"{(files / case_page('ok', 2)).as_uri()}#{case_anchor('ok')}"
    profile = tmp_path / "profile"
    for url, expected in (
        (
            detail,
            [
                f'<section class="detail" id="{cell_anchor(cell_id)}">',
                "ok:alpha:2",
                "You asked: &lt;prompt sha256:",
                "and my token is &lt;redacted&gt;",
                "Scrubbed: env values",
                "pattern not found in &lt;prompt sha256:",
            ],
        ),
        (
            case,
            [
                f'<section class="case" id="{case_anchor("ok")}">',
                "the answer of ok:alpha:1",
                "You asked: &lt;prompt sha256:",
            ],
        ),
    ):
        dumped = chromium(profile, "--dump-dom", url)
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        for text in expected:
            assert text in dumped.stdout, (url, text)
        assert SECRET_ENV not in dumped.stdout and "pwned" not in dumped.stdout
        shot = tmp_path / "shot.png"
        taken = chromium(profile, "--window-size=1200,1400", f"--screenshot={shot}", url)
        assert taken.returncode == 0, taken.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        shot.unlink()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_big_list_shows_its_first_rows_and_renders_the_others_on_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past STATIC_ROWS, rows wait in the page's data: a filter (here given by the link,
    #filter=...) or #all renders them; the matrix's other cases likewise."""
    monkeypatch.setattr(render_module, "STATIC_ROWS", 2)
    out, plan, receipts, summary = unit_report(tmp_path)
    write(out, plan, receipts, summary)
    index = out / "report" / "index.html"
    page = index.read_text()
    matrix, rest = page.split('<script type="application/json" id="matrix-more">')
    assert matrix.count("<tr><th><a href=") == 2  # two cases of the matrix in the page itself
    cells, _ = rest.split('<script type="application/json" id="cells-more">')
    assert cells.count('<tr class="') == 2  # and two cells
    assert '<script type="application/json" id="cells-more">' in page
    assert "show the other 1 cases" in page
    profile = tmp_path / "profile"
    rows = re.compile(r'<tr class="[a-z]+" data-text="([^"]*)" data-seat="[^"]*">')
    shown = chromium(profile, "--dump-dom", index.as_uri())
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"2 of {len(plan.cells)} cells shown ({len(plan.cells)} match)" in shown.stdout
    assert [text.split()[0] for text in rows.findall(shown.stdout)] == ["ok:alpha:1", "ok:alpha:2"]
    filtered = chromium(profile, "--dump-dom", f"{index.as_uri()}#filter=faults:alpha")
    assert "4 of 14 cells shown" in filtered.stdout
    assert [text.split()[0] for text in rows.findall(filtered.stdout)] == [
        f"faults:alpha:{trial}" for trial in (1, 2, 3, 4)
    ]
    everything = chromium(profile, "--dump-dom", f"{index.as_uri()}#all")
    assert f"{len(plan.cells)} of {len(plan.cells)} cells shown" in everything.stdout
    assert len(rows.findall(everything.stdout)) == len(plan.cells)
    matrix = everything.stdout.split('<table id="matrix">')[1].split("</table>")[0]
    assert matrix.count("<th><a href=") == 3  # every case of the matrix


def test_a_binary_file_a_run_wrote_is_one_line_in_the_report(project: Project) -> None:
    """Regression: its `GIT binary patch` hunk (zlib in base85) carried the prompt, an env
    value and the run folder into the detail page, and the leak check passed it."""
    git_workspace(project)
    agent = project.root / "binary.py"
    agent.write_text(
        "import os, sys\n"
        "p = sys.stdin.read()\n"
        "data = os.environ['TOKEN'] + p + os.environ['BRIGADE_RUN_DIR']\n"
        "open('notes.bin', 'wb').write(b'\\0' + data.encode())\n"
        "print('ok')\n"
    )
    project.write_roster(
        {"agent": {"cli": f"exec:{{python}} {agent}", "env": {"TOKEN": SECRET_ENV}}}
    )
    project.write_manifest(
        [{"id": "bin", "prompt": "Write the confidential memo for the project today please"}],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    cell_id = project.plan()["cells"][0]["cell_id"]
    detail = detail_of(project.out, cell_id)
    diff = detail[detail.index('<pre class="diff">') :]
    assert re.fullmatch(
        '<pre class="diff">diff --git a/notes.bin b/notes.bin\n'
        "new file mode 100644\n"
        "index 0{40}\\.\\.[0-9a-f]{40}\n"
        "binary file changed\n\n</pre>"
        '<p class="scrubbed">Scrubbed: binary file data '
        "\\(shown as &#x27;binary file changed&#x27;\\)\\.</p>",
        diff,
    )
    assert "GIT binary patch" not in detail
    for name, raw in report_files(project.out).items():
        assert "GIT binary patch" not in raw, name


def test_paths_on_the_lines_of_a_diff_are_scrubbed_and_dev_null_stays(
    project: Project,
) -> None:
    """Regression: a path right after `+`, `-` (every line of a diff), `*`, `#`, `_` or a
    digit was not scrubbed; `--- /dev/null` became `<path>`, so the diff no longer applied."""
    git_workspace(project)
    agent = project.root / "paths.py"
    agent.write_text(
        "import os, sys\nsys.stdin.read()\n"
        "home = os.path.expanduser('~')\n"
        "open('paths.txt', 'w').write(f'{home}/.ssh/id_rsa\\n/etc/hostname\\n')\n"
        "print(f'+{home}/.ssh/id_rsa\\n-/etc/hostname\\n#/etc/hostname')\n"
    )
    project.write_roster({"agent": {"cli": f"exec:{{python}} {agent}"}})
    project.write_manifest(
        [{"id": "paths", "prompt": "p"}], execution={"mode": "writable-worktree"}
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    detail = detail_of(project.out, project.plan()["cells"][0]["cell_id"])
    assert '<pre class="answer">+~/.ssh/id_rsa\n-&lt;path&gt;\n#&lt;path&gt;\n</pre>' in detail
    assert '<span class="file">--- /dev/null</span>' in detail
    assert (
        '<span class="add">+~/.ssh/id_rsa</span>\n<span class="add">+&lt;path&gt;</span>' in detail
    )
    junit = ET.parse(project.out / "report" / "junit.xml").getroot()
    assert [c.findtext("system-out") for c in junit.iter("testcase")] == [
        "+~/.ssh/id_rsa\n-<path>\n#<path>\n"
    ]
    home = os.path.expanduser("~")
    for name, raw in report_files(project.out).items():
        for text in (raw, html.unescape(raw)):
            assert f"{home}/.ssh" not in text, name
            assert "/etc/hostname" not in text, name
