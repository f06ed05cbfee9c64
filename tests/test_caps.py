"""Concurrency caps end to end: -n overall, `max_concurrency` per seat, shared `limits`.

Seats log when each run started and ended (the fake agent's $FAKE_AGENT_SPANS); the
tests count how many runs overlapped, never how long anything took.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import FAKE_CLI, Project


def spans(path: Path) -> dict[str, list[tuple[int, int]]]:
    """seat -> (start, end) of each of its runs."""
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        seat, start, end = line.split()
        found[seat].append((int(start), int(end)))
    return dict(found)


def most_at_once(intervals: list[tuple[int, int]]) -> int:
    """The largest number of intervals in flight at one moment."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def seats(**caps: dict[str, object]) -> dict[str, dict[str, object]]:
    return {name: {"cli": FAKE_CLI, **extra} for name, extra in caps.items()}


@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_no_seat_ever_has_more_runs_in_flight_than_its_cap(
    project: Project, tmp_path: Path, front: str
) -> None:
    log = tmp_path / "spans.log"
    project.write_roster(
        seats(
            one={"max_concurrency": 1},
            two={"max_concurrency": 2, "limit": "account"},
            mate={"limit": "account"},
            free={},
        ),
        limits={"account": 3},
    )
    project.write_manifest(
        [{"id": f"c{n}", "prompt": "sleep: 0.2"} for n in range(4)],
        seats=("one", "two", "mate", "free"),
    )
    if front == "doit":
        done = project.doit("jobs=5", FAKE_AGENT_SPANS=str(log))
    else:
        done = project.run("-n", "5", FAKE_AGENT_SPANS=str(log))
    assert done.returncode == 0, done.stderr
    runs = spans(log)
    assert {seat: len(found) for seat, found in runs.items()} == {
        "one": 4,
        "two": 4,
        "mate": 4,
        "free": 4,
    }
    assert most_at_once(runs["one"]) == 1
    assert most_at_once(runs["two"]) <= 2
    assert most_at_once(runs["two"] + runs["mate"]) <= 3
    assert most_at_once([span for found in runs.values() for span in found]) <= 5


@pytest.mark.parametrize("front", ["doit", "brigade"])
def test_n_runs_that_many_seats_at_once(project: Project, tmp_path: Path, front: str) -> None:
    # two cells that can only finish together: each waits for the other's file
    first, second = tmp_path / "first", tmp_path / "second"
    project.write_manifest(
        [
            {"id": "a", "prompt": f"write: {first}=1\nawait: {second}"},
            {"id": "b", "prompt": f"write: {second}=1\nawait: {first}"},
        ]
    )
    done = project.doit("jobs=2") if front == "doit" else project.run("-n", "2")
    assert done.returncode == 0, done.stderr
    assert project.states() == {"a:agent:1": "unscored", "b:agent:1": "unscored"}


def test_a_seat_at_its_cap_does_not_hold_back_the_others(project: Project, tmp_path: Path) -> None:
    # The capped seat's first cell waits for a file that only the other seat's last cell
    # writes. Were the free slot given to the capped seat's next cell (head-of-line
    # blocking), that cell would wait for the slot held by the first one, which never ends.
    release, there = tmp_path / "release", tmp_path / "there"
    there.write_text("")
    project.write_roster(
        {
            "slow": {
                "cli": FAKE_CLI,
                "max_concurrency": 1,
                "env": {"HOLD": str(release), "MARK": str(tmp_path / "unused")},
            },
            "fast": {"cli": FAKE_CLI, "env": {"HOLD": str(there), "MARK": str(release)}},
        }
    )
    cases = [{"id": "first", "prompt": "await: $HOLD"}]
    cases += [{"id": f"c{n}", "prompt": "answer: ok"} for n in range(3)]
    cases.append({"id": "last", "prompt": "write: $MARK=1"})
    project.write_manifest(cases, seats=("slow", "fast"))
    done = project.doit("jobs=2")
    assert done.returncode == 0, done.stderr
    assert set(project.states().values()) == {"unscored"}


def test_doit_refuses_parallel_processes(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    done = project.brigade_doit("-n", "2", "-P", "process")
    assert done.returncode == 2
    assert done.stderr == (
        "brigade: doit -P process: brigade runs the seats in threads of doit's own process; "
        "drop -P process (-n N alone runs N seats at once)\n"
    )
    assert not project.out.exists()


def test_plain_doit_refuses_parallel_processes_on_one_line(project: Project) -> None:
    """Plain doit forks processes that would run the steps on copies of the run: it ended
    with exit 1 and not a word, the seat runs of its children lost; every step refuses."""
    project.write_manifest([{"id": "a", "prompt": "answer: ok"}, {"id": "b", "prompt": "x"}])
    done = project.doit("-n", "2", "-P", "process")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "brigade: doit -P process: brigade runs the seats in threads of doit's own process; "
        "drop -P process (jobs=N runs N seats at once)\n"
    )
    assert not any(project.out.glob("cells/*/cell.json"))
    again = project.doit("-n", "2", "jobs=2")
    assert again.returncode == 0, again.stderr
    assert set(project.states().values()) == {"unscored"}


def test_a_seat_naming_an_unknown_limit_is_refused(project: Project) -> None:
    project.write_roster(seats(agent={"limit": "acct"}), limits={"other": 2})
    project.write_manifest([{"id": "a", "prompt": "x"}])
    done = project.run()
    assert done.returncode == 2
    assert done.stderr == (
        f"brigade: {project.roster}: seats.agent.limit: no limit 'acct' in the roster's "
        "`limits` (defined: other); add `limits: {acct: N}`\n"
    )


def test_a_no_op_resume_builds_no_scheduler(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}])
    assert project.doit().returncode == 0
    script = f"""
import sys
from pathlib import Path
from brigade.engine.session import Options, open_session
from brigade.engine.engine import Engine
options = Options(manifest=Path({str(project.manifest)!r}), roster=Path({str(project.roster)!r}),
                  out=Path({str(project.out)!r}), workspace=Path({str(project.workspace)!r}))
engine = Engine(open_session(options))
print(engine.scheduler, "brigade.run.schedule" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.stdout, done.stderr) == ("None False\n", "")
