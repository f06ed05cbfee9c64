"""Shared helpers for the benchmarks: build manifests and completed output directories fast."""

from __future__ import annotations

import compileall
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DODO = REPO / "dodo.py"


def write_inputs(
    folder: Path,
    cases: int,
    trials: int,
    seats: int = 1,
    cli: str = "exec:true",
    prompt: str = "Say hello",
) -> tuple[Path, Path]:
    """A manifest of `cases` x `seats` x `trials` cells and its roster."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"seat{i}" for i in range(seats)]
    roster = folder / "roster.yaml"
    roster.write_text(
        yaml.safe_dump(
            {
                "schema": "brigade.roster.v1",
                "seats": {name: {"cli": cli} for name in names},
            }
        )
    )
    manifest = folder / "manifest.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "schema": "brigade.eval_manifest.v1",
                "name": "bench",
                "trials": trials,
                "seats": names,
                "graders": [{"type": "regex_output", "pattern": "hello"}],
                "cases": [
                    {"id": f"case-{i:06d}", "prompt": f"{prompt} #{i}"} for i in range(cases)
                ],
            },
            sort_keys=False,
        )
    )
    return manifest, roster


def fabricate_results(manifest: Path, roster: Path, out: Path, workspace: Path) -> int:
    """Write plan.json and a finished receipt for every cell, shaped as a real run writes them.

    Written directly (no per-file validation or fsync) so 100,000 cells take
    seconds, not minutes; tests/ check that real runs write the same shapes.
    """
    from brigade.core.taxonomy import cell_score, classify_grades
    from brigade.engine.session import Options, open_session
    from brigade.outdir import store
    from brigade.outdir.planfile import write_plan
    from brigade.run.graders import run_graders
    from brigade.run.runner import grade_context, running_receipt

    session = open_session(Options(manifest=manifest, roster=roster, out=out, workspace=workspace))
    write_plan(out, session.planned.plan, session.planned.key)
    now = "2026-01-01T00:00:00.000Z"
    final = b"hello\n"
    for cell in session.planned.plan.cells:
        run_dir = store.run_dir(out, cell.cell_id, 1)
        run_dir.mkdir(parents=True)
        (run_dir / "final.txt").write_bytes(final)
        for name in ("stdout.log", "stderr.log"):
            (run_dir / name).write_bytes(b"")
        run_doc = {
            "schema": "brigade.run.v1",
            "cell_id": cell.cell_id,
            "attempt": 1,
            "status": "completed",
            "exit_code": 0,
            "signal": None,
            "duration_seconds": 0.01,
            "cwd": str(workspace),
            "started_at": now,
            "finished_at": now,
            "failure_kind": None,
            "failure_detail": None,
            "adapter": "exec",
            "argv": ["true"],
            "executable": None,
            "executable_version": None,
            "timeout_seconds": 600.0,
            "execution_mode": "read-only",
            "workspace_access": "shared-checkout",
            "read_only_enforcement": "none",
            "settings_not_applied": [],
            "changed_files": None,
            "workspace_snapshot": None,
            "stdout_bytes": 6,
            "stderr_bytes": 0,
        }
        (run_dir / "run.json").write_text(json.dumps(run_doc))
        results = run_graders(cell.graders, grade_context(session.ctx, cell, run_dir, run_doc))
        receipt = running_receipt(session.ctx, cell, 1, now)
        receipt.update(
            {
                "state": classify_grades(results).state,
                "finished_at": now,
                "exit_code": 0,
                "duration_seconds": 0.01,
                "run_dir": str(run_dir),
                "run_path": store.run_path(cell.cell_id, 1),
                "graders": results,
                "output_digest": store.file_digest(run_dir / "final.txt"),
                "score": cell_score(results),
                "acceptance": {
                    "accepted": True,
                    "graders_total": len(results),
                    "graders_passed": len(results),
                    "graders_errored": 0,
                },
                "graded_at": now,
            }
        )
        data = store.dumps(receipt)
        (run_dir.parent / "cell.json").write_bytes(data)
        (store.cell_dir(out, cell.cell_id) / "cell.json").write_bytes(data)
    return len(session.planned.plan.cells)


@functools.cache
def compile_bytecode() -> None:
    """Byte-compile brigade (and dodo.py) as an installed package is.

    An editable install compiles on first import, and not at all where
    PYTHONDONTWRITEBYTECODE is set: every measured run would pay for compiling.
    """
    compileall.compile_dir(REPO / "brigade", quiet=1)
    compileall.compile_file(DODO, quiet=1)


def timed(
    argv: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: int | None = subprocess.DEVNULL,
) -> tuple[float, int, float]:
    """Wall seconds, exit code and peak RSS (MB) of one command."""
    compile_bytecode()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss / 1024


def best_of(runs: int, argv: list[str], **kwargs: object) -> tuple[float, int, float]:
    """The fastest of several runs (wall, exit code, peak RSS MB): noise only adds time."""
    results = [timed(argv, **kwargs) for _ in range(runs)]  # type: ignore[arg-type]
    return min(results, key=lambda r: r[0])


Timing = tuple[float, int, float]


def beside_floors(
    runs: int, floors: list[list[str]], measure: Callable[[], tuple[Timing, Any]]
) -> tuple[Timing, Any, list[float]]:
    """`runs` measurements, each right after one run of every floor command: the fastest
    measurement (its timing and what `measure` returned beside it) and the fastest run of
    each floor. A ratio to floors measured beside it holds while the machine's speed
    drifts between the parts of a benchmark (a virtual machine's neighbours)."""
    results: list[tuple[Timing, Any]] = []
    walls: list[list[float]] = [[] for _ in floors]
    for _ in range(runs):
        for wall, argv in zip(walls, floors, strict=True):
            wall.append(timed(argv)[0])
        results.append(measure())
    best = min(results, key=lambda result: result[0][0])
    return best[0], best[1], [min(wall) for wall in walls]


def doit_argv(manifest: Path, roster: Path, out: Path, workspace: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "doit",
        "-f",
        str(DODO),
        *extra,
        f"manifest={manifest}",
        f"roster={roster}",
        f"out={out}",
        f"workspace={workspace}",
    ]


def brigade_argv(*args: str) -> list[str]:
    script = Path(sys.executable).parent / "brigade"
    return (
        [str(script), *args]
        if script.exists()
        else [sys.executable, "-m", "brigade.front.cli", *args]
    )


def emit(name: str, value: float, unit: str, note: str = "") -> None:
    """One figure per line."""
    print(f"{name}: {value:.3f} {unit}{('  ' + note) if note else ''}", flush=True)


def cpu_count() -> int:
    return os.cpu_count() or 1


def run_argv(manifest: Path, roster: Path, out: Path, workspace: Path, *extra: str) -> list[str]:
    """`brigade run` over a benchmark's inputs."""
    return brigade_argv(
        "run", str(manifest), "--roster", str(roster), "--out", str(out),
        "--workspace", str(workspace), *extra,
    )  # fmt: skip


def finished_output(root: Path, cells: int) -> tuple[Path, Path, Path, Path]:
    """(manifest, roster, workspace, out) with every cell finished, built once per root."""
    manifest, roster = write_inputs(root, cells, 1)
    workspace, out = root / "ws", root / "out"
    workspace.mkdir(exist_ok=True)
    if not (out / "plan.json").exists():
        print(f"building {cells} finished cells in {out} ...", file=sys.stderr)
        fabricate_results(manifest, roster, out, workspace)
        # a finished run leaves its export behind too
        subprocess.run(brigade_argv("export", str(out)), check=True, stdout=subprocess.DEVNULL)
        # what was just written goes to disk now: the measured command must not
        # pay for flushing the builder's dirty pages (brigade regrade syncs)
        os.sync()
    return manifest, roster, workspace, out
