"""Planning: expand a 100,000-cell manifest and write plan.json (`doit plan` runs only that task).

.venv/bin/python benchmarks/bench_plan.py [--cases 10000] [--trials 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from common import best_of, brigade_argv, cpu_count, doit_argv, emit, write_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="brigade-bench-plan-"))
    cells = args.cases * args.trials
    manifest, roster = write_inputs(root, args.cases, args.trials)
    workspace, out = root / "ws", root / "out"
    workspace.mkdir()
    # a fresh cache each run: the first parse and validation are part of planning
    env = {**os.environ, "BRIGADE_CACHE_DIR": str(root / "cache")}
    plan_cmd = brigade_argv("plan", str(manifest), "--roster", str(roster), "--out", str(out))
    print(
        f"planning {cells} cells ({args.cases} cases x {args.trials} trials) on {cpu_count()} cores"
    )
    cold = []
    for _ in range(args.runs):
        shutil.rmtree(root / "cache", ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        cold.append(best_of(1, doit_argv(manifest, roster, out, workspace, "plan"), env=env))
    wall, code, rss = min(cold)
    # exit 3: the plan's cells have not run yet (incomplete), as it should be
    assert code == 3 and (out / "plan.json").exists(), code
    size = (out / "plan.json").stat().st_size / 1e6
    emit(
        "doit plan (parse, validate, expand, write plan.json; no cell tasks are built)",
        wall,
        "s",
        f"plan.json {size:.0f} MB",
    )
    emit("doit plan peak RSS", rss, "MB")
    warm, code, _ = best_of(args.runs, doit_argv(manifest, roster, out, workspace, "plan"), env=env)
    emit("doit plan again (plan up to date, input cached)", warm, "s")
    shutil.rmtree(out)
    printed, code, rss = best_of(args.runs, plan_cmd, env=env)
    assert code == 0
    emit("brigade plan (parse, validate, expand, plan JSON to stdout)", printed, "s")
    emit("brigade plan peak RSS", rss, "MB")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
