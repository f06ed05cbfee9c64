"""End to end: built-in adapters drive fake agent CLIs on PATH; doctor; read-only warnings."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agents import cli_outputs
from agents.cli_outputs import SAMPLES
from agents.fake_cli import ANSWERING, BINARIES, SCENARIOS, TRUST_REFUSALS, install, load_sample
from conftest import FAKE_CLI, Project, alive, git_workspace

from brigade.adapters import adapter_for
from brigade.adapters.base import SeatRequest
from brigade.adapters.common import READ_ONLY_NOTICE
from brigade.adapters.versions import incompatible_detail
from brigade.core.specs import SeatSpec
from brigade.core.taxonomy import FAILURE_REASONS
from brigade.core.transcript import transcript_document
from brigade.inputs import schemas
from brigade.run.runner import OWN_FAILURES

# claude as it prints in stream-json mode (the samples of agents/cli_outputs.py)
FAKE_CLAUDE = """#!{python}
import json, sys
sys.path.insert(0, {tests!r})
from agents import cli_outputs as out
if sys.argv[1:] == ["--version"]:
    print("9.9.9 (Claude Code)")
    sys.exit(0)
with open(sys.argv[0] + ".argv", "w") as handle:
    json.dump(sys.argv[1:], handle)
prompt = sys.stdin.read()
if "overloaded" in prompt:
    sys.stdout.write(out.CLAUDE["overloaded"][1])
    sys.exit(1)
if "silent" in prompt:
    sys.stdout.write(out.CLAUDE["empty"][1])
    sys.exit(0)
if "crash" in prompt:
    print("segfault in agent", file=sys.stderr)
    sys.exit(2)
sys.stdout.write(out.claude_answer("hello from claude"))
"""

FAKE_CODEX = Path(__file__).parent / "agents" / "fake_codex.py"


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    claude = folder / "claude"
    claude.write_text(
        FAKE_CLAUDE.format(python=sys.executable, tests=str(Path(__file__).resolve().parent))
    )
    codex = folder / "codex"
    codex.write_text(f"#!{sys.executable}\n" + FAKE_CODEX.read_text())
    for path in (claude, codex):
        path.chmod(0o755)
    return folder


def outcome(receipt: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """A receipt's state, canonical failure reason and fault kind."""
    fault = receipt.get("fault")
    return receipt["state"], receipt.get("failure_reason"), fault["kind"] if fault else None


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
    outcomes = {c: outcome(r) for c, r in project.receipts().items()}
    assert outcomes == {
        "hi:claude:1": ("accepted", None, None),
        "hi:codex:1": ("accepted", None, None),
        "busy:claude:1": ("adapter_error", "provider_5xx", "overloaded"),
        "busy:codex:1": ("adapter_error", None, "rate_limited"),
        "quiet:claude:1": ("adapter_error", None, "empty_output"),
        "quiet:codex:1": ("unscored", None, None),
        "crash:claude:1": ("execution_error", None, None),
        "crash:codex:1": ("unscored", None, None),
    }
    hi = Path(project.receipt("hi:claude:1")["run_dir"])
    assert (hi / "final.txt").read_text() == "hello from claude"
    events = [json.loads(line) for line in (hi / "stdout.log").read_text().splitlines()]
    assert events[-1]["type"] == "result" and events[-1]["result"] == "hello from claude"
    run = json.loads((hi / "run.json").read_text())
    assert run["adapter"] == "claude"
    assert run["executable"] == str(fake_bin / "claude")
    assert run["executable_version"] == "9.9.9 (Claude Code)"
    assert run["read_only_enforcement"] == "hard"
    assert run["argv"][:3] == ["claude", "-p", "--output-format"]
    assert ["--model", "sonnet"] == run["argv"][run["argv"].index("--model") :][:2]
    quiet = json.loads(Path(project.receipt("quiet:claude:1")["run_dir"], "run.json").read_text())
    assert quiet["failure_kind"] == "empty_output"
    busy = json.loads(Path(project.receipt("busy:claude:1")["run_dir"], "run.json").read_text())
    assert (busy["failure_kind"], busy["failure_detail"]) == (
        "overloaded",
        "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again "
        "in a moment. If it persists, check your inference gateway (127.0.0.1:5421).",
    )
    rate = json.loads(Path(project.receipt("busy:codex:1")["run_dir"], "run.json").read_text())
    assert (rate["failure_kind"], rate["failure_detail"]) == (
        "rate_limited",
        "exceeded retry limit, last status: 429 Too Many Requests, "
        "request id: 8c2f0a7e-1b3d-4e5f-9a6b-7c8d9e0f1a2b",
    )
    codex = json.loads(Path(project.receipt("hi:codex:1")["run_dir"], "run.json").read_text())
    assert codex["argv"][-1] == "-" and "read-only" in codex["argv"]
    assert Path(project.receipt("hi:codex:1")["run_dir"], "final.txt").read_text() == (
        "hello from codex"
    )


def test_a_missing_cli_refuses_the_run(project: Project, tmp_path: Path) -> None:
    project.write_roster({"claude": {"cli": "claude"}})
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("claude",))
    done = project.doit(PATH=str(tmp_path / "empty-bin"))
    assert done.returncode == 2
    assert done.stderr == (
        "brigade: seat claude needs 'claude', which cannot be run here (not found on PATH, or "
        "not executable): install it or fix the seat's cli in the roster (brigade doctor "
        "checks every seat)\n"
    )
    assert not (project.out / "cells").exists()


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
    assert len(lines) == 3
    assert lines[1].startswith("gone    MISSING  gemini")
    assert lines[2].startswith("sandbox: ")  # whether it works here: tests/test_sandbox.py


def test_read_only_warning_once_per_soft_or_none_seat(project: Project, fake_bin: Path) -> None:
    project.write_roster({"claude": {"cli": "claude"}, "agent": {"cli": "exec:true"}})
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("claude", "agent"), trials=3)
    done = project.run(PATH=path_with(fake_bin))
    warnings = [line for line in done.stderr.splitlines() if "read-only run" in line]
    assert warnings == [
        "brigade: seat agent: read-only run, but the exec adapter cannot enforce it; "
        "the seat may still change the workspace (the seat's acknowledge_read_only: true "
        "silences this)"
    ]
    # a run that launches nothing says nothing of it; a seat that acknowledges it neither
    assert "read-only run" not in project.run(PATH=path_with(fake_bin)).stderr
    project.write_roster(
        {"claude": {"cli": "claude"}, "agent": {"cli": "exec:true", "acknowledge_read_only": True}}
    )
    project.write_manifest([{"id": "d", "prompt": "x"}], seats=("claude", "agent"))
    assert "read-only run" not in project.run(PATH=path_with(fake_bin)).stderr
    assert len(project.receipts()) == 2


ECHO_PROMPT = "-- echo \"double\" 'single' $HOME\nsecond line\n\tindented"


def test_codex_app_server_transport(project: Project, fake_bin: Path) -> None:
    project.write_roster(
        {"codex": {"cli": "codex", "model": "gpt-x", "reasoning": "high"}},
        codex_transport="app-server",
    )
    project.write_manifest(
        [
            {
                "id": "hi",
                "prompt": "say hi",
                "graders": [{"type": "exact_output", "expected": "hello from codex app-server"}],
            },
            {"id": "settings", "prompt": "settings"},
            {"id": "echo", "prompt": ECHO_PROMPT},
            {"id": "approve", "prompt": "approve"},
            {"id": "question", "prompt": "question"},
            {"id": "flaky", "prompt": "flaky"},
            {"id": "5xx", "prompt": "5xx"},
            {"id": "overloaded", "prompt": "overloaded"},
            {"id": "drop", "prompt": "drop"},
            {"id": "silent", "prompt": "silent"},
            {"id": "context", "prompt": "context"},
        ],
        seats=("codex",),
    )
    done = project.doit(PATH=path_with(fake_bin))
    assert done.returncode == 3, done.stderr
    outcomes = {c: outcome(r) for c, r in project.receipts().items()}
    assert outcomes == {
        "hi:codex:1": ("accepted", None, None),
        "settings:codex:1": ("unscored", None, None),
        "echo:codex:1": ("unscored", None, None),
        "approve:codex:1": ("unscored", None, None),
        "question:codex:1": ("unscored", None, None),
        "flaky:codex:1": ("unscored", None, None),
        "5xx:codex:1": ("adapter_error", "provider_5xx", "overloaded"),
        "overloaded:codex:1": ("adapter_error", "provider_5xx", "overloaded"),
        "drop:codex:1": ("adapter_error", "transport_drop", "transport_drop"),
        "silent:codex:1": ("adapter_error", None, "empty_output"),
        "context:codex:1": ("execution_error", None, None),
    }

    def run_dir(case: str) -> Path:
        return Path(project.receipt(f"{case}:codex:1")["run_dir"])

    def final(case: str) -> str:
        return (run_dir(case) / "final.txt").read_text()

    run = json.loads((run_dir("hi") / "run.json").read_text())
    assert run["argv"] == ["codex", "app-server"]
    assert run["executable"] == str(fake_bin / "codex")
    assert run["executable_version"] == "codex-cli 0.0.1"
    assert run["read_only_enforcement"] == "hard"
    assert run["settings_not_applied"] == []
    # stdout.log is the server's own JSON-RPC output, turn/completed included
    transcript = [
        json.loads(line) for line in (run_dir("hi") / "stdout.log").read_text().splitlines()
    ]
    assert transcript[0] == {"id": 1, "result": {"userAgent": "fake_codex/0.0.1"}}
    assert transcript[-1]["method"] == "turn/completed"
    assert json.loads(final("settings")) == {
        "sandbox": "read-only",
        "approvalPolicy": "never",
        "model": "gpt-x",
        "effort": "high",
        "cwd": str(project.workspace.resolve()),
    }
    assert final("echo") == ECHO_PROMPT
    assert final("approve") == "decision=decline"
    assert final("question") == "refused=-32601"

    def failure(case: str) -> tuple[str, str]:
        run_doc = json.loads((run_dir(case) / "run.json").read_text())
        return run_doc["failure_kind"], run_doc["failure_detail"]

    assert failure("5xx") == (
        "overloaded",
        "exceeded retry limit, last status: 503 Service Unavailable",
    )
    assert failure("overloaded") == ("overloaded", "Server overloaded; retry later.")
    assert failure("drop") == (
        "transport_drop",
        "connection closed: codex app-server ended before the turn completed",
    )
    assert "fake codex: lost the connection" in (run_dir("drop") / "stderr.log").read_text()
    assert json.loads((run_dir("silent") / "run.json").read_text())["failure_kind"] == (
        "empty_output"
    )
    # faults that waiting does not cure stop the seat: one run each
    lasting = {
        "usage": ("quota", "You've hit your usage limit. Try again later."),
        "auth": (
            "auth",
            "Your access token could not be refreshed because your refresh token was revoked. "
            "Please log out and sign in again.",
        ),
        "nomodel": (
            "model_unavailable",
            "unexpected status 404 Not Found: The model `m-1` does not exist or you do not have "
            "access to it., url: http://127.0.0.1:18766/v1/responses, request id: "
            "req_test_fixture_0001",
        ),
    }
    for case, (kind, message) in lasting.items():
        project.write_manifest([{"id": case, "prompt": case}], seats=("codex",))
        done = project.doit(PATH=path_with(fake_bin))
        assert done.returncode == 3, done.stderr
        assert outcome(project.receipt(f"{case}:codex:1")) == ("adapter_error", None, kind)
        assert failure(case) == (kind, message)
        article = "an" if kind == "auth" else "a"  # model_unavailable: "a"
        assert done.stderr.splitlines()[-1] == (
            f"brigade: seat codex stopped after {article} {kind} fault: {message}; "
            "0 cells not started"
        )


def test_codex_app_server_writable_and_timeout(project: Project, fake_bin: Path) -> None:
    git_workspace(project)
    project.write_roster(
        {"codex": {"cli": "codex", "timeout_seconds": 3}}, codex_transport="app-server"
    )
    project.write_manifest(
        [
            {"id": "settings", "prompt": "settings"},
            {"id": "approve", "prompt": "approve"},
            {"id": "hang", "prompt": "hang"},
        ],
        seats=("codex",),
        execution={"mode": "writable-worktree"},
    )
    done = project.doit(PATH=path_with(fake_bin))
    assert done.returncode == 3, done.stderr
    receipts = project.receipts()
    assert receipts["hang:codex:1"]["state"] == "execution_error"
    assert receipts["hang:codex:1"]["failure_reason"] == "timeout"
    settings = json.loads(Path(receipts["settings:codex:1"]["run_dir"], "final.txt").read_text())
    assert settings["sandbox"] == "workspace-write"
    assert Path(receipts["approve:codex:1"]["run_dir"], "final.txt").read_text() == (
        "decision=accept"
    )
    # the timeout ended the server as well as brigade's client
    pid = int((fake_bin / "codex.hang.pid").read_text())
    assert not alive(pid)


def test_codex_app_server_missing_binary(project: Project, tmp_path: Path) -> None:
    # the app-server client (brigade's own) is there; the codex it drives is not
    project.write_roster({"codex": {"cli": "codex"}}, codex_transport="app-server")
    project.write_manifest([{"id": "c", "prompt": "x"}], seats=("codex",))
    done = project.run(PATH=str(tmp_path / "empty-bin"))
    assert done.returncode == 2
    assert done.stderr.startswith("brigade: seat codex needs 'codex', which cannot be run here")
    assert not (project.out / "cells").exists()


# -- every built-in adapter against a fake of its CLI --------------------------------

ALL_CLIS = sorted(BINARIES)
# run.json's failure_kind per fault case, the same for every CLI that has the case
FAULTS = {
    "auth": "auth",
    "quota": "quota",
    "rate": "rate_limited",
    "overloaded": "overloaded",
    "5xx": "provider_5xx",
    "drop": "transport_drop",
    "empty": "empty_output",
    "model": "model_unavailable",
    "args": "cli_incompatible",
    "extra": "quota",
    "unknown": "unknown",
}
# faults that stop their seat: each runs on a seat of its own (see test_every_cli_lasting_faults)
LASTING = ("auth", "quota", "model", "args", "extra")
TRICKY = "-starts with a dash\nthen \"double\" and 'single' quotes\n\ttab $HOME `tick` --flag"


def install_fake(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    install(folder, name)
    return folder


def calls(folder: Path, name: str) -> list[dict[str, Any]]:
    log = folder / f"{BINARIES[name]}.calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()]


def fake_seat(name: str) -> dict[str, str]:
    if name == "ollama":
        return {"cli": "ollama:llama3.2", "reasoning": "high"}
    return {"cli": name, "model": "m-1", "reasoning": "high"}


@pytest.mark.parametrize("name", ALL_CLIS)
def test_every_cli_read_only(project: Project, tmp_path: Path, name: str) -> None:
    folder = install_fake(tmp_path, name)
    project.write_roster({"s": fake_seat(name)})
    ok = {
        "id": "ok",
        "prompt": TRICKY,
        "graders": [{"type": "exact_output", "expected": "All good."}],
    }
    echo = {
        "id": "echo",
        "prompt": cli_outputs.ECHO_PROMPT,
        "graders": [{"type": "exact_output", "expected": cli_outputs.ECHO_ANSWER}],
    }
    skipped = ("echo", *ANSWERING, *LASTING)
    cases = [s for s in SCENARIOS if s in SAMPLES[name] and s not in skipped]
    answers = [ok, echo]
    # a codex thread of several turns, cursor's several messages, aider's notices before
    # its banner: each answers normally
    for shape in (s for s in ANSWERING if s in SAMPLES[name]):
        grader = {"type": "exact_output", "expected": "All good."}
        answers.append({"id": shape, "prompt": f"SCENARIO:{shape}", "graders": [grader]})
    project.write_manifest(
        [*answers, *({"id": s, "prompt": f"SCENARIO:{s}"} for s in cases)], seats=("s",)
    )
    done = project.doit(PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    receipts = project.receipts()

    def run_doc(case: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(
            Path(receipts[f"{case}:s:1"]["run_dir"], "run.json").read_text()
        )
        return doc

    outcomes = {
        c.split(":")[0]: (r["state"], run_doc(c.split(":")[0])["failure_kind"])
        for c, r in receipts.items()
    }
    # a prompt and an answer about 429s and 401s are a normal, accepted answer
    expected = {answer["id"]: ("accepted", None) for answer in answers}
    expected.update({case: ("adapter_error", FAULTS[case]) for case in cases if case in FAULTS})
    own = {case: run_doc(case)["failure_kind"] for case in cases if case not in FAULTS}
    assert set(own.values()) <= set(OWN_FAILURES) | {"nonzero_exit"}
    expected.update({case: ("execution_error", kind) for case, kind in own.items()})
    assert outcomes == expected
    for case in cases:
        receipt, doc = receipts[f"{case}:s:1"], run_doc(case)
        assert_reading(name, case, receipt, doc)
        # an error report is never taken as the answer
        assert Path(receipt["run_dir"], "final.txt").read_text() == "", case
    receipt = project.receipt("ok:s:1")
    run_dir = Path(receipt["run_dir"])
    run = json.loads((run_dir / "run.json").read_text())
    [call] = [c for c in calls(folder, name) if "SCENARIO" not in (c["prompt"] or "")]
    [echoed] = [c for c in calls(folder, name) if "SCENARIO:echo" in (c["prompt"] or "")]
    assert echoed["prompt"].endswith(cli_outputs.ECHO_PROMPT)
    assert call["prompt"] == (READ_ONLY_NOTICE + TRICKY if name == "goose" else TRICKY)
    assert call["argv"] == run["argv"][1:]
    assert call["cwd"] == str(project.workspace.resolve())
    assert call["env"]["BRIGADE_CELL_ID"] == receipt["cell_id"]
    assert call["env"]["BRIGADE_EXECUTION_MODE"] == "read-only"
    assert run["executable"] == str(folder / BINARIES[name])
    assert run["executable_version"] == f"{name} 1.2.3 (fake)"
    assert run["read_only_enforcement"] in ("hard", "soft", "none")
    assert (run_dir / "final.txt").read_text() == "All good."
    assert (run_dir / "stdout.log").read_text() == SAMPLES[name]["success"][1]
    # what the agent did is kept beside the answer, as the adapter read it
    code, stdout, stderr = SAMPLES[name]["success"]
    reading = adapter_for(fake_seat(name)["cli"]).read(exit_code=code, stdout=stdout, stderr=stderr)
    if reading.transcript is None:
        assert not (run_dir / "transcript.json").exists()
    else:
        assert reading.transcript  # every CLI that has one says something in it
        stored = json.loads((run_dir / "transcript.json").read_text())
        assert stored == transcript_document(reading.transcript)
        assert schemas.problems(stored, "brigade.transcript.v1") == []
    argv = " ".join(call["argv"])
    if name != "ollama":
        assert "m-1" in argv
    assert ("high" in argv) != ("reasoning" in run["settings_not_applied"])
    # the shapes that answer normally are read in full: aider's banner after its notices
    # (its model), cursor's last message answering with every message in the transcript
    for shape in (s for s in ANSWERING if s in SAMPLES[name]):
        code, stdout, stderr = SAMPLES[name][shape]
        reading = adapter_for(fake_seat(name)["cli"]).read(
            exit_code=code, stdout=stdout, stderr=stderr
        )
        shaped = receipts[f"{shape}:s:1"]
        assert shaped["usage"].get("model") == (reading.usage and reading.usage.model), shape
        stored_path = Path(shaped["run_dir"], "transcript.json")
        if reading.transcript is None:
            assert not stored_path.exists(), shape
        else:
            stored = json.loads(stored_path.read_text())
            assert stored == transcript_document(reading.transcript), shape
    if "notices" in SAMPLES[name]:
        assert receipts["notices:s:1"]["usage"]["model"] == "anthropic/claude-sonnet-4-20250514"
    if name == "cursor":
        entries = json.loads(
            Path(receipts["messages:s:1"]["run_dir"], "transcript.json").read_text()
        )
        said = [e["text"] for e in entries["entries"] if e.get("role") == "assistant"]
        assert said == [
            "I'll read the README file",
            "Based on the README, I'll check it.",
            "All good.",
        ]


def assert_reading(name: str, case: str, receipt: dict[str, Any], doc: dict[str, Any]) -> None:
    """A fault case's receipt: its kind and the CLI's own message as the adapter reads the
    sample, the canonical reason mapped from the kind; a seat that stopped itself: its own
    reason in the detail, no fault."""
    code, stdout, stderr = SAMPLES[name][case]
    reading = adapter_for(fake_seat(name)["cli"]).read(exit_code=code, stdout=stdout, stderr=stderr)
    if case in FAULTS:
        assert reading.fault is not None, case
        assert (receipt["state"], receipt["fault"]["kind"]) == ("adapter_error", FAULTS[case])
        message = reading.fault.detail
        if reading.fault.kind == "cli_incompatible":
            # the refusal, then which version refused which flag and what to do
            adapter = adapter_for(fake_seat(name)["cli"])
            version = f"{name} 1.2.3 (fake)"
            message = incompatible_detail(adapter.name, adapter.min_version, version, message)
        assert receipt["fault"]["message"] == message == receipt["failure_detail"]
        assert receipt.get("failure_reason") == FAILURE_REASONS.get(FAULTS[case]), case
        assert doc["fault"] == receipt["fault"]
        waits = reading.fault.retry_after_seconds is not None
        assert ("retry_after_seconds" in receipt["fault"]) == waits, case
        return
    assert receipt["state"] == "execution_error" and "fault" not in receipt, case
    assert "failure_reason" not in receipt, case
    if reading.own_failure is None:
        assert receipt["failure_detail"] == f"the seat exited with status {code}", case
        return
    kind, message = reading.own_failure.kind, reading.own_failure.detail
    assert doc["own_failure"] == {"kind": kind, "message": message}, case
    assert receipt["failure_detail"] == f"{OWN_FAILURES[kind]}: {message}", case


@pytest.mark.parametrize("name", [n for n in ALL_CLIS if set(LASTING) & set(SAMPLES[n])])
def test_every_cli_lasting_faults(project: Project, tmp_path: Path, name: str) -> None:
    """auth and quota, each on a seat of its own (such a fault stops its seat): adapter_error
    with the CLI's own kind and message, never the seat's failure."""
    folder = install_fake(tmp_path, name)
    lasting = [case for case in LASTING if case in SAMPLES[name]]
    project.write_roster(
        {case: {**fake_seat(name), "env": {"FAKE_CLI_SCENARIO": case}} for case in lasting}
    )
    project.write_manifest([{"id": "hello", "prompt": "Say hello"}], seats=tuple(lasting))
    # retries allowed: none of these is retried (codex's model refusal, wrapped in "stream
    # disconnected before completion", included)
    done = project.doit("retries=2", "retry_backoff=0", PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    for case in lasting:
        receipt = project.receipt(f"hello:{case}:1")
        doc = json.loads(Path(receipt["run_dir"], "run.json").read_text())
        assert doc["failure_kind"] == FAULTS[case]
        assert receipt["attempts_in_run"] == 1, case
        assert_reading(name, case, receipt, doc)
    summary = project.summary()
    assert summary["fault_kinds"] == dict(Counter(FAULTS[case] for case in lasting))
    assert summary["counts"]["adapter_error"] == len(lasting)
    assert summary["trial_stats"]["by_seat"][lasting[0]]["scored"] == 0


@pytest.mark.parametrize("name", ALL_CLIS)
def test_every_cli_writable(project: Project, tmp_path: Path, name: str) -> None:
    git_workspace(project)
    folder = install_fake(tmp_path, name)
    spec = fake_seat(name)
    project.write_roster({"s": spec})
    project.write_manifest(
        [
            {
                "id": "ok",
                "prompt": TRICKY,
                "graders": [{"type": "exact_output", "expected": "All good."}],
            }
        ],
        seats=("s",),
        execution={"mode": "writable-worktree"},
    )
    done = project.doit(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    run = json.loads(Path(project.receipt("ok:s:1")["run_dir"], "run.json").read_text())
    [call] = calls(folder, name)
    assert call["prompt"] == TRICKY
    assert call["argv"] == run["argv"][1:]
    assert call["env"]["BRIGADE_EXECUTION_MODE"] == "writable-worktree"
    # the run happened in a detached worktree, not in the user's checkout
    assert Path(call["cwd"]) != project.workspace.resolve()
    assert run["workspace_access"] == "detached-worktree"
    seat_spec = SeatSpec(
        name="s", cli=spec["cli"], model=spec.get("model"), reasoning=spec["reasoning"]
    )
    read_only = adapter_for(spec["cli"]).invocation(
        SeatRequest(
            seat=seat_spec,
            prompt=TRICKY,
            cwd=project.workspace,
            run_dir=tmp_path,
            writable=False,
            cell_id="x",
            coordinate="ok:s:1",
        )
    )
    # `ollama run` has no tools, so both modes are the same command
    assert (list(read_only.argv[1:]) != call["argv"]) == (name != "ollama")


@pytest.mark.parametrize("name", sorted(TRUST_REFUSALS))
def test_workspace_trust_refusal_is_an_adapter_error(
    project: Project, tmp_path: Path, name: str
) -> None:
    folder = install_fake(tmp_path, name)
    project.write_roster({"s": fake_seat(name)})
    project.write_manifest(
        [{"id": "trusted", "prompt": "hi"}, {"id": "refused", "prompt": "SCENARIO:untrusted"}],
        seats=("s",),
    )
    assert project.doit(PATH=path_with(folder)).returncode == 3
    # the adapter passes the trust flag, so the ordinary run is not refused
    assert project.receipt("trusted:s:1")["state"] == "unscored"
    refused = project.receipt("refused:s:1")
    assert outcome(refused) == ("adapter_error", None, "workspace_untrusted")
    run = json.loads(Path(refused["run_dir"], "run.json").read_text())
    assert run["failure_kind"] == "workspace_untrusted"


# -- real CLIs of stated versions: fakes replaying tests/data/cli_samples ------------


def install_versions(tmp_path: Path, **samples: str) -> Path:
    """A folder holding, per adapter, a fake of the version a sample was captured from."""
    folder = tmp_path / "versions"
    folder.mkdir(parents=True, exist_ok=True)
    for name, sample in samples.items():
        install(folder, name, sample=sample)
    return folder


def test_a_cli_answering_with_its_usage_alone_is_refused_not_the_seats_failure(
    project: Project, tmp_path: Path
) -> None:
    """opencode 1.18.33 refuses an option by printing `run`'s usage, no error line, exit 1:
    still cli_incompatible (exit 3), never execution_error charged to the seat."""
    folder = install_versions(tmp_path, opencode="opencode-1.18.33-unknown")
    project.write_roster({"oc": {"cli": "opencode", "model": "p/m-1"}})
    project.write_manifest([{"id": "c0", "prompt": "answer: ok"}], seats=("oc",))
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("c0:oc:1")
    assert receipt["state"] == "adapter_error" and "failure_reason" not in receipt
    assert receipt["fault"]["kind"] == "cli_incompatible"
    assert receipt["fault"]["message"].startswith(
        "the CLI printed its usage and nothing else: it refused brigade's command line "
        "(opencode 1.18.33 refused brigade's command line; "
    )


def test_a_cli_refusing_the_command_line_stops_its_seat(project: Project, tmp_path: Path) -> None:
    """claude 1.0.30 has no --effort, gemini 0.6.1 no stream-json: cli_incompatible (exit 3),
    never retried, the seat stopped at its first cell, the version and the flag named."""
    folder = install_versions(
        tmp_path, claude="claude-1.0.30-effort", gemini="gemini-0.6.1-stream-json"
    )
    project.write_roster(
        {
            "opus": {"cli": "claude", "model": "m-1", "reasoning": "high"},
            "pro": {"cli": "gemini", "model": "m-1"},
            "local": {"cli": FAKE_CLI},
        }
    )
    cases = [{"id": f"c{n}", "prompt": "answer: ok"} for n in range(3)]
    project.write_manifest(cases, seats=("opus", "pro", "local"))
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    assert project.states() == {
        "c0:opus:1": "adapter_error",
        "c0:pro:1": "adapter_error",
        **{f"c{n}:local:1": "unscored" for n in range(3)},
    }
    claude = (
        "error: unknown option '--effort' (claude 1.0.30 (Claude Code) refused --effort; "
        "brigade's claude adapter needs 2.1.38 or newer: upgrade it; brigade doctor checks "
        "every seat)"
    )
    gemini = (
        'Invalid values: Argument: output-format, Given: "stream-json", Choices: "text", "json" '
        "(gemini 0.6.1 refused --output-format; brigade's gemini adapter needs 0.11.3 or "
        "newer: upgrade it; brigade doctor checks every seat)"
    )
    for seat, message in (("opus", claude), ("pro", gemini)):
        receipt = project.receipt(f"c0:{seat}:1")
        assert receipt["fault"] == {"kind": "cli_incompatible", "message": message}
        assert "failure_reason" not in receipt
        assert receipt["attempts_in_run"] == 1
        run = json.loads(Path(receipt["run_dir"], "run.json").read_text())
        assert (run["failure_kind"], run["exit_code"]) == ("cli_incompatible", 1)
    lines = done.stderr.splitlines()
    assert lines[-2:] == [
        f"brigade: seat opus stopped after a cli_incompatible fault: {claude}; 2 cells not started",
        f"brigade: seat pro stopped after a cli_incompatible fault: {gemini}; 2 cells not started",
    ]
    assert project.summary()["fault_kinds"] == {"cli_incompatible": 2}
    # doctor says so before any run: each version, and what the adapter needs
    doctor = project.brigade("doctor", str(project.manifest), PATH=path_with(folder))
    assert doctor.returncode == 1
    rows = {line.split()[0]: line for line in doctor.stdout.splitlines()[:-1]}
    assert rows["opus"].startswith(f"opus   OLD      {folder / 'claude'}  (1.0.30 (Claude Code); ")
    assert "the claude adapter needs 2.1.38 or newer: upgrade it;" in rows["opus"]
    assert "(0.6.1; the gemini adapter needs 0.11.3 or newer: upgrade it;" in rows["pro"]
    assert "supported" not in rows["local"]  # an exec seat runs any program


def test_a_newer_cli_is_supported_by_doctor(project: Project, tmp_path: Path) -> None:
    folder = install_versions(
        tmp_path, claude="claude-2.1.38-ok", qwen="qwen-0.24.4-ok", aider="aider-0.86.2-ok"
    )
    project.write_roster(
        {"opus": {"cli": "claude"}, "coder": {"cli": "qwen"}, "ai": {"cli": "aider"}}
    )
    project.write_manifest([{"id": "c", "prompt": "hi"}], seats=("opus", "coder", "ai"))
    doctor = project.brigade("doctor", str(project.manifest), PATH=path_with(folder))
    assert doctor.returncode == 0, doctor.stdout
    rows = {line.split()[0]: line for line in doctor.stdout.splitlines()[:-1]}
    assert "(2.1.38 (Claude Code); supported: 2.1.38 or newer;" in rows["opus"]
    assert "(0.24.4; supported: 0.1.4 or newer;" in rows["coder"]
    assert "(aider 0.86.2; supported: 0.73.0 or newer;" in rows["ai"]


def test_a_model_the_account_cannot_use_stops_its_seat(project: Project, tmp_path: Path) -> None:
    """codex, qwen and claude answering a 404 for the model: model_unavailable, not retried
    (codex's own retries said 'stream error'), the seat stopped; zero tokens cost zero."""
    folder = install_versions(
        tmp_path, codex="codex-0.44.0-404", qwen="qwen-0.7.1-404", claude="claude-2.1.38-404"
    )
    project.write_roster(
        {name: {"cli": name, "model": "m-1"} for name in ("codex", "qwen", "claude")}
    )
    project.write_manifest(
        [{"id": f"c{n}", "prompt": "hi"} for n in range(2)], seats=("codex", "qwen", "claude")
    )
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    assert project.states() == {
        f"c0:{name}:1": "adapter_error" for name in ("codex", "qwen", "claude")
    }
    for name in ("codex", "qwen", "claude"):
        receipt = project.receipt(f"c0:{name}:1")
        assert receipt["fault"]["kind"] == "model_unavailable", name
        assert receipt["attempts_in_run"] == 1 and "failure_reason" not in receipt
        assert f"seat {name} stopped after a model_unavailable fault: " in done.stderr
    assert project.receipt("c0:codex:1")["fault"]["message"].startswith(
        "unexpected status 404 Not Found: "
    )
    claude = project.receipt("c0:claude:1")
    assert (claude["usage"]["cost_usd"], claude["usage"]["cost_source"]) == (0.0, "reported")
    summary = project.summary()
    assert summary["fault_kinds"] == {"model_unavailable": 3}
    assert summary["by_seat"]["claude"]["usage_all_attempts"]["cells_cost_unknown"] == 0


def test_codex_before_044_is_read(project: Project, tmp_path: Path) -> None:
    """codex 0.42.0's `{"id", "msg"}` events: the answer and token_count usage; an error that
    ends its task with exit 0 is still the fault it names."""
    folder = install_versions(tmp_path, codex="codex-0.42.0-ok")
    project.write_roster({"codex": {"cli": "codex", "model": "m-1", "reasoning": "high"}})
    grader = {"type": "exact_output", "expected": "All good."}
    project.write_manifest(
        [{"id": "hi", "prompt": "Say hi", "graders": [grader]}], seats=("codex",)
    )
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("hi:codex:1")
    assert receipt["state"] == "accepted"
    usage = receipt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["model"]) == (1200, 4, "m-1")
    run = json.loads(Path(receipt["run_dir"], "run.json").read_text())
    assert run["executable_version"] == "codex-cli 0.42.0"
    transcript = json.loads(Path(receipt["run_dir"], "transcript.json").read_text())
    assert transcript["entries"] == [{"kind": "message", "role": "assistant", "text": "All good."}]
    # the same version meeting a model it cannot use: exit 0, an error event
    failing = install_versions(tmp_path / "failing", codex="codex-0.42.0-404")
    project.write_manifest([{"id": "gone", "prompt": "Say hi"}], seats=("codex",))
    done = project.run(PATH=path_with(failing))
    assert done.returncode == 3, done.stderr
    gone = project.receipt("gone:codex:1")
    assert (gone["state"], gone["exit_code"], gone["fault"]["kind"]) == (
        "adapter_error",
        0,
        "model_unavailable",
    )


def test_an_unlabelled_claude_failure_is_never_the_seats(project: Project, tmp_path: Path) -> None:
    """claude 1.0.30 labels nothing: an empty credit balance is still quota, at a known cost of
    zero (every token count 0)."""
    folder = install_versions(tmp_path, claude="claude-1.0.30-400")
    project.write_roster({"opus": {"cli": "claude", "model": "claude-sonnet-4-6"}})
    project.write_manifest([{"id": f"c{n}", "prompt": "hi"} for n in range(2)], seats=("opus",))
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("c0:opus:1")
    assert (receipt["state"], receipt["fault"]) == (
        "adapter_error",
        {"kind": "quota", "message": "Credit balance is too low"},
    )
    assert receipt["usage"]["cost_usd"] == 0.0
    seat = project.summary()["by_seat"]["opus"]
    assert seat["usage_all_attempts"]["cells_cost_unknown"] == 0
    assert done.stderr.splitlines()[-1] == (
        "brigade: seat opus stopped after a quota fault: Credit balance is too low; "
        "1 cell not started"
    )


def test_real_cursor_output_is_read(project: Project, tmp_path: Path) -> None:
    """cursor-agent 2026.09.10 as a public capture recorded it: its answer (thinking events
    first) accepted; a named model its plan may not use (init and user, then the refusal on
    stderr, exit 1) is model_unavailable, never the seat's failure, and stops the seat."""
    folder = install_versions(tmp_path, cursor="cursor-2026.09.10-ok")
    project.write_roster({"cur": {"cli": "cursor", "model": "auto"}})
    grader = {"type": "exact_output", "expected": "ok"}
    project.write_manifest(
        [{"id": "ok", "prompt": "reply with the word ok", "graders": [grader]}], seats=("cur",)
    )
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("ok:cur:1")
    assert receipt["state"] == "accepted"
    usage = receipt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["model"]) == (20920, 28, "Auto")
    run_dir = Path(receipt["run_dir"])
    assert (run_dir / "stdout.log").read_text() == load_sample("cursor-2026.09.10-ok")["stdout"]
    entries = json.loads((run_dir / "transcript.json").read_text())["entries"]
    assert [e["kind"] for e in entries] == ["system", "message", "reasoning", "message"]
    assert entries[2]["text"] == 'Replying with "ok".'
    run = json.loads((run_dir / "run.json").read_text())
    assert run["executable_version"] == "2026.09.10-fd3934a"

    refused = install_versions(tmp_path / "refused", cursor="cursor-2026.09.10-model")
    project.write_roster({"cur": {"cli": "cursor", "model": "gpt-5.4-nano-low"}})
    project.write_manifest([{"id": f"c{n}", "prompt": "hi"} for n in range(2)], seats=("cur",))
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(refused))
    assert done.returncode == 3, done.stderr
    assert project.states() == {"c0:cur:1": "adapter_error"}
    receipt = project.receipt("c0:cur:1")
    assert receipt["fault"] == {
        "kind": "model_unavailable",
        "message": "ActionRequiredError: Named models unavailable Free plans can only use Auto. "
        "Switch to Auto or upgrade plans to continue.",
    }
    assert receipt["attempts_in_run"] == 1 and "failure_reason" not in receipt
    assert "seat cur stopped after a model_unavailable fault: " in done.stderr


def test_real_goose_output_is_read(project: Project, tmp_path: Path) -> None:
    """goose 1.50.1 as a public recording has it: a refused key exits 0 with its banner on
    stdout and a typed authentication error; auth (exit 3), never the seat's, at a known
    cost of zero."""
    folder = install_versions(tmp_path, goose="goose-1.50.1-401")
    project.write_roster({"g": {"cli": "goose", "model": "nvidia/nemotron-3.5-lightning:free"}})
    project.write_manifest([{"id": f"c{n}", "prompt": "hi"} for n in range(2)], seats=("g",))
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("c0:g:1")
    assert (receipt["state"], receipt["exit_code"], receipt["fault"]["kind"]) == (
        "adapter_error",
        0,
        "auth",
    )
    assert receipt["fault"]["message"].startswith("Ran into this error: Authentication error: ")
    assert receipt["attempts_in_run"] == 1 and "failure_reason" not in receipt
    assert (receipt["usage"]["cost_usd"], receipt["usage"]["cost_source"]) == (0.0, "reported")
    assert project.summary()["by_seat"]["g"]["usage_all_attempts"]["cells_cost_unknown"] == 0
    run = json.loads(Path(receipt["run_dir"], "run.json").read_text())
    assert run["executable_version"] == "1.50.1"


def test_real_aider_output_is_read(project: Project, tmp_path: Path) -> None:
    """aider 0.86.2 run with brigade's argv: its answer after other notices (git's, litellm's)
    accepted with the model of its banner; a model the provider does not have stops the seat
    (model_unavailable, exit 3); a 429 it gave up retrying is rate_limited, never the seat's."""
    folder = install_versions(tmp_path, aider="aider-0.86.2-ok")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-1"}})
    grader = {"type": "exact_output", "expected": "All good."}
    project.write_manifest(
        [{"id": "ok", "prompt": "Say: All good.", "graders": [grader]}], seats=("ai",)
    )
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("ok:ai:1")
    assert receipt["state"] == "accepted"
    usage = receipt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["model"]) == (
        1200,
        4,
        "openai/m-1",
    )
    assert usage["cost_source"] == "unknown"  # aider priced nothing for this model
    run = json.loads(Path(receipt["run_dir"], "run.json").read_text())
    assert run["executable_version"] == "aider 0.86.2"

    missing = install_versions(tmp_path / "missing", aider="aider-0.86.2-404")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-missing"}})
    project.write_manifest([{"id": f"c{n}", "prompt": "hi"} for n in range(2)], seats=("ai",))
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(missing))
    assert done.returncode == 3, done.stderr
    assert project.states() == {"c0:ai:1": "adapter_error"}
    gone = project.receipt("c0:ai:1")
    assert (gone["exit_code"], gone["fault"]["kind"], gone["attempts_in_run"]) == (
        0,
        "model_unavailable",
        1,
    )
    assert "seat ai stopped after a model_unavailable fault: litellm.NotFoundError" in done.stderr

    limited = install_versions(tmp_path / "limited", aider="aider-0.86.2-429")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-429"}})
    project.write_manifest([{"id": "r", "prompt": "hi"}], seats=("ai",))
    done = project.run(PATH=path_with(limited))
    assert done.returncode == 3, done.stderr
    receipt = project.receipt("r:ai:1")
    assert (receipt["state"], receipt["fault"]["kind"]) == ("adapter_error", "rate_limited")
    assert receipt["fault"]["retry_after_seconds"] == 20.0
    assert Path(receipt["run_dir"], "final.txt").read_text() == ""  # no error as an answer


def test_an_aider_older_than_its_adapter_is_refused_not_the_seats_failure(
    project: Project, tmp_path: Path
) -> None:
    """aider 0.72.0 has no --reasoning-effort: its argparse refusal is cli_incompatible (exit 3)
    naming the version and the flag; doctor says OLD."""
    folder = install_versions(tmp_path, aider="aider-0.72.0-effort")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-1", "reasoning": "high"}})
    project.write_manifest([{"id": f"c{n}", "prompt": "hi"} for n in range(2)], seats=("ai",))
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    assert project.states() == {"c0:ai:1": "adapter_error"}
    receipt = project.receipt("c0:ai:1")
    assert receipt["fault"] == {
        "kind": "cli_incompatible",
        "message": "aider: error: unrecognized arguments: --reasoning-effort (aider 0.72.0 refused "
        "--reasoning-effort; brigade's aider adapter needs 0.73.0 or newer: upgrade it; brigade "
        "doctor checks every seat)",
    }
    assert receipt["attempts_in_run"] == 1 and "failure_reason" not in receipt
    doctor = project.brigade("doctor", str(project.manifest), PATH=path_with(folder))
    assert doctor.returncode == 1
    assert "(aider 0.72.0; the aider adapter needs 0.73.0 or newer: upgrade it;" in doctor.stdout


def test_a_codex_model_refusal_in_a_dropped_stream_stops_its_seat(
    project: Project, tmp_path: Path
) -> None:
    """codex wraps the refusal as `stream disconnected before completion: The model ... does
    not exist ...`: model_unavailable, not the transient transport_drop; never retried, and
    the seat's other cells are not started."""
    folder = install_fake(tmp_path, "codex")
    project.write_roster({"cx": {**fake_seat("codex"), "env": {"FAKE_CLI_SCENARIO": "model"}}})
    project.write_manifest([{"id": f"c{n}", "prompt": "hi"} for n in range(3)], seats=("cx",))
    done = project.run("--retries", "2", "--retry-backoff", "0", PATH=path_with(folder))
    assert done.returncode == 3, done.stderr
    assert project.states() == {"c0:cx:1": "adapter_error"}
    receipt = project.receipt("c0:cx:1")
    assert receipt["fault"]["kind"] == "model_unavailable"
    assert receipt["fault"]["message"].startswith("stream disconnected before completion: ")
    assert receipt["attempts_in_run"] == 1 and len(calls(folder, "codex")) == 1
    assert done.stderr.splitlines()[-1].startswith(
        "brigade: seat cx stopped after a model_unavailable fault: stream disconnected "
    )
    assert done.stderr.splitlines()[-1].endswith("; 2 cells not started")


def test_a_writable_aider_run_answers_with_the_reply_it_kept(
    project: Project, tmp_path: Path
) -> None:
    """aider 0.86.2 in a writable run: stdout shows its diff of the edit and names the file it
    added to the chat above the second reply; the answer is the reply as the model wrote it,
    from the chat history aider kept in the run folder."""
    git_workspace(project)
    folder = install_versions(tmp_path, aider="aider-0.86.2-edit")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-edit"}})
    sample = load_sample("aider-0.86.2-edit")
    expected = (
        "I'll add the word.\n\nREADME.md\n```\n<<<<<<< SEARCH\nhello\n=======\nhello world\n"
        ">>>>>>> REPLACE\n```\n\nDone."
    )
    grader = {"type": "exact_output", "expected": expected}
    project.write_manifest(
        [{"id": "edit", "prompt": "Say: All good.", "graders": [grader]}],
        seats=("ai",),
        execution={"mode": "writable-worktree"},
    )
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("edit:ai:1")
    assert receipt["state"] == "accepted"
    run_dir = Path(receipt["run_dir"])
    assert (run_dir / "final.txt").read_text() == expected
    assert (run_dir / "stdout.log").read_text() == sample["stdout"]
    usage = receipt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["turns"]) == (2400, 8, 2)


@pytest.mark.parametrize(
    ("sample", "answer"),
    [
        (
            "aider-0.86.2-notice-reply",
            "litellm.RateLimitError: RateLimitError: rate limit exceeded",
        ),
        ("aider-0.86.2-quote-reply", "Here is the poem:\n> roses are red  \n"),
        ("aider-0.86.2-usage-reply", "The answer is 4.\nTokens: 1..2 sent, 3 received.\n"),
    ],
)
def test_an_aider_reply_like_aiders_own_lines_is_graded_as_the_models(
    project: Project, tmp_path: Path, sample: str, answer: str
) -> None:
    """A model whose reply reads like aider's error notice, quotes with line breaks, or has
    lines like aider's usage report (real aider 0.86.2 runs): the run completes and its reply,
    whole, is graded as the model's own. Never an empty answer (a fault, not scored), a
    reply cut at its quote, a crash of the run, or tokens taken off its usage."""
    folder = install_versions(tmp_path, aider=sample)
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-1"}})
    grader = {"type": "regex_output", "pattern": "no such text"}
    project.write_manifest(
        [{"id": "c", "prompt": "Say: All good.", "graders": [grader]}], seats=("ai",)
    )
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    receipt = project.receipt("c:ai:1")
    assert (receipt["state"], receipt.get("fault")) == ("rejected", None)
    final = (Path(receipt["run_dir"]) / "final.txt").read_text()
    expected = load_sample(sample)
    assert final.startswith(answer) and final in expected["files"]["aider.chat.history.md"]
    usage = receipt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (1200, 4)


def test_an_aider_edit_quoting_a_line_like_its_error_notice_is_no_fault(
    project: Project, tmp_path: Path
) -> None:
    """A writable aider 0.86.2 run whose model keeps sending an edit that cannot apply, its
    SEARCH lines a line like aider's error notice (litellm.RateLimitError: ...): aider prints
    its report of the edit, quoting those lines, after each reply, then stops after three
    reflections. The last line like a provider error is followed by aider's own lines, so
    it is no rate limit (left out of the score, retried): the run is graded."""
    git_workspace(project)
    folder = install_versions(tmp_path, aider="aider-0.86.2-edit-notice")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/gpt-4o"}})
    grader = {"type": "regex_output", "pattern": "no such text"}
    project.write_manifest(
        [{"id": "edit", "prompt": "Say: All good.", "graders": [grader]}],
        seats=("ai",),
        execution={"mode": "writable-worktree"},
    )
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 1, done.stderr
    receipt = project.receipt("edit:ai:1")
    assert (receipt["state"], receipt.get("fault")) == ("rejected", None)
    final = (Path(receipt["run_dir"]) / "final.txt").read_text()
    assert final.startswith("Here is the fix.\n") and final.endswith(">>>>>>> REPLACE\n```")
    usage = receipt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["turns"]) == (4800, 16, 4)


def test_aider_history_planted_as_a_link_is_not_followed(project: Project, tmp_path: Path) -> None:
    """An aider whose chat history is a link to another file: the link is not followed, the
    answer is stdout's reply, never the file behind it."""
    secret = tmp_path / "secret.md"
    secret.write_text("\n# aider chat started at x\n\nthe secret behind the link\n")
    folder = tmp_path / "linking"
    folder.mkdir()
    sample = load_sample("aider-0.86.2-ok")
    program = folder / "aider"
    program.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    print('aider 0.86.2'); sys.exit(0)\n"
        "for arg in sys.argv[1:]:\n"
        "    if arg.startswith('--chat-history-file='):\n"
        f"        os.symlink({str(secret)!r}, arg.split('=', 1)[1])\n"
        f"sys.stdout.write({sample['stdout']!r})\n"
    )
    program.chmod(0o755)
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-1"}})
    project.write_manifest([{"id": "ok", "prompt": "Say: All good."}], seats=("ai",))
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("ok:ai:1")
    planted = Path(receipt["run_dir"]).parent / "seat" / "aider.chat.history.md"
    assert planted.is_symlink()  # (where the command line named it)
    assert Path(receipt["run_dir"], "final.txt").read_text() == "All good."


def test_aider_out_of_its_context_window_is_the_seats_own_end(
    project: Project, tmp_path: Path
) -> None:
    """aider 0.86.2 meeting a model's context limit prints its token-limit advice: the seat's
    own failure (execution_error, exit 1), never the apparatus's empty output."""
    folder = install_versions(tmp_path, aider="aider-0.86.2-context")
    project.write_roster({"ai": {"cli": "aider", "model": "openai/m-context"}})
    project.write_manifest([{"id": "long", "prompt": "a long prompt"}], seats=("ai",))
    done = project.run(PATH=path_with(folder))
    assert done.returncode == 1, done.stderr
    receipt = project.receipt("long:ai:1")
    assert receipt["state"] == "execution_error" and "fault" not in receipt
    assert receipt["failure_detail"] == (
        f"{OWN_FAILURES['agent_error']}: Model openai/m-context has hit a token limit!"
    )
    assert receipt["usage"]["input_tokens"] == 161
