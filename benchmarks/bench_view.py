"""`brigade view` over a big battery: the server's start, the index opening and each filter of
the cell list in headless Chromium, and the server's memory.

.venv/bin/python benchmarks/bench_view.py [--cells 100000] [--seats 4] [--runs 5] [--keep DIR]

The cells are written by `common.fabricate_results` (every one finished), then given
varied outcomes: a state (accepted, rejected, execution_error), a duration and a cost
over their attempts, so each filter keeps a real share of them. The real `brigade view`
serves the directory; Playwright drives Debian's Chromium (/usr/bin/chromium). A filter
is timed inside the page, from the input event to the cell list rebuilt with the
server's answer (the page marks `data-shown` when it has).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import brigade_argv, compile_bytecode, emit, fabricate_results, write_inputs

from brigade.outdir import feed, store
from brigade.outdir.results import load_plan
from brigade.outdir.scan import scan

CHROMIUM = "/usr/bin/chromium"
STATES = ("accepted", "accepted", "accepted", "rejected", "rejected", "execution_error")


def outcome(index: int) -> dict[str, Any]:
    """A varied outcome of the cell at `index` (the same for the same index every time)."""
    state = STATES[index % len(STATES)]
    cost = round(0.001 + (index * 7919 % 1000) / 10_000, 6)  # $0.001 .. $0.1009
    usage = {
        "input_tokens": 1000 + index % 500,
        "output_tokens": 100 + index % 50,
        "cost_usd": cost,
        "cost_source": "reported",
    }
    changes: dict[str, Any] = {
        "state": state,
        "duration_seconds": 1.0 + (index % 97) / 10,
        "usage": usage,
        "attempts_usage": [{"attempt": 1, "usage": usage}],
    }
    if state == "rejected":
        changes["score"] = 0.0
        changes["acceptance"] = {
            "accepted": False,
            "graders_total": 1,
            "graders_passed": 0,
            "graders_errored": 0,
        }
    elif state == "execution_error":
        changes.update(
            score=None,
            exit_code=2,
            failure_reason="nonzero_exit",
            failure_detail="the seat exited 2",
            acceptance=None,
        )
    return changes


def vary(out: Path) -> None:
    """Give every fabricated cell its outcome (its receipt and the attempt's copy)."""
    plan = json.loads((out / "plan.json").read_text())
    for index, cell in enumerate(plan["cells"]):
        folder = out / "cells" / cell["cell_id"]
        receipt = json.loads((folder / "cell.json").read_bytes())
        receipt.update(outcome(index))
        data = json.dumps(receipt, sort_keys=True).encode()
        (folder / "cell.json").write_bytes(data)
        (folder / "attempts" / "attempt-001" / "cell.json").write_bytes(data)


def build(root: Path, cells: int, seats: int) -> Path:
    """The output directory (built once per root)."""
    out = root / "out"
    if (out / "plan.json").exists():
        return out
    manifest, roster = write_inputs(root, cells // seats, 1, seats=seats)
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    print(f"building {cells} finished cells in {out} ...", file=sys.stderr, flush=True)
    fabricate_results(manifest, roster, out, workspace)
    vary(out)
    os.sync()
    return out


def json_floor(*files: Path) -> float:
    """Seconds a new Python process takes to read and parse these JSON files (what any
    reader of the directory's plan and receipts must do), best of three."""
    code = "import json, sys\nfor name in sys.argv[1:]:\n    json.loads(open(name, 'rb').read())"
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *map(str, files)], check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def start_viewer(out: Path) -> tuple[subprocess.Popen[str], str, float]:
    """`brigade view OUT` started; its URL and the seconds until it printed it."""
    compile_bytecode()
    started = time.perf_counter()
    proc = subprocess.Popen(
        brigade_argv("view", str(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"(http://127\.0\.0\.1:\d+/[\w-]+/)", line)
    assert found, line
    return proc, found[1], time.perf_counter() - started


def memory_mb(pid: int) -> tuple[float, float]:
    """The resident size now and at its peak (MB) of a process."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


# one filter change timed in the page: the input's event to the list rebuilt with its answer
TIME_FILTER = """async ([id, value, event]) => {
  const box = document.getElementById(id);
  const before = document.body.getAttribute("data-shown");
  const done = new Promise((resolve) => {
    const watch = new MutationObserver(() => {
      if (document.body.getAttribute("data-shown") !== before) {
        watch.disconnect();
        resolve(performance.now());
      }
    });
    watch.observe(document.body, {attributes: true, attributeFilter: ["data-shown"]});
  });
  const start = performance.now();
  box.value = value;
  box.dispatchEvent(new Event(event, {bubbles: true}));
  const end = await done;
  return [end - start, Number(document.body.getAttribute("data-matching"))];
}"""

# a fetch from the page: the round trip every filter makes too
ROUND_TRIP = """async (url) => {
  const start = performance.now();
  await (await fetch(url)).text();
  return performance.now() - start;
}"""

# (what, the input's id, the value, its event); each reset to "" (any) after
FILTERS = (
    ("state", "f-state", "rejected", "change"),
    ("seat", "f-seat", "seat2", "change"),
    ("case", "f-case", "case-00012", "input"),
    ("text", "q", "seat3 execution", "input"),
    ("cost from", "f-min", "0.05", "input"),
    ("cost to", "f-max", "0.02", "input"),
)


def flip(out: Path, cell_id: str) -> str:
    """What a run does when it grades a cell again: its receipt rewritten (accepted <->
    rejected) and a line in the change feed; the cell's new state."""
    path = out / "cells" / cell_id / "cell.json"
    receipt = json.loads(path.read_bytes())
    receipt["state"] = "rejected" if receipt["state"] == "accepted" else "accepted"
    fresh = path.with_name("cell.json.new")
    fresh.write_bytes(json.dumps(receipt, sort_keys=True).encode())
    fresh.rename(path)
    feed.append(out, cell_id, receipt["state"], receipt["attempt"])
    return str(receipt["state"])


# how long until the page shows a cell's new state (the list is fetched again on a change)
WAIT_STATE = """async ([id, state]) => {
  const start = performance.now();
  while (true) {
    const row = document.querySelector(`#rows tr[data-cell="${id}"] td.state`);
    if (row && row.textContent.split(" ")[0] === state) { return performance.now() - start; }
    if (performance.now() - start > 60000) { return Infinity; }  // never shown
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}"""


def live(page: Any, out: Path, runs: int) -> None:
    """A cell graded again while the index shows it: seconds until its row says so."""
    page.evaluate(TIME_FILTER, ["f-state", "", "change"])
    page.evaluate(TIME_FILTER, ["f-seat", "", "change"])
    page.evaluate(TIME_FILTER, ["q", "case-000007:seat1", "input"])
    cell_id = page.get_attribute("#rows tr", "data-cell")
    assert cell_id
    times = []
    for _ in range(runs):
        state = flip(out, cell_id)
        times.append(page.evaluate(WAIT_STATE, [cell_id, state]) / 1000)
    if len(times) % 2:
        flip(out, cell_id)  # as it was
    emit(
        "a cell graded again, until the open index shows its new state",
        statistics.median(times),
        "s",
        f"max {max(times):.3f} s of {runs} (the page asks every second, the server "
        "reads the feed twice a second)",
    )


def measure(url: str, runs: int, out: Path) -> None:
    """The index opening, each filter and a live change, in headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as manager:
        browser = manager.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        # the floor: a new page loading the server's cheapest answer (a 404 line)
        floors = []
        for _ in range(runs):
            page = browser.new_page()
            start = time.perf_counter()
            page.goto(url + "0/floor", wait_until="load")
            floors.append(time.perf_counter() - start)
            page.close()
        floor = min(floors)
        emit("floor: a new page loading the server's cheapest answer", floor, "s")
        opened, statistics_shown, heap = [], [], []
        for run in range(runs):
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            start = time.perf_counter()
            page.goto(url + "0/", wait_until="commit")
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            opened.append(time.perf_counter() - start)
            if run == 0:  # the server computes its first summary now, in another thread
                busy = [page.evaluate(TIME_FILTER, [box, value, event])[0] / 1000
                        for _what, box, value, event in FILTERS]  # fmt: skip
                emit(
                    "each filter while the server computes its first summary",
                    statistics.median(busy),
                    "s",
                    f"max {max(busy):.3f} s of {len(busy)}",
                )
            page.wait_for_selector("body[data-stats='1']", timeout=300_000)
            statistics_shown.append(time.perf_counter() - start)
            heap.append(page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0"))
            rows = page.locator("#rows tr").count()
            page.close()
        emit(
            "index opened (to its cell list rendered)",
            min(opened),
            "s",
            f"median {statistics.median(opened):.3f} s of {runs}; {rows} rows in the page; "
            f"{min(opened) / floor:.1f}x floor",
        )
        emit(
            "index's statistics, matrix and cost chart shown",
            statistics_shown[0],
            "s",
            f"the first page (the summary computed); later pages "
            f"{statistics.median(statistics_shown[1:] or statistics_shown):.3f} s",
        )
        emit("the index page's JS heap", max(heap) / 1e6, "MB")

        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(url + "0/")
        page.wait_for_selector("body[data-stats='1']", timeout=300_000)
        total = int(page.get_attribute("body", "data-matching") or 0)
        # the floor of a filter: the page's own round trip to the server (its cheapest answer)
        trips = [page.evaluate(ROUND_TRIP, url + "0/floor") / 1000 for _ in range(runs)]
        trip = statistics.median(trips)
        emit("floor: a fetch of the server's cheapest answer from the page", trip, "s")
        for what, box, value, event in FILTERS:
            times, kept = [], 0
            for _ in range(runs):
                elapsed, kept = page.evaluate(TIME_FILTER, [box, value, event])
                times.append(elapsed / 1000)
                page.evaluate(TIME_FILTER, [box, "", event])  # back to every cell
            emit(
                f"filter by {what} ({value!r}), input to list updated",
                statistics.median(times),
                "s",
                f"max {max(times):.3f} s of {runs}; {kept} of {total} cells kept; "
                f"{statistics.median(times) / trip:.1f}x floor",
            )
        # two filters at once, then the next page of what they keep
        for _what, box, value, event in FILTERS[:2]:
            page.evaluate(TIME_FILTER, [box, value, event])
        times = [page.evaluate(TIME_FILTER, ["next", "", "click"])[0] / 1000 for _ in range(runs)]
        emit(
            "next page of a filtered list", statistics.median(times), "s", f"max {max(times):.3f} s"
        )
        live(page, out, runs)
        page.close()
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--seats", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the output directory here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="brigade-bench-view-"))
    out = build(root, args.cells, args.seats)
    print(f"brigade view of {args.cells} cells ({args.seats} seats)")
    # the receipt index a run leaves behind, written by this code (an index written by
    # other code is not trusted; brigade view itself writes nothing)
    scan(out, load_plan(out)).save()
    index = out / store.RECEIPT_INDEX
    floor = json_floor(out / store.PLAN_FILE, index)
    emit("floor: python parsing plan.json and the receipt index", floor, "s")
    aside = index.with_name(index.name + ".aside")
    index.rename(aside)  # as a directory copied from elsewhere: every cell.json read
    try:
        proc, url, ready = start_viewer(out)
        rss, _ = memory_mb(proc.pid)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    finally:
        aside.rename(index)
    emit("server started, no receipt index (every cell.json read)", ready, "s", f"{rss:.0f} MB")
    (out / feed.FEED_FILE).touch()  # the change feed a run leaves (its first lines: a rescan)
    proc, url, ready = start_viewer(out)
    try:
        emit(
            "server started, with the receipt index a run leaves (URL printed)",
            ready,
            "s",
            f"{ready / floor:.1f}x floor",
        )
        rss, _ = memory_mb(proc.pid)
        emit("server memory after start", rss, "MB")
        measure(url, args.runs, out)
        rss, peak = memory_mb(proc.pid)
        emit("server memory after the pages", rss, "MB", f"peak {peak:.1f} MB")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
