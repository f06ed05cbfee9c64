"""The report of a big battery: building it, rebuilding it after one cell changed, its sizes,
and opening it in headless Chromium.

.venv/bin/python benchmarks/bench_report.py [--cells 10000] [--entries 12] [--keep DIR]

Every finished cell gets a transcript of `--entries` entries (tool calls with their
input and output, messages), about what a short agent run records, so the detail pages
weigh what real ones do.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import best_of, brigade_argv, emit, finished_output


def add_transcripts(out: Path, entries: int) -> None:
    """A transcript.json beside every final.txt (as a CLI with a transcript leaves one)."""
    steps = []
    for index in range(entries // 3):
        steps += [
            {
                "kind": "tool_call",
                "name": "Bash",
                "input": {"command": f"grep -n hello src/{index}.py"},
            },
            {"kind": "tool_result", "name": "Bash", "output": f"{index}: print('hello')\n" * 8},
            {"kind": "message", "role": "assistant", "text": "Looking at the next file. " * 6},
        ]
    data = json.dumps({"schema": "brigade.transcript.v1", "entries": steps[:entries]})
    for final in (out / "cells").glob("*/attempts/attempt-001/run/final.txt"):
        (final.parent / "transcript.json").write_text(data)


def chromium_seconds(chromium: str, url: str, profile: Path) -> tuple[float, int]:
    """Wall seconds of `chromium --headless --dump-dom URL` and the DOM's size."""
    argv = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--dump-dom", url,
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=300)
    wall = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    return wall, len(done.stdout)


def mtimes(folder: Path) -> dict[str, int]:
    """Every file's mtime_ns under a folder, by its path relative to it."""
    return {
        p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
        for p in folder.rglob("*")
        if p.is_file()
    }


def folder_size(folder: Path) -> tuple[int, int, int]:
    """Total bytes, number of files and the largest file's bytes under a folder."""
    sizes = [p.stat().st_size for p in folder.rglob("*") if p.is_file()]
    return sum(sizes), len(sizes), max(sizes, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=12)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the output directory here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="brigade-bench-report-"))
    _, _, _, out = finished_output(root, args.cells)
    add_transcripts(out, args.entries)
    report = out / "report"
    shutil.rmtree(report, ignore_errors=True)
    (out / ".report-state.json").unlink(missing_ok=True)
    os.sync()
    print(f"report of {args.cells} cells, {args.entries} transcript entries each")

    wall, code, rss = best_of(1, brigade_argv("report", str(out)))
    assert code in (0, 1), code  # the results' bucket (a kept folder may hold a rejected cell)
    emit("brigade report, first build", wall, "s", f"{wall / args.cells * 1000:.2f} ms per cell")
    emit("brigade report, first build, peak RSS", rss, "MB")
    wall, code, _ = best_of(3, brigade_argv("report", str(out)))
    emit("brigade report, nothing changed", wall, "s")

    # one cell re-graded to another verdict: its two pages, the index and JUnit change
    receipt_path = next((out / "cells").glob("*/cell.json"))
    receipt = json.loads(receipt_path.read_text())
    receipt["state"] = "rejected" if receipt["state"] == "accepted" else "accepted"
    receipt["graded_at"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    receipt_path.write_text(json.dumps(receipt))
    before = mtimes(report)
    wall, code, _ = best_of(1, brigade_argv("report", str(out)))
    after = mtimes(report)
    rewritten = sorted(name for name, mtime in after.items() if before.get(name) != mtime)
    emit("brigade report, one cell changed", wall, "s")
    # its own detail page, its case's page and the two that list every cell
    emit("... report files rewritten", len(rewritten), "files", " ".join(rewritten))

    total, files, largest = folder_size(report)
    index = (report / "index.html").stat().st_size
    emit("index.html", index / 1e6, "MB")
    emit("report/ in all", total / 1e6, "MB", f"{files} files, the largest {largest / 1e6:.2f} MB")

    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium not found: no open times")
    else:
        profile = root / "chromium-profile"
        blank = root / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p>")
        chromium_seconds(chromium, blank.as_uri(), profile)  # a first start warms the profile
        floor = min(chromium_seconds(chromium, blank.as_uri(), profile)[0] for _ in range(3))
        emit("chromium, a blank page (floor)", floor, "s")
        opened, dom = min(
            chromium_seconds(chromium, (report / "index.html").as_uri(), profile) for _ in range(3)
        )
        emit(
            "chromium, index.html opened",
            opened,
            "s",
            f"DOM {dom / 1e6:.1f} MB; target < 3 s: {'met' if opened < 3 else 'NOT met'}",
        )
        page = max((report / "index_files" / "cells").iterdir(), key=lambda p: p.stat().st_size)
        opened, dom = min(chromium_seconds(chromium, page.as_uri(), profile) for _ in range(3))
        emit("chromium, the largest detail page opened", opened, "s", f"DOM {dom / 1e6:.1f} MB")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
