"""The dask executor against a real scheduler and real workers on localhost (no mocks of dask).

Seats are the fake agent (tests/agents/fake_agent.py); the workers inherit this
test's environment, so every launch on a worker appends to the cluster's log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from agents.fake_cli import install
from conftest import FAKE_CLI, Project, brigade_command, cli_python, git

from brigade import fs
from brigade.run import sandbox

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

EXIT_STATUS = [{"type": "exit_status"}]
MIXED = [
    {"id": "right", "prompt": "answer: x", "graders": [{"type": "exact_output", "expected": "x"}]},
    {"id": "wrong", "prompt": "answer: y", "graders": [{"type": "exact_output", "expected": "x"}]},
    {"id": "crash", "prompt": "exit: 3"},
    {"id": "slow", "prompt": "sleep: 1\nanswer: x", "graders": EXIT_STATUS},
    {"id": "provider", "prompt": "tempfail: HTTP 503"},
    {"id": "dropped", "prompt": "tempfail: connection reset by peer"},
    {"id": "silent", "prompt": "answer: z"},
]
# what may differ between two runs of the same seat
VOLATILE = {"started_at", "finished_at", "duration_seconds", "graded_at", "run_dir"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


class Cluster:
    """A `dask scheduler` and `dask worker`s on localhost, as subprocesses."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.log = root / "launches.log"  # the fake agent's launches on the workers
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        environment = {**os.environ, "FAKE_AGENT_LOG": str(self.log), **env}
        with open(self.root / f"{name}-{len(self.processes)}.log", "wb") as output:
            process = subprocess.Popen(
                # a seat's `{python}` is the worker's: the one the brigade CLI runs on, so
                # a run on the cluster records what a local run records
                [cli_python(), "-m", "dask", *args],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def start_scheduler(self) -> None:
        self._spawn(
            "scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
            "--no-dashboard",
        )  # fmt: skip

    def start_worker(self, resources: str = "exec=8", **env: str) -> subprocess.Popen[bytes]:
        worker = self._spawn(
            "worker", "worker", self.address, "--host", "127.0.0.1", "--resources", resources,
            "--nworkers", "1", "--nthreads", "8", "--no-dashboard",
            "--local-directory", str(self.root / "scratch"), **env,
        )  # fmt: skip
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, count: int) -> None:
        with distributed.Client(self.address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(count, timeout=60)
            wait_for(lambda: len(client.scheduler_info()["workers"]) == count)

    def kill_tree(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL a worker and every process under it (nanny, worker, its seats)."""
        with suppress(psutil.NoSuchProcess):
            root = psutil.Process(process.pid)
            for member in [root, *root.children(recursive=True)]:
                with suppress(psutil.NoSuchProcess):
                    member.kill()
        process.wait(timeout=30)
        if process in self.workers:
            self.workers.remove(process)

    def owner(self, pid: int) -> subprocess.Popen[bytes]:
        """The worker a process runs under."""
        ancestors = {parent.pid for parent in psutil.Process(pid).parents()}
        return next(w for w in self.workers if w.pid in ancestors)

    def launches(self) -> list[tuple[str, int]]:
        """(coordinate, pid) of every seat the workers launched so far."""
        if not self.log.exists():
            return []
        return [
            (coordinate, int(pid))
            for coordinate, pid in (line.split() for line in self.log.read_text().splitlines())
        ]

    def logs(self) -> str:
        """The end of every scheduler and worker log (for a failing assertion's message)."""
        return "\n".join(
            f"--- {path.name}\n" + "\n".join(path.read_text("utf-8", "replace").splitlines()[-15:])
            for path in sorted(self.root.glob("*.log"))
            if path != self.log
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            self.kill_tree(process)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        running.start_scheduler()
        running.start_worker()
        running.start_worker()
        running.wait_for_workers(2)
        yield running
    finally:
        running.stop()


def dask_run(project: Project, cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`brigade run --executor dask` against the cluster."""
    return project.run("--executor", "dask", "--scheduler", cluster.address, *args)


def run_popen(project: Project, cluster: Cluster, *args: str) -> subprocess.Popen[str]:
    argv = [
        *brigade_command(),
        *project.run_args("--executor", "dask", "--scheduler", cluster.address, *args),
    ]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=project.env()
    )


def outcome(project: Project) -> dict[str, Any]:
    """What a run decided: each cell's state, reason, exit code and attempt; the summary."""
    summary = project.summary()
    return {
        "cells": {
            coordinate: (r["state"], r.get("failure_reason"), r["exit_code"], r["attempt"])
            for coordinate, r in project.receipts().items()
        },
        "counts": summary["counts"],
        "measurement_failures": summary["measurement_failures"],
        "exit_code": summary["exit_code"],
    }


def faults(project: Project) -> dict[str, str]:
    """Each cell's state and failure detail (for a failing assertion's message)."""
    return {
        coordinate: f"{r['state']}: {r.get('failure_detail')}"
        for coordinate, r in project.receipts().items()
    }


def attempt_files(project: Project, coordinate: str, attempt: int = 1) -> dict[str, Any]:
    """An attempt folder's files, JSON parsed and without what differs from run to run."""
    folder = project.cell_dir(coordinate) / "attempts" / f"attempt-{attempt:03d}"
    files: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(folder))
        if path.suffix == ".json":
            document = json.loads(path.read_text().replace(str(project.root), "<project>"))
            for key in VOLATILE:
                document.pop(key, None)
            for grade in document.get("graders", []):
                grade.pop("duration_seconds", None)
            if name == "run/seat_run.json":
                document.pop("files")  # digests of documents with volatile fields
            files[name] = document
        else:
            files[name] = path.read_bytes()
    return files


def verdict(stderr: str) -> str:
    """The final line up to its exit code (the elapsed time and the report's path follow)."""
    line = stderr.strip().splitlines()[-1]
    return line[: line.index(")", line.index("(exit ")) + 1]


def test_a_mixed_battery_gives_the_same_results_as_local_through_doit_and_brigade_run(
    cluster: Cluster, tmp_path: Path
) -> None:
    projects = {name: Project(tmp_path / name) for name in ("local", "doit", "cli")}
    for project in projects.values():
        project.write_manifest(MIXED, trials=2)
    local = projects["local"].run()
    assert local.returncode == 3, local.stderr
    before = len(cluster.launches())
    via_doit = projects["doit"].doit("executor=dask", f"scheduler={cluster.address}")
    via_cli = dask_run(projects["cli"], cluster)
    assert (via_doit.returncode, via_cli.returncode) == (3, 3), via_doit.stderr + via_cli.stderr
    assert len(cluster.launches()) - before == 2 * len(MIXED) * 2
    expected = outcome(projects["local"])
    assert expected["cells"]["provider:agent:1"][:2] == ("adapter_error", "provider_5xx")
    assert expected["cells"]["dropped:agent:2"][:2] == ("adapter_error", "transport_drop")
    assert outcome(projects["doit"]) == expected, (faults(projects["doit"]), cluster.logs())
    assert outcome(projects["cli"]) == expected, (faults(projects["cli"]), cluster.logs())
    for coordinate in projects["local"].receipts():
        assert attempt_files(projects["cli"], coordinate) == attempt_files(
            projects["local"], coordinate
        )
    last_line = verdict(local.stderr)
    assert verdict(via_doit.stderr) == last_line
    assert verdict(via_cli.stderr) == last_line

    # a resume is a no-op: nothing submitted, nothing launched, the same verdict
    launched = len(cluster.launches())
    receipts = projects["doit"].receipts()
    again = projects["doit"].doit("executor=dask", f"scheduler={cluster.address}")
    assert again.returncode == 3, again.stderr
    again_cli = dask_run(projects["cli"], cluster)
    assert again_cli.returncode == 3, again_cli.stderr
    # with nothing to run the cluster is not even contacted
    unused = projects["cli"].run("--executor", "dask", "--scheduler", "tcp://127.0.0.1:9")
    assert unused.returncode == 3, unused.stderr
    assert len(cluster.launches()) == launched
    assert projects["doit"].receipts() == receipts


def test_a_worker_killed_mid_run_is_a_transport_drop_and_retried_as_a_new_attempt(
    cluster: Cluster, project: Project, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    project.write_manifest(
        [
            {"id": "long", "prompt": f"block: {release}\nanswer: done", "graders": EXIT_STATUS},
            {"id": "quick", "prompt": "answer: x", "graders": EXIT_STATUS},
        ]
    )
    before = len(cluster.launches())
    running = run_popen(project, cluster)
    try:
        pid = wait_for(
            lambda: next((p for c, p in cluster.launches()[before:] if c == "long:agent:1"), None)
        )
        wait_for(
            lambda: (
                project.receipts().get("quick:agent:1", {}).get("state") not in (None, "running")
            )
        )
        assert project.receipt("quick:agent:1")["state"] == "accepted", faults(project)
        cluster.kill_tree(cluster.owner(pid))
        _, err = running.communicate(timeout=60)
    finally:
        if running.poll() is None:
            running.kill()
            print(cluster.logs())
    assert running.returncode == 3, err
    lost = project.receipt("long:agent:1")
    assert (lost["state"], lost["failure_reason"], lost["attempt"]) == (
        "adapter_error",
        "transport_drop",
        1,
    )
    assert lost["failure_detail"].startswith("dask: ")
    assert lost["fault"] == {"kind": "cluster_lost", "message": lost["failure_detail"]}
    # the task Dask restarted on the other worker did not launch the seat again
    assert [c for c, _ in cluster.launches()[before:]].count("long:agent:1") == 1

    cluster.start_worker()
    cluster.wait_for_workers(2)
    release.touch()
    retried = dask_run(project, cluster, "--retry-transient")
    assert retried.returncode == 0, retried.stderr
    assert project.receipt("long:agent:1")["state"] == "accepted"
    assert project.receipt("long:agent:1")["attempt"] == 2
    assert project.attempts("long:agent:1") == ["attempt-001", "attempt-002"]
    assert project.receipt("quick:agent:1")["attempt"] == 1


def test_an_unreachable_scheduler_exits_2_on_one_line_and_writes_nothing(
    project: Project,
) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: x"}])
    address = f"tcp://127.0.0.1:{free_port()}"
    quick = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"}
    done = project.run("--executor", "dask", "--scheduler", address, **quick)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and address in done.stderr, done.stderr
    assert "cannot connect to the dask scheduler" in done.stderr
    assert not (project.out / "plan.json").exists()
    assert not (project.out / "cells").exists()
    # the roster's executor works for plain doit; the command line overrides it
    project.write_roster(executor={"kind": "dask", "scheduler": address})
    via_doit = project.doit(**quick)
    assert via_doit.returncode == 2
    assert via_doit.stderr.count("\n") == 1 and address in via_doit.stderr, via_doit.stderr
    assert not (project.out / "plan.json").exists()
    local = project.run("--executor", "local")
    assert local.returncode == 0, local.stderr
    assert project.states() == {"a:agent:1": "unscored"}


def test_executor_settings_are_checked_before_anything_runs(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: x"}])
    no_address = project.run("--executor", "dask")
    assert no_address.returncode == 2 and "needs a scheduler address" in no_address.stderr
    stray = project.run("--scheduler", "tcp://127.0.0.1:9")
    assert stray.returncode == 2 and "add --executor dask" in stray.stderr
    bad = project.doit("executor=spark")
    assert bad.returncode == 2 and "use local or dask" in bad.stderr
    # the roster's executor is not part of any cell's identity
    plain = json.loads(project.brigade("plan", str(project.manifest)).stdout)["cells"]
    project.write_roster(executor={"kind": "dask", "scheduler": "tcp://127.0.0.1:9"})
    with_executor = json.loads(project.brigade("plan", str(project.manifest)).stdout)["cells"]
    assert [c["cell_id"] for c in with_executor] == [c["cell_id"] for c in plain]
    project.write_roster(executor={"kind": "dask", "scheduler": "localhost"})
    refused = project.run()
    assert refused.returncode == 2 and "executor.scheduler" in refused.stderr, refused.stderr
    assert project.launches() == 0


def own_world_battery(project: Project) -> None:
    """Writable cases over repositories of their own, two trials each: `a` at its first
    commit, `b` with a setup whose product the graders check, `broken` whose setup fails."""
    for name in ("repo-a", "repo-b"):
        repo = project.root / name
        repo.mkdir()
        git(repo, "init", "-q")
        for version in ("1", "2"):
            (repo / "version.txt").write_text(f"{name} {version}\n")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", version)
    fixed = [{"type": "command", "command": "grep -q fixed fix.txt"}]
    project.write_manifest(
        [
            {
                "id": "a",
                "prompt": "write: fix.txt=fixed\nanswer: done",
                "workspace": {"repo": "repo-a", "commit": "HEAD~1"},
                "graders": [
                    *fixed,
                    {"type": "command", "command": "grep -qx 'repo-a 1' version.txt"},
                ],
            },
            {
                "id": "b",
                "prompt": "write: fix.txt=fixed\nanswer: done",
                "workspace": {"repo": "repo-b"},
                "setup": ["echo built > built.txt"],
                "graders": [*fixed, {"type": "command", "command": "grep -qx built built.txt"}],
            },
            {
                "id": "broken",
                "prompt": "answer: never",
                "workspace": {"repo": "repo-b"},
                "setup": ["echo cannot install >&2; exit 4"],
            },
        ],
        trials=2,
        execution={"mode": "writable-worktree"},
    )


def worker_copies(cluster: Cluster) -> list[str]:
    """The copies of cases' workspaces the workers made (one name per worker and bundle)."""
    return sorted(path.name for path in cluster.root.glob("scratch/**/brigade-workspaces/*"))


def test_cases_with_their_own_workspace_run_on_workers_from_the_built_tree(
    cluster: Cluster, tmp_path: Path
) -> None:
    projects = {name: Project(tmp_path / name) for name in ("local", "dask")}
    for project in projects.values():
        own_world_battery(project)
    local = projects["local"].run()
    before = len(cluster.launches())
    # plain doit over the cluster (the no-op below is `brigade run`'s)
    remote = projects["dask"].doit("executor=dask", f"scheduler={cluster.address}")
    assert (local.returncode, remote.returncode) == (3, 3), local.stderr + remote.stderr
    project = projects["dask"]
    assert outcome(project) == outcome(projects["local"]), (faults(project), cluster.logs())
    assert project.states() == {
        "a:agent:1": "accepted",
        "a:agent:2": "accepted",
        "b:agent:1": "accepted",
        "b:agent:2": "accepted",
        "broken:agent:1": "adapter_error",
        "broken:agent:2": "adapter_error",
    }
    # the seats ran on the workers; the failed setup's cells launched nothing
    assert sorted(c for c, _ in cluster.launches()[before:]) == [
        "a:agent:1",
        "a:agent:2",
        "b:agent:1",
        "b:agent:2",
    ]
    broken = project.receipt("broken:agent:1")
    assert broken["fault"]["kind"] == "setup_failed"
    log = broken["failure_detail"].split("(log: ")[1].rstrip(")")
    assert "cannot install" in (project.out / log).read_text()
    # each setup ran once, on the coordinator; each built tree reached the workers as one
    # bundle, of which each worker made one copy at most, and nothing half-made is left
    assert len(list((project.out / "workspaces").iterdir())) == 3
    copies = worker_copies(cluster)
    assert 2 <= len(copies) <= 4, copies
    assert len({name.rsplit("-", 1)[0] for name in copies}) == 2, copies
    assert not any(name.startswith(".") for name in copies)
    # the changes came back: the patch of each run, its snapshot at the built commit
    heads = {
        json.loads(path.read_text())["head"]
        for path in (project.out / "workspaces").glob("*/workspace.json")
    }
    for coordinate in ("a:agent:1", "b:agent:2"):
        run = project.cell_dir(coordinate) / "attempts/attempt-001/run"
        assert "+fixed" in (run / "changes.patch").read_text()
        assert json.loads((run / "run.json").read_text())["workspace_snapshot"]["head"] in heads
    # a regrade re-applies each stored patch at its case's own built commit, here
    regraded = project.brigade("regrade", str(project.out))
    assert regraded.returncode == 3, regraded.stderr
    assert outcome(project) == outcome(projects["local"])
    # nothing changed: nothing is submitted, nothing launched, nothing bundled again
    launched = len(cluster.launches())
    again = dask_run(project, cluster)
    assert again.returncode == 3, again.stderr
    assert len(cluster.launches()) == launched
    assert worker_copies(cluster) == copies


def test_a_read_only_case_of_its_own_runs_on_a_worker_in_a_fresh_copy(
    cluster: Cluster, project: Project
) -> None:
    repo = project.root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "version.txt").write_text("r1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "r1")
    # each attempt sees its case's files as the setup left them, in a copy of its own
    project.write_manifest(
        [
            {
                "id": "look",
                "prompt": "list: .\nanswer: seen",
                "workspace": {"repo": "repo"},
                "setup": ["echo built > built.txt"],
                "graders": [
                    {"type": "regex_output", "pattern": "^\\.git built.txt version.txt$"},
                    {"type": "command", "command": "grep -qx built built.txt"},
                ],
            }
        ],
        trials=2,
    )
    done = dask_run(project, cluster)
    assert done.returncode == 0, (done.stderr, faults(project), cluster.logs())
    assert project.states() == {"look:agent:1": "accepted", "look:agent:2": "accepted"}
    for trial in (1, 2):
        run = project.cell_dir(f"look:agent:{trial}") / "attempts/attempt-001/run"
        assert json.loads((run / "run.json").read_text())["workspace_access"] == "read-only-copy"


def test_a_seat_whose_resource_no_worker_offers_exits_2_and_a_missing_commit_is_a_fault(
    cluster: Cluster, project: Project, tmp_path: Path
) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(project.workspace)], check=True)
    (project.workspace / "tracked.txt").write_text("one\n")
    subprocess.run([*git, "-C", str(project.workspace), "add", "."], check=True)
    subprocess.run([*git, "-C", str(project.workspace), "commit", "-qm", "one"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(project.workspace), str(clone)], check=True)
    subprocess.run(
        [*git, "-C", str(project.workspace), "commit", "-q", "--allow-empty", "-m", "two"],
        check=True,
    )
    project.write_roster({"agent": {"cli": "ollama:tiny"}})
    project.write_manifest(
        [{"id": "a", "prompt": "answer: x"}], execution={"mode": "writable-worktree"}
    )
    refused = dask_run(project, cluster)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "seat 'agent' needs worker resource 'ollama'" in refused.stderr
    assert not (project.out / "cells").exists()

    # a worker whose own checkout lacks the coordinator's HEAD commit
    worker = cluster.start_worker("ollama=1", BRIGADE_WORKSPACE=str(clone))
    try:
        cluster.wait_for_workers(3)
        done = dask_run(project, cluster)
    finally:
        cluster.kill_tree(worker)
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("a:agent:1")
    assert (receipt["state"], receipt["fault"]["kind"]) == ("adapter_error", "worktree_failed")
    assert "failure_reason" not in receipt
    assert "is not in the git checkout at" in receipt["failure_detail"]
    assert str(clone) in receipt["failure_detail"]


def test_writable_worktree_runs_come_back_with_their_changes(
    cluster: Cluster, tmp_path: Path
) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    cases = [
        {
            "id": "edit",
            "prompt": "write: notes/new.txt=hello\ndelete: tracked.txt\nanswer: done",
            "graders": [
                {"type": "file_exists", "path": "notes/new.txt"},
                {"type": "diff_constraints", "allowed": ["^notes/"], "max_files": 1},
            ],
        },
        {"id": "look", "prompt": "answer: x", "graders": [{"type": "file_exists", "path": "x"}]},
    ]
    projects = {name: Project(tmp_path / name) for name in ("local", "dask")}
    for project in projects.values():
        subprocess.run(["git", "init", "-q", str(project.workspace)], check=True)
        (project.workspace / "tracked.txt").write_text("one\n")
        subprocess.run([*git, "-C", str(project.workspace), "add", "."], check=True)
        subprocess.run([*git, "-C", str(project.workspace), "commit", "-qm", "one"], check=True)
        project.write_manifest(cases, execution={"mode": "writable-worktree"})
    local = projects["local"].run()
    remote = dask_run(projects["dask"], cluster)
    assert (local.returncode, remote.returncode) == (1, 1), local.stderr + remote.stderr
    assert outcome(projects["dask"]) == outcome(projects["local"])
    assert projects["dask"].states() == {"edit:agent:1": "accepted", "look:agent:1": "rejected"}
    edit = attempt_files(projects["dask"], "edit:agent:1")
    assert edit["run/changes/notes/new.txt"] == b"hello\n"
    assert edit["run/run.json"]["changed_files"] == ["notes/new.txt"]
    assert edit["run/run.json"]["workspace_snapshot"]["deleted"] == ["tracked.txt"]
    assert (projects["dask"].workspace / "tracked.txt").exists()  # the checkout is untouched


def test_an_interrupted_run_cancels_its_seats_and_leaves_its_cells_running(
    cluster: Cluster, project: Project, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    project.write_manifest(
        [{"id": "held", "prompt": f"block: {release}\nanswer: x", "graders": EXIT_STATUS}],
        trials=3,
    )
    before = len(cluster.launches())
    running = run_popen(project, cluster)
    wait_for(lambda: len(cluster.launches()) - before == 3)
    pids = [pid for _, pid in cluster.launches()[before:]]
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 128 + signal.SIGTERM, err
    assert set(project.states().values()) == {"running"}
    # the workers stop the seats of the cancelled tasks
    wait_for(lambda: not any(psutil.pid_exists(pid) for pid in pids), timeout=30)
    release.touch()
    again = dask_run(project, cluster)
    assert again.returncode == 0, again.stderr
    assert {r["attempt"] for r in project.receipts().values()} == {2}
    assert set(project.states().values()) == {"accepted"}


def test_two_hundred_cells_in_flight_need_few_coordinator_threads(
    cluster: Cluster, project: Project
) -> None:
    project.write_manifest(
        [{"id": "nap", "prompt": "sleep: 0.5", "graders": EXIT_STATUS}], trials=200
    )
    before = len(cluster.launches())
    running = run_popen(project, cluster)
    most = 0
    while running.poll() is None:
        with suppress(OSError):
            status = Path(f"/proc/{running.pid}/status").read_text()
            line = next(x for x in status.splitlines() if x.startswith("Threads:"))
            most = max(most, int(line.split()[1]))
        time.sleep(0.05)
    _, err = running.communicate()
    assert running.returncode == 0, err
    assert len(cluster.launches()) - before == 200
    assert set(project.states().values()) == {"accepted"}
    assert 0 < most < 60


def test_a_worker_finds_its_own_workspace_and_roster_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brigade.core.specs import SeatSpec
    from brigade.run.cluster import localise, worker_workspace
    from brigade.run.seat import SeatJob

    coordinator, checkout = tmp_path / "coordinator", tmp_path / "checkout"
    coordinator.mkdir()
    checkout.mkdir()
    monkeypatch.delenv("BRIGADE_WORKSPACE", raising=False)
    assert worker_workspace(str(coordinator)) == (coordinator, "")
    path, problem = worker_workspace(str(tmp_path / "elsewhere"))
    assert path is None and "set BRIGADE_WORKSPACE" in problem
    monkeypatch.setenv("BRIGADE_WORKSPACE", str(checkout))
    assert worker_workspace(str(coordinator)) == (checkout, "")
    monkeypatch.setenv("BRIGADE_WORKSPACE", str(tmp_path / "missing"))
    assert worker_workspace(str(coordinator))[0] is None

    seat = SeatSpec(name="s", cli=FAKE_CLI, roster_dir=str(coordinator / "evals"))
    job = SeatJob("0" * 64, "a:s:1", 1, seat, "p", "read-only")
    assert localise(job, coordinator, checkout).seat.roster_dir == str(checkout / "evals")
    assert localise(job, coordinator, coordinator) is job
    outside = SeatJob(
        "0" * 64, "a:s:1", 1, SeatSpec(name="s", cli=FAKE_CLI, roster_dir="/r"), "p", "read-only"
    )
    assert localise(outside, coordinator, checkout).seat.roster_dir == "/r"


def test_a_lost_scheduler_is_a_transport_drop_not_a_crash(
    tmp_path_factory: pytest.TempPathFactory, project: Project, tmp_path: Path
) -> None:
    own = Cluster(tmp_path_factory.mktemp("lost"))
    release = tmp_path / "release"
    project.write_manifest([{"id": "held", "prompt": f"block: {release}", "graders": EXIT_STATUS}])
    try:
        own.start_scheduler()
        own.start_worker()
        own.wait_for_workers(1)
        running = run_popen(project, own)
        wait_for(own.launches)
        own.kill_tree(own.processes[0])  # the scheduler
        _, err = running.communicate(timeout=60)
    finally:
        release.touch()
        own.stop()
    assert running.returncode == 3, err
    # the read-only note, the cell's progress line and the final line: no tracebacks
    assert err.count("\n") == 3, err
    assert err.splitlines()[1].startswith("brigade: [1/1] held:agent:1 adapter_error ")
    receipt = project.receipt("held:agent:1")
    assert (receipt["state"], receipt["failure_reason"]) == ("adapter_error", "transport_drop")
    assert receipt["fault"]["kind"] == "cluster_lost"
    assert "connection" in receipt["failure_detail"]


def test_a_transcript_comes_back_from_the_worker(cluster: Cluster, tmp_path: Path) -> None:
    """A seat whose CLI prints what it did (a fake claude on the worker's PATH): the
    worker sends the run back and the coordinator keeps run/transcript.json, the same
    as a local run writes."""
    folder = tmp_path / "bin"
    folder.mkdir()
    install(folder, "claude")
    path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    cases = [
        {
            "id": "ok",
            "prompt": "say hi",
            "graders": [{"type": "exact_output", "expected": "All good."}],
        }
    ]
    projects = {name: Project(tmp_path / name) for name in ("local", "dask")}
    for project in projects.values():
        project.write_roster({"agent": {"cli": "claude"}})
        project.write_manifest(cases)
    local = projects["local"].run(PATH=path)
    worker = cluster.start_worker("claude=1", PATH=path)
    try:
        cluster.wait_for_workers(3)
        remote = dask_run(projects["dask"], cluster)
    finally:
        cluster.kill_tree(worker)
    assert (local.returncode, remote.returncode) == (0, 0), local.stderr + remote.stderr
    stored = attempt_files(projects["dask"], "ok:agent:1")
    assert (
        stored["run/transcript.json"]
        == attempt_files(projects["local"], "ok:agent:1")["run/transcript.json"]
    )
    kinds = [entry["kind"] for entry in stored["run/transcript.json"]["entries"]]
    assert "message" in kinds


def test_a_budget_stops_launching_on_the_cluster_too(cluster: Cluster, project: Project) -> None:
    # one run in flight at a time (no overall cap on a cluster), each reporting $0.02
    project.write_roster({"agent": {"cli": FAKE_CLI, "max_concurrency": 1}}, max_cost=0.03)
    usage = '{"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.02}'
    project.write_manifest([{"id": f"c{n}", "prompt": f"usage: {usage}"} for n in range(4)])
    done = dask_run(project, cluster)
    assert done.returncode == 3, (done.stderr, cluster.logs())
    assert project.states() == {"c0:agent:1": "unscored"}  # a second would pass the cap
    assert done.stderr.splitlines()[-1] == (
        "brigade: stopped launching: the budget of $0.0300 was reached: $0.0200 spent by 1 seat "
        "run of this run; the next would cost about $0.0200, past the cap; 3 cells not started"
    )


def test_a_bundle_is_sent_once_per_run_and_again_when_its_copy_was_lost(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's memo of sent workspaces, against a stand-in for the client's scatter
    (the real one is exercised end to end above): once per workspace, again when the
    cluster lost the only copy (a worker holding it died)."""
    from brigade.run import cluster as cluster_module
    from brigade.run import workspaces

    class Sent:
        status = "finished"

    sent: list[str] = []

    class Client:
        def scatter(self, data: dict[str, bytes], hash: bool) -> dict[str, Sent]:
            assert hash is False
            sent.extend(data)
            return {name: Sent() for name in data}

    def bundle(out: Path, world: Any, head: str) -> tuple[workspaces.Shipment, bytes]:
        return workspaces.Shipment("k" * 32, head, "sha256:" + "0" * 64), b"bundle"

    monkeypatch.setattr(workspaces, "bundle", bundle)
    executor = cluster_module.DaskExecutor("tcp://x:1", project.out, project.workspace, {}, True)
    executor.client = Client()

    class OwnCell:  # what _ship reads of a cell
        def world(self) -> dict[str, str]:
            return {"commit": "c" * 40}

    cell: Any = OwnCell()
    first, future = executor._ship(cell, "a" * 40)
    assert executor._ship(cell, "a" * 40) == (first, future)
    assert len(sent) == 1
    future.status = "lost"
    executor._ship(cell, "a" * 40)
    assert len(sent) == 2


# a seat that lists what its worker keeps beside its copy of its case's workspace (other
# cases' copies, data the worker spilled to disk) and in the worker's folder itself
NEIGHBOURS = """\
import os, subprocess, sys
sys.stdin.read()
common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                        capture_output=True, text=True).stdout.strip()
cache = os.path.dirname(os.path.dirname(common))
print(len(os.listdir(cache)), len(os.listdir(os.path.dirname(cache))))
"""


@pytest.mark.skipif(not sandbox.probe().ok, reason="no sandbox here")
def test_a_seat_on_a_worker_sees_its_own_copy_and_nothing_else_of_the_worker(
    project: Project,
) -> None:
    # one worker whose folder is outside /tmp (the sandbox's /tmp is private anyway)
    local = Path(tempfile.mkdtemp(prefix="brigade-test-worker-", dir="/var/tmp"))
    single = Cluster(project.root / "cluster")
    single.root.mkdir()
    try:
        single.start_scheduler()
        single._spawn(
            "worker", "worker", single.address, "--host", "127.0.0.1", "--resources", "exec=8",
            "--nworkers", "1", "--nthreads", "8", "--no-dashboard", "--local-directory",
            str(local),
        )  # fmt: skip
        single.wait_for_workers(1)
        for name in ("repo-a", "repo-b"):
            repo = project.root / name
            repo.mkdir()
            git(repo, "init", "-q")
            (repo / "version.txt").write_text(f"{name}\n")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", name)
        seat = project.root / "neighbours.py"
        seat.write_text(NEIGHBOURS)
        roster = {"agent": {"cli": f"exec:{sys.executable} {seat}"}}
        project.write_roster(roster, sandbox="required")
        cases = [{"id": n, "prompt": "look", "workspace": {"repo": f"repo-{n}"}} for n in "ab"]
        project.write_manifest(cases, trials=2, execution={"mode": "writable-worktree"})
        # the first case's copy is made before the second case's seats run
        first = project.run("--executor", "dask", "--scheduler", single.address, "--case", "a")
        assert first.returncode == 0, (first.stderr, single.logs())
        done = project.run("--executor", "dask", "--scheduler", single.address)
        assert done.returncode == 0, (done.stderr, faults(project), single.logs())
    finally:
        single.stop()
        shutil.rmtree(local, ignore_errors=True)
    for coordinate in ("b:agent:1", "b:agent:2"):
        run = project.cell_dir(coordinate) / "attempts/attempt-001/run"
        # its own copy alone in the cache; nothing of the worker's own folder
        assert (run / "final.txt").read_text().split() == ["1", "1"], coordinate


def test_a_run_folder_nested_past_any_path_length_is_packed(tmp_path: Path) -> None:
    """An unconfined seat reaches its scratch run folder on the worker: folders it nests
    there are skipped, the files brigade wrote go back."""
    from brigade.run import cluster

    rdir = tmp_path / "run"
    (rdir / "changes" / "src").mkdir(parents=True)
    (rdir / "stdout.log").write_text("out\n")
    (rdir / "changes" / "src" / "a.py").write_text("a\n")
    os.symlink("/etc/passwd", rdir / "link")
    here = os.open(rdir, os.O_RDONLY)
    for _ in range(2500):
        os.mkdir("d", dir_fd=here)
        inner = os.open("d", os.O_RDONLY, dir_fd=here)
        os.close(here)
        here = inner
    os.close(here)
    try:
        assert cluster._pack(rdir) == {"changes/src/a.py": b"a\n", "stdout.log": b"out\n"}
    finally:
        fs.remove(rdir)
