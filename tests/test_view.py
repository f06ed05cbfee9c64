"""`brigade view`: the local server over output directories, its refusals, and its pages in
a real browser (Playwright driving Debian's Chromium; skipped when it cannot start).

Screenshots of the main pages go to test-artefacts/view/ (not committed)."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BATTERY, CHROMIUM, FAKE_CLI, REPO, Project, brigade_command

from brigade.outdir import feed, store
from brigade.report.live import Query, Watched
from brigade.report.serve import Viewer, make_server, open_viewer, policy, url_of

ARTEFACTS = REPO / "test-artefacts" / "view"
PROMPT_MARK = "answer: hello"


class Served:
    """A viewer serving in this process, on a free loopback port."""

    def __init__(self, viewer: Viewer) -> None:
        self.viewer = viewer
        self.server = make_server(viewer)
        self.url = url_of(self.server)
        self.port = int(self.server.server_address[1])
        self.threads = [
            threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}),
            threading.Thread(target=viewer.watch),
        ]
        for thread in self.threads:
            thread.start()

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """A raw GET of `path` (sent as it is: no normalising of `..`)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        connection.close()
        return response.status, headers, body

    def under(self, path: str) -> tuple[int, dict[str, str], bytes]:
        return self.get(f"/{self.viewer.token}/{path}")

    def json(self, path: str) -> Any:
        status, _, body = self.under(path)
        assert status == 200, body
        return json.loads(body)

    def close(self) -> None:
        self.viewer.stop()
        self.server.shutdown()
        self.server.server_close()
        for thread in self.threads:
            thread.join(10)


def two_seats(project: Project, cases: list[dict[str, Any]] = BATTERY) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI}, "other": {"cli": FAKE_CLI}})
    project.write_manifest(cases, seats=("agent", "other"))


@pytest.fixture(scope="module")
def served_battery(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, Served]]:
    """BATTERY on two seats, run once for the module, and a viewer serving it."""
    project = Project(tmp_path_factory.mktemp("served"))
    two_seats(project)
    done = project.doit(BRIGADE_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))
    assert done.returncode == 3, done.stderr
    served = Served(open_viewer([project.out]))
    yield project, served
    served.close()


# -- the change feed -----------------------------------------------------------------------


def test_the_feed_is_read_from_where_it_was_left(tmp_path: Path) -> None:
    tail = feed.Tail(tmp_path / feed.FEED_FILE)
    assert tail.read() is None  # the first read: rescan everything
    assert tail.read() == []
    feed.append(tmp_path, "a" * 64, "running", 1)
    feed.append(tmp_path, "b" * 64, "accepted", 2)
    assert tail.read() is None  # the feed appeared: rescan (it may have missed lines)
    feed.append(tmp_path, "a" * 64, "accepted", 1)
    with (tmp_path / feed.FEED_FILE).open("ab") as handle:
        handle.write(b'{"cell_id": "c')  # a line being written
    (entry,) = tail.read() or []
    assert (entry["cell_id"], entry["state"], entry["attempt"]) == ("a" * 64, "accepted", 1)
    with (tmp_path / feed.FEED_FILE).open("ab") as handle:
        handle.write(b'ccc", "state": "running"}\nnot json\n[1]\n')
    assert [e["cell_id"] for e in tail.read() or []] == ["cccc"]
    (tmp_path / feed.FEED_FILE).unlink()
    feed.append(tmp_path, "d" * 64, "running", 1)  # started anew: another inode
    assert tail.read() is None


def test_a_receipt_written_is_a_line_of_the_feed(served_battery: tuple[Project, Served]) -> None:
    project, _ = served_battery
    lines = (project.out / feed.FEED_FILE).read_text().splitlines()
    states = [json.loads(line)["state"] for line in lines]
    assert states.count("running") == 10 and len(states) == 20


def test_a_planted_link_as_the_feed_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / feed.FEED_FILE).symlink_to(target)
    feed.append(tmp_path, "a" * 64, "running", 1)
    assert target.read_text() == ""


# -- the rows and their filters --------------------------------------------------------


def test_filters_by_state_seat_case_text_and_cost(served_battery: tuple[Project, Served]) -> None:
    project, _ = served_battery
    watched = Watched(project.out)
    rows = watched.rows
    assert len(rows) == 10

    def coordinates(**params: str) -> list[str]:
        return [r.coordinate for r in Query.of(params).select(rows)]

    assert coordinates(state="accepted") == ["ok:agent:1", "ok:other:1"]
    assert coordinates(state="fault") == ["fault:agent:1", "fault:other:1"]
    assert coordinates(seat="other", case="o") == ["ok:other:1", "no:other:1"]
    assert coordinates(q="crash OTHER") == ["crash:other:1"]
    assert coordinates(q="zzz") == []
    # the fake agent reports no usage: a cost bound keeps no cell of unknown cost
    assert coordinates(min_cost="0") == [] and len(coordinates(min_cost="x")) == 10
    page = watched.page(Query(), 8, 5)
    assert (page["matching"], page["offset"], len(page["rows"])) == (10, 8, 2)
    # however many rows a page asks for, an answer holds at most PAGE_LIMIT of them
    from brigade.report.live import PAGE_LIMIT

    watched.rows = watched.rows * 100
    watched.version += 1
    page = watched.page(Query(), 0, 10**6)
    assert (page["matching"], len(page["rows"])) == (1000, PAGE_LIMIT)


def test_a_rows_cost_is_the_summarys_cost_of_the_cell() -> None:
    """The cell list prices a cell as the summary does (`cell_usage`), reported costs kept,
    priced ones priced again, unknown ones left out, a broken document unknown."""
    from brigade.core.accounting import cell_usage
    from brigade.core.usage import Price
    from brigade.report.live import cost_of

    prices = {"m": Price(input_per_mtok=3.0, output_per_mtok=15.0)}
    reported = {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25, "cost_source": "reported"}
    priced = {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 9.0, "cost_source": "priced"}
    unknown = {"input_tokens": 1000, "output_tokens": 100}
    broken = {"input_tokens": -4, "cost_usd": "x"}
    for docs in (
        None,
        (),
        (None,),
        (reported,),
        (reported, reported, None),
        (priced,),
        (unknown, reported),
        (broken, reported),
        (unknown,),
    ):
        for model in ("m", None):
            expected = cell_usage(docs, prices, model).get("cost_usd")
            assert cost_of(docs, prices, model) == expected, (docs, model)


def test_the_eta_is_the_cells_left_at_the_pace_of_recent_finishes(
    served_battery: tuple[Project, Served],
) -> None:
    project, _ = served_battery
    watched = Watched(project.out)
    watched.finishes = [0.0, 1000.0, 1010.0, 1020.0]  # the first: out of the ten minutes
    left = {"missing": 4, "running": 2, "accepted": 9}
    assert watched.eta(left, now=1030.0) == pytest.approx(6 / (3 / 30))
    assert watched.eta({"accepted": 9}, now=1030.0) is None  # nothing left
    assert watched.eta(left, now=1615.0) is None  # one finish in the window: no pace yet


def test_the_cells_of_a_seat_share_one_spec_when_read_from_plan_json(
    served_battery: tuple[Project, Served],
) -> None:
    """plan.json holds each cell's seat in full; read back, one seat's cells share one spec
    (the viewer holds every cell), and a seat's spec is its own."""
    from brigade.core.plan import plan_from_document

    project, _ = served_battery
    doc = project.plan()
    cells = plan_from_document(doc).cells
    by_seat = {cell.seat.name: cell.seat for cell in cells}
    assert set(by_seat) == {"agent", "other"}
    assert all(cell.seat is by_seat[cell.seat.name] for cell in cells)
    # a cell whose seat differs in one value (its env) gets a spec of its own
    doc["cells"][0]["seat"] = dict(doc["cells"][0]["seat"], env={"X": "1"})
    changed = plan_from_document(doc).cells
    assert changed[0].seat.env == {"X": "1"} and changed[1].seat.env == {}
    assert changed[0].seat is not by_seat[changed[0].seat.name]
    assert [c.run_key for c in changed[1:]] == [c.run_key for c in cells[1:]]


def test_pages_asking_at_once_share_one_summary(
    served_battery: tuple[Project, Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages opened together all ask for the statistics: the summary (seconds at 100,000
    cells) is computed once, the others wait for it."""
    import brigade.report.live as live

    project, _ = served_battery
    watched = Watched(project.out)
    made: list[int] = []
    real = live.summarize

    def slow(*args: Any) -> Any:
        made.append(1)
        time.sleep(0.3)
        return real(*args)

    monkeypatch.setattr(live, "summarize", slow)
    found: list[Any] = []
    askers = [threading.Thread(target=lambda: found.append(watched.summary())) for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(30)
    assert len(made) == 1 and len(found) == 4
    assert all(summary is found[0] for summary in found)


# -- the server ------------------------------------------------------------------------


def test_pages_need_the_token(served_battery: tuple[Project, Served]) -> None:
    _, served = served_battery
    token = served.viewer.token
    assert served.get("/")[0] == 404
    assert served.get("/0/")[0] == 404
    assert served.get(f"/{token[:-1]}x/0/")[0] == 404
    assert served.get(f"/{token}x/0/")[0] == 404
    assert served.get(f"/0/api/cells?token={token}")[0] == 404
    status, headers, body = served.under("0/")
    assert status == 200 and b"brigade view: t" in body
    nonce = re.search(r"'nonce-([A-Za-z0-9_-]{16,})'", headers["content-security-policy"])
    assert nonce and headers["content-security-policy"] == policy(nonce[1])
    assert "unsafe-inline'; img" not in headers["content-security-policy"]  # scripts: nonce only
    assert f'<script nonce="{nonce[1]}">'.encode() in body and b" onsubmit=" not in body
    assert served.under("0/")[1]["content-security-policy"] != headers["content-security-policy"]
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-content-type-options"] == "nosniff"
    assert served.under("")[0] == 302  # one directory: to its index
    assert served.under("7/")[0] == 404


def test_another_host_name_is_refused(served_battery: tuple[Project, Served]) -> None:
    # a web page whose DNS name is rebound to 127.0.0.1 sends its own name as Host
    _, served = served_battery
    for host in (f"evil.example:{served.port}", "127.0.0.1", f"127.0.0.1:{served.port + 1}", ""):
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        connection.putrequest("GET", f"/{served.viewer.token}/0/", skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == 421, host
        response.read()
        connection.close()
    status, headers, _ = served.under("0/")
    assert status == 200
    assert not [key for key in headers if key.startswith("access-control-")]


def test_a_failing_page_is_an_error_for_that_request_only(
    served_battery: tuple[Project, Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    import brigade.report.serve as serve

    def broken(*args: Any) -> str:
        raise RecursionError("a receipt too deep")

    monkeypatch.setattr(serve, "compare_page", broken)
    _, served = served_battery
    status, _, body = served.under("compare")
    assert status == 500 and b"Traceback" not in body and b"too deep" not in body
    assert served.under("0/")[0] == 200


def test_files_only_of_cell_folders_no_traversal_no_link_out(
    served_battery: tuple[Project, Served], tmp_path: Path
) -> None:
    project, served = served_battery
    cell_id = served.json("0/api/cells?q=ok:agent")["rows"][0][0]
    final = (store.run_dir(project.out, cell_id, 1) / "final.txt").relative_to(project.out)
    assert (project.out / final).is_file()
    status, headers, body = served.under(f"0/file/{final}")
    assert status == 200 and body.strip() == b"hello"
    assert headers["content-type"].startswith("text/plain")
    assert "sandbox" in headers["content-security-policy"]
    final = final.as_posix()
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the viewer")
    (project.out / "cells" / cell_id / "out.txt").symlink_to(secret)
    (project.out / "cells" / "linked").symlink_to(tmp_path)
    refused = [
        "0/file/../../../../etc/passwd",
        "0/file/cells/../plan.json",
        "0/file/cells/%2e%2e/plan.json",
        "0/file/cells%2f..%2fplan.json",
        "0/file/plan.json",
        f"0/file/cells/{cell_id}/out.txt",
        "0/file/cells/linked/secret.txt",
        f"0/file/cells/{cell_id}/attempts",
        f"0/file/cells/{cell_id}//cell.json",
        "0/file/%2fetc%2fpasswd",
    ]
    for path in refused:
        status, _, body = served.under(path)
        assert status == 404, (path, body)
        assert b"not for the viewer" not in body
    assert served.get(f"/{served.viewer.token}/../{served.viewer.token}/0/")[0] == 404


def test_the_viewer_only_reads(served_battery: tuple[Project, Served]) -> None:
    project, served = served_battery
    before = sorted(str(p.relative_to(project.out)) for p in project.out.rglob("*"))
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    connection.request("POST", f"/{served.viewer.token}/0/", body=b"x")
    assert connection.getresponse().status == 405
    connection.close()
    for path in ("0/", "0/api/stats", "0/api/matrix", "0/api/cells", "compare?base=0&new=0"):
        assert served.under(path)[0] == 200, path
    assert sorted(str(p.relative_to(project.out)) for p in project.out.rglob("*")) == before


def test_prompts_show_only_when_asked(served_battery: tuple[Project, Served]) -> None:
    project, served = served_battery
    cell_id = served.json("0/api/cells?q=ok:agent")["rows"][0][0]
    status, _, body = served.under(f"0/cell/{cell_id}")
    assert status == 200
    page = body.decode()
    assert "--show-prompts" in page and PROMPT_MARK not in page
    assert "<h3>Answer</h3>" in page and "hello" in page
    shown = Served(open_viewer([project.out], show_prompts=True))
    try:
        page = shown.under(f"0/cell/{cell_id}")[2].decode()
        assert f'<pre class="prompt">{PROMPT_MARK}</pre>' in page
    finally:
        shown.close()


def test_no_absolute_path_of_this_machine_on_a_page(served_battery: tuple[Project, Served]) -> None:
    project, served = served_battery
    cell_id = served.json("0/api/cells?q=crash:agent")["rows"][0][0]
    for path in ("0/", "0/api/stats", "0/api/matrix", f"0/cell/{cell_id}"):
        body = served.under(path)[2].decode()
        assert str(project.out) not in body and str(REPO) not in body, path


def start_cli(project: Project, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`brigade view` started with a browser that notes the URL it is given (in
    `opened.txt`); the process and the first line it printed."""
    browser = project.root / "browser.py"
    noted = project.root / "opened.txt"
    browser.write_text(f"import sys\nopen({str(noted)!r}, 'a').write(sys.argv[1] + '\\n')\n")
    env = project.env()
    env["BROWSER"] = f"{sys.executable} {browser} %s"
    viewer = subprocess.Popen(
        [*brigade_command(), "view", str(project.out), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert viewer.stdout is not None
    return viewer, viewer.stdout.readline()


def test_the_cli_prints_the_url_and_serves_it(project: Project) -> None:
    two_seats(project)
    assert project.doit().returncode == 3
    viewer, line = start_cli(project, "--port", "0")
    try:
        found = re.search(r"http://127\.0\.0\.1:(\d+)(/[\w-]+/)", line)
        assert found, line
        connection = http.client.HTTPConnection("127.0.0.1", int(found[1]), timeout=10)
        connection.request("GET", found[2] + "0/")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        viewer.terminate()
        _, errors = viewer.communicate(timeout=10)
    assert "warning" not in errors
    assert not (project.root / "opened.txt").exists()  # nothing opened unless --open
    # every address: a warning; --open: the URL handed to the user's browser
    viewer, line = start_cli(project, "--host", "0.0.0.0", "--port", "0", "--open")
    try:
        found = re.search(r"(http://0\.0\.0\.0:(\d+)/[\w-]+/)", line)
        assert found, line
        deadline = time.monotonic() + 20
        while not (project.root / "opened.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (project.root / "opened.txt").read_text().split() == [found[1]]
    finally:
        viewer.terminate()
        _, errors = viewer.communicate(timeout=10)
    assert errors.startswith("brigade: warning: --host 0.0.0.0: other machines can reach")


def test_a_directory_that_is_none_exits_2(project: Project) -> None:
    done = project.brigade("view", str(project.root / "nothing"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"brigade: {project.root / 'nothing'}: no such output directory"


# -- in a real browser ------------------------------------------------------------------


def _browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if CHROMIUM is None:
        return None
    manager = sync_playwright().start()
    try:
        browser = manager.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    except Exception:  # Chromium cannot start here
        manager.stop()
        return None
    return manager, browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    started = _browser()
    if started is None:
        pytest.skip("Chromium cannot start here (or playwright is not installed)")
    manager, browser = started
    yield browser
    browser.close()
    manager.stop()


def shot(page: Any, name: str) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / f"{name}.png"), full_page=True)


def test_index_filter_cell_and_compare_in_chromium(
    served_battery: tuple[Project, Served], browser: Any
) -> None:
    project, served = served_battery
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(served.url + "0/")
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#rows tr").count() == 10
    page.wait_for_selector("#cost-chart, #rates")
    page.wait_for_selector("#matrix table")
    shot(page, "index")
    page.select_option("#f-seat", "other")
    page.wait_for_selector("body[data-matching='5']")
    page.fill("#q", "crash")
    page.wait_for_selector("body[data-matching='1']")
    assert page.locator("#rows tr td.state").inner_text().startswith("execution_error")
    page.fill("#q", "")
    page.select_option("#f-state", "accepted")
    page.wait_for_selector("body[data-matching='1']")
    page.click("#rows a")
    page.wait_for_selector("#cell section.detail")
    assert "ok:other:1" in page.inner_text("h2")
    assert "hello" in page.inner_text("pre.answer")
    shot(page, "cell")
    page.click("a[href^='../case/']")
    page.wait_for_selector("section.case table.side")
    assert page.locator("table.side th").all_inner_texts()[:3] == ["trial", "agent", "other"]
    shot(page, "case")
    page.goto(served.url + "compare?base=0&new=0&a=agent&b=other")
    page.wait_for_selector("#gate")
    assert "agent" in page.inner_text("body") and "other" in page.inner_text("body")
    shot(page, "compare")
    assert errors == []
    # the refusals, as the browser meets them: no token, a file linked out
    assert page.goto(f"http://127.0.0.1:{served.port}/0/").status == 404
    link = project.out / "cells" / "linked-out"
    link.symlink_to(project.root, target_is_directory=True)
    try:
        assert page.goto(served.url + "0/file/cells/linked-out/roster.yaml").status == 404
    finally:
        link.unlink()
    page.close()


def test_two_directories_compared_in_chromium(
    served_battery: tuple[Project, Served], browser: Any
) -> None:
    project, _ = served_battery
    served = Served(open_viewer([project.out, project.out]))
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    try:
        page.goto(served.url)
        assert page.locator("#dirs li").count() == 2
        page.select_option("select[name=new]", "1")
        page.click("button[type=submit]")
        page.wait_for_selector("#gate")
        assert "brigade compare: t → t" in page.inner_text("body")
        shot(page, "compare-directories")
    finally:
        page.close()
        served.close()


def test_a_cell_turns_from_running_to_accepted_while_the_run_goes_on(
    project: Project, browser: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    cases = [
        {
            "id": "quick",
            "prompt": "answer: hello",
            "graders": [{"type": "exact_output", "expected": "hello"}],
        },
        {
            "id": "slow",
            "prompt": f"block: {gate}\nanswer: hello",
            "graders": [{"type": "exact_output", "expected": "hello"}],
        },
    ]
    project.write_manifest(cases)
    run = project.doit_popen()
    served = None
    try:
        deadline = time.monotonic() + 60
        while not (project.out / "plan.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        served = Served(open_viewer([project.out]))
        page = browser.new_page()
        page.goto(served.url + "0/")
        page.wait_for_selector("body[data-ready='1']")
        slow = "#rows tr:has(a:text-is('slow:agent:1')) td.state"
        page.wait_for_selector(f"{slow}:text-is('running')", timeout=30_000)
        shot(page, "live-running")
        cell_page = browser.new_page()
        cell_page.goto(served.url + "0/")
        cell_page.wait_for_selector("body[data-ready='1']")
        cell_page.click("a:text-is('slow:agent:1')")
        cell_page.wait_for_selector("#cell h2 span:text-is('running')")
        gate.write_text("")
        started = time.monotonic()
        page.wait_for_selector(f"{slow}:text-is('accepted')", timeout=30_000)
        cell_page.wait_for_selector("#cell h2 span.accepted", timeout=30_000)
        assert time.monotonic() - started < 30
        assert "finished 2" in page.inner_text("#live")
        shot(page, "live-finished")
        run.wait(60)
    finally:
        gate.write_text("")
        if served is not None:
            served.close()
        if run.poll() is None:
            os.killpg(run.pid, 15)
            run.wait(30)


def test_a_cell_page_shows_the_usage_of_every_attempt(project: Project) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI, "retry": {"max": 1, "backoff_seconds": 0}}})
    spent = '{"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.02}'
    prompt = f"usage: {spent}\ntempfail_before: 2 rate_limited: busy\nanswer: hello"
    project.write_manifest([{"id": "a", "prompt": prompt}])
    done = project.run()
    assert done.returncode == 0, done.stderr
    served = Served(open_viewer([project.out]))
    try:
        cell_id = served.json("0/api/cells")["rows"][0][0]
        page = served.under(f"0/cell/{cell_id}")[2].decode()
    finally:
        served.close()
    usage = re.findall(r'<td class="usage">([^<]*)</td>', page)
    assert usage == ["100 input tokens, 10 output tokens, $0.0200 (reported)"] * 2
    assert "over its 2 attempts: 200 input tokens, 20 output tokens" in page
    assert "$0.0400" in page


def test_two_directories_are_listed_and_compared(served_battery: tuple[Project, Served]) -> None:
    project, _ = served_battery
    served = Served(open_viewer([project.out, project.out]))
    try:
        status, _, body = served.under("")
        assert status == 200 and body.count(b'<li><a href="') == 2
        status, _, body = served.under("compare?base=0&new=1")
        page = body.decode()
        assert status == 200 and "brigade compare: t → t" in page
        assert 'href="0/cell/' in page or "no detectable difference" in page
        assert served.under("compare?base=0&new=5")[0] == 400
    finally:
        served.close()


def test_bound_to_every_address_any_name_with_the_port_is_served() -> None:
    """`--host 0.0.0.0` is for other machines: they reach it under a LAN name or address."""
    from types import SimpleNamespace

    from brigade.report.serve import Handler

    def allowed(bound: str, host: str) -> bool:
        fake = SimpleNamespace(
            server=SimpleNamespace(server_address=(bound, 8123)), headers={"Host": host}
        )
        return Handler._host_allowed(fake)  # type: ignore[arg-type]

    assert allowed("0.0.0.0", "192.168.1.20:8123") and allowed("::", "myhost.lan:8123")
    assert not allowed("0.0.0.0", "192.168.1.20:8124") and not allowed("0.0.0.0", ":8123")
    assert not allowed("127.0.0.1", "192.168.1.20:8123")
    assert allowed("127.0.0.1", "localhost:8123")


XSS = (
    "<img src=x onerror=\"window.__pwned='img'\"> </script><script>window.__pwned='script'"
    "</script> <svg onload=\"window.__pwned='svg'\"></svg> <a href=\"javascript:window."
    "__pwned='link'\">x</a> ' onmouseover=\"window.__pwned='attr'\" \"><b>bold</b>"
)


def test_markup_an_agent_wrote_never_runs_in_the_viewer_or_the_report(
    project: Project, browser: Any
) -> None:
    """An answer, a fault line and a grader's detail made of markup and script are shown as
    text on every page (the index, its filter, the cell, the case, the static report)."""
    project.write_roster({"agent": {"cli": FAKE_CLI}})
    project.write_manifest(
        [
            {
                "id": "xss",
                "prompt": f"answer: {XSS}",
                "graders": [{"type": "exact_output", "expected": "hello"}],
            },
            {"id": "fault", "prompt": f"tempfail: {XSS}"},
            # an answer the prompt does not hold: the projected report shows it too
            {"id": "env", "prompt": "env: PAGE_TEXT"},
        ],
        seats=("agent",),
    )
    done = project.doit(PAGE_TEXT=XSS)
    assert done.returncode == 3, done.stderr
    # --show-prompts: answers are served as the seat wrote them (the prompt holds this
    # one, so the projected pages show it replaced)
    served = Served(open_viewer([project.out], show_prompts=True))
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(served.url + "0/")
        page.wait_for_selector("body[data-ready='1']")
        page.fill("#q", "<b>bold</b>")  # the filter box takes markup as text too
        page.wait_for_selector("body:not([data-matching='3'])")
        page.fill("#q", "xss:")
        page.wait_for_selector("body[data-matching='1']")
        page.fill("#q", "")
        page.wait_for_selector("body[data-matching='3']")
        page.hover("#rows")
        pages = [page.url]
        shown: list[bool] = []  # the markup is on the cell pages, as text
        for link in page.locator("#rows a").evaluate_all("(links) => links.map(a => a.href)"):
            page.goto(link)
            page.wait_for_load_state("load")
            pages.append(link)
            page.hover("body")
            shown.append("<img src=x onerror=" in page.inner_text("body"))
        report = project.out / "report"
        in_report: list[bool] = []
        for html in sorted(report.rglob("*.html")):
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            page.hover("body")
            pages.append(html.name)
            in_report.append("<img src=x onerror=" in page.inner_text("body"))
            assert page.evaluate("window.__pwned") is None, html
        assert page.evaluate("window.__pwned") is None
        assert dialogs == []
        assert len(pages) > 3 and any(shown) and any(in_report)
    finally:
        page.close()
        served.close()


def test_the_report_runs_its_own_script_and_no_other(project: Project, browser: Any) -> None:
    """The static report allows its script by hash ('unsafe-inline' nowhere): its filter
    works, and a script or handler that reached the page by a fault of escaping is blocked."""
    import base64
    import hashlib

    project.write_roster({"agent": {"cli": FAKE_CLI}})
    project.write_manifest(BATTERY, seats=("agent",))
    assert project.doit().returncode == 3
    index = project.out / "report" / "index.html"
    text = index.read_text()
    policy_text = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text)
    assert policy_text and "unsafe-inline" not in policy_text[1].split("script-src")[1]
    (script,) = re.findall(r"<script>(.*?)</script>", text, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy_text[1]
    injected = index.with_name("injected.html")
    planted = (
        "<script>window.__pwned='inline'</script>"
        "<img src=x onerror=\"window.__pwned='handler'\">"
        "<a id=js href=\"javascript:window.__pwned='link'\">x</a>"
    )
    injected.write_text(text.replace("<h2>Cells</h2>", planted + "<h2>Cells</h2>", 1))
    page = browser.new_page()
    try:
        for html in (index, injected):
            page.goto(html.as_uri())
            page.wait_for_selector("body[data-ready='1']")  # its own script ran
            assert page.locator("#cells tbody.static tr:not([hidden])").count() == 5
            page.fill("#filter", "crash")
            page.wait_for_function(
                "document.querySelectorAll('#cells tbody.static tr:not([hidden])').length == 1"
            )
        page.click("#js")
        page.wait_for_timeout(100)
        assert page.evaluate("window.__pwned") is None
    finally:
        page.close()


# counts what a page script hands the browser to parse as HTML
PARSE_COUNTER = """(() => {
  window.__parsed = 0;
  const count = () => { window.__parsed += 1; };
  for (const [owner, name] of [[Element.prototype, "innerHTML"], [Element.prototype,
      "outerHTML"], [ShadowRoot.prototype, "innerHTML"]]) {
    const known = Object.getOwnPropertyDescriptor(owner, name);
    Object.defineProperty(owner, name, {get() { return known.get.call(this); },
      set(value) { count(); known.set.call(this, value); }});
  }
  for (const [owner, name] of [[Element.prototype, "insertAdjacentHTML"],
      [Range.prototype, "createContextualFragment"], [DOMParser.prototype, "parseFromString"],
      [Document.prototype, "write"], [Document.prototype, "writeln"]]) {
    const known = owner[name];
    owner[name] = function (...args) { count(); return known.apply(this, args); };
  }
})();"""
# markup as a name (names hold no ':')
NAME_XSS = "<img src=x onerror=\"window.__pwned='name'\"><b>bold</b>"


def test_every_field_a_seat_writes_is_text_when_the_page_script_builds_it(
    project: Project, browser: Any
) -> None:
    """The page script builds what it fetches (rows, statistics, matrix, a cell's section)
    with createElement/textContent: an answer, a case's and a seat's name, a grader's
    detail and a failure's text made of markup are text there, and no element of theirs
    appears."""
    seat = f"s {NAME_XSS}"
    project.write_roster({seat: {"cli": FAKE_CLI}})
    fields = {
        "answer": {"prompt": f"answer: {XSS}"},
        "grader": {
            "prompt": "answer: hello",
            "graders": [
                {"type": "exact_output", "expected": XSS},
                {"type": "regex_output", "pattern": NAME_XSS},
            ],
        },
        "fault": {"prompt": f"tempfail: {XSS}"},
        "crash": {"prompt": f"stderr: {XSS}\nexit: 2"},
        "name": {"prompt": "answer: hello"},
    }
    cases = [{"id": f"{key} {NAME_XSS}" if key == "name" else key, **case}
             for key, case in fields.items()]  # fmt: skip
    project.write_manifest(cases, seats=(seat,))
    assert project.doit().returncode in (1, 3)
    served = Served(open_viewer([project.out], show_prompts=True))
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    built = "#rows img, #rows b, #matrix img, #matrix b, #stats img, #stats b, #cell img, #cell b"
    page.add_init_script(PARSE_COUNTER)
    try:
        page.goto(served.url + "0/")
        page.wait_for_selector("body[data-stats='1']")
        page.hover("#matrix")
        for box in ("#rows", "#matrix", "#stats"):
            assert "<img src=x onerror=" in page.inner_text(box), box
        assert page.locator(built).count() == 0
        assert page.evaluate("window.__parsed") == 0  # no string parsed as HTML
        links = page.locator("#rows a").evaluate_all("(links) => links.map(a => a.href)")
        assert len(links) == len(fields)
        for link in links:
            page.goto(link)
            page.wait_for_selector("body[data-version]")  # its first look at the changes
            page.evaluate("document.querySelector('#cell section').setAttribute('data-old', '')")
            # plan.json touched: the viewer reads everything again, the page fetches its cell
            plan = project.out / "plan.json"
            os.utime(plan, ns=(time.time_ns(), plan.stat().st_mtime_ns + 1_000_000))
            page.wait_for_selector("#cell section:not([data-old])", timeout=20_000)
            page.hover("#cell")
            text = page.inner_text("#cell")
            assert "<img src=x onerror=" in text, link
            assert page.locator(built).count() == 0, link
            assert page.evaluate("window.__parsed") == 0, link
        assert page.evaluate("window.__pwned") is None
        assert dialogs == []
    finally:
        page.close()
        served.close()


def test_a_fragment_is_sent_as_a_tree_of_text_and_elements() -> None:
    from brigade.report.tree import tree

    nodes = tree(
        '<p class="x">a &lt;b&gt; &amp; <b>c</b><br>d</p><script>alert(1)</script>'
        '<a href="javascript:alert(1)" onclick="alert(1)">j</a><a href="../cell/ab">k</a>'
        '<a href=" //evil.example/">h</a><svg viewBox="0 0 1 1"><text x="1">t</text></svg>'
        "<iframe srcdoc='x'><p>inside</p></iframe></p><i>unclosed"
    )
    assert nodes == [
        ["p", {"class": "x"}, "a <b> & ", ["b", {}, "c"], ["br", {}], "d"],
        ["a", {}, "j"],
        ["a", {"href": "../cell/ab"}, "k"],
        ["a", {}, "h"],
        ["svg", {"viewBox": "0 0 1 1"}, ["text", {"x": "1"}, "t"]],
        ["i", {}, "unclosed"],
    ]


def test_fragments_and_a_cell_section_are_json_trees(
    served_battery: tuple[Project, Served],
) -> None:
    _, served = served_battery
    cell_id = served.json("0/api/cells?q=ok:agent")["rows"][0][0]
    for path in ("0/api/stats", "0/api/matrix", f"0/api/cell/{cell_id}"):
        status, headers, body = served.under(path)
        assert status == 200 and headers["content-type"] == "application/json", path
        nodes = json.loads(body)["nodes"]
        assert nodes and all(isinstance(n, (str, list)) for n in nodes), path
