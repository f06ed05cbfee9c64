"""Per-seat caps: 3 seats x 40 cells whose seat sleeps 1 s, max_concurrency 2 / 4 / 8, -n 14.

The seat capped at 2 bounds the run: the ideal schedule takes ceil(40 / 2) x 1 s
= 20 s, and every other seat's cells fit beside it (4 + 8 slots). Efficiency =
ideal / measured wall time; the target is within 10% of the ideal.

    .venv/bin/python benchmarks/bench_caps.py [--cells 40] [--caps 2 4 8] [--jobs 14] [--runs 1]
                                              [--doit]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
from pathlib import Path

import yaml
from common import cpu_count, doit_argv, emit, run_argv, timed, write_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", type=int, default=40, help="cells per seat")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--caps", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--jobs", type=int, default=14)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--doit", action="store_true", help="run through doit, not brigade run")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="brigade-bench-caps-"))
    manifest, roster = write_inputs(
        root, args.cells, 1, seats=len(args.caps), cli=f"exec:sleep {args.seconds}"
    )
    doc = yaml.safe_load(roster.read_text())
    for (_, seat), cap in zip(sorted(doc["seats"].items()), args.caps, strict=True):
        seat["max_concurrency"] = cap
    roster.write_text(yaml.safe_dump(doc))
    workspace = root / "ws"
    workspace.mkdir()
    ideal = max(math.ceil(args.cells / cap) for cap in args.caps) * args.seconds
    load = os.getloadavg()[0]
    front = "doit" if args.doit else "brigade run"
    print(
        f"{len(args.caps)} seats x {args.cells} cells sleeping {args.seconds} s, caps "
        f"{'/'.join(map(str, args.caps))}, -n {args.jobs}, {front}, on {cpu_count()} cores "
        f"(load {load:.2f} before)"
    )
    for run in range(args.runs):
        out = root / f"out-{run}"
        if args.doit:  # (plain doit: the cap of seat runs is the jobs= variable)
            command = doit_argv(manifest, roster, out, workspace, f"jobs={args.jobs}")
        else:
            command = run_argv(manifest, roster, out, workspace, "-n", str(args.jobs))
        wall, code, _ = timed(command)
        assert code == 1, code  # sleep prints nothing: the "hello" grader rejects every cell
        emit(
            f"run {run + 1}",
            wall,
            "s",
            f"ideal {ideal:.1f} s, efficiency {ideal / wall:.0%} "
            f"(load {os.getloadavg()[0]:.2f} after)",
        )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
