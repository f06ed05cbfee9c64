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
from functools import partial
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


def floor_note(floors: list[float]) -> str:
    return f"floors beside it {floors[0]:.3f} / {floors[1]:.3f} s"


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
    # the floors read the output directory the warm runs read, in the same state of the
    # page cache (before a cold run's copy replaces it: the copy is not read before it
    # is measured)
    floor_argvs = [
        [sys.executable, str(HERE / "floor.py"), str(out), "--plan"],
        [sys.executable, str(HERE / "floor.py"), str(out)],
    ]
    floor, _, _ = best_of(args.runs, floor_argvs[0])
    cells_floor, _, _ = best_of(args.runs, floor_argvs[1])
    print(f"cold resume of {args.cells} cells on {cpu_count()} cores (best of {args.runs})")
    emit("floor (plain loop over plan.json and every cell.json)", floor, "s")
    emit("floor of the no-op benchmark (the loop over cell.json alone)", cells_floor, "s")
    print("each figure is the fastest of its runs, its ratios to the fastest of the floors")
    print("run beside them (one of each before each of its runs)")
    figures = []
    fronts = [("brigade run", lambda o: run_argv(manifest, roster, o, workspace))]
    if not args.only_run:
        fronts.append(("doit", lambda o: doit_argv(manifest, roster, o, workspace)))

    def warm(argv: list[str]) -> tuple[tuple[float, int, float], None]:
        return timed(argv), None

    def cold(target: Path, argv: list[str]) -> tuple[tuple[float, int, float], int]:
        copy(pristine, target)  # new inodes and ctimes (at another path: moved)
        before = mtimes(target)
        timing = timed(argv)
        return timing, sum(1 for name, mtime in mtimes(target).items() if before.get(name) != mtime)

    for label, make_argv in fronts:
        (wall, _, rss), _, floors = beside_floors(
            args.runs, floor_argvs, partial(warm, make_argv(out))
        )
        emit(f"{label} warm no-op", wall, "s", f"{ratios(wall, *floors)}; {floor_note(floors)}")
        emit(f"{label} warm peak RSS", rss, "MB")
        (wall, code, rss), rewritten, floors = beside_floors(
            args.runs, floor_argvs, partial(cold, out, make_argv(out))
        )
        note = f"{ratios(wall, *floors)}; {floor_note(floors)}"
        emit(f"{label} cold no-op (cp -a)", wall, "s", note)
        emit(f"{label} cold peak RSS", rss, "MB")
        emit(f"{label} cold: export/ and report/ files rewritten", rewritten, "files")
        figures.append(code)
    if not args.only_run:
        # a longer path, and one shorter than the workspace's (the secrets' paths are
        # listed longest first: the output directory's place among them changes)
        for moved, label in ((root / "moved" / "out", "moved"), (root / "o", "moved shorter")):
            moved.parent.mkdir(exist_ok=True)
            argv = run_argv(manifest, roster, moved, workspace)
            (wall, code, rss), rewritten, floors = beside_floors(
                args.runs, floor_argvs, partial(cold, moved, argv)
            )
            note = f"{ratios(wall, *floors)}; {floor_note(floors)}"
            emit(f"brigade run {label}", wall, "s", note)
            emit(f"brigade run {label} peak RSS", rss, "MB")
            emit(f"brigade run {label}: export/ and report/ files rewritten", rewritten, "files")
            shutil.rmtree(moved, ignore_errors=True)
            figures.append(code)
    assert set(figures) == {0}, figures
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
