"""End to end, each written as the attack: a hostile seat (or the code under test of a
command grader) plants files where brigade reads or writes its own after the seat ended
(issue 27, items 1, 2, 3 and 12). Runs the real `brigade`; every test asserts that the
victim files are byte-identical, and that the run ends with its summary and exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project

from brigade.run import sandbox

AVAILABLE = sandbox.probe()
# every attack runs with the sandbox off (the seat can write anywhere the user can) and,
# where bwrap works here, required
MODES = [
    "off",
    pytest.param(
        "required",
        marks=pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}"),
    ),
]


def seat_script(project: Project, name: str, text: str, mode: str) -> dict[str, str]:
    """A roster seat running the Python `text` (written beside the project)."""
    path = project.root / name
    path.write_text("import os, sys\nsys.stdin.read()\n" + text)
    return {"cli": f"exec:{{python}} {path}", "sandbox": mode}


def finished(project: Project, code: int = 0) -> dict[str, object]:
    """The run ended with a summary (every cell decided) and exit `code`."""
    done = project.run()
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    summary = project.summary()
    assert all(state != "running" for state in project.states().values())
    return summary


# --- item 3: untrusted JSON, one reader --------------------------------------------------

DEEP_USAGE = """\
with open(os.environ["BRIGADE_USAGE_FILE"], "w") as handle:
    handle.write("[" * 100000)
print("done")
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_usage_file_nested_100000_deep_is_ignored_with_a_note(
    project: Project, mode: str
) -> None:
    project.write_roster({"agent": seat_script(project, "deep.py", DEEP_USAGE, mode)})
    project.write_manifest(
        [{"id": "a", "prompt": "p"}], graders=[{"type": "regex_output", "pattern": "done"}]
    )
    finished(project)
    receipt = project.receipt("a:agent:1")
    assert receipt["state"] == "accepted"
    run = json.loads((Path(receipt["run_dir"]) / "run.json").read_text())
    assert run["usage"] is None
    assert run["notes"] == ["usage ignored: usage.json: nested deeper than 200 levels"]
