"""Reliability: SIGTERM and SIGINT to doit and to brigade run, serial and parallel.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import Project, alive, brigade_command, wait_for
from reliability import ANSWER_ID, launched, start_brigade_run, start_doit

# ---------------------------------------------------------------------------------------
# 2: SIGTERM and SIGINT to doit and to brigade run, serial and parallel
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1, 3])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_signal_stops_seat_groups_and_resume_reruns(
    project: Project, tmp_path: Path, front: str, signum: int, jobs: int
) -> None:
    pids = tmp_path / "pids"
    release = tmp_path / "release"
    project.write_manifest(
        [{"id": f"c{i}", "prompt": f"spawn: 120\nblock: {release}\n{ANSWER_ID}"} for i in range(3)]
    )
    extra: tuple[str, ...] = ()
    if jobs > 1:  # (plain doit: the cap of seat runs is a variable)
        extra = (f"jobs={jobs}",) if front == "doit" else ("-n", str(jobs))
    env = {"FAKE_AGENT_PIDS": str(pids)}
    start = start_doit if front == "doit" else start_brigade_run
    proc = start(project, *extra, **env)

    def children() -> list[int]:
        return [int(x) for x in pids.read_text().split()] if pids.exists() else []

    wait_for(lambda: len(children()) == jobs, what=f"{jobs} seats and their children running")
    agents = [pid for _, pid in launched(project)]
    started = {coord: r["started_at"] for coord, r in project.receipts().items()}
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)  # Ctrl-C: the terminal signals the foreground group
    else:
        os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    group = agents + children()
    wait_for(lambda: not any(alive(pid) for pid in group), 10, "no orphan agent or child")
    assert sorted(project.states().values()) == ["running"] * jobs
    release.touch()
    pids.unlink()
    done = project.doit()
    assert done.returncode == 0, done.stderr
    receipts = project.receipts()
    for coord, receipt in receipts.items():
        assert receipt["state"] == "unscored"
        if coord in started:
            assert (receipt["attempt"], receipt["started_at"]) == (2, started[coord])
        else:
            assert receipt["attempt"] == 1
    assert len(receipts) == 3


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize("front", ["doit", "brigade doit", "brigade run"])
def test_a_signal_while_the_run_connects_to_its_cluster(
    project: Project, front: str, signum: int
) -> None:
    """Ctrl-C (or SIGTERM) while the run waits for a Dask scheduler that does not answer
    (it waits up to 30 s): the run says it was interrupted and exits 128+N through every
    front door, writing nothing; under doit it was a silent exit 3."""
    pytest.importorskip("distributed")
    project.write_manifest([{"id": "a", "prompt": "answer: x"}])
    nobody = "tcp://127.0.0.1:9"  # the discard port: nothing listens there
    argv = {
        "doit": project.doit_popen_args("executor=dask", f"scheduler={nobody}"),
        "brigade doit": [
            *brigade_command(), "doit", *project.variables(), "executor=dask",
            f"scheduler={nobody}",
        ],
        "brigade run": [
            *brigade_command(),
            *project.run_args("--executor", "dask", "--scheduler", nobody),
        ],
    }[front]  # fmt: skip
    started = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=project.env(),
        start_new_session=True,
        cwd=project.workspace,
    )
    # no line is said before the cluster answers; the signal lands while brigade loads or
    # connects, either way a stop before the run started
    time.sleep(2)
    started.send_signal(signum)
    _, err = started.communicate(timeout=60)
    assert started.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("brigade: interrupted"), err
    assert not (project.out / "plan.json").exists()
    assert not (project.out / ".doit.db").exists()
