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
    best_of,
    cpu_count,
    doit_argv,
    emit,
    finished_output,
    run_argv,
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
    floor, _, floor_rss = best_of(args.runs, [sys.executable, str(HERE / "floor.py"), str(out)])
    doit_wall, doit_code, doit_rss = best_of(args.runs, doit)
    run_wall, run_code, run_rss = best_of(args.runs, run)
    assert doit_code == 0 and run_code == 0, (doit_code, run_code)
    print(f"no-op resume of {args.cells} cells on {cpu_count()} cores (best of {args.runs})")
    emit("floor (plain loop over cell.json)", floor, "s")
    emit("doit no-op", doit_wall, "s", f"ratio {doit_wall / floor:.2f}x floor")
    emit("brigade run no-op", run_wall, "s", f"ratio {run_wall / floor:.2f}x floor")
    emit("doit peak RSS", doit_rss, "MB")
    emit("brigade run peak RSS", run_rss, "MB")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
