"""Reliability (issue #7): kills, signals, hostile input, hostile paths, tampering, full or
read-only disks, and concurrent runs. End-to-end tests run the real `doit` and `brigade`.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DODO, FAKE_CLI, REPO, Project, alive, brigade_command, wait_for
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from brigade.core.taxonomy import TERMINAL
from brigade.errors import BrigadeError
from brigade.front.session import Options, load_inputs, plan_only
from brigade.inputs import schemas
from brigade.outdir import store
from brigade.run import proc

SLOW_DOIT = REPO / "tests" / "agents" / "slow_writes_doit.py"
CELL_ID = "^[0-9a-f]{64}$"

# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def is_fake_agent(pid: int) -> bool:
    """Whether `pid` is (still) one of our fake agents, not a recycled pid."""
    try:
        return b"fake_agent.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def launched(project: Project) -> list[tuple[str, int]]:
    """(coordinate, pid) of every agent launch so far, from $FAKE_AGENT_LOG."""
    if not project.log.exists():
        return []
    rows = []
    for line in project.log.read_text().splitlines():
        coordinate, _, pid = line.rpartition(" ")
        rows.append((coordinate, int(pid)))
    return rows


def one_line(stderr: str) -> str:
    """The single line a refused command printed (fails when there are more)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def without_seat_warnings(stderr: str) -> str:
    """stderr without the fake seat's warning that it cannot enforce read-only runs."""
    return "".join(
        line for line in stderr.splitlines(keepends=True) if "read-only run, but" not in line
    )


def start_doit(
    project: Project, *args: str, slow_writes: bool = False, **env: str
) -> subprocess.Popen[str]:
    """The real doit in its own session (optionally with slowed atomic writes)."""
    program = [str(SLOW_DOIT)] if slow_writes else ["-m", "doit"]
    return subprocess.Popen(
        [sys.executable, *program, "-f", str(DODO), *args, *project.variables()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=project.env(**env),
        start_new_session=True,
    )


def start_brigade_run(project: Project, *args: str, **env: str) -> subprocess.Popen[str]:
    """`brigade run` in its own session."""
    return subprocess.Popen(
        [*brigade_command(), *project.run_args(*args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=project.env(**env),
        start_new_session=True,
        cwd=project.workspace,
    )


def tree_snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under root (not following links): kind and content or link target."""
    result: dict[str, tuple[str, bytes]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                result[key] = ("link", os.readlink(path).encode())
            elif path.is_dir():
                result[key] = ("dir", b"")
            else:
                result[key] = ("file", path.read_bytes())
    return result


def load_json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def assert_valid(path: Path, tag: str) -> dict[str, Any]:
    """Parse a document and validate it against its schema."""
    doc = load_json(path)
    assert schemas.problems(doc, tag) == [], (path, schemas.problems(doc, tag)[:3])
    return doc


def temp_files(root: Path) -> set[Path]:
    """Temp files of atomic writes under root (left behind only by a killed writer)."""
    return {p for p in root.rglob(".*.tmp")} if root.exists() else set()


# ---------------------------------------------------------------------------------------
# 1 and 7: kill -9 at random moments, resume, end where an uninterrupted run ends
# ---------------------------------------------------------------------------------------

ANSWER_ID = "env: BRIGADE_CELL_ID"
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
GRADERS = {
    "accept": [{"type": "regex_output", "pattern": CELL_ID}],
    "instant": [{"type": "regex_output", "pattern": CELL_ID}],
    "reject": [{"type": "regex_output", "pattern": "^never$"}],
    "crash": [{"type": "regex_output", "pattern": CELL_ID}],
    "tempfail": [{"type": "regex_output", "pattern": CELL_ID}],
    "grader_error": [{"type": "regex_output", "pattern": "("}],
    "unscored": [],
}


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
    args = ("-n", str(jobs)) if jobs > 1 else ()
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
    extra = ("-n", str(jobs)) if jobs > 1 else ()
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


# ---------------------------------------------------------------------------------------
# 3: any manifest or roster either loads or is refused on one line; never a traceback
# ---------------------------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
ANY = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)


def maybe(valid: st.SearchStrategy[Any], *invalid: Any) -> st.SearchStrategy[Any]:
    """Mostly a valid value; sometimes one of the `invalid` ones, or anything at all."""
    wrong = st.sampled_from(invalid) if invalid else ANY
    return st.integers(0, 13).flatmap(lambda n: valid if n < 12 else wrong if n < 13 else ANY)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


ID = st.from_regex(r"[A-Za-z0-9_.\-éケ𝔘]{1,12}", fullmatch=True)
BAD_NAMES = ("", " a", "a ", "x:y", "tab\t", "\x00", "a" * 201, 5, True, None, ["a"])
TRIALS = st.integers(1, 3) | st.just(2.0)
BAD_TRIALS = (0, -1, True, False, 1.5, 100001, 10**30, "2", None, float("nan"))
GRADER = maybe(
    st.fixed_dictionaries(
        {"type": maybe(st.sampled_from(["exact_output", "regex_output", "json_field"]), "nope")},
        optional={
            "expected": ANY,
            "pattern": st.sampled_from(["ok", "(", "[a-z]+", "\\"]),
            "path": st.sampled_from(["a.b", "../x", "/etc/passwd", "f.txt"]),
            "deep": st.integers(1, 60).map(nested),
        },
    ),
    "exit_status",
    [],
)
PROMPT = maybe(
    st.sampled_from(["hello", "a\r\nb\rc", "\u0000", "\ufeffbom"])
    | TEXT
    | st.integers(0, 300_000).map(lambda n: "x" * n),
    None,
    5,
)
BASE_CASE = st.fixed_dictionaries(
    {"id": maybe(ID, *BAD_NAMES)},
    optional={
        "trials": maybe(TRIALS, *BAD_TRIALS),
        "graders": maybe(st.lists(GRADER, max_size=3)),
        "metadata": maybe(st.dictionaries(TEXT, ANY, max_size=2)),
    },
)
PROMPT_FILE = maybe(st.just("p.txt"), "../p.txt", "/etc/hostname", "d", "missing.txt", "")
CASE = maybe(
    st.one_of(
        st.builds(lambda case, prompt: {**case, "prompt": prompt}, BASE_CASE, PROMPT),
        st.builds(lambda case, path: {**case, "prompt_file": path}, BASE_CASE, PROMPT_FILE),
    ),
    {"id": "both", "prompt": "p", "prompt_file": "p.txt"},
    {"id": "neither"},
)
MANIFEST = st.fixed_dictionaries(
    {
        "schema": maybe(st.just("brigade.eval_manifest.v1"), "brigade.eval_manifest.v2"),
        "name": maybe(st.sampled_from(["t", "a.b-c_1"]), "-bad", "x/y", "", "é"),
        "seats": maybe(st.just(["agent"]), [], ["ghost"], ["agent", "agent"], [None]),
        "cases": maybe(st.lists(CASE, min_size=1, max_size=4), []),
    },
    optional={
        "trials": maybe(TRIALS, *BAD_TRIALS),
        "graders": maybe(st.lists(GRADER, max_size=2)),
        "execution": maybe(st.just({"mode": "read-only"}), {"mode": "yolo"}, {"mode": None}),
        "roster": maybe(st.just("roster.yaml"), "missing.yaml", "../roster.yaml", ""),
        "description": maybe(TEXT),
    },
)
SEAT = maybe(
    st.fixed_dictionaries(
        {"cli": maybe(st.sampled_from([FAKE_CLI, "codex", "claude"]), "exec:", "exec:'", "nope")},
        optional={
            "model": maybe(TEXT),
            "reasoning": maybe(TEXT),
            "transport": maybe(TEXT),
            "env": maybe(st.dictionaries(TEXT, TEXT, max_size=2), {"A": 1}, {"": "x"}),
            "timeout_seconds": maybe(
                st.sampled_from([1, 0.5, 604800]), 0, -1, 1e308, 604801, True, "5"
            ),
        },
    ),
    {},
    {"model": "m"},
)
ROSTER = st.fixed_dictionaries(
    {
        "schema": maybe(st.just("brigade.roster.v1"), "brigade.roster.v0"),
        "seats": maybe(
            st.dictionaries(
                ID | st.sampled_from(BAD_NAMES[:5]) | st.integers(), SEAT, max_size=3
            ).map(lambda seats: {"agent": {"cli": FAKE_CLI}, **seats}),
            {},
            {"agent": None},
        ),
    },
    optional={
        "codex_transport": maybe(st.sampled_from(["exec", "app-server"]), "grpc"),
        "timeout_seconds": maybe(st.just(600), 0, -5, float("inf"), "10"),
    },
)


@st.composite
def document_bytes(draw: st.DrawFn, docs: st.SearchStrategy[Any]) -> tuple[str, bytes]:
    """(file suffix, bytes) of a document: serialised as YAML or JSON, then maybe mangled."""
    doc = draw(docs)
    suffix = draw(st.sampled_from([".yaml", ".json"]))
    if suffix == ".json":
        text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    else:
        text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()), sort_keys=False)
    data = text.encode("utf-8")
    mangle = draw(
        st.sampled_from(["none"] * 12 + ["bytes", "truncate", "duplicate", "bom", "utf16", "deep"])
    )
    if mangle == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    elif mangle == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif mangle == "duplicate":
        key = b'"schema": 1, ' if suffix == ".json" else b"schema: 1\n"
        data = data.replace(b"{", b"{" + key, 1) if suffix == ".json" else key + data
    elif mangle == "bom":
        data = b"\xef\xbb\xbf" + data
    elif mangle == "utf16":
        data = text.encode("utf-16")
    elif mangle == "deep":
        depth = draw(st.integers(50, 3000))
        deep = "[" * depth + "1" + "]" * depth
        data = data.replace(b"[]", deep.encode(), 1) if b"[]" in data else deep.encode()
    return suffix, data


VALID_ROSTER = {"schema": "brigade.roster.v1", "seats": {"agent": {"cli": FAKE_CLI}}}
VALID_MANIFEST = {
    "schema": "brigade.eval_manifest.v1",
    "name": "t",
    "seats": ["agent"],
    "cases": [{"id": "a", "prompt": "p"}],
}


def refusal_in_process(
    folder: Path, manifest: tuple[str, bytes], roster: tuple[str, bytes], explicit: bool = True
) -> str | None:
    """plan_only on the files: None when they load, else the one-line BrigadeError message.

    Any other exception fails the test; the output directory is never created.
    """
    (folder / "p.txt").write_text("a prompt from a file")
    (folder / "d").mkdir()
    manifest_path = folder / f"manifest{manifest[0]}"
    manifest_path.write_bytes(manifest[1])
    roster_path = folder / f"roster{roster[0]}"
    roster_path.write_bytes(roster[1])
    out = folder / "out"
    options = Options(
        manifest=manifest_path, roster=roster_path if explicit else None, out=out, workspace=folder
    )
    try:
        plan_only(options)
    except BrigadeError as exc:
        message: str | None = str(exc)
    else:
        message = None
    assert not out.exists()
    if message is not None:
        assert message and "\n" not in message, message
    if currently_in_test_context():
        event("loads" if message is None else "refused")  # --hypothesis-show-statistics
    return message


def as_yaml(doc: Any) -> tuple[str, bytes]:
    return ".yaml", yaml.safe_dump(doc, sort_keys=False).encode()


PROPERTY_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(PROPERTY_SETTINGS, max_examples=300)
@given(manifest=document_bytes(MANIFEST), explicit=st.booleans())
def test_any_manifest_loads_or_is_refused_on_one_line(
    manifest: tuple[str, bytes], explicit: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal_in_process(Path(folder), manifest, as_yaml(VALID_ROSTER), explicit)


@settings(PROPERTY_SETTINGS, max_examples=200)
@given(roster=document_bytes(ROSTER))
def test_any_roster_loads_or_is_refused_on_one_line(roster: tuple[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal_in_process(Path(folder), as_yaml(VALID_MANIFEST), roster)


@pytest.mark.slow
@settings(PROPERTY_SETTINGS, max_examples=1500)
@given(manifest=document_bytes(MANIFEST), roster=document_bytes(ROSTER))
def test_any_manifest_and_roster_stress(
    manifest: tuple[str, bytes], roster: tuple[str, bytes]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal_in_process(Path(folder), manifest, roster)


def _manifest(**changes: Any) -> dict[str, Any]:
    return {**VALID_MANIFEST, **changes}


def _case(**changes: Any) -> dict[str, Any]:
    return _manifest(cases=[{"id": "a", "prompt": "p", **changes}])


def _json(doc: Any) -> tuple[str, bytes]:
    return ".json", json.dumps(doc).encode()


def deep_grader(depth: int) -> tuple[str, bytes]:
    """A JSON manifest whose grader holds a value nested `depth` lists deep."""
    text = json.dumps(_case(graders=[{"type": "json_field", "path": "a", "expected": "HOLE"}]))
    return ".json", text.replace('"HOLE"', "[" * depth + "1" + "]" * depth).encode()


def alias_bomb(levels: int) -> tuple[str, bytes]:
    """A few hundred bytes of YAML whose aliases expand to 10**levels values."""
    lines = [
        "schema: brigade.eval_manifest.v1",
        "name: t",
        "seats: [agent]",
        "cases:",
        "  - id: a",
        "    prompt: p",
        "    metadata:",
        "      x0: &a0 [" + ", ".join(["lol"] * 10) + "]",
    ]
    for level in range(1, levels):
        lines.append(f"      x{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return ".yaml", ("\n".join(lines) + "\n").encode()


SHARED_GRADERS = b"""schema: brigade.eval_manifest.v1
name: t
seats: [agent]
cases:
  - {id: a, prompt: p, graders: &std [{type: regex_output, pattern: ok}]}
  - {id: b, prompt: q, graders: *std}
"""

HOSTILE_INPUTS: dict[str, tuple[tuple[str, bytes], bool]] = {
    # name: ((suffix, bytes), loads)
    "huge prompt": (as_yaml(_case(prompt="y" * (6 * 2**20))), True),
    "huge prompt json": (_json(_case(prompt="z" * (3 * 2**20))), True),
    "non-utf8 bytes": ((".yaml", b"schema: brigade.eval_manifest.v1\nname: \xff\xfe\n"), False),
    "non-utf8 in prompt": (
        (".yaml", as_yaml(_case(prompt="PLACE"))[1].replace(b"PLACE", b"\xc3\x28")),
        False,
    ),
    "utf-16": ((".json", json.dumps(VALID_MANIFEST).encode("utf-16")), False),
    "duplicate keys yaml": ((".yaml", b"name: t\n" + as_yaml(VALID_MANIFEST)[1]), False),
    "duplicate keys json": ((".json", b'{"name": "u", ' + _json(VALID_MANIFEST)[1][1:]), False),
    "deep graders 100": (deep_grader(100), True),
    "deep graders 400": (deep_grader(400), False),
    "deep graders 800": (deep_grader(800), False),
    "deep graders 990": (deep_grader(990), False),
    "deep graders 5000 yaml": (
        (".yaml", b"graders: " + b"[" * 5000 + b"]" * 5000 + b"\n" + as_yaml(VALID_MANIFEST)[1]),
        False,
    ),
    "integer id": (as_yaml(_case(id=5)), False),
    "boolean id": (as_yaml(_case(id=True)), False),
    "list id": (as_yaml(_case(id=["a"])), False),
    "null id": (as_yaml(_case(id=None)), False),
    "negative trials": (as_yaml(_case(trials=-1)), False),
    "zero trials": (as_yaml(_manifest(trials=0)), False),
    "boolean trials": (as_yaml(_manifest(trials=True)), False),
    "float trials": (as_yaml(_case(trials=1.5)), False),
    "integral float trials": (as_yaml(_case(trials=2.0)), True),
    "huge trials": (as_yaml(_case(trials=10**40)), False),
    "nan": ((".json", _json(_manifest(trials=1))[1].replace(b"1}", b"NaN}")), False),
    "yaml inf": (as_yaml(_case(graders=[{"type": "json_field", "expected": float("inf")}])), False),
    "nulls everywhere": (
        as_yaml({k: None for k in ("schema", "name", "seats", "cases", "trials", "graders")}),
        False,
    ),
    "null case fields": (
        as_yaml(_manifest(cases=[{"id": None, "prompt": None, "trials": None, "graders": None}])),
        False,
    ),
    "unicode names": (
        as_yaml(_manifest(cases=[{"id": "ケース-✓-\u200b-𝔘", "prompt": "\u202e\u0301ß"}])),
        True,
    ),
    "empty file": ((".yaml", b""), False),
    "top-level list": ((".yaml", b"- 1\n- 2\n"), False),
    "python tag": ((".yaml", b"!!python/object/apply:os.system ['true']\n"), False),
    "binary tag": (as_yaml(_case(prompt=b"\x00\x01")), False),
    "prompt file is a folder": (as_yaml(_manifest(cases=[{"id": "a", "prompt_file": "d"}])), False),
    "unknown seat": (as_yaml(_manifest(seats=["ghost"])), False),
    "yaml aliases": ((".yaml", SHARED_GRADERS), True),
    "yaml alias bomb": (alias_bomb(9), False),
}


@pytest.mark.parametrize("name", list(HOSTILE_INPUTS))
def test_hostile_manifest_in_process(name: str, tmp_path: Path) -> None:
    document, loads = HOSTILE_INPUTS[name]
    refusal = refusal_in_process(tmp_path, document, as_yaml(VALID_ROSTER))
    assert (refusal is None) == loads, refusal


@pytest.mark.parametrize(
    "name",
    [
        "huge prompt",
        "non-utf8 bytes",
        "duplicate keys json",
        "deep graders 800",
        "deep graders 5000 yaml",
        "integer id",
        "boolean trials",
        "nan",
        "nulls everywhere",
        "unicode names",
        "python tag",
    ],
)
def test_hostile_manifest_through_the_cli_and_doit(name: str, project: Project) -> None:
    (suffix, data), loads = HOSTILE_INPUTS[name]
    project.manifest = project.root / f"manifest{suffix}"
    project.manifest.write_bytes(data)
    checked = project.brigade("validate", str(project.manifest), "--roster", str(project.roster))
    assert "Traceback" not in checked.stderr
    if loads:
        assert checked.returncode == 0, checked.stderr
        return
    assert checked.returncode == 2
    assert one_line(checked.stderr).startswith("brigade: ")
    done = project.doit()
    assert done.returncode == 2
    assert one_line(done.stderr).startswith("brigade: ")
    assert not project.out.exists()


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(manifest=document_bytes(MANIFEST))
def test_random_manifests_through_the_cli_agree_with_the_library(
    manifest: tuple[str, bytes], project: Project
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal = refusal_in_process(Path(folder), manifest, as_yaml(VALID_ROSTER))
        path = Path(folder) / f"manifest{manifest[0]}"
        roster = str(Path(folder) / "roster.yaml")
        checked = project.brigade("validate", str(path), "--roster", roster)
    if refusal is None:
        assert checked.returncode == 0, checked.stderr
    else:
        assert checked.returncode == 2
        line = one_line(checked.stderr)
        # how deep the parser gets before Python's recursion limit depends on the stack
        deep = "nested too deeply" in refusal and "nested too deeply" in line
        assert deep or line == f"brigade: {refusal}"


# ---------------------------------------------------------------------------------------
# 4: hostile paths
# ---------------------------------------------------------------------------------------


def suite_with_outside(project: Project) -> Path:
    """Put the manifest in root/suite/ and create root/outside/ with files worth reaching."""
    (project.root / "suite").mkdir()
    project.manifest = project.root / "suite" / "manifest.yaml"
    outside = project.root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (outside / "receipt.json").write_text('{"status": "completed"}\n')
    return outside


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "symlinked folder"])
def test_prompt_file_escaping_the_manifest_folder_is_refused(project: Project, how: str) -> None:
    outside = suite_with_outside(project)
    suite = project.manifest.parent
    (suite / "link.txt").symlink_to(outside / "secret.txt")
    (suite / "linked").symlink_to(outside)
    relative = {
        "dotdot": "../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "symlink": "link.txt",
        "symlinked folder": "linked/secret.txt",
    }[how]
    project.write_manifest([{"id": "a", "prompt_file": relative}])
    with pytest.raises(BrigadeError, match="outside the manifest's folder"):
        load_inputs(project.manifest, project.roster)
    checked = project.brigade("validate", str(project.manifest), "--roster", str(project.roster))
    assert checked.returncode == 2
    assert "outside the manifest's folder" in one_line(checked.stderr)
    done = project.doit()
    assert done.returncode == 2
    assert "outside the manifest's folder" in one_line(done.stderr)
    assert not project.out.exists()


def test_grader_paths_escaping_their_roots_are_grader_errors(project: Project) -> None:
    outside = suite_with_outside(project)
    suite = project.manifest.parent
    (suite / "inside.txt").write_text("secret\n")
    (suite / "link.txt").symlink_to(outside / "secret.txt")
    (suite / "linked").symlink_to(outside)
    ws = project.workspace
    (ws / "present.txt").write_text("here\n")
    (ws / "receipt.json").write_text('{"status": "completed"}\n')
    (ws / "ws-link").symlink_to(outside / "secret.txt")
    (ws / "ws-receipt").symlink_to(outside / "receipt.json")
    (ws / "ws-linked").symlink_to(outside)
    escaping = {
        "expected_file": [
            "../outside/secret.txt",
            str(outside / "secret.txt"),
            "link.txt",
            "linked/secret.txt",
        ],
        "file_exists": [
            "../outside/secret.txt",
            str(outside / "secret.txt"),
            "ws-link",
            "ws-linked/secret.txt",
        ],
        "verify_receipt": [
            "../outside/receipt.json",
            str(outside / "receipt.json"),
            "ws-receipt",
            "ws-linked/receipt.json",
        ],
    }
    inside = {
        "expected_file": "inside.txt",
        "file_exists": "present.txt",
        "verify_receipt": "receipt.json",
    }
    cases = []
    for kind, paths in escaping.items():
        for index, path in enumerate(paths):
            grader = {"type": kind, "path": path}
            cases.append({"id": f"{kind}-{index}", "prompt": "answer: secret", "graders": [grader]})
        grader = {"type": kind, "path": inside[kind]}
        cases.append({"id": f"{kind}-inside", "prompt": "answer: secret", "graders": [grader]})
    project.write_manifest(cases)
    before = tree_snapshot(outside)
    done = project.doit()
    assert done.returncode == 3, done.stderr
    for coord, receipt in project.receipts().items():
        if coord.split(":")[0].endswith("-inside"):
            assert receipt["state"] == "accepted", (coord, receipt["graders"])
            continue
        assert receipt["state"] == "grader_error", coord
        detail = receipt["graders"][0]["detail"]
        assert "outside its folder" in detail or "must be a relative path" in detail, detail
    assert tree_snapshot(outside) == before


def test_output_dir_that_is_a_symlink_is_used_in_place(project: Project) -> None:
    real = project.root / "real-out"
    real.mkdir()
    project.out = project.root / "out-link"
    project.out.symlink_to(real)
    project.write_manifest([{"id": "a", "prompt": ANSWER_ID}, {"id": "b", "prompt": "answer: b"}])
    entries = set(os.listdir(project.root))
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert (real / "plan.json").exists() and (real / "summary.json").exists()
    assert set(os.listdir(project.root)) == entries | {"launches.log"}
    assert project.out.is_symlink()
    assert project.run().returncode == 0
    assert project.doit().returncode == 0
    assert len(launched(project)) == 2


@pytest.mark.parametrize("planted", ["running receipt", "finished receipt", "empty folder"])
@pytest.mark.parametrize("link", ["cell folder", "attempts folder"])
def test_symlinked_cell_folders_are_never_written_through(
    project: Project, planted: str, link: str
) -> None:
    project.write_manifest(
        [{"id": c, "prompt": ANSWER_ID, "graders": GRADERS["accept"]} for c in ("a", "b")]
    )
    assert project.doit().returncode == 0
    cell = project.cell_dir("a:agent:1")
    outside = project.root / "outside"
    target = outside / "planted"
    shutil.copytree(cell if link == "cell folder" else cell / "attempts", target)
    if planted == "empty folder":
        shutil.rmtree(target)
        target.mkdir()
    elif link == "cell folder":
        receipt = load_json(target / "cell.json")
        if planted == "running receipt":
            receipt["state"] = "running"
        (target / "cell.json").write_text(json.dumps(receipt))
    if link == "cell folder":
        shutil.rmtree(cell)
        cell.symlink_to(target)
    else:
        receipt = load_json(cell / "cell.json")
        if planted != "finished receipt":
            (cell / "cell.json").write_text(json.dumps({**receipt, "state": "running"}))
        shutil.rmtree(cell / "attempts")
        (cell / "attempts").symlink_to(target)
    before = tree_snapshot(outside)
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert tree_snapshot(outside) == before
    assert project.summary()["counts"]["accepted"] == 2
    receipt = project.receipt("a:agent:1")
    if link == "attempts folder" and planted == "finished receipt":
        assert len(launched(project)) == 2  # a finished receipt stands; nothing was written
        return
    assert len(launched(project)) == 3  # the linked cell ran again, in a real folder
    assert not cell.is_symlink() and not (cell / "attempts").is_symlink()
    final = store.run_dir(project.out, receipt["cell_id"], receipt["attempt"]) / "final.txt"
    assert final.read_text() == f"{receipt['cell_id']}\n"


# ---------------------------------------------------------------------------------------
# 5: tampering
# ---------------------------------------------------------------------------------------


def test_edited_final_txt_is_refused_by_regrade_and_by_doit(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "good", "prompt": ANSWER_ID, "graders": GRADERS["accept"]},
            {"id": "broken", "prompt": ANSWER_ID, "graders": GRADERS["grader_error"]},
        ]
    )
    assert project.doit().returncode == 3
    receipts = {p: p.read_bytes() for p in project.out.glob("cells/**/cell.json")}
    summary = (project.out / "summary.json").read_bytes()
    for coordinate in ("good:agent:1", "broken:agent:1"):
        receipt = project.receipt(coordinate)
        final = store.run_dir(project.out, receipt["cell_id"], receipt["attempt"]) / "final.txt"
        original = final.read_bytes()
        final.write_text("forged\n")
        regraded = project.brigade("regrade", str(project.out))
        assert regraded.returncode == 2
        assert "output digest mismatch" in one_line(regraded.stderr)
        resumed = project.doit()
        assert resumed.returncode == 2
        assert any("output digest mismatch" in line for line in resumed.stderr.splitlines())
        assert "Traceback" not in resumed.stderr
        assert {p: p.read_bytes() for p in project.out.glob("cells/**/cell.json")} == receipts
        final.write_bytes(original)
    assert (project.out / "summary.json").read_bytes() == summary
    assert len(launched(project)) == 2


def test_receipt_naming_another_cell_is_never_trusted(project: Project) -> None:
    project.write_manifest(
        [{"id": c, "prompt": ANSWER_ID, "graders": GRADERS["accept"]} for c in ("a", "b")]
    )
    assert project.doit().returncode == 0
    a_receipt = project.cell_dir("a:agent:1") / "cell.json"
    original = a_receipt.read_bytes()
    b_dir = project.cell_dir("b:agent:1")
    shutil.copyfile(a_receipt, b_dir / "cell.json")
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert [coord for coord, _ in launched(project)] == ["a:agent:1", "b:agent:1", "b:agent:1"]
    receipt = project.receipt("b:agent:1")
    assert (receipt["cell_id"], receipt["state"], receipt["attempt"]) == (
        b_dir.name,
        "accepted",
        2,
    )
    assert a_receipt.read_bytes() == original
    assert project.summary()["counts"]["accepted"] == 2


def test_plan_json_of_another_manifest_makes_no_bogus_stale_cells(project: Project) -> None:
    mine = [{"id": c, "prompt": f"answer: {c}"} for c in ("a", "b", "c")]
    theirs = [{"id": "a", "prompt": "answer: other"}, {"id": "d", "prompt": "answer: d"}]
    other = project.root / "other-out"
    project.write_manifest(theirs)
    project.out, first = other, project.out
    assert project.doit().returncode == 0
    project.out = first
    project.write_manifest(mine)
    assert project.doit().returncode == 0
    shutil.copyfile(other / "plan.json", project.out / "plan.json")
    for _ in range(2):
        done = project.doit()
        assert done.returncode == 0, done.stderr
        assert "stale" not in done.stderr
        plan = project.plan()
        assert [c["coordinate"] for c in plan["cells"]] == ["a:agent:1", "b:agent:1", "c:agent:1"]
        assert plan["stale_cells"] == []
        summary = project.summary()
        assert summary["counts"]["unscored"] == 3 and summary["total_cells"] == 3
        assert set(summary["stale_counts"].values()) == {0}
    assert len(launched(project)) == 5


# ---------------------------------------------------------------------------------------
# 6: full or read-only disks
# ---------------------------------------------------------------------------------------


def test_output_path_that_is_a_file_is_refused(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    project.out = project.root / "out-file"
    project.out.write_text("not a folder\n")
    for result in (project.doit(), project.run()):
        assert result.returncode == 2
        assert "not a folder" in one_line(result.stderr)
    assert project.out.read_text() == "not a folder\n"
    assert not project.log.exists()


@pytest.mark.parametrize("where", ["under a file", "under /proc"])
def test_output_dir_that_cannot_be_created_is_refused(project: Project, where: str) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    (project.root / "file").write_text("x")
    project.out = {
        "under a file": project.root / "file" / "out",
        "under /proc": Path("/proc/self/brigade-out"),
    }[where]
    for result in (project.doit(), project.run()):
        assert result.returncode == 2, result.stderr
        assert str(project.out) in one_line(result.stderr)
    assert not project.log.exists()


def namespace_mounts_work(folder: Path) -> bool:
    """Whether this process may make a private mount namespace with a tmpfs (root, unshare)."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = folder / "probe"
    probe.mkdir(exist_ok=True)
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {probe}"],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


def doit_shell(project: Project) -> str:
    """The doit command line for a shell script."""
    argv = [sys.executable, "-m", "doit", "-f", str(DODO), *project.variables()]
    return " ".join(f"'{arg}'" for arg in argv)


def receipts_are_whole(out: Path) -> None:
    """No truncated or invalid document and no temp file anywhere under out."""
    assert temp_files(out) == set()
    for path in out.rglob("*.json"):
        if path.name == "cell.json":
            assert_valid(path, "brigade.eval_cell.v1")
        elif path.parent == out and path.name in ("plan.json", "summary.json"):
            load_json(path)


def test_read_only_output_dir_is_refused_cleanly(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    assert project.doit().returncode == 0
    project.write_manifest([{"id": "a", "prompt": "answer: a"}, {"id": "b", "prompt": "answer: b"}])

    def records() -> dict[str, tuple[str, bytes]]:
        # the lock and doit's DB are existing files: chmod on their folder does not stop them
        snapshot = tree_snapshot(project.out)
        return {k: v for k, v in snapshot.items() if k not in (".brigade.lock", ".doit.db")}

    before = records()
    if os.geteuid() != 0:
        mode = project.out.stat().st_mode
        for folder in (project.out, project.out / "cells"):
            folder.chmod(0o555)
        try:
            results = [project.doit(), project.run()]
        finally:
            for folder in (project.out, project.out / "cells"):
                folder.chmod(mode)
    else:
        if not namespace_mounts_work(project.root):
            pytest.skip("running as root without mount namespaces: cannot make a read-only dir")
        script = (
            f"mount --bind '{project.out}' '{project.out}' && "
            f"mount -o remount,bind,ro '{project.out}' && {doit_shell(project)}"
        )
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            capture_output=True,
            text=True,
            env=project.env(),
            timeout=120,
        )
        results = [done]
    for result in results:
        assert result.returncode == 2, result.stderr
        line = one_line(without_seat_warnings(result.stderr))
        assert "Read-only file system" in line or "Permission denied" in line, line
    assert records() == before
    assert len(launched(project)) == 1


@pytest.mark.parametrize("spare_kib", [0, 8, 16, 24, 32, 48])
def test_full_disk_is_refused_cleanly(project: Project, spare_kib: int) -> None:
    """An output dir on a tiny tmpfs, filled up but for `spare_kib`, so writes fail at
    different points of the run (lock, plan, seat files, receipts, summary)."""
    if not namespace_mounts_work(project.root):
        pytest.skip("needs a private mount namespace (root with unshare) for a tiny tmpfs")
    project.write_manifest([{"id": "a", "prompt": "answer: a"}])
    assert project.doit().returncode == 0
    project.write_manifest([{"id": "a", "prompt": "answer: a"}, {"id": "b", "prompt": "answer: b"}])
    stage = project.root / "stage"
    result = project.root / "result"
    recovered = project.root / "recovered"
    out = project.out
    script = "; ".join(
        [
            f"cp -a '{out}' '{stage}'",
            f"mount -t tmpfs -o size=256k tmpfs '{out}'",
            f"cp -a '{stage}/.' '{out}/'",
            f"head -c {spare_kib * 1024} /dev/zero > '{out}/spare'",
            f"cat /dev/zero > '{out}/filler' 2>/dev/null",
            f"rm '{out}/spare'",
            doit_shell(project),
            "code=$?",
            f"cp -a '{out}' '{result}'",
            f"rm -f '{out}/filler'",
            f"{doit_shell(project)} 2> '{project.root}/recovery.err'",
            f"echo $? > '{project.root}/recovery.code'",
            f"cp -a '{out}' '{recovered}'",
            "exit $code",
        ]
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=project.env(),
        timeout=120,
    )
    assert "Traceback" not in done.stderr
    receipts_are_whole(result)
    a_cell = next(p for p in (stage / "cells").iterdir())
    assert tree_snapshot(result / "cells" / a_cell.name) == tree_snapshot(a_cell)
    if done.returncode != 0:  # else it all fitted
        assert done.returncode == 2, done.stderr
        assert any("No space left on device" in line for line in done.stderr.splitlines())
        states = [load_json(p)["state"] for p in result.glob("cells/*/cell.json")]
        assert sorted(states) in (["unscored"], ["running", "unscored"], ["unscored", "unscored"])
    # with space again, a resume finishes the job
    assert (project.root / "recovery.code").read_text().strip() == "0"
    assert load_json(recovered / "summary.json")["counts"]["unscored"] == 2
    receipts_are_whole(recovered)


def test_atomic_write_failing_midway_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk filling up mid-write: the write raises, the old file and nothing else remains."""
    target = tmp_path / "cell.json"
    target.write_bytes(b'{"old": true}\n')
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, data: bytes) -> int:
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode)))
    with pytest.raises(OSError) as raised:
        store.atomic_write_bytes(target, b'{"new": true, "padding": "' + b"x" * 4096 + b'"}\n')
    assert raised.value.errno == errno.ENOSPC
    assert target.read_bytes() == b'{"old": true}\n'
    assert sorted(os.listdir(tmp_path)) == ["cell.json"]


# ---------------------------------------------------------------------------------------
# 7: concurrency
# ---------------------------------------------------------------------------------------


def test_second_run_on_one_output_dir_is_refused_and_writes_nothing(
    project: Project, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    project.write_manifest([{"id": "b", "prompt": "x"}])
    assert project.doit().returncode == 0  # doit's DB exists: a refused run must not touch it
    project.write_manifest(
        [{"id": "b", "prompt": "x"}, {"id": "slow", "prompt": f"block: {release}\n{ANSWER_ID}"}]
    )
    first = start_brigade_run(project)
    try:
        wait_for(lambda: len(launched(project)) == 2, what="first run's seat started")
        before = tree_snapshot(project.out)
        db_written = (project.out / ".doit.db").stat().st_mtime_ns
        regrade = project.brigade("regrade", str(project.out))
        for second in (project.doit(), project.run(), project.doit("-n", "4"), regrade):
            assert second.returncode == 2
            assert f"pid {first.pid}" in one_line(second.stderr)
        assert tree_snapshot(project.out) == before
        assert (project.out / ".doit.db").stat().st_mtime_ns == db_written
    finally:
        release.touch()
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert len(launched(project)) == 2
