"""Reports: JUnit XML (validated against a JUnit XSD), the self-contained HTML page, the leak
check on both, `brigade report`, `brigade show`'s matrix, and a render in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from conftest import CHROMIUM, FAKE_CLI, REPO, Project, chromium

from brigade.core.identity import CELL_SCHEMA, digest
from brigade.core.plan import Plan, build_plan, plan_from_document
from brigade.core.projection import make_secrets
from brigade.core.receipts import Receipt, views_of
from brigade.core.summary import build_summary
from brigade.engine.engine import Engine
from brigade.engine.session import Options, open_session
from brigade.inputs.manifest import manifest_from_document
from brigade.inputs.roster import roster_from_document
from brigade.outdir.results import current_receipts, read_plan_document
from brigade.report import render as render_module
from brigade.report.build import build_report, check_report_file, write_report
from brigade.report.junit import junit_xml
from brigade.report.render import html_page, text_matrix

JUNIT_XSD = REPO / "tests" / "data" / "junit.xsd"
NOW = "2025-01-02T03:04:05.678Z"
# a prompt full of HTML and XML special characters: it must never reach a report
PROMPT = 'answer: hello\n<script>alert("pwned & gone")</script> Is 1 < 2 && \'yes\' > "no"?'
WEIRD_CASE = "x<y>&\"z'"
WEIRD_SEAT = "s<e>\"a&t'"
SECRET_ENV = "s3cr3t-value-xyz"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(JUNIT_XSD))


# --- a plan with every state, built in memory -------------------------------------


def make_plan(root: Path) -> Plan:
    roster = roster_from_document(
        {
            "schema": "brigade.roster.v1",
            "seats": {
                "alpha": {"cli": "exec:true"},
                WEIRD_SEAT: {"cli": "exec:true", "env": {"TOKEN": SECRET_ENV}},
            },
        },
        root / "roster.yaml",
        "roster.yaml",
    )
    manifest = manifest_from_document(
        {
            "schema": "brigade.eval_manifest.v1",
            "name": "unit",
            "seats": ["alpha", WEIRD_SEAT],
            "cases": [
                {"id": "ok", "prompt": PROMPT, "trials": 2},
                {"id": WEIRD_CASE, "prompt": "a prompt about weird names"},
                {"id": "faults", "prompt": "a prompt for faults", "trials": 4},
            ],
        },
        root / "manifest.yaml",
        "manifest.yaml",
    )
    return build_plan(manifest, roster, "roster.yaml", None)


def grader(score: float | None, detail: str, status: str = "scored") -> dict[str, Any]:
    return {
        "grader_id": "regex_output:0",
        "grader_type": "regex_output",
        "status": status,
        "score": score,
        "detail": detail,
    }


def parsed(receipts: dict[str, Any]) -> dict[str, Receipt | None]:
    """The receipts as the store's reader hands them over (parsed once)."""
    return {
        cell_id: Receipt.of({"schema": CELL_SCHEMA, **doc}) if doc is not None else None
        for cell_id, doc in receipts.items()
    }


def receipt(out: Path, cell_id: str, state: str, **fields: Any) -> dict[str, Any]:
    doc = {
        "cell_id": cell_id,
        "state": state,
        "attempt": fields.pop("attempt", 1),
        "duration_seconds": fields.pop("duration", 1.25),
        "run_dir": str(out / "cells" / cell_id / "attempts" / "attempt-001" / "run"),
        "prompt": "never shown",
        "graders": [],
        "score": None,
    }
    doc.update(fields)
    return doc


def unit_results(root: Path) -> tuple[Path, Plan, dict[str, Any]]:
    """out dir, plan and receipts: every state on seat alpha, a few on the weird seat."""
    out = root / "out"
    plan = make_plan(root)
    by_coordinate = {cell.coordinate: cell.cell_id for cell in plan.cells}

    def at(case: str, seat: str, trial: int) -> str:
        return by_coordinate[f"{case}:{seat}:{trial}"]

    # the grader detail quotes the prompt: the projection must replace it
    leaky = grader(0.0, f"pattern not found in {PROMPT!s}")
    receipts: dict[str, Any] = {
        at("ok", "alpha", 1): receipt(
            out, at("ok", "alpha", 1), "accepted", score=1.0, graders=[grader(1.0, "found")]
        ),
        at("ok", "alpha", 2): receipt(
            out, at("ok", "alpha", 2), "rejected", score=0.0, graders=[leaky]
        ),
        at(WEIRD_CASE, "alpha", 1): receipt(out, at(WEIRD_CASE, "alpha", 1), "unscored"),
        at("faults", "alpha", 1): receipt(
            out,
            at("faults", "alpha", 1),
            "execution_error",
            failure_detail="the seat exited with status 2",
            exit_code=2,
        ),
        at("faults", "alpha", 2): receipt(
            out,
            at("faults", "alpha", 2),
            "execution_error",
            failure_reason="timeout",
            failure_detail="the seat hit its time limit",
        ),
        at("faults", "alpha", 3): receipt(
            out,
            at("faults", "alpha", 3),
            "adapter_error",
            failure_reason="transport_drop",
            failure_detail=f"connection reset while sending {SECRET_ENV}",
            attempt=3,
        ),
        at("faults", "alpha", 4): receipt(
            out,
            at("faults", "alpha", 4),
            "grader_error",
            graders=[grader(None, "bad pattern '(': missing )", status="grader_error")],
        ),
        at("ok", WEIRD_SEAT, 1): receipt(
            out, at("ok", WEIRD_SEAT, 1), "accepted", score=1.0, graders=[grader(1.0, "ok")]
        ),
        at("ok", WEIRD_SEAT, 2): {
            "cell_id": at("ok", WEIRD_SEAT, 2),
            "state": "running",
            "attempt": 2,
            "started_at": NOW,
        },
        at(WEIRD_CASE, WEIRD_SEAT, 1): receipt(
            out, at(WEIRD_CASE, WEIRD_SEAT, 1), "accepted", score=1.0, graders=[grader(1.0, "ok")]
        ),
        at("faults", WEIRD_SEAT, 1): receipt(
            out,
            at("faults", WEIRD_SEAT, 1),
            "adapter_error",
            failure_reason="provider_5xx",
            failure_detail="HTTP 503 from the provider",
        ),
        # faults:<weird>:2..4 have no receipt: missing
    }
    write_run_files(out, plan, receipts)
    return out, plan, receipts


# what the agents said and did, as their run folders record it
ECHO = f"You asked: {PROMPT}\nand my token is {SECRET_ENV}"
LONG = "x" * 20_000
TRANSCRIPT_PATH = "/tmp/secret-folder/notes.txt"  # an absolute path of this machine


def write_run_files(out: Path, plan: Plan, receipts: dict[str, Any]) -> None:
    """final.txt for every finished cell, and a few cells' logs, transcript and changes."""
    by_id = {cell.cell_id: cell.coordinate for cell in plan.cells}
    special = {"ok:alpha:2": ECHO, "faults:alpha:1": LONG}
    for cell_id, doc in receipts.items():
        if doc["state"] == "running":
            continue
        run = out / "cells" / cell_id / "attempts" / f"attempt-{doc['attempt']:03d}" / "run"
        run.mkdir(parents=True)
        coordinate = by_id[cell_id]
        (run / "final.txt").write_text(special.get(coordinate, f"the answer of {coordinate}\n"))
        if coordinate == "faults:alpha:3":
            (run / "stderr.log").write_text(
                f"retrying\nconnection reset while sending {SECRET_ENV}\n"
            )
        if coordinate == "ok:alpha:1":
            entries = [
                {"kind": "message", "role": "user", "text": PROMPT},
                {"kind": "reasoning", "text": "I should read the notes first."},
                {"kind": "tool_call", "name": "Read", "input": {"file_path": TRANSCRIPT_PATH}},
                {"kind": "tool_result", "name": "Read", "output": "no such file", "is_error": True},
                {"kind": "message", "role": "assistant", "text": "the answer of ok:alpha:1"},
            ]
            doc_ = {"schema": "brigade.transcript.v1", "entries": entries}
            data = json.dumps(doc_).encode()
            (run / "transcript.json").write_bytes(data)
            # brigade reads only the transcript it wrote: run.json records its digest
            (run / "run.json").write_text(json.dumps({"transcript_digest": digest(data)}))
        if coordinate == f"ok:{WEIRD_SEAT}:1":
            (run / "run.json").write_text(
                json.dumps({"changed_files": ["src/app.py"], "workspace_snapshot": {}})
            )
            (run / "changes.patch").write_text(
                "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-print('v1')\n+print('v2')\n"
            )


def unit_report(root: Path) -> tuple[Path, Plan, dict[str, Any], dict[str, Any]]:
    out, plan, receipts = unit_results(root)
    summary = build_summary(plan, views_of(receipts), {}, NOW)
    return out, plan, receipts, summary


# --- JUnit XML ----------------------------------------------------------------


def cases_by_name(root: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in root.iter("testcase")}


def test_junit_has_a_suite_per_seat_and_a_case_per_cell(tmp_path: Path, schema) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    result = write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts))
    assert result.leaks == ()
    junit = out / "report" / "junit.xml"
    assert result.files == (junit, out / "report" / "index.html")
    schema.validate(str(junit))
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("name") == "unit"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["alpha", WEIRD_SEAT]
    assert [
        (s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped")) for s in suites
    ] == [
        ("7", "2", "3", "1"),
        ("7", "0", "1", "4"),
    ]
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "14",
        "2",
        "4",
        "5",
    )
    cases = cases_by_name(root)
    assert len(cases) == 14
    accepted = cases["ok:alpha:1"]
    assert accepted.get("classname") == "ok"
    assert accepted.get("time") == "1.250"
    assert [(p.get("name"), p.get("value")) for p in accepted.iter("property")] == [
        ("cell_id", receipts_id(plan, "ok:alpha:1")),
        ("attempt", "1"),
        ("state", "accepted"),
    ]
    assert [child.tag for child in accepted] == ["properties", "system-out"]
    assert accepted.findtext("system-out") == "the answer of ok:alpha:1\n"

    rejected = cases["ok:alpha:2"].find("failure")
    assert rejected is not None and rejected.get("type") == "rejected"
    crashed = cases["faults:alpha:1"].find("failure")
    assert crashed is not None and crashed.get("type") == "execution_error"
    assert "status 2" in (crashed.get("message") or "")

    timeout = cases["faults:alpha:2"].find("error")
    assert timeout is not None and timeout.get("type") == "timeout"
    assert "execution_error (timeout)" in (timeout.get("message") or "")
    drop = cases["faults:alpha:3"]
    assert drop.find("error").get("type") == "transport_drop"  # type: ignore[union-attr]
    assert {p.get("name"): p.get("value") for p in drop.iter("property")}["attempt"] == "3"
    graded = cases["faults:alpha:4"].find("error")
    assert graded is not None and graded.get("type") == "grader_error"
    five = cases[f"faults:{WEIRD_SEAT}:1"].find("error")
    assert five is not None and five.get("type") == "provider_5xx"
    assert "HTTP 503" in (five.get("message") or "")

    for name, state in (
        (f"{WEIRD_CASE}:alpha:1", "unscored"),
        (f"ok:{WEIRD_SEAT}:2", "running"),
        (f"faults:{WEIRD_SEAT}:3", "missing"),
    ):
        skipped = cases[name].find("skipped")
        assert skipped is not None and (skipped.get("message") or "").startswith(state)
    missing = {
        p.get("name"): p.get("value") for p in cases[f"faults:{WEIRD_SEAT}:3"].iter("property")
    }
    assert missing["attempt"] == "0" and missing["state"] == "missing"
    assert cases[f"faults:{WEIRD_SEAT}:3"].get("time") == "0.000"


def receipts_id(plan: Plan, coordinate: str) -> str:
    return next(c.cell_id for c in plan.cells if c.coordinate == coordinate)


def test_the_validator_rejects_broken_junit(tmp_path: Path, schema) -> None:
    """The XSD is a real constraint: misplaced or missing parts fail validation."""
    good = (
        '<testsuites><testsuite name="s" tests="1"><testcase name="c" classname="k" time="0.1">'
        '<properties><property name="a" value="b"/></properties><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    assert schema.is_valid(good)
    for broken in (
        good.replace(' classname="k"', ""),  # Ant requires classname
        good.replace('time="0.1"', 'time="fast"'),
        good.replace("<properties><property", "<skipped/><properties><property").replace(
            "</properties><skipped/>", "</properties>"
        ),  # properties come first
        good.replace("<skipped/>", "<skipped/><failure/>"),  # one outcome per testcase
        good.replace(' tests="1"', ""),
    ):
        assert not schema.is_valid(broken), broken


def test_junit_strips_characters_xml_cannot_carry(tmp_path: Path, schema) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    first = plan.cells[0].cell_id
    receipts[first]["graders"] = [grader(1.0, "bell \x07 and nul \x00 here")]
    report = build_report(out, plan, parsed(receipts), summary)
    data = junit_xml("unit", report.cells)
    schema.validate(ET.fromstring(data))
    assert b"\x07" not in data and b"\x00" not in data


# --- HTML ---------------------------------------------------------------------


def test_html_is_self_contained_and_escapes_everything(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts))
    page = (out / "report" / "index.html").read_text()
    # one file, no network: nothing is loaded from anywhere; links go to its detail pages
    for reference in ("http://", "https://", "src=", "@import", "url("):
        assert reference not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    links = re.findall(r'href="([^"]*)"', page)
    assert links and all(
        re.fullmatch(r"index_files/(cells|cases)/[0-9a-f]{2}\.html#[ck]-[0-9a-f]+", link)
        for link in links
    )
    assert "default-src 'none'" in page
    # the parts
    for marker in (
        'id="matrix"',
        'id="rates"',
        'id="seats"',
        'id="comparisons"',
        'id="failures"',
        'id="stale"',
        'id="filter"',
        'id="cells"',
        "<script>",
    ):
        assert marker in page, marker  # fmt: skip
    assert page.count('<tr class="') == len(plan.cells)
    # names with special characters appear escaped, never raw
    assert WEIRD_CASE not in page and WEIRD_SEAT not in page
    assert html.escape(WEIRD_CASE) in page and html.escape(WEIRD_SEAT) in page
    assert "<script>alert" not in page
    # the matrix: accepted/scored per seat x case, faults noted, coloured by rate
    assert ">1/2</a><small>50%</small>" in page
    assert "– (1 unscored)" in page
    assert "0/1 (3 mf)" in page
    assert "hsl(60,65%,78%)" in page
    # measurement failures by reason, per seat
    assert "<th>adapter_error (transport_drop)</th>" in page
    assert "<th>adapter_error (provider_5xx)</th>" in page
    assert "<th>execution_error (timeout)</th>" in page
    assert "<th>grader_error</th>" in page
    assert "No stale cells." in page


def test_reports_leak_no_prompt_path_or_env_value(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    result = write_report(
        out, plan, views_of(receipts), summary, receipts=parsed(receipts), workspace=tmp_path
    )
    assert result.leaks == ()
    for path in result.files:
        raw = path.read_text()
        for text in (raw, html.unescape(raw)):
            assert "pwned & gone" not in text
            assert "pwned" not in text
            assert SECRET_ENV not in text
            assert str(tmp_path) not in text
            assert "never shown" not in text
    page = (out / "report" / "index.html").read_text()
    assert "pattern not found in &lt;prompt sha256:" in page  # replaced by its digest
    assert "cells/" not in page or str(out) not in page


def test_the_leak_check_reads_through_html_escapes(tmp_path: Path) -> None:
    prompt = "Is 1 < 2 && 'yes' > \"no\"?"
    secrets = make_secrets([prompt], [], [])
    page = tmp_path / "index.html"
    page.write_text(f"<p>{html.escape(prompt)}</p>")
    leaks = check_report_file(page, "report/index.html", secrets)
    assert [(leak.where, leak.kind) for leak in leaks] == [("(text, entities decoded)", "prompt")]
    page.write_text("<p>nothing here</p>")
    assert check_report_file(page, "report/index.html", secrets) == []


def test_names_equal_to_secrets_are_shown_as_they_are(tmp_path: Path) -> None:
    """Seat names and case ids are identifiers, never redacted: a seat named like an env
    value or a case id equal to a prompt is shown, and is not a leak; the same text in
    free text is replaced (and would be a leak)."""
    out, plan, receipts, summary = unit_report(tmp_path)
    secrets = make_secrets(["a prompt about weird names", WEIRD_CASE], [], ["alpha-x", "alpha"])
    result = write_report(
        out, plan, views_of(receipts), summary, receipts=parsed(receipts), secrets=secrets
    )
    assert result.leaks == ()
    root = ET.parse(out / "report" / "junit.xml").getroot()
    assert [s.get("name") for s in root.findall("testsuite")] == ["alpha", WEIRD_SEAT]
    page = tmp_path / "page.html"
    page.write_text(f"<p>{html.escape(WEIRD_CASE)}</p>")
    assert [leak.kind for leak in check_report_file(page, "page.html", secrets)] == ["prompt"]
    skeleton = page.read_bytes()
    assert check_report_file(page, "page.html", secrets, skeleton) == []


def test_unchanged_reports_are_not_rewritten(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts))
    page = out / "report" / "index.html"
    before = page.stat().st_mtime_ns
    write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts))
    assert page.stat().st_mtime_ns == before
    page.write_text("tampered")
    write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts))
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_kept_rows_that_are_not_rows_are_made_again(tmp_path: Path) -> None:
    """The rows the index and JUnit are made from are a cache: one that is not a row this
    code keeps is made again from its receipt, and the pages are as a fresh build's."""
    out, plan, documents, summary = unit_report(tmp_path)
    views = views_of(documents)
    receipts = parsed(documents)
    write_report(out, plan, views, summary, receipts=receipts)
    pages = [out / "report" / name for name in ("index.html", "junit.xml")]
    before = [page.read_bytes() for page in pages]
    rows_file = out / ".report-rows.json"
    rows = json.loads(rows_file.read_text())
    spoiled = list(rows["entries"].values())
    assert spoiled
    for number, entry in enumerate(spoiled):
        entry[1] = "not a row" if number % 2 else entry[1][:3]
    rows_file.write_text(json.dumps(rows))
    (out / ".report-state.json").unlink()  # the index and JUnit are made again
    assert write_report(out, plan, views, summary, receipts=receipts).leaks == ()
    assert [page.read_bytes() for page in pages] == before
    kept = json.loads(rows_file.read_text())["entries"]
    assert all(type(entry[1]) is list and len(entry[1]) > 3 for entry in kept.values())


def test_text_matrix(tmp_path: Path) -> None:
    _, _, _, summary = unit_report(tmp_path)
    lines = text_matrix(summary).splitlines()
    assert lines[0].split() == ["case", "alpha", WEIRD_SEAT]
    assert lines[1].split() == ["ok", "1/2", "1/1", "(1", "not", "run)"]
    assert lines[3].startswith("faults") and "0/1 (3 mf)" in lines[3]
    assert lines[3].endswith("– (1 mf, 3 not run)")
    assert lines[4].startswith("all") and "1/3 (3 mf, 1 unscored) 33%" in lines[4]


def test_html_page_without_results(tmp_path: Path) -> None:
    out, plan, _, _ = unit_report(tmp_path)
    summary = build_summary(plan, {}, {}, NOW)
    report = build_report(out, plan, {}, summary)
    page = html_page(report.summary, report.cells)
    assert "no scored trials" in page and "No measurement failures." in page


# --- end to end: doit writes report/, brigade report and show --------------------


def e2e_project(project: Project) -> None:
    project.write_roster(
        {
            "alpha": {"cli": FAKE_CLI, "timeout_seconds": 3},
            "beta": {"cli": FAKE_CLI, "timeout_seconds": 3, "env": {"TOKEN": SECRET_ENV}},
        }
    )
    hello = [{"type": "exact_output", "expected": "hello"}]
    project.write_manifest(
        [
            {"id": "ok", "prompt": PROMPT, "graders": hello},
            {"id": "wrong", "prompt": "answer: nope", "graders": hello},
            {"id": "crash", "prompt": "exit: 2", "graders": hello},
            {"id": "drop", "prompt": "tempfail: connection reset by peer", "graders": hello},
            {"id": "free", "prompt": "answer: anything", "graders": []},
            {
                "id": "broken",
                "prompt": "answer: hello",
                "graders": [{"type": "regex_output", "pattern": "("}],
            },
            {"id": "slow", "prompt": "sleep: 30", "graders": hello},
        ],
        seats=("alpha", "beta"),
    )


def outcome_tag(case: ET.Element) -> str:
    tags = [
        child.tag for child in case if child.tag not in ("properties", "system-out", "system-err")
    ]
    return tags[0] if tags else "passed"


def test_doit_writes_valid_reports_without_leaks(project: Project, schema) -> None:
    e2e_project(project)
    done = project.doit("jobs=4")
    assert done.returncode == 3, done.stderr  # measurement failures
    junit = project.out / "report" / "junit.xml"
    page = project.out / "report" / "index.html"
    schema.validate(str(junit))
    root = ET.parse(junit).getroot()
    assert [s.get("name") for s in root.findall("testsuite")] == ["alpha", "beta"]
    for suite in root.findall("testsuite"):
        outcome = {case.get("classname"): outcome_tag(case) for case in suite.findall("testcase")}
        assert outcome == {
            "ok": "passed",
            "wrong": "failure",
            "crash": "failure",
            "drop": "error",
            "free": "skipped",
            "broken": "error",
            "slow": "error",
        }
    assert {e.get("type") for e in root.iter("error")} == {
        "transport_drop",
        "grader_error",
        "timeout",
    }
    text = page.read_text()
    assert 'id="matrix"' in text and text.count('<tr class="') == 14
    for path in (junit, page):
        raw = path.read_text()
        for content in (raw, html.unescape(raw)):
            assert "pwned" not in content
            assert SECRET_ENV not in content
            assert str(project.root) not in content
    summary = project.summary()
    alpha = summary["trial_stats"]["by_seat"]["alpha"]
    assert (alpha["trials"], alpha["scored"], alpha["accepted"]) == (7, 3, 1)
    assert alpha["measurement_failures"] == 3
    assert alpha["measurement_failure_kinds"] == {
        "adapter_error": 1,
        "grader_error": 1,
        "timeout": 1,
    }
    assert alpha["unscored"] == 1
    # a no-op run leaves the reports as they are
    before = page.stat().st_mtime_ns
    again = project.doit()
    assert again.returncode == 3
    assert page.stat().st_mtime_ns == before

    # brigade report: custom destinations and JSON
    custom_junit = project.root / "ci" / "junit.xml"
    custom_html = project.root / "ci" / "report.html"
    shown = project.brigade(
        "report",
        str(project.out),
        "--junit",
        str(custom_junit),
        "--html",
        str(custom_html),
        "--json",
    )
    assert shown.returncode == 3, shown.stderr  # the results' bucket
    doc = json.loads(shown.stdout)
    assert doc["trial_stats"]["by_seat"]["alpha"]["accepted"] == 1
    assert len(doc["cells"]) == 14
    assert {c["state"] for c in doc["cells"]} >= {"accepted", "rejected", "adapter_error"}
    assert all(not (c["run_dir"] or "").startswith("/") for c in doc["cells"])
    assert doc["measurement_failures_by_reason"]["adapter_error (transport_drop)"] == {
        "alpha": 1,
        "beta": 1,
    }
    assert "pwned" not in shown.stdout and SECRET_ENV not in shown.stdout
    schema.validate(str(custom_junit))
    assert custom_junit.read_bytes() == junit.read_bytes()
    # the custom page links to its own detail pages, written beside it
    assert custom_html.read_text().replace("report_files/", "index_files/") == page.read_text()
    own = sorted(
        p.relative_to(custom_html.parent / "report_files").as_posix()
        for p in (custom_html.parent / "report_files").rglob("*.html")
    )
    assert own == sorted(
        p.relative_to(page.parent / "index_files").as_posix()
        for p in (page.parent / "index_files").rglob("*.html")
    )
    assert f"wrote {custom_junit}" in shown.stderr

    only_junit = project.root / "only.xml"
    shown = project.brigade("report", str(project.out), "--junit", str(only_junit))
    assert shown.returncode == 3 and only_junit.exists()
    assert shown.stdout == f"wrote {only_junit}\n"

    page.unlink()
    shown = project.brigade("report", str(project.out))
    assert shown.stdout.splitlines() == [f"wrote {junit}", f"wrote {page}"]
    assert page.exists()

    matrix = project.brigade("show", str(project.out))
    assert matrix.returncode == 0
    lines = matrix.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("case ")))
    assert lines[start].split() == ["case", "alpha", "beta"]
    rows = {line.split()[0]: line for line in lines[start + 1 : start + 9]}
    assert rows["ok"].split()[1:] == ["1/1", "1/1"]
    assert rows["drop"].split()[1:] == ["–", "(1", "mf)", "–", "(1", "mf)"]
    assert rows["free"].split()[1:] == ["–", "(1", "unscored)", "–", "(1", "unscored)"]
    assert rows["all"].split()[1:4] == ["1/3", "(3", "mf,"]


def finish_once(project: Project) -> str | None:
    """The finish step of a run of the project's battery (its leak check's failure, or None)."""
    options = Options(
        manifest=project.manifest,
        roster=project.roster,
        out=project.out,
        workspace=project.workspace,
    )
    return Engine(open_session(options)).finish()


def test_a_leaking_report_fails_the_finish(project: Project, monkeypatch) -> None:
    project.write_manifest([{"id": "c", "prompt": PROMPT}])
    assert project.doit().returncode == 0
    plan = plan_from_document(read_plan_document(project.out))
    assert finish_once(project) is None

    real = render_module.html_page

    def leaky(summary, cells, links=None):
        return real(summary, cells, links) + f"<!-- {html.escape(PROMPT)} -->"

    monkeypatch.setattr(render_module, "html_page", leaky)  # the report renders through it
    # nothing changed since the last run: the clean report stands as it is
    assert finish_once(project) is None
    (project.out / "report" / "index.html").unlink()
    failed = finish_once(project)
    assert failed is not None
    assert failed.startswith("export leak check failed: ")
    assert "report/index.html: (text, entities decoded): contains prompt" in failed
    # the leak is not remembered as clean: the next run checks again
    receipts = current_receipts(project.out, plan)
    summary = build_summary(plan, views_of(receipts), {}, NOW)
    again = write_report(
        project.out, plan, views_of(receipts), summary, workspace=project.workspace
    )
    assert again.leaks


def test_report_command_errors(project: Project) -> None:
    done = project.brigade("report", str(project.root / "nowhere"))
    assert done.returncode == 2
    assert done.stderr.startswith("brigade: ")
    assert "plan.json" in done.stderr


# --- headless Chromium ------------------------------------------------------------


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    out, plan, receipts, summary = unit_report(tmp_path)
    write_report(out, plan, views_of(receipts), summary, receipts=parsed(receipts))
    page = out / "report" / "index.html"
    done = chromium(tmp_path / "chromium-profile", "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # parsed: the matrix and every cell row are in the DOM
    assert '<table id="matrix">' in dom
    assert dom.count('<tr class="') == len(plan.cells)
    assert "ok:alpha:1" in dom
    # the inline script ran: it marks the body and counts the rows it can filter
    assert 'data-ready="1"' in dom
    assert f"{len(plan.cells)} of {len(plan.cells)} cells shown" in dom
    # and the SVG chart is there
    assert '<svg id="rates"' in dom
    shot = tmp_path / "report.png"
    done = chromium(
        tmp_path / "chromium-profile",
        "--window-size=1200,1600",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
