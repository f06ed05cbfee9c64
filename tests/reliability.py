"""Helpers shared by the reliability tests (test_kills, test_signals, test_hostile_inputs,
test_hostile_paths, test_tampering, test_storage_faults, test_concurrency)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import DODO, REPO, Project, brigade_command

from brigade.inputs import schemas

SLOW_DOIT = REPO / "tests" / "agents" / "slow_writes_doit.py"
CELL_ID = "^[0-9a-f]{64}$"
# the fake agent answers with its cell id; graders for each kind of cell of a battery
ANSWER_ID = "env: BRIGADE_CELL_ID"
GRADERS = {
    "accept": [{"type": "regex_output", "pattern": CELL_ID}],
    "instant": [{"type": "regex_output", "pattern": CELL_ID}],
    "reject": [{"type": "regex_output", "pattern": "^never$"}],
    "crash": [{"type": "regex_output", "pattern": CELL_ID}],
    "tempfail": [{"type": "regex_output", "pattern": CELL_ID}],
    "grader_error": [{"type": "regex_output", "pattern": "("}],
    "unscored": [],
}

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


def refusal_lines(stderr: str) -> list[str]:
    """The lines a refused command printed: one per problem, each `brigade: file: ...`."""
    lines = stderr.strip().splitlines()
    assert lines and all(line.startswith("brigade: ") for line in lines), stderr
    assert "Traceback" not in stderr
    return lines


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
