"""End to end: built-in adapters drive fake agent CLIs on PATH; doctor; read-only warnings."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import Project

FAKE_CLAUDE = """#!{python}
import json, sys
if sys.argv[1:] == ["--version"]:
    print("9.9.9 (Claude Code)")
    sys.exit(0)
with open(sys.argv[0] + ".argv", "w") as handle:
    json.dump(sys.argv[1:], handle)
prompt = sys.stdin.read()
if "overloaded" in prompt:
    print(json.dumps({{"type": "result", "subtype": "error_during_execution", "is_error": True,
                      "result": "API Error: 529 Overloaded"}}))
    sys.exit(1)
if "silent" in prompt:
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": ""}}))
    sys.exit(0)
if "crash" in prompt:
    print("segfault in agent", file=sys.stderr)
    sys.exit(2)
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
                  "result": "hello from claude", "session_id": "s"}}))
"""

FAKE_CODEX = """#!{python}
import json, sys
if sys.argv[1:] == ["--version"]:
    print("codex-cli 0.0.1")
    sys.exit(0)
prompt = sys.stdin.read()
events = [{{"type": "thread.started"}}, {{"type": "turn.started"}}]
if "rate" in prompt:
    events.append({{"type": "turn.failed", "error": {{"message": "429 Too Many Requests"}}}})
    code = 1
else:
    events.append({{"type": "item.completed",
                    "item": {{"type": "agent_message", "text": "hello from codex"}}}})
    events.append({{"type": "turn.completed"}})
    code = 0
for event in events:
    print(json.dumps(event))
sys.exit(code)
"""


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, text in (("claude", FAKE_CLAUDE), ("codex", FAKE_CODEX)):
        path = folder / name
        path.write_text(text.format(python=sys.executable))
        path.chmod(0o755)
    return folder


def path_with(folder: Path) -> str:
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def test_claude_and_codex_adapters(project: Project, fake_bin: Path) -> None:
    project.write_roster(
        {
            "claude": {"cli": "claude", "model": "sonnet", "reasoning": "high"},
            "codex": {"cli": "codex", "model": "gpt-x"},
        }
    )
    project.write_manifest(
        [
            {
                "id": "hi",
                "prompt": "say hi",
                "graders": [{"type": "regex_output", "pattern": "^hello from"}],
            },
            {"id": "busy", "prompt": "overloaded rate"},
            {"id": "quiet", "prompt": "silent"},
            {"id": "crash", "prompt": "crash"},
        ],
        seats=("claude", "codex"),
    )
    done = project.doit(PATH=path_with(fake_bin))
    assert done.returncode == 3, done.stderr
    outcomes = {c: (r["state"], r.get("failure_reason")) for c, r in project.receipts().items()}
    assert outcomes == {
        "hi:claude:1": ("accepted", None),
        "hi:codex:1": ("accepted", None),
        "busy:claude:1": ("adapter_error", "provider_5xx"),
        "busy:codex:1": ("adapter_error", "transport_drop"),
        "quiet:claude:1": ("adapter_error", "transport_drop"),
        "quiet:codex:1": ("unscored", None),
        "crash:claude:1": ("execution_error", None),
        "crash:codex:1": ("unscored", None),
    }
    hi = Path(project.receipt("hi:claude:1")["run_dir"])
    assert (hi / "final.txt").read_text() == "hello from claude"
    assert json.loads((hi / "stdout.log").read_text())["result"] == "hello from claude"
    run = json.loads((hi / "run.json").read_text())
    assert run["adapter"] == "claude"
    assert run["executable"] == str(fake_bin / "claude")
    assert run["executable_version"] == "9.9.9 (Claude Code)"
    assert run["read_only_enforcement"] == "hard"
    assert run["argv"][:3] == ["claude", "-p", "--output-format"]
    assert ["--model", "sonnet"] == run["argv"][run["argv"].index("--model") :][:2]
    quiet = json.loads(Path(project.receipt("quiet:claude:1")["run_dir"], "run.json").read_text())
    assert quiet["failure_kind"] == "empty_output"
    codex = json.loads(Path(project.receipt("hi:codex:1")["run_dir"], "run.json").read_text())
    assert codex["argv"][-1] == "-" and "read-only" in codex["argv"]
    assert Path(project.receipt("hi:codex:1")["run_dir"], "final.txt").read_text() == (
        "hello from codex"
    )


def test_missing_cli_is_an_adapter_error(project: Project, tmp_path: Path) -> None:
    project.write_roster({"claude": {"cli": "claude"}})
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("claude",))
    done = project.doit(PATH=str(tmp_path / "empty-bin"))
    assert done.returncode == 3
    receipt = project.receipt("c:claude:1")
    assert (receipt["state"], receipt["failure_reason"]) == ("adapter_error", "transport_drop")


def test_doctor(project: Project, fake_bin: Path) -> None:
    project.write_roster({"claude": {"cli": "claude"}, "gone": {"cli": "gemini"}})
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("claude",))
    ok = project.brigade(
        "doctor", str(project.manifest), "--roster", str(project.roster), PATH=path_with(fake_bin)
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("claude  ok")
    assert "9.9.9 (Claude Code)" in ok.stdout
    everything = project.brigade(
        "doctor", "--roster", str(project.roster), PATH=path_with(fake_bin)
    )
    assert everything.returncode == 1
    lines = everything.stdout.splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("gone    MISSING  gemini")


def test_read_only_warning_once_per_soft_or_none_seat(project: Project, fake_bin: Path) -> None:
    project.write_roster({"claude": {"cli": "claude"}, "agent": {"cli": "exec:true"}})
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("claude", "agent"), trials=3)
    done = project.run(PATH=path_with(fake_bin))
    warnings = [line for line in done.stderr.splitlines() if "read-only run" in line]
    assert warnings == [
        "brigade: seat agent: read-only run, but the exec adapter cannot enforce it; "
        "the seat may still change the workspace"
    ]
