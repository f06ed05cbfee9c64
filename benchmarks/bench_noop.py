"""No-op resume: every cell of a completed output directory is up to date.

Prints the wall time of `doit` and `brigade run` against the floor of a plain
Python loop that reads the same cell.json files (floor.py), and peak memory.

    .venv/bin/python benchmarks/bench_noop.py [--cells 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from common import (
    beside_floors,
    best_of,
    cpu_count,
    doit_argv,
    emit,
    finished_output,
    run_argv,
    timed,
)

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the output directory here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="brigade-bench-noop-"))
    manifest, roster, workspace, out = finished_output(root, args.cells)
    doit = doit_argv(manifest, roster, out, workspace)
    run = run_argv(manifest, roster, out, workspace)
    # the first run after building writes summary, export and caches; not measured
    best_of(1, doit)
    floor_argv = [sys.executable, str(HERE / "floor.py"), str(out)]
    # each measured run right after a run of the floor: the ratio holds while the
    # machine's speed drifts
    (doit_wall, doit_code, doit_rss), _, (doit_floor,) = beside_floors(
        args.runs, [floor_argv], lambda: (timed(doit), None)
    )
    (run_wall, run_code, run_rss), _, (run_floor,) = beside_floors(
        args.runs, [floor_argv], lambda: (timed(run), None)
    )
    assert doit_code == 0 and run_code == 0, (doit_code, run_code)
    print(f"no-op resume of {args.cells} cells on {cpu_count()} cores (best of {args.runs})")
    emit("floor (plain loop over cell.json)", min(doit_floor, run_floor), "s")
    emit("doit no-op", doit_wall, "s", f"ratio {doit_wall / doit_floor:.2f}x floor beside it")
    emit("brigade run no-op", run_wall, "s", f"ratio {run_wall / run_floor:.2f}x floor beside it")
    emit("doit peak RSS", doit_rss, "MB")
    emit("brigade run peak RSS", run_rss, "MB")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
