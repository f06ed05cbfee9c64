"""Shared fixtures: a throwaway project with a manifest, a roster of fake agents, and runners
for the real `doit` and `brigade` commands as subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from brigade.engine.session import Options, Session, open_session

REPO = Path(__file__).resolve().parents[1]
DODO = REPO / "dodo.py"
FAKE_AGENT = REPO / "tests" / "agents" / "fake_agent.py"
FAKE_CLI = f"exec:{{python}} {FAKE_AGENT}"


def cli_python() -> str:
    """The interpreter the installed `brigade` script runs on (its `#!` line), which
    `{python}` in a seat's command line names: it may be spelled otherwise than this
    process's (`python3` there, `python` here when pytest was started as `python -m`)."""
    script = Path(sys.executable).parent / "brigade"
    if script.exists():
        first = script.read_bytes().split(b"\n", 1)[0]
        if first.startswith(b"#!") and first[2:].split():
            return first[2:].split()[0].decode()
    return sys.executable


def brigade_command() -> list[str]:
    """The installed `brigade` script beside this interpreter (else -m brigade.front.cli)."""
    script = Path(sys.executable).parent / "brigade"
    return [str(script)] if script.exists() else [sys.executable, "-m", "brigade.front.cli"]


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll until `predicate()` holds (AssertionError at the deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"not reached in {timeout} s: {what or predicate}")


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z"


def git(cwd: Path, *args: str) -> str:
    """git with a fixed identity; its stdout."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    ).stdout


def git_workspace(project: Project) -> None:
    """Make the project's workspace a git checkout with one commit."""
    ws = project.workspace
    git(ws, "init", "-q")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('v1')\n")
    (ws / "README").write_text("readme\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "init")


class Project:
    """A manifest, a roster and an output directory in a temporary folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "workspace"
        self.workspace.mkdir(parents=True)
        self.out = root / "out"
        self.manifest = root / "manifest.yaml"
        self.roster = root / "roster.yaml"
        self.log = root / "launches.log"
        self.write_roster()

    # -- inputs ---------------------------------------------------------------

    def write_manifest(
        self,
        cases: list[dict[str, Any]],
        *,
        seats: tuple[str, ...] = ("agent",),
        trials: int = 1,
        **extra: Any,
    ) -> None:
        doc = {
            "schema": "brigade.eval_manifest.v1",
            "name": "t",
            "trials": trials,
            "seats": list(seats),
            "cases": cases,
            **extra,
        }
        self.manifest.write_text(yaml.safe_dump(doc, sort_keys=False))

    def write_roster(self, seats: dict[str, Any] | None = None, **extra: Any) -> None:
        # the fake agents report through files and pids outside any sandbox: tests not
        # about the sandbox run without it (tests/test_sandbox.py turns it on)
        extra.setdefault("sandbox", "off")
        doc = {
            "schema": "brigade.roster.v1",
            **extra,
            "seats": seats or {"agent": {"cli": FAKE_CLI}},
        }
        self.roster.write_text(yaml.safe_dump(doc, sort_keys=False))

    # -- commands -------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["FAKE_AGENT_LOG"] = str(self.log)
        env.update(extra)
        return env

    def variables(self) -> list[str]:
        return [
            f"manifest={self.manifest}",
            f"roster={self.roster}",
            f"out={self.out}",
            f"workspace={self.workspace}",
        ]

    def doit(
        self, *args: str, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """The real doit, with this project's variables (extra args go first)."""
        argv = [sys.executable, "-m", "doit", "-f", str(DODO), *args, *self.variables()]
        return subprocess.run(
            argv, capture_output=True, text=True, env=self.env(**env), timeout=timeout
        )

    def doit_popen_args(self, *args: str) -> list[str]:
        """The argument list of the real doit with this project's variables."""
        return [sys.executable, "-m", "doit", "-f", str(DODO), *args, *self.variables()]

    def doit_popen(self, *args: str, **env: str) -> subprocess.Popen[str]:
        argv = self.doit_popen_args(*args)
        return subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(**env),
            start_new_session=True,
        )

    def brigade(
        self, *args: str, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """The real brigade CLI."""
        return subprocess.run(
            [*brigade_command(), *args],
            capture_output=True,
            text=True,
            env=self.env(**env),
            timeout=timeout,
            cwd=self.workspace,
        )

    def run_args(self, *args: str) -> list[str]:
        """The arguments of `brigade run` with this project's inputs."""
        return [
            "run",
            str(self.manifest),
            "--roster",
            str(self.roster),
            "--out",
            str(self.out),
            "--workspace",
            str(self.workspace),
            *args,
        ]

    def brigade_doit(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`brigade doit` (doit's command line over brigade's tasks) with this project's
        variables (extra args go first)."""
        return self.brigade("doit", *args, *self.variables(), **env)

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`brigade run` with this project's inputs."""
        return self.brigade(*self.run_args(*args), **env)

    # -- results --------------------------------------------------------------

    def launches(self) -> int:
        """How many agent processes ran so far."""
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def plan(self) -> dict[str, Any]:
        return json.loads((self.out / "plan.json").read_text())

    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())

    def cell_dir(self, coordinate: str) -> Path:
        for cell in self.plan()["cells"]:
            if cell["coordinate"] == coordinate:
                return self.out / "cells" / cell["cell_id"]
        raise KeyError(coordinate)

    def receipt(self, coordinate: str) -> dict[str, Any]:
        return json.loads((self.cell_dir(coordinate) / "cell.json").read_text())

    def receipts(self) -> dict[str, dict[str, Any]]:
        result = {}
        for cell in self.plan()["cells"]:
            path = self.out / "cells" / cell["cell_id"] / "cell.json"
            if path.exists():
                result[cell["coordinate"]] = json.loads(path.read_text())
        return result

    def states(self) -> dict[str, str]:
        return {coord: receipt["state"] for coord, receipt in self.receipts().items()}

    def attempts(self, coordinate: str) -> list[str]:
        return sorted(p.name for p in (self.cell_dir(coordinate) / "attempts").iterdir())


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


# A battery with a cell in every row of the resume table (accepted, rejected, unscored,
# execution_error, adapter_error); its first run exits 3 (a measurement failure).
BATTERY: list[dict[str, Any]] = [
    {
        "id": "ok",
        "prompt": "answer: hello",
        "graders": [{"type": "exact_output", "expected": "hello"}],
    },
    {
        "id": "no",
        "prompt": "answer: nope",
        "graders": [{"type": "exact_output", "expected": "hello"}],
    },
    {"id": "free", "prompt": "answer: whatever"},
    {"id": "crash", "prompt": "exit: 2"},
    {"id": "fault", "prompt": "tempfail: upstream 502"},
]
BATTERY_STATES = {
    "ok:agent:1": "accepted",
    "no:agent:1": "rejected",
    "free:agent:1": "unscored",
    "crash:agent:1": "execution_error",
    "fault:agent:1": "adapter_error",
}
GRADED = BATTERY[:2]  # one accepted and one rejected cell: the first run exits 1


@pytest.fixture
def battery(project: Project) -> Project:
    """The project with BATTERY as its manifest (nothing run yet)."""
    project.write_manifest(BATTERY)
    return project


@pytest.fixture
def finished_battery(battery: Project) -> Project:
    """BATTERY run once through the real doit."""
    done = battery.doit()
    assert done.returncode == 3, done.stderr
    assert battery.states() == BATTERY_STATES
    return battery


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A copy of the repository's tracked inputs (dodo, manifests) without outputs."""
    target = tmp_path / "repo"
    target.mkdir()
    shutil.copy(DODO, target / "dodo.py")
    shutil.copytree(REPO / "manifests", target / "manifests")
    return target


@pytest.fixture(autouse=True)
def isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """brigade's input cache goes to a temporary folder, never the user's."""
    monkeypatch.setenv("BRIGADE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


# headless Chromium renders the HTML report (tests skip without it)
CHROMIUM = shutil.which("chromium")


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with its own profile folder (offline, no first-run work)."""
    argv = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


# files whose tests take longest (kills, thousands of cells, clusters, built wheels): the
# workers start on them, so the end of a run is not one worker finishing a long test alone
LONG_FIRST = (
    "test_kills.py",
    "test_scale.py",
    "test_init.py",
    "test_dask.py",
    "test_readme.py",
    "test_compare.py",
    "test_grader_reuse.py",
    "test_agent_clis.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the long files first (order within a file kept); nothing is left out."""
    rank = {name: index for index, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def opened(project: Project, **extra: object) -> Session:
    """The engine's session over a project's inputs (`extra`: more options)."""
    return open_session(
        Options(
            manifest=project.manifest,
            roster=project.roster,
            out=project.out,
            workspace=project.workspace,
            **extra,  # type: ignore[arg-type]
        )
    )
