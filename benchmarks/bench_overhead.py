"""Per-cell overhead: brigade running 1,000 cells whose seat exits at once (`exec:true`),
against the same command spawned 1,000 times by a bare Python loop; without the
filesystem sandbox and, where it works, in it.

    .venv/bin/python benchmarks/bench_overhead.py [--cells 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import cpu_count, emit, run_argv, timed, write_inputs

from brigade.run import sandbox


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=1000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="brigade-bench-overhead-"))
    manifest, roster = write_inputs(root, args.cells, 1, cli="exec:true")
    workspace, out = root / "ws", root / "out"
    workspace.mkdir()
    start = time.perf_counter()
    for _ in range(args.cells):
        subprocess.run(["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    bare = time.perf_counter() - start
    # the disk's cost of one durable file (a cell writes about seven: receipts, run records)
    probe = root / "fsync-probe"
    probe.mkdir()
    start = time.perf_counter()
    for index in range(200):
        fd = os.open(probe / f"f{index}", os.O_CREAT | os.O_WRONLY)
        os.write(fd, b"x")
        os.fsync(fd)
        os.close(fd)
    fsync_ms = (time.perf_counter() - start) / 200 * 1000
    print(f"{args.cells} cells with a seat that exits at once, serial, on {cpu_count()} cores")
    emit("bare loop spawning the seat", bare, "s", f"{bare / args.cells * 1000:.2f} ms per spawn")
    modes = ["off"] + (["required"] if sandbox.probe().ok else [])
    for mode in modes:
        shutil.rmtree(out, ignore_errors=True)
        wall, code, _ = timed(run_argv(manifest, roster, out, workspace, "--sandbox", mode))
        assert code == 1, code  # `true` prints nothing, so the "hello" grader rejects every cell
        where = "in the sandbox" if mode == "required" else "without the sandbox"
        emit(f"brigade run, {where}", wall, "s", f"{wall / args.cells * 1000:.2f} ms per cell")
        emit(f"brigade overhead per cell, {where}", (wall - bare) / args.cells * 1000, "ms")
    emit("disk: create + fsync of one small file", fsync_ms, "ms", "(context: ~7 per cell)")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
