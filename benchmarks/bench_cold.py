"""Cold resume: a finished output directory restored as a copy (same path, new inodes and
ctimes: `cp -a`, a tarball, a CI cache) or moved to a new path, against the floor.

Prints the wall time of `brigade run` (and `doit`) on each against the floor of a
plain Python loop that reads plan.json and every cell.json (`floor.py --plan`: the floor
the cold-resume targets are set against; the ratio to the loop over cell.json alone, the
no-op benchmark's floor, is printed beside it), peak memory, and how many files under
export/ and report/ were rewritten (by mtime).

    .venv/bin/python benchmarks/bench_cold.py [--cells 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import best_of, cpu_count, doit_argv, emit, finished_output, run_argv, timed

HERE = Path(__file__).resolve().parent


def mtimes(out: Path) -> dict[str, int]:
    found = {}
    for part in ("export", "report"):
        for root, _, names in os.walk(out / part):
            for name in names:
                path = os.path.join(root, name)
                found[path[len(str(out)) :]] = os.stat(path).st_mtime_ns
    return found


def copy(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    os.sync()


def ratios(wall: float, floor: float, cells_floor: float) -> str:
    """The ratio to the floor, and to the loop over cell.json alone in brackets."""
    return f"ratio {wall / floor:.2f}x floor ({wall / cells_floor:.2f}x the cell.json loop)"


def moved_figures(
    runs: int,
    floors: tuple[float, float],
    pristine: Path,
    moved: Path,
    label: str,
    argv: tuple[Path, Path, Path],
) -> int:
    """`brigade run` on a copy at another path: its time and the files it rewrote."""
    manifest, roster, ws = argv
    moved.parent.mkdir(exist_ok=True)
    results = []
    for _ in range(runs):
        copy(pristine, moved)
        before = mtimes(moved)
        results.append((*timed(run_argv(manifest, roster, moved, ws)), before))
    wall, code, rss, before = min(results, key=lambda r: r[0])
    rewritten = sum(1 for name, mtime in mtimes(moved).items() if before.get(name) != mtime)
    emit(f"brigade run {label}", wall, "s", ratios(wall, *floors))
    emit(f"brigade run {label} peak RSS", rss, "MB")
    emit(f"brigade run {label}: export/ and report/ files rewritten", rewritten, "files")
    shutil.rmtree(moved, ignore_errors=True)
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the output directory here")
    parser.add_argument(
        "--only-run",
        action="store_true",
        help="only `brigade run` on the copy (no doit, no move): each copy of 100,000 cells "
        "takes minutes",
    )
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="brigade-bench-cold-"))
    manifest, roster, workspace, out = finished_output(root, args.cells)
    run = run_argv(manifest, roster, out, workspace)
    timed(run)  # the first run after building writes summary, report and caches
    pristine = root / "pristine"
    copy(out, pristine)
    floor, _, _ = best_of(args.runs, [sys.executable, str(HERE / "floor.py"), str(out), "--plan"])
    cells_floor, _, _ = best_of(args.runs, [sys.executable, str(HERE / "floor.py"), str(out)])
    print(f"cold resume of {args.cells} cells on {cpu_count()} cores (best of {args.runs})")
    emit("floor (plain loop over plan.json and every cell.json)", floor, "s")
    emit("floor of the no-op benchmark (the loop over cell.json alone)", cells_floor, "s")
    figures = []
    fronts = [("brigade run", lambda o: run_argv(manifest, roster, o, workspace))]
    if not args.only_run:
        fronts.append(("doit", lambda o: doit_argv(manifest, roster, o, workspace)))
    for label, make_argv in fronts:
        warm = best_of(args.runs, make_argv(out))
        emit(f"{label} warm no-op", warm[0], "s", ratios(warm[0], floor, cells_floor))
        emit(f"{label} warm peak RSS", warm[2], "MB")
        results = []
        for _ in range(args.runs):
            copy(pristine, out)  # same path, new inodes and ctimes
            before = mtimes(out)
            results.append((*timed(make_argv(out)), before, mtimes(out)))
        wall, code, rss, before, after = min(results, key=lambda r: r[0])
        rewritten = sum(1 for name, mtime in after.items() if before.get(name) != mtime)
        emit(f"{label} cold no-op (cp -a)", wall, "s", ratios(wall, floor, cells_floor))
        emit(f"{label} cold peak RSS", rss, "MB")
        emit(f"{label} cold: export/ and report/ files rewritten", rewritten, "files")
        figures.append(code)
    if not args.only_run:
        inputs = (manifest, roster, workspace)
        floors = (floor, cells_floor)
        # a longer path, and one shorter than the workspace's (the secrets' paths are
        # listed longest first: the output directory's place among them changes)
        for moved, label in ((root / "moved" / "out", "moved"), (root / "o", "moved shorter")):
            figures.append(moved_figures(args.runs, floors, pristine, moved, label, inputs))
    assert set(figures) == {0}, figures
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
