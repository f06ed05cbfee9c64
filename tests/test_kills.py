"""Reliability: kill -9 at random moments (and while doit writes its DB), resume, end where
an uninterrupted run ends; agents a killed run left behind are ended.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_CLI, Project, alive, wait_for
from reliability import (
    ANSWER_ID,
    GRADERS,
    assert_valid,
    is_fake_agent,
    launched,
    load_json,
    start_doit,
    temp_files,
)

from brigade.core.taxonomy import TERMINAL
from brigade.inputs import schemas
from brigade.outdir import store
from brigade.run import proc

# ---------------------------------------------------------------------------------------
# 1 and 7: kill -9 at random moments, resume, end where an uninterrupted run ends
# ---------------------------------------------------------------------------------------

KINDS = (
    "accept",
    "accept",
    "accept",
    "instant",
    "reject",
    "reject",
    "crash",
    "tempfail",
    "grader_error",
    "unscored",
)


def chaos_battery(project: Project, rng: random.Random) -> dict[str, str]:
    """10 cases x 2 seats = 20 cells of every outcome; returns case id -> kind."""
    cases = []
    kinds = {}
    for index, kind in enumerate(KINDS):
        seconds = 0 if kind == "instant" else round(rng.uniform(0.05, 0.4), 2)
        lines = [f"sleep: {seconds}"] if seconds else []
        if kind == "tempfail":
            lines.append("tempfail: upstream said HTTP 503")
        else:
            lines.append(ANSWER_ID)
        if kind == "crash":
            lines.append("exit: 2")
        case_id = f"{kind}-{index}"
        kinds[case_id] = kind
        cases.append({"id": case_id, "prompt": "\n".join(lines), "graders": GRADERS[kind]})
    project.write_roster({"a": {"cli": FAKE_CLI}, "b": {"cli": FAKE_CLI, "model": "fake-2"}})
    project.write_manifest(cases, seats=("a", "b"))
    return kinds


@dataclass
class Chaos:
    """What a kill campaign did."""

    kills: int = 0
    inside_writes: int = 0  # kills that left an atomic write's temp file behind
    stragglers_left: int = 0  # orphaned agents left running into the next resume
    outputs: int = 0  # output directories brought to completion


@dataclass
class OutputHistory:
    """What was seen in one output directory, to prove numbers and files are never reused."""

    attempts: dict[str, set[int]] = field(default_factory=dict)
    write_once: dict[Path, bytes] = field(default_factory=dict)
    unused: set[Path] = field(default_factory=set)  # attempt folders a kill left before launch


def cell_ids(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "cells").iterdir()) if (out / "cells").exists() else []


def check_consistent(out: Path, history: OutputHistory) -> None:
    """What must hold at any moment, even right after a kill -9."""
    for name, tag in (("plan.json", "brigade.eval_plan.v1"), ("summary.json", None)):
        if (out / name).exists():
            doc = load_json(out / name)  # never truncated
            if tag:
                assert schemas.problems(doc, tag) == []
    for cell_id in cell_ids(out):
        base = out / "cells" / cell_id
        numbers = set(store.attempt_numbers(base))
        assert history.attempts.get(cell_id, set()) <= numbers, (cell_id, numbers)
        history.attempts[cell_id] = numbers
        if (base / "cell.json").exists():
            receipt = assert_valid(base / "cell.json", "brigade.eval_cell.v1")
            assert receipt["cell_id"] == cell_id
            assert receipt["attempt"] <= max(numbers)
        for number in numbers:
            folder = store.attempt_dir(out, cell_id, number)
            contents = sorted(p.name for p in folder.rglob("*"))
            if folder in history.unused:  # a number whose run never started is never reused
                assert contents in ([], ["run"]), (folder, contents)
            elif contents in ([], ["run"]):
                history.unused.add(folder)
            for relative in ("cell.json", "run/final.txt", "run/run.json"):
                path = folder / relative
                if not path.exists():
                    continue
                data = path.read_bytes()
                assert history.write_once.setdefault(path, data) == data, f"{path} rewritten"
            stdout = folder / "run" / "stdout.log"
            if stdout.exists():  # a (killed) straggler writes only (part of) its own cell's id
                assert f"{cell_id}\n".startswith(stdout.read_text()), stdout
            if (folder / "cell.json").exists():
                copy = assert_valid(folder / "cell.json", "brigade.eval_cell.v1")
                assert (copy["cell_id"], copy["attempt"]) == (cell_id, number)
            for name, tag in (
                ("run.json", "brigade.run.v1"),
                ("worker-results.json", "brigade.worker_results.v1"),
            ):
                if (folder / "run" / name).exists():
                    assert_valid(folder / "run" / name, tag)


def check_final(
    project: Project, kinds: dict[str, str], history: OutputHistory, reference: dict[str, Any]
) -> None:
    """The end state of an interrupted-and-resumed output directory."""
    out = project.out
    check_consistent(out, history)
    plan = assert_valid(out / "plan.json", "brigade.eval_plan.v1")
    assert plan["stale_cells"] == []
    summary = assert_valid(out / "summary.json", "brigade.eval_summary.v1")
    states = {}
    for cell in plan["cells"]:
        cell_id = cell["cell_id"]
        receipt = assert_valid(out / "cells" / cell_id / "cell.json", "brigade.eval_cell.v1")
        assert receipt["state"] in TERMINAL
        numbers = store.attempt_numbers(out / "cells" / cell_id)
        assert receipt["attempt"] == max(numbers)
        states[cell["coordinate"]] = receipt["state"]
        run_dir = store.run_dir(out, cell_id, receipt["attempt"])
        assert receipt["run_dir"] == str(run_dir)
        assert receipt["output_digest"] == store.file_digest(run_dir / "final.txt")
        expected = "" if kinds[cell["case_id"]] == "tempfail" else f"{cell_id}\n"
        for number in numbers:  # every attempt that finished holds this cell's own output
            folder = store.attempt_dir(out, cell_id, number)
            if (folder / "cell.json").exists():
                assert (folder / "run" / "final.txt").read_text() == expected
                assert_valid(folder / "run" / "run.json", "brigade.run.v1")
    assert states == reference["states"]
    for key in ("counts", "measurement_failures", "exit_code"):
        assert summary[key] == reference["summary"][key], key


def reap_stragglers(
    project: Project, handled: set[int], rng: random.Random, chaos: Chaos, left: list[int]
) -> None:
    """Orphaned agents of a killed doit: most are killed, some left to finish late."""
    for _, pid in launched(project):
        if pid in handled:
            continue
        handled.add(pid)
        if not (alive(pid) and is_fake_agent(pid)):
            continue
        if rng.random() < 0.3:
            left.append(pid)
            chaos.stragglers_left += 1
        else:
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda pid=pid: not alive(pid), 10, f"agent {pid} gone")


def reference_run(project: Project, args: tuple[str, ...]) -> dict[str, Any]:
    """An uninterrupted run of the same manifest in another output directory."""
    project.out = project.root / "reference"
    done = project.doit(*args)
    assert done.returncode in (0, 1, 3), done.stderr
    assert "Traceback" not in done.stderr and (project.out / "summary.json").exists(), done.stderr
    summary = project.summary()
    states = {coord: r["state"] for coord, r in project.receipts().items()}
    assert summary["exit_code"] == done.returncode
    return {"summary": summary, "states": states, "returncode": done.returncode}


def chaos_campaign(project: Project, seed: int, kills: int, jobs: int) -> Chaos:
    """Kill -9 doit's process group at random moments (seeded), resume after every kill.

    The battery and the kill schedule (delays, slowed writes) come from `seed` alone;
    which stragglers are left running depends on timing, so they draw from their own RNG.
    """
    rng = random.Random(seed)
    straggler_rng = random.Random(-seed)
    kinds = chaos_battery(project, rng)
    args = (f"jobs={jobs}",) if jobs > 1 else ()
    reference = reference_run(project, args)
    chaos = Chaos()
    handled = {pid for _, pid in launched(project)}
    while chaos.kills < kills:
        chaos.outputs += 1
        project.out = project.root / f"out-{chaos.outputs}"
        history = OutputHistory()
        left: list[int] = []
        while True:
            if chaos.kills >= kills:  # the resume after the last kill runs to the end
                proc = start_doit(project, *args)
                deadline = 120.0
            else:
                # a quarter of the kills land while doit loads, plans or takes the lock
                delay = rng.uniform(0, 0.35) if rng.random() < 0.25 else rng.uniform(0.35, 1.4)
                proc = start_doit(project, *args, slow_writes=rng.random() < 0.5)
                deadline = delay
            temps = temp_files(project.out)
            try:
                code = proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
                chaos.kills += 1
                chaos.inside_writes += bool(temp_files(project.out) - temps)
                reap_stragglers(project, handled, straggler_rng, chaos, left)
                check_consistent(project.out, history)
                continue
            _, err = proc.communicate(timeout=30)
            assert code == reference["returncode"], err
            assert "Traceback" not in err and (project.out / "summary.json").exists(), err
            for pid in left:  # late stragglers write only into their own attempt folder
                wait_for(lambda pid=pid: not alive(pid), 30, f"straggler {pid} done")
            check_final(project, kinds, history, reference)
            break
    return chaos


def test_kill_9_at_random_moments_then_resume(project: Project) -> None:
    chaos = chaos_campaign(project, seed=20240607, kills=30, jobs=1)
    assert chaos.kills >= 30
    assert chaos.inside_writes >= 1  # some kills landed inside a receipt write


def test_kill_9_in_parallel_runs_then_resume(project: Project) -> None:
    chaos = chaos_campaign(project, seed=4, kills=12, jobs=4)
    assert chaos.kills >= 12


@pytest.mark.slow
def test_kill_9_stress(project: Project) -> None:
    chaos = chaos_campaign(project, seed=777, kills=50, jobs=2)
    assert chaos.kills >= 50
    assert chaos.inside_writes >= 1


def test_kill_9_while_doit_writes_its_db_then_resume(project: Project, tmp_path: Path) -> None:
    """doit's DB (a cache) truncated by a kill: the resume drops it and re-runs nothing."""
    marker = tmp_path / "half-dumped"
    project.write_manifest(
        [{"id": c, "prompt": ANSWER_ID, "graders": GRADERS["accept"]} for c in ("a", "b")]
    )
    assert project.doit().returncode == 0
    proc = start_doit(project, slow_writes=True, HALF_DUMP_MARKER=str(marker))
    wait_for(marker.exists, what="doit halfway through writing its DB")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    with pytest.raises(ValueError):
        json.loads((project.out / ".doit.db").read_text())
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert len(launched(project)) == 2
    assert set(project.states().values()) == {"accepted"}


@pytest.mark.parametrize("left", [b"", b'{"plan": {"_values_:": {}}', b'{"pl'])
def test_doit_db_left_empty_or_truncated_is_dropped(project: Project, left: bytes) -> None:
    """What a kill leaves of doit's DB: right after its open('w'), or mid-write (even at '}')."""
    project.write_manifest([{"id": "a", "prompt": ANSWER_ID}])
    assert project.doit().returncode == 0
    (project.out / ".doit.db").write_bytes(left)
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert len(launched(project)) == 1


def test_agents_left_running_by_a_killed_run_are_ended_on_resume(
    project: Project, tmp_path: Path
) -> None:
    """After kill -9 of doit the agent (its own session) and the child it started live on;
    the resume kills both before the cell's next attempt, and they write nothing more."""
    release = tmp_path / "release"
    pids = tmp_path / "pids"
    project.write_manifest(
        [{"id": "late", "prompt": f"spawn: 120\nblock: {release}\n{ANSWER_ID}"}],
    )
    first = start_doit(project, FAKE_AGENT_PIDS=str(pids))
    wait_for(lambda: pids.exists() and pids.read_text().strip() != "", what="agent started")
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    ((_, orphan),) = launched(project)
    child = int(pids.read_text().split()[0])
    assert alive(orphan) and alive(child)  # a kill -9 gives brigade no chance to stop them
    resume = project.doit_popen()
    wait_for(lambda: not alive(orphan) and not alive(child), 30, "stragglers ended")
    release.touch()  # the new attempt answers (the orphan never will)
    _, err = resume.communicate(timeout=60)
    assert resume.returncode == 0, err
    assert "late:agent:1: ended 2 process(es) left running by attempt 1" in err
    cell_id = project.plan()["cells"][0]["cell_id"]
    receipt = project.receipt("late:agent:1")
    assert (receipt["state"], receipt["attempt"]) == ("unscored", 2)
    first_run = store.run_dir(project.out, cell_id, 1)
    assert sorted(p.name for p in first_run.iterdir()) == ["stderr.log", "stdout.log"]
    assert (first_run / "stdout.log").read_text() == ""  # ended before it answered
    assert receipt["output_digest"] == store.file_digest(
        store.run_dir(project.out, cell_id, 2) / "final.txt"
    )
    again = project.doit()
    assert again.returncode == 0 and len(launched(project)) == 2
    assert "ended" not in again.stderr


def test_only_the_crashed_cells_own_processes_are_ended(tmp_path: Path) -> None:
    """Stragglers are found by their exact run-folder prefix: other cells' seats, other output
    directories' and processes without the variable are left alone."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]

    def start(run_dir: str | None) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "BRIGADE_RUN_DIR"}
        if run_dir is not None:
            env["BRIGADE_RUN_DIR"] = run_dir
        return subprocess.Popen(sleeper, env=env, start_new_session=True)

    out = tmp_path / "out" / "cells"
    mine = start(f"{out}/aaa/attempts/attempt-001/run")
    others = [
        start(f"{out}/aaab/attempts/attempt-001/run"),  # another cell, same first letters
        start(f"{tmp_path}/elsewhere/cells/aaa/attempts/attempt-001/run"),
        start(None),
    ]
    try:
        wait_for(lambda: all(alive(p.pid) for p in [mine, *others]))
        assert proc.end_stragglers("BRIGADE_RUN_DIR", f"{out}/aaa/") == [mine.pid]
        assert mine.wait(timeout=10) == -signal.SIGKILL
        assert all(p.poll() is None for p in others)
        assert proc.end_stragglers("BRIGADE_RUN_DIR", f"{out}/aaa/") == []
    finally:
        for p in [mine, *others]:
            p.kill()
            p.wait()
