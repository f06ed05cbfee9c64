"""Cases with their own workspace: a 50-case battery over 5 repositories, each case with a
setup, 2 seats x 3 trials (300 cells). The setup must run 5 times (once per repository and
setup), not once per cell; planning and a no-op resume are measured against the same battery
without workspaces (the floor), and planning 100,000 cells over 5 repositories against
100,000 without.

    .venv/bin/python benchmarks/bench_workspaces.py [--cases 50] [--repos 5] [--trials 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml
from common import best_of, brigade_argv, cpu_count, doit_argv, emit, run_argv, timed

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}


def make_repos(root: Path, count: int) -> list[Path]:
    """`count` small repositories of one commit each (20 files)."""
    repos = []
    for index in range(count):
        repo = root / "repos" / f"r{index}"
        (repo / "src").mkdir(parents=True)
        for number in range(20):
            (repo / "src" / f"m{number}.py").write_text(f"VALUE = {index * 100 + number}\n")
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
            subprocess.run(["git", *args], cwd=repo, check=True, env=GIT_ENV)
        repos.append(repo)
    return repos


def write_battery(
    folder: Path, cases: int, repos: int, trials: int, own: bool, seats: int = 2
) -> tuple[Path, Path]:
    """The battery's manifest and roster; `own`: each case over repository i % repos."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"seat{i}" for i in range(seats)]
    roster = folder / "roster.yaml"
    doc = {"schema": "brigade.roster.v1", "sandbox": "off"}
    seats = {name: {"cli": "exec:echo hello"} for name in names}
    roster.write_text(yaml.safe_dump({**doc, "seats": seats}))
    listed = []
    for index in range(cases):
        case: dict[str, object] = {"id": f"case-{index:06d}", "prompt": f"Say hello #{index}"}
        if own:
            case["workspace"] = {"repo": f"../repos/r{index % repos}"}
            case["setup"] = ["echo built > built.txt"]
        listed.append(case)
    manifest = folder / "manifest.yaml"
    battery = {
        "schema": "brigade.eval_manifest.v1",
        "name": "bench",
        "trials": trials,
        "seats": names,
        "graders": [{"type": "regex_output", "pattern": "hello"}],
        "cases": listed,
    }
    manifest.write_text(yaml.safe_dump(battery, sort_keys=False))
    return manifest, roster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--repos", type=int, default=5)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plan-cases", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="brigade-bench-workspaces-"))
    make_repos(root, args.repos)
    workspace = root / "ws"
    workspace.mkdir()
    env = {**os.environ, "BRIGADE_CACHE_DIR": str(root / "cache")}
    cells = args.cases * 2 * args.trials
    print(
        f"{args.cases} cases over {args.repos} repositories x 2 seats x {args.trials} trials "
        f"({cells} cells) on {cpu_count()} cores (best of {args.runs})"
    )
    walls = {}
    for own in (False, True):
        name = "own" if own else "shared"
        manifest, roster = write_battery(root / name, args.cases, args.repos, args.trials, own)
        out = root / name / "out"
        first, code, _ = timed(run_argv(manifest, roster, out, workspace, "-n", "2"), env=env)
        assert code == 0, code
        if own:
            built = list((out / "workspaces").iterdir())
            setups = [b for b in built if (b / "setup.log").exists()]
            emit("first run with workspaces (setups and 300 seats)", first, "s")
            emit("setups run", len(setups), "", f"of {args.cases} cases, {cells} cells")
            assert len(setups) == args.repos, len(setups)
        plan = brigade_argv("plan", str(manifest), "--roster", str(roster), "--out", str(out))
        walls[name, "plan"] = best_of(args.runs, plan, env=env)[0]
        walls[name, "run"] = best_of(args.runs, run_argv(manifest, roster, out, workspace))[0]
        walls[name, "doit"] = best_of(args.runs, doit_argv(manifest, roster, out, workspace))[0]
    for what, label in (
        ("plan", "brigade plan"),
        ("run", "brigade run no-op"),
        ("doit", "doit no-op"),
    ):
        own, shared = walls["own", what], walls["shared", what]
        emit(f"{label} with workspaces", own, "s", f"without {shared:.3f} s, {own / shared:.2f}x")
    # planning at scale: 100,000 cells over 5 repositories
    for own in (False, True):
        name = "own" if own else "shared"
        manifest, roster = write_battery(
            root / f"big-{name}", args.plan_cases, args.repos, 10, own, seats=1
        )
        plan = brigade_argv("plan", str(manifest), "--roster", str(roster))
        cold = []
        for _ in range(args.runs):
            shutil.rmtree(root / "cache", ignore_errors=True)
            cold.append(best_of(1, plan, env=env))
        walls[name, "big"], code, rss = min(cold)
        assert code == 0, code
        walls[name, "big-rss"] = rss
    own, shared = walls["own", "big"], walls["shared", "big"]
    emit(
        f"brigade plan, {args.plan_cases * 10} cells over {args.repos} repositories",
        own,
        "s",
        f"{walls['own', 'big-rss']:.0f} MB; without workspaces {shared:.3f} s, "
        f"{walls['shared', 'big-rss']:.0f} MB ({own / shared:.2f}x)",
    )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
