"""Regrade: `brigade regrade` re-grades every stored cell (digests verified first, no seat runs).

.venv/bin/python benchmarks/bench_regrade.py [--cells 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from common import best_of, brigade_argv, cpu_count, emit, finished_output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the output directory here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="brigade-bench-regrade-"))
    manifest, roster, workspace, out = finished_output(root, args.cells)
    wall, code, rss = best_of(1, brigade_argv("regrade", str(out)))
    assert code == 0, code
    print(f"regrade of {args.cells} stored cells on {cpu_count()} cores")
    emit("brigade regrade", wall, "s", f"{wall / args.cells * 1000:.2f} ms per cell")
    emit("brigade regrade peak RSS", rss, "MB")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
