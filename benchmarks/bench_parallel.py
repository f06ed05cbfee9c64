"""Parallel efficiency: 64 cells whose seat sleeps 1 s, with -n 1, 4, 8 and 16.
Efficiency = ideal wall time (cells x 1 s / n) / measured wall time.

    .venv/bin/python benchmarks/bench_parallel.py [--cells 64] [--jobs 1 4 8 16]
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
from pathlib import Path

from common import cpu_count, emit, run_argv, timed, write_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 8, 16])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="brigade-bench-parallel-"))
    manifest, roster = write_inputs(root, args.cells, 1, cli=f"exec:sleep {args.seconds}")
    workspace = root / "ws"
    workspace.mkdir()
    print(f"{args.cells} cells sleeping {args.seconds} s each on {cpu_count()} cores")
    for jobs in args.jobs:
        out = root / f"out-{jobs}"
        wall, code, _ = timed(run_argv(manifest, roster, out, workspace, "-n", str(jobs)))
        assert code == 1, code  # sleep prints nothing: the "hello" grader rejects every cell
        ideal = math.ceil(args.cells / jobs) * args.seconds
        emit(f"-n {jobs}", wall, "s", f"ideal {ideal:.1f} s, efficiency {ideal / wall:.0%}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
