"""Built-in agent CLI adapters: argv per mode, prompt placement, output reading."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import cli_outputs as out
from agents.cli_outputs import NOW, SAMPLES, jsonl
from agents.fake_cli import BINARIES, TRUST_REFUSALS

from brigade.adapters import adapter_for, built_in, check_cli, common, known_names
from brigade.adapters.base import Adapter, Fault, OwnFailure, Reading, SeatRequest
from brigade.adapters.codex_rpc import Session
from brigade.adapters.common import (
    READ_ONLY_NOTICE,
    classify_fault,
    kind_for_status,
    one_line,
    retry_after,
)
from brigade.adapters.exec import ExecAdapter
from brigade.adapters.names import BUILT_IN_NAMES
from brigade.adapters.ollama import OllamaAdapter
from brigade.core.specs import SeatSpec
from brigade.core.transcript import Entry
from brigade.core.usage import ModelUsage, Usage

AGENTS = built_in()

PROMPT = "Review the parser.\nList the bugs."

BUILT_IN = ["claude", "codex", "cursor", "gemini", "opencode", "aider", "goose", "qwen", "copilot"]

# Adapters whose CLI reads the prompt on stdin; the others take it as argv.
STDIN_PROMPT = {"claude", "codex", "gemini", "opencode", "qwen", "copilot"}

# How each CLI is given the model and the reasoning setting (None: not supported).
MODEL_ARGS = {
    "claude": ("--model", "m"),
    "codex": ("--model", "m"),
    "cursor": ("--model", "m"),
    "gemini": ("--model", "m"),
    "opencode": ("--model", "m"),
    "aider": ("--model", "m"),
    "goose": ("--model", "m"),
    "qwen": ("--model", "m"),
    "copilot": ("--model=m",),
}
REASONING_ARGS: dict[str, tuple[str, ...] | None] = {
    "claude": ("--effort", "high"),
    "codex": ("-c", 'model_reasoning_effort="high"'),
    "cursor": None,
    "gemini": None,
    "opencode": ("--variant", "high"),
    "aider": ("--reasoning-effort", "high"),
    "goose": None,
    "qwen": None,
    "copilot": ("--reasoning-effort=high",),
}


def seat(cli: str = "claude", **overrides: object) -> SeatSpec:
    fields: dict[str, object] = {"name": "s", "cli": cli, "model": "m", "reasoning": "high"}
    fields.update(overrides)
    return SeatSpec(**fields)


def request(
    tmp_path: Path,
    spec: SeatSpec,
    *,
    writable: bool = False,
    prompt: str = PROMPT,
) -> SeatRequest:
    return SeatRequest(
        seat=spec,
        prompt=prompt,
        cwd=tmp_path,
        run_dir=tmp_path / "run",
        writable=writable,
        cell_id="c1",
        coordinate="case/s/1",
    )


def contains_run(argv: tuple[str, ...], run: tuple[str, ...]) -> bool:
    return any(argv[i : i + len(run)] == run for i in range(len(argv) - len(run) + 1))


# ---------------------------------------------------------------- registry


def test_registry_has_every_built_in_cli() -> None:
    assert set(BUILT_IN) <= set(AGENTS)
    for name, adapter in AGENTS.items():
        assert adapter.name == name
        assert adapter.binary == BINARIES[name]  # type: ignore[attr-defined]


def test_registry_lookups_go_through_the_package() -> None:
    assert adapter_for("claude") is AGENTS["claude"]
    ollama = adapter_for("ollama:llama3.2")
    assert isinstance(ollama, OllamaAdapter)
    assert ollama.model == "llama3.2"
    assert isinstance(adapter_for("exec:true"), ExecAdapter)
    assert check_cli("cursor") is None
    assert check_cli("nope") is not None
    assert "copilot" in known_names()


def test_a_roster_is_checked_with_the_names_the_adapters_have() -> None:
    """check_cli answers without importing an adapter: its names are the registry's, and
    a prefixed seat is refused for what its adapter would refuse."""
    assert BUILT_IN_NAMES == tuple(sorted(built_in()))
    assert all(check_cli(name) is None for name in built_in())
    for cli in ("exec:", "exec:   ", "exec:'unclosed", "ollama:", "ollama:  "):
        problem = check_cli(cli)
        factory = ExecAdapter if cli.startswith("exec:") else OllamaAdapter
        with pytest.raises(ValueError) as refused:
            factory(cli.split(":", 1)[1])
        assert problem == str(refused.value)
    assert check_cli("exec:python3 -c 'print(1)'") is None
    assert check_cli("ollama:llama3.2") is None
    assert check_cli("cursor-agent") == (
        "unknown cli 'cursor-agent'; use one of aider, claude, codex, copilot, cursor, gemini, "
        "goose, opencode, qwen, ollama:<model> or exec:<command line>"
    )


@pytest.mark.parametrize("name", BUILT_IN)
def test_version_argv(name: str) -> None:
    assert AGENTS[name].version_argv(seat(name)) == (BINARIES[name], "--version")


def test_ollama_version_argv() -> None:
    assert OllamaAdapter("qwen3").version_argv(seat("ollama:qwen3")) == ("ollama", "--version")


# ---------------------------------------------------------------- exact argv


def test_claude_read_only_argv(tmp_path: Path) -> None:
    inv = AGENTS["claude"].invocation(request(tmp_path, seat("claude")))
    assert inv.argv == (
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "default",
        "--disallowedTools",
        "Bash,Edit,MultiEdit,Write,NotebookEdit",
        "--strict-mcp-config",
        "--model",
        "m",
        "--effort",
        "high",
    )
    assert inv.stdin_text == PROMPT
    assert inv.read_only_enforcement == "hard"
    assert inv.settings_not_applied == ()


def test_claude_writable_argv(tmp_path: Path) -> None:
    inv = AGENTS["claude"].invocation(request(tmp_path, seat("claude"), writable=True))
    assert inv.argv == (
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash",
        "--model",
        "m",
        "--effort",
        "high",
    )
    assert inv.stdin_text == PROMPT
    assert inv.read_only_enforcement == "none"


def test_codex_read_only_argv(tmp_path: Path) -> None:
    spec = seat("codex", codex_transport="exec")
    inv = AGENTS["codex"].invocation(request(tmp_path, spec))
    assert inv.argv == (
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "--model",
        "m",
        "-c",
        'model_reasoning_effort="high"',
        "-",
    )
    assert inv.stdin_text == PROMPT
    assert inv.read_only_enforcement == "hard"
    assert inv.settings_not_applied == ()


def test_codex_writable_argv(tmp_path: Path) -> None:
    spec = seat("codex", codex_transport="exec", model=None, reasoning=None)
    inv = AGENTS["codex"].invocation(request(tmp_path, spec, writable=True))
    assert inv.argv == (
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "-",
    )
    assert inv.read_only_enforcement == "none"


def test_codex_app_server_runs_the_server_under_brigades_client(tmp_path: Path) -> None:
    spec = seat("codex", codex_transport="app-server")
    inv = AGENTS["codex"].invocation(request(tmp_path, spec))
    assert inv.argv == ("codex", "app-server")
    assert inv.driver == (sys.executable, "-m", "brigade.run.codex_driver")
    assert inv.settings_not_applied == ()
    assert inv.read_only_enforcement == "hard"
    assert inv.stdin_text is not None
    assert json.loads(inv.stdin_text) == {
        "prompt": PROMPT,
        "cwd": str(tmp_path),
        "writable": False,
        "model": "m",
        "effort": "high",
    }
    writable = AGENTS["codex"].invocation(request(tmp_path, spec, writable=True))
    assert writable.read_only_enforcement == "none"
    assert writable.stdin_text is not None
    assert json.loads(writable.stdin_text)["writable"] is True


def test_codex_rpc_session_handshake_thread_and_turn() -> None:
    session = Session(prompt='-x "q"\nline', cwd="/w", writable=False, model="m", effort="low")
    [initialize] = session.start()
    assert initialize == {
        "method": "initialize",
        "id": 1,
        "params": {
            "clientInfo": {"name": "brigade", "title": "brigade evaluation runner", "version": "0"}
        },
    }
    assert "jsonrpc" not in initialize
    initialized, thread_start = session.feed({"id": 1, "result": {"userAgent": "x"}})
    assert initialized == {"method": "initialized"}
    assert thread_start == {
        "method": "thread/start",
        "id": 2,
        "params": {"cwd": "/w", "approvalPolicy": "never", "sandbox": "read-only", "model": "m"},
    }
    assert session.feed({"method": "thread/started", "params": {"thread": {"id": "t"}}}) == []
    [turn_start] = session.feed({"id": 2, "result": {"thread": {"id": "t"}}})
    assert turn_start == {
        "method": "turn/start",
        "id": 3,
        "params": {
            "threadId": "t",
            "input": [{"type": "text", "text": '-x "q"\nline'}],
            "effort": "low",
        },
    }
    assert session.feed({"id": 3, "result": {"turn": {"id": "u", "status": "inProgress"}}}) == []
    assert not session.finished
    other = {"threadId": "elsewhere", "turn": {"status": "completed"}}
    session.feed({"method": "turn/completed", "params": other})
    assert not session.finished
    mine = {"threadId": "t", "turn": {"id": "u", "status": "completed"}}
    session.feed({"method": "turn/completed", "params": mine})
    assert session.finished and session.succeeded


def test_codex_rpc_session_answers_server_requests() -> None:
    read_only = Session(prompt="p", cwd="/w", writable=False)
    writable = Session(prompt="p", cwd="/w", writable=True)
    ask = {"method": "item/fileChange/requestApproval", "id": 7, "params": {}}
    assert read_only.feed(ask) == [{"id": 7, "result": {"decision": "decline"}}]
    assert writable.feed(ask) == [{"id": 7, "result": {"decision": "accept"}}]
    legacy = {"method": "execCommandApproval", "id": "a", "params": {}}
    assert read_only.feed(legacy) == [{"id": "a", "result": {"decision": "denied"}}]
    [refusal] = read_only.feed({"method": "tool/requestUserInput", "id": 8, "params": {}})
    assert refusal["id"] == 8 and refusal["error"]["code"] == -32601


def test_codex_rpc_session_stops_on_a_refused_request() -> None:
    session = Session(prompt="p", cwd="/w", writable=False)
    session.start()
    assert session.feed({"id": 1, "error": {"code": -32600, "message": "nope"}}) == []
    assert session.finished and not session.succeeded
    assert session.feed({"id": 1, "result": {}}) == []  # nothing after the end


def rpc(*messages: object) -> str:
    return jsonl(*messages)


def turn_completed(status: str, error: object = None) -> dict[str, object]:
    turn = {"id": "u", "status": status, "items": [], "error": error}
    return {"method": "turn/completed", "params": {"threadId": "t", "turn": turn}}


def agent_item(text: str) -> dict[str, object]:
    return {"method": "item/completed", "params": {"item": {"type": "agentMessage", "text": text}}}


OPENING = (
    {"id": 1, "result": {"userAgent": "codex"}},
    {"id": 2, "result": {"thread": {"id": "t"}}},
    {"method": "thread/started", "params": {"thread": {"id": "t"}}},
    {"id": 3, "result": {"turn": {"id": "u", "status": "inProgress"}}},
)


def test_codex_app_server_transcript_final_message() -> None:
    retried = {"error": {"message": "Reconnecting... 1/5"}, "willRetry": True}
    stdout = rpc(
        *OPENING,
        {"method": "item/agentMessage/delta", "params": {"itemId": "m", "delta": "All "}},
        {"method": "error", "params": retried},
        agent_item("draft"),
        agent_item("All good."),
        turn_completed("completed"),
    )
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading == Reading(
        "All good.",
        usage=Usage(turns=1, session_id="t"),
        transcript=(
            Entry(kind="error", text="Reconnecting... 1/5"),
            Entry(kind="message", role="assistant", text="draft"),
            Entry(kind="message", role="assistant", text="All good."),
        ),
    )


@pytest.mark.parametrize(
    ("info", "message", "kind"),
    [
        ("unauthorized", "Your access token could not be refreshed.", "auth"),
        ("usageLimitExceeded", "You've hit your usage limit.", "quota"),
        ("serverOverloaded", "Selected model is at capacity.", "overloaded"),
        ("internalServerError", "We're currently experiencing high demand.", "provider_5xx"),
        ({"httpConnectionFailed": {"httpStatusCode": 503}}, "upstream failed", "overloaded"),
        ({"httpConnectionFailed": {"httpStatusCode": 502}}, "upstream failed", "provider_5xx"),
        ({"httpConnectionFailed": {"httpStatusCode": 401}}, "upstream failed", "auth"),
        ({"responseStreamConnectionFailed": {"httpStatusCode": 429}}, "it broke", "rate_limited"),
        ({"responseTooManyFailedAttempts": {"httpStatusCode": 429}}, "retries", "rate_limited"),
        ({"responseStreamDisconnected": {"httpStatusCode": None}}, "stream", "transport_drop"),
        ({"httpConnectionFailed": {}}, "it broke", "transport_drop"),
        ("HttpConnectionFailed", "it broke", "transport_drop"),
        ("other", "unexpected status 401 Unauthorized: Incorrect API key provided", "auth"),
        ("other", "exceeded retry limit, last status: 429 Too Many Requests", "rate_limited"),
    ],
)
def test_codex_app_server_error_info(info: object, message: str, kind: str) -> None:
    error = {"message": message, "codexErrorInfo": info}
    stdout = rpc(*OPENING, turn_completed("failed", error))
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault == Fault(kind=kind, detail=message)
    assert reading.final_text == ""


@pytest.mark.parametrize(
    "info",
    [
        "contextWindowExceeded",
        "badRequest",
        "other",
        {"httpConnectionFailed": {"httpStatusCode": 400}},
    ],
)
def test_codex_app_server_agent_failures_are_not_faults(info: object) -> None:
    error = {"message": "the model gave up", "codexErrorInfo": info}
    stdout = rpc(*OPENING, turn_completed("failed", error))
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault is None
    assert reading.own_failure == OwnFailure(kind="agent_error", detail="the model gave up")


def test_codex_app_server_quota_waits_for_the_exhausted_window() -> None:
    limits = {
        "rateLimits": {
            "limitId": "codex",
            "primary": {"usedPercent": 100, "windowDurationMins": 300, "resetsAt": NOW + 3600},
            "secondary": {"usedPercent": 40, "windowDurationMins": 10080, "resetsAt": NOW + 86400},
        }
    }
    error = {"message": "You've hit your usage limit.", "codexErrorInfo": "usageLimitExceeded"}
    stdout = rpc(
        *OPENING,
        {"method": "account/rateLimits/updated", "params": limits},
        {"method": "error", "params": {"error": error, "willRetry": False}},
        turn_completed("failed", error),
    )
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault == Fault(
        kind="quota", detail="You've hit your usage limit.", retry_after_seconds=3600.0
    )


def test_codex_app_server_usage_and_model() -> None:
    started = {"id": 2, "result": {"thread": {"id": "thr_1"}, "model": "gpt-5-codex"}}
    usage = {
        "threadId": "thr_1",
        "turnId": "u",
        "tokenUsage": {
            "total": {
                "totalTokens": 28912,
                "inputTokens": 28794,
                "cachedInputTokens": 23040,
                "outputTokens": 118,
                "reasoningOutputTokens": 64,
            },
            "last": {
                "totalTokens": 14471,
                "inputTokens": 14466,
                "cachedInputTokens": 14080,
                "outputTokens": 5,
                "reasoningOutputTokens": 0,
            },
            "modelContextWindow": 272000,
        },
    }
    command = {
        "type": "commandExecution",
        "id": "cmd_1",
        "command": "ls",
        "cwd": "/w",
        "status": "completed",
        "aggregatedOutput": "README.md\n",
        "exitCode": 0,
    }
    stdout = rpc(
        OPENING[0],
        started,
        OPENING[3],
        {"method": "item/completed", "params": {"item": command}},
        {"method": "thread/tokenUsage/updated", "params": usage},
        agent_item("All good."),
        turn_completed("completed"),
    )
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.usage == Usage(
        input_tokens=28794,
        cached_input_tokens=23040,
        output_tokens=118,
        reasoning_tokens=64,
        turns=1,
        model="gpt-5-codex",
        session_id="thr_1",
    )
    assert reading.transcript == (
        Entry(kind="tool_call", name="shell", input={"command": "ls"}, call_id="cmd_1"),
        Entry(
            kind="tool_result", name="shell", output="README.md\n", is_error=False, call_id="cmd_1"
        ),
        Entry(kind="message", role="assistant", text="All good."),
    )


def test_codex_app_server_refused_request_and_overload() -> None:
    overloaded = {"code": -32001, "message": "Server overloaded; retry later."}
    stdout = rpc(OPENING[0], OPENING[1], {"id": 3, "error": overloaded})
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault == Fault(kind="overloaded", detail="Server overloaded; retry later.")
    invalid = {"code": -32602, "message": "bad sandbox"}
    stdout = rpc(OPENING[0], {"id": 2, "error": invalid})
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault is None
    assert reading.own_failure == OwnFailure(kind="agent_error", detail="bad sandbox")


def test_codex_app_server_ended_before_the_turn_completed() -> None:
    stdout = rpc(*OPENING, agent_item("half"))
    stderr = "brigade: connection closed: codex app-server exited with status 1 before ...\n"
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr=stderr, now=NOW)
    assert reading.fault == Fault(
        kind="transport_drop",
        detail="connection closed: codex app-server ended before the turn completed",
    )
    # a non-retried error notice before the end names the cause instead
    notice = {
        "error": {"message": "You've hit your usage limit.", "codexErrorInfo": "usageLimitExceeded"}
    }
    stdout = rpc(*OPENING, {"method": "error", "params": notice})
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr=stderr, now=NOW)
    assert reading.fault == Fault(kind="quota", detail="You've hit your usage limit.")


def test_codex_app_server_empty_final_message() -> None:
    stdout = rpc(*OPENING, agent_item(""), turn_completed("completed"))
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.fault == Fault(kind="empty_output", detail=EMPTY_DETAIL)


EMPTY_DETAIL = "exited 0 without a final message"


def test_cursor_read_only_argv(tmp_path: Path) -> None:
    inv = AGENTS["cursor"].invocation(request(tmp_path, seat("cursor")))
    assert inv.argv == (
        "cursor-agent",
        "-p",
        "--output-format",
        "stream-json",
        "--trust",
        "--mode",
        "ask",
        "--model",
        "m",
        "--",
        PROMPT,
    )
    assert inv.stdin_text is None
    assert inv.read_only_enforcement == "hard"
    assert inv.settings_not_applied == ("reasoning",)


def test_cursor_writable_argv(tmp_path: Path) -> None:
    spec = seat("cursor", reasoning=None)
    inv = AGENTS["cursor"].invocation(request(tmp_path, spec, writable=True))
    assert inv.argv == (
        "cursor-agent",
        "-p",
        "--output-format",
        "stream-json",
        "--trust",
        "--force",
        "--model",
        "m",
        "--",
        PROMPT,
    )
    assert inv.read_only_enforcement == "none"
    assert inv.settings_not_applied == ()


def test_ollama_argv(tmp_path: Path) -> None:
    adapter = OllamaAdapter("llama3.2")
    spec = seat("ollama:llama3.2", model=None, reasoning=None)
    inv = adapter.invocation(request(tmp_path, spec))
    assert inv.argv == ("ollama", "run", "--verbose", "llama3.2")
    assert inv.stdin_text == PROMPT
    assert inv.read_only_enforcement == "hard"
    writable = adapter.invocation(request(tmp_path, spec, writable=True))
    assert writable.argv == ("ollama", "run", "--verbose", "llama3.2")
    assert writable.read_only_enforcement == "none"


def test_ollama_reasoning_and_model_mismatch(tmp_path: Path) -> None:
    adapter = OllamaAdapter("gpt-oss:20b")
    inv = adapter.invocation(request(tmp_path, seat("ollama:gpt-oss:20b", model="other")))
    assert inv.argv == (
        "ollama",
        "run",
        "--verbose",
        "--think=high",
        "--hidethinking",
        "gpt-oss:20b",
    )
    assert inv.settings_not_applied == ("model",)
    same = adapter.invocation(request(tmp_path, seat("ollama:gpt-oss:20b", model="gpt-oss:20b")))
    assert same.settings_not_applied == ()


@pytest.mark.parametrize("model", ["", "   "])
def test_ollama_needs_a_model(model: str) -> None:
    with pytest.raises(ValueError) as info:
        OllamaAdapter(model)
    assert "\n" not in str(info.value)
    assert check_cli("ollama:" + model) == str(info.value)


# ---------------------------------------------------------------- every adapter


@pytest.mark.parametrize("name", BUILT_IN)
@pytest.mark.parametrize("writable", [False, True])
def test_common_invocation_shape(tmp_path: Path, name: str, writable: bool) -> None:
    spec = seat(name, transport="proxy-x")
    inv = AGENTS[name].invocation(request(tmp_path, spec, writable=writable))
    assert inv.argv[0] == BINARIES[name]
    assert inv.transport == "proxy-x"
    if writable:
        assert inv.read_only_enforcement == "none"
    else:
        expected = "soft" if name == "goose" else "hard"
        assert inv.read_only_enforcement == expected


@pytest.mark.parametrize("name", BUILT_IN)
def test_read_only_and_writable_argv_differ(tmp_path: Path, name: str) -> None:
    spec = seat(name)
    read_only = AGENTS[name].invocation(request(tmp_path, spec))
    writable = AGENTS[name].invocation(request(tmp_path, spec, writable=True))
    assert read_only.argv != writable.argv or read_only.stdin_text != writable.stdin_text


@pytest.mark.parametrize("name", BUILT_IN)
def test_model_and_reasoning_are_passed_or_reported(tmp_path: Path, name: str) -> None:
    inv = AGENTS[name].invocation(request(tmp_path, seat(name)))
    assert contains_run(inv.argv, MODEL_ARGS[name])
    reasoning = REASONING_ARGS[name]
    if reasoning is None:
        assert "reasoning" in inv.settings_not_applied
        assert "high" not in inv.argv
    else:
        assert contains_run(inv.argv, reasoning)
        assert "reasoning" not in inv.settings_not_applied


@pytest.mark.parametrize("name", BUILT_IN)
def test_unset_model_and_reasoning_add_nothing(tmp_path: Path, name: str) -> None:
    spec = seat(name, model=None, reasoning=None)
    inv = AGENTS[name].invocation(request(tmp_path, spec))
    assert inv.settings_not_applied == ()
    flags = ("--model", "--effort", "--variant", "--reasoning-effort", "--think")
    assert not any(arg.startswith(flags) for arg in inv.argv)
    assert "-c" not in inv.argv


@pytest.mark.parametrize("name", BUILT_IN)
def test_prompt_placement(tmp_path: Path, name: str) -> None:
    inv = AGENTS[name].invocation(request(tmp_path, seat(name)))
    if name in STDIN_PROMPT:
        assert inv.stdin_text == PROMPT
        assert not any(PROMPT in arg for arg in inv.argv)
    else:
        assert inv.stdin_text is None
        assert PROMPT in inv.argv[-1]
        assert sum(PROMPT in arg for arg in inv.argv) == 1


def test_cursor_prompt_that_looks_like_an_option_stays_after_end_of_options(
    tmp_path: Path,
) -> None:
    inv = AGENTS["cursor"].invocation(request(tmp_path, seat("cursor"), prompt="--force it"))
    assert inv.argv[-2:] == ("--", "--force it")
    assert "--force" not in inv.argv[:-1]


def test_aider_argv(tmp_path: Path) -> None:
    run = tmp_path / "run"
    read_only = AGENTS["aider"].invocation(request(tmp_path, seat("aider")))
    assert read_only.argv[0] == "aider"
    assert "--no-auto-commits" in read_only.argv
    assert "--no-dirty-commits" in read_only.argv
    assert "--yes-always" in read_only.argv
    assert contains_run(read_only.argv, ("--chat-mode", "ask"))
    assert f"--chat-history-file={run / 'aider.chat.history.md'}" in read_only.argv
    assert read_only.argv[-1] == f"--message={PROMPT}"
    # aider's console wraps at the terminal width: a wide one keeps answers whole
    assert read_only.env == {"COLUMNS": "100000"}
    writable = AGENTS["aider"].invocation(request(tmp_path, seat("aider"), writable=True))
    assert "--chat-mode" not in writable.argv
    assert "--no-auto-commits" in writable.argv
    assert writable.argv[-1] == f"--message={PROMPT}"


def test_goose_argv(tmp_path: Path) -> None:
    read_only = AGENTS["goose"].invocation(request(tmp_path, seat("goose", reasoning=None)))
    assert read_only.argv == (
        "goose",
        "run",
        "--no-session",
        "--output-format",
        "json",
        "--model",
        "m",
        "-t",
        READ_ONLY_NOTICE + PROMPT,
    )
    assert read_only.env == {}
    writable = AGENTS["goose"].invocation(request(tmp_path, seat("goose"), writable=True))
    assert writable.argv[-2:] == ("-t", PROMPT)
    assert writable.env == {"GOOSE_MODE": "auto"}
    dashed = AGENTS["goose"].invocation(
        request(tmp_path, seat("goose"), writable=True, prompt="- fix it")
    )
    assert dashed.argv[-1] == "--text=- fix it"


def test_gemini_and_qwen_argv(tmp_path: Path) -> None:
    gemini = AGENTS["gemini"]
    read_only = gemini.invocation(request(tmp_path, seat("gemini", reasoning=None)))
    assert read_only.argv == (
        "gemini",
        "--output-format",
        "stream-json",
        "--approval-mode",
        "default",
        "--model",
        "m",
    )
    assert read_only.env == {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
    writable = gemini.invocation(request(tmp_path, seat("gemini"), writable=True))
    assert contains_run(writable.argv, ("--approval-mode", "yolo"))
    qwen = AGENTS["qwen"].invocation(request(tmp_path, seat("qwen"), writable=True))
    assert qwen.argv[:5] == ("qwen", "--output-format", "json", "--approval-mode", "yolo")


def test_opencode_argv(tmp_path: Path) -> None:
    read_only = AGENTS["opencode"].invocation(request(tmp_path, seat("opencode")))
    assert read_only.argv == (
        "opencode",
        "run",
        "--format",
        "json",
        "--agent",
        "plan",
        "--model",
        "m",
        "--variant",
        "high",
    )
    writable = AGENTS["opencode"].invocation(request(tmp_path, seat("opencode"), writable=True))
    assert "--agent" not in writable.argv


def test_copilot_argv(tmp_path: Path) -> None:
    read_only = AGENTS["copilot"].invocation(request(tmp_path, seat("copilot")))
    assert read_only.argv == (
        "copilot",
        "--output-format",
        "json",
        "--allow-all-tools",
        "--deny-tool=write",
        "--deny-tool=shell",
        "--model=m",
        "--reasoning-effort=high",
    )
    writable = AGENTS["copilot"].invocation(request(tmp_path, seat("copilot"), writable=True))
    assert writable.argv == (
        "copilot",
        "--output-format",
        "json",
        "--allow-all-tools",
        "--model=m",
        "--reasoning-effort=high",
    )


# ---------------------------------------------------------------- reading: every adapter x case


def adapter_named(name: str) -> Adapter:
    return OllamaAdapter("llama3.2") if name == "ollama" else AGENTS[name]


def read(name: str, case: str) -> Reading:
    exit_code, stdout, stderr = SAMPLES[name][case]
    return adapter_named(name).read(exit_code=exit_code, stdout=stdout, stderr=stderr, now=NOW)


ALL = [*BUILT_IN, "ollama"]
EMPTY = "exited 0 without a final message"


def fault_of(kind: str, detail: str, wait: float | None = None) -> Fault:
    return Fault(kind=kind, detail=one_line(detail), retry_after_seconds=wait)


def own(kind: str, detail: str) -> OwnFailure:
    return OwnFailure(kind=kind, detail=one_line(detail))


def message_of_sample(stdout: str) -> str:
    """The error message of a gemini/qwen sample's terminal result."""
    for value in (
        json.loads(stdout) if stdout.startswith("[") else map(json.loads, stdout.splitlines())
    ):
        if value.get("type") == "result":
            return str(value.get("error", {}).get("message") or value.get("result"))
    raise AssertionError("no result")


def local_midnight(year: int, month: int, day: int) -> float:
    from datetime import datetime

    zone = datetime.fromtimestamp(NOW).astimezone().tzinfo
    return datetime(year, month, day, tzinfo=zone).timestamp()


# (answer, fault, own failure) per adapter and case; details are the CLI's own words
OK = (out.ANSWER, None, None)
ECHO = (out.ECHO_ANSWER, None, None)
PLAIN = ("", None, None)
EXPECTED: dict[str, dict[str, tuple[str, Fault | None, OwnFailure | None]]] = {
    "claude": {
        "success": OK,
        "auth": ("", fault_of("auth", "Not logged in · Please run /login"), None),
        "quota": (
            "",
            fault_of(
                "quota",
                "You've hit your session limit · resets 3:43am (UTC)",
                out.CLAUDE_RESETS_AT - NOW,
            ),
            None,
        ),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "API Error: Server is temporarily limiting requests (not your usage limit) · "
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of(
                "overloaded",
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try "
                "again in a moment. If it persists, check your inference gateway (127.0.0.1:5421).",
            ),
            None,
        ),
        "5xx": ("", fault_of("provider_5xx", "API Error: 500 Internal server error"), None),
        "drop": ("", fault_of("transport_drop", "API Error: Connection error."), None),
        "maxturns": ("", None, own("turn_limit", "Reached maximum number of turns (1)")),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "plain": ("", None, own("agent_error", "No conversation found with session ID: 4f1c9b2e")),
        "model": ("", fault_of("model_unavailable", out.claude_model_text("m-1")), None),
        "args": ("", fault_of("cli_incompatible", "error: unknown option '--effort'"), None),
        # Apr 24, 4am in Tokyo is 2027-04-23T19:00Z: 198 days, 9 hours after NOW
        "extra": (
            "",
            fault_of(
                "quota", "You're out of extra usage · resets Apr 24, 4am (Asia/Tokyo)", 17139600.0
            ),
            None,
        ),
        "unknown": ("", fault_of("unknown", "API Error: Request was aborted."), None),
    },
    "codex": {
        "model": (
            "",
            fault_of(
                "model_unavailable",
                "stream disconnected before completion: The model `gpt-9` does not exist or you "
                "do not have access to it.",
            ),
            None,
        ),
        "success": OK,
        "turns": OK,
        "auth": ("", fault_of("auth", out.CODEX_AUTH), None),
        # the reset time in the message (Apr 28th, 2026) is past at NOW
        "quota": ("", fault_of("quota", out.CODEX_QUOTA), None),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "exceeded retry limit, last status: 429 Too Many Requests, "
                "request id: 8c2f0a7e-1b3d-4e5f-9a6b-7c8d9e0f1a2b",
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of("overloaded", "Selected model is at capacity. Please try a different model."),
            None,
        ),
        "5xx": (
            "",
            fault_of(
                "provider_5xx",
                "We're currently experiencing high demand, which may cause temporary errors.",
            ),
            None,
        ),
        "drop": (
            "",
            fault_of(
                "transport_drop",
                "stream disconnected before completion: error sending request for url "
                "(https://chatgpt.com/backend-api/codex/responses)",
            ),
            None,
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "plain": (
            "",
            None,
            own(
                "agent_error",
                "Codex ran out of room in the model's context window. Start a new thread or "
                "clear earlier history before retrying.",
            ),
        ),
    },
    "cursor": {
        "messages": OK,
        "success": OK,
        "auth": (
            "",
            fault_of(
                "auth",
                "Error: Authentication required. Please run 'agent login' first, or set "
                "CURSOR_API_KEY environment variable.",
            ),
            None,
        ),
        "quota": (
            "",
            fault_of(
                "quota", "Error: You've hit your usage limit", local_midnight(2026, 11, 17) - NOW
            ),
            None,
        ),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "Error: You've hit your rate limit on this model. Please try again later.",
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of(
                "overloaded", "Error: [unavailable] The model is overloaded. Please try again."
            ),
            None,
        ),
        "5xx": ("", fault_of("provider_5xx", "Error: [internal] Internal server error"), None),
        "drop": (
            "",
            fault_of("transport_drop", "Error: ConnectError: [aborted] read ECONNRESET"),
            None,
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "model": (
            "",
            fault_of(
                "model_unavailable",
                "ActionRequiredError: Named models unavailable Free plans can only use Auto. "
                "Switch to Auto or upgrade plans to continue.",
            ),
            None,
        ),
    },
    "gemini": {
        "model": (
            "",
            fault_of(
                "model_unavailable",
                "[API Error: models/m-1 is not found for API version v1beta, or is not supported "
                "for generateContent. Call ListModels to see the list of available models and "
                "their supported methods.]",
            ),
            None,
        ),
        "success": OK,
        "auth": ("", fault_of("auth", out.GEMINI["auth"][2]), None),
        "quota": ("", fault_of("quota", message_of_sample(out.GEMINI["quota"][1])), None),
        "rate": (
            "",
            fault_of("rate_limited", message_of_sample(out.GEMINI["rate"][1]), 34.0),
            None,
        ),
        "overloaded": (
            "",
            fault_of("overloaded", "[API Error: The model is overloaded. Please try again later.]"),
            None,
        ),
        "5xx": ("", fault_of("provider_5xx", "[API Error: Internal error encountered.]"), None),
        "drop": (
            "",
            fault_of(
                "transport_drop", "[API Error: exception TypeError: fetch failed sending request]"
            ),
            None,
        ),
        "maxturns": (
            "",
            None,
            own("turn_limit", message_of_sample(out.GEMINI["maxturns"][1])),
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "plain": (
            "",
            None,
            own("agent_error", "Exiting due to an error processing the @ command."),
        ),
    },
    "qwen": {
        "model": (
            "",
            fault_of(
                "model_unavailable",
                "[API Error: 404 The model `m-1` does not exist or you do not have access to it.]",
            ),
            None,
        ),
        "success": OK,
        "auth": (
            "",
            fault_of("auth", "[API Error: 401 Incorrect API key provided: sk-abc***xyz.]"),
            None,
        ),
        "quota": ("", fault_of("quota", message_of_sample(out.QWEN["quota"][1])), None),
        "rate": (
            "",
            fault_of("rate_limited", message_of_sample(out.QWEN["rate"][1]), 20.0),
            None,
        ),
        "overloaded": (
            "",
            fault_of("overloaded", message_of_sample(out.QWEN["overloaded"][1])),
            None,
        ),
        "5xx": ("", fault_of("provider_5xx", message_of_sample(out.QWEN["5xx"][1])), None),
        "drop": ("", fault_of("transport_drop", "[API Error: Connection error.]"), None),
        "maxturns": (
            "",
            None,
            own(
                "turn_limit",
                "Reached max session turns for this session. Increase the number of turns by "
                "specifying maxSessionTurns in settings.json.",
            ),
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "plain": (
            "",
            None,
            own("agent_error", "Tool execution failed: run_shell_command was denied"),
        ),
    },
    "opencode": {
        "success": OK,
        "auth": ("", fault_of("auth", "ProviderAuthError: invalid x-api-key"), None),
        "quota": ("", fault_of("quota", "APIError: Monthly usage limit reached"), None),
        "rate": ("", fault_of("rate_limited", "APIError: Rate limit exceeded", 30.0), None),
        "overloaded": ("", fault_of("overloaded", "APIError: Overloaded"), None),
        "5xx": ("", fault_of("provider_5xx", "APIError: Internal server error"), None),
        "drop": (
            "",
            fault_of(
                "transport_drop",
                "provider.transport: ECONNRESET: The socket connection was closed unexpectedly",
            ),
            None,
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "plain": PLAIN,
    },
    "aider": {
        "notices": OK,
        "success": OK,
        "model": (
            "",
            fault_of(
                "model_unavailable",
                "litellm.NotFoundError: OpenAIException - The model `m-1` does not exist or you "
                "do not have access to it.",
            ),
            None,
        ),
        "auth": (
            "",
            fault_of(
                "auth",
                "litellm.AuthenticationError: AuthenticationError: OpenrouterException - "
                '{"error":{"message":"No auth credentials found","code":401}}',
            ),
            None,
        ),
        "quota": (
            "",
            fault_of(
                "quota",
                "litellm.APIError: APIError: OpenrouterException - "
                '{"error":{"message":"Insufficient '
                'credits. Add more using https://openrouter.ai/settings/credits","code":402}}',
            ),
            None,
        ),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "litellm.RateLimitError: RateLimitError: AnthropicException - rate limit exceeded",
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of(
                "overloaded",
                'litellm.InternalServerError: AnthropicError - {"type": "error", "error": '
                '{"type": "overloaded_error", "message": "Overloaded"}}',
            ),
            None,
        ),
        "5xx": (
            "",
            fault_of(
                "provider_5xx",
                "litellm.InternalServerError: OpenAIException - 500 Internal Server Error",
            ),
            None,
        ),
        "drop": (
            "",
            fault_of(
                "transport_drop",
                "litellm.InternalServerError: InternalServerError: OpenAIException - "
                "Connection error.",
            ),
            None,
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "args": (
            "",
            fault_of("cli_incompatible", "aider: error: unrecognized arguments: --bogus"),
            None,
        ),
    },
    "goose": {
        "success": OK,
        # goose's own failure, its error line naming no kind: never the seat's, nor its answer
        "unknown": (
            "",
            fault_of("unknown", "Error: Stream decode error: unexpected end of stream"),
            None,
        ),
        "auth": (
            "",
            fault_of(
                "auth",
                "Ran into this error: Authentication error: Authentication failed for "
                "https://api.anthropic.com/v1/messages. Status: 401 Unauthorized.",
            ),
            None,
        ),
        "quota": (
            "",
            fault_of("quota", "Credits exhausted: Your credit balance is too low."),
            None,
        ),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "Rate limit exceeded: Rate limit exceeded. Please retry after 12 seconds",
                12.0,
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of(
                "overloaded", "Server error: Server error (529 <unknown status code>): Overloaded"
            ),
            None,
        ),
        "5xx": (
            "",
            fault_of(
                "provider_5xx",
                "Server error: Server error (500 Internal Server Error): Internal server error",
            ),
            None,
        ),
        "drop": (
            "",
            fault_of(
                "transport_drop",
                "Network error: Could not connect to api.anthropic.com — check your network "
                "connection and try again.",
            ),
            None,
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "plain": PLAIN,
    },
    "copilot": {
        "success": OK,
        "auth": ("", fault_of("auth", "Error: No authentication information found."), None),
        "quota": ("", fault_of("quota", "You have no quota"), None),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "Sorry, you've hit a rate limit that restricts the number of requests. Please "
                "try again in 30 seconds.",
                30.0,
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of("overloaded", "503 Service Unavailable: the model is overloaded"),
            None,
        ),
        "5xx": ("", fault_of("provider_5xx", "500 Internal Server Error"), None),
        "drop": ("", fault_of("transport_drop", "stream disconnected"), None),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "model": (
            "",
            fault_of(
                "model_unavailable",
                'Error: Model "__invalid__" from --model flag is not available.',
            ),
            None,
        ),
    },
    "ollama": {
        "success": OK,
        "auth": (
            "",
            fault_of("auth", "You need to be signed in to Ollama to run Cloud models."),
            None,
        ),
        "rate": (
            "",
            fault_of(
                "rate_limited",
                "Error: 429 Too Many Requests: rate limit exceeded, please retry in 30s",
                30.0,
            ),
            None,
        ),
        "overloaded": (
            "",
            fault_of(
                "overloaded",
                "Error: 503 Service Unavailable: server overloaded, please try again later",
            ),
            None,
        ),
        "5xx": (
            "",
            fault_of(
                "provider_5xx",
                "Error: 500 Internal Server Error: llama runner process has terminated: exit "
                "status 2",
            ),
            None,
        ),
        "drop": (
            "",
            fault_of(
                "transport_drop",
                "Error: could not connect to ollama server, run 'ollama serve' to start it",
            ),
            None,
        ),
        "echo": ECHO,
        "empty": ("", fault_of("empty_output", EMPTY), None),
        "model": (
            "",
            fault_of("model_unavailable", "Error: pull model manifest: file does not exist"),
            None,
        ),
    },
}
CASES = [(name, case) for name in ALL for case in SAMPLES[name]]
NEWER_KINDS = {
    "claude": {"model_unavailable", "cli_incompatible", "unknown"},
    "codex": {"model_unavailable"},
    "cursor": {"model_unavailable"},
    "gemini": {"model_unavailable"},
    "qwen": {"model_unavailable"},
    "aider": {"cli_incompatible", "model_unavailable"},
    "copilot": {"model_unavailable"},
    "ollama": {"model_unavailable"},
    # a status-error run whose error line names no kind (its session code's own notice)
    "goose": {"unknown"},
}


def test_aider_reads_its_banner_after_other_lines() -> None:
    reading = read("aider", "notices")
    assert reading.final_text == out.ANSWER
    assert reading.usage is not None
    assert reading.usage.model == "anthropic/claude-sonnet-4-20250514"


def test_cursor_answers_with_its_last_message_and_keeps_the_rest() -> None:
    # the last message also streamed in pieces first: they are neither answer nor transcript
    reading = read("cursor", "messages")
    assert reading.final_text == out.ANSWER
    said = [
        e.text for e in reading.transcript or () if e.kind == "message" and e.role == "assistant"
    ]
    assert said == ["I'll read the README file", "Based on the README, I'll check it.", out.ANSWER]


def test_every_adapter_has_samples_and_expectations() -> None:
    assert set(SAMPLES) == set(ALL)
    for name in ALL:
        assert set(EXPECTED[name]) == set(SAMPLES[name]), name
        # every fault kind an adapter can meet has a sample
        kinds = {fault.kind for _, fault, _ in EXPECTED[name].values() if fault}
        expected_kinds = {
            "auth",
            "rate_limited",
            "overloaded",
            "provider_5xx",
            "transport_drop",
            "empty_output",
        }
        if name != "ollama":  # no usage limit of ollama's has been captured
            expected_kinds.add("quota")
        # the kinds of newer samples, where each CLI's wording is known
        expected_kinds |= NEWER_KINDS.get(name, set())
        assert kinds == expected_kinds, name


@pytest.mark.parametrize(("name", "case"), CASES)
def test_reading(name: str, case: str) -> None:
    reading = read(name, case)
    answer, fault, own_failure = EXPECTED[name][case]
    assert (reading.final_text, reading.fault, reading.own_failure) == (
        answer,
        fault,
        own_failure,
    )


@pytest.mark.parametrize("name", ALL)
def test_answers_about_faults_are_answers(name: str) -> None:
    # the answer (and the prompt, which adapters never read) talks about 429 and 401
    reading = read(name, "echo")
    assert reading.fault is None
    assert reading.own_failure is None
    assert reading.final_text == out.ECHO_ANSWER


@pytest.mark.parametrize("name", ALL)
def test_killed_process_gets_no_guessed_fault(name: str) -> None:
    _, stdout, stderr = SAMPLES[name]["rate"]
    reading = adapter_named(name).read(exit_code=None, stdout="", stderr=stderr, now=NOW)
    assert reading.fault is None


# ---------------------------------------------------------------- usage per adapter


USAGE: dict[str, Usage | None] = {
    "claude": Usage(
        input_tokens=20839,
        cached_input_tokens=0,
        cache_write_tokens=20333,
        output_tokens=15,
        turns=2,
        cost_usd=0.122623,
        cost_source="reported",
        model="claude-sonnet-4-6",
        models=(
            ModelUsage(
                model="claude-haiku-4-5-20251001",
                input_tokens=504,
                cached_input_tokens=0,
                cache_write_tokens=0,
                output_tokens=11,
                cost_usd=0.000559,
            ),
            ModelUsage(
                model="claude-sonnet-4-6",
                input_tokens=20335,
                cached_input_tokens=0,
                cache_write_tokens=20333,
                output_tokens=4,
                cost_usd=0.12206399999999999,
            ),
        ),
        session_id=out.CLAUDE_SESSION,
        api_duration_seconds=3.091,
    ),
    "codex": Usage(
        input_tokens=52580,
        cached_input_tokens=24832,
        cache_write_tokens=0,
        output_tokens=417,
        reasoning_tokens=128,
        turns=1,
        session_id=out.CODEX_THREAD,
    ),
    "cursor": Usage(
        input_tokens=185,
        cached_input_tokens=80,
        cache_write_tokens=5,
        output_tokens=20,
        model="Claude 4 Sonnet",
        session_id=out.CURSOR_SESSION,
        api_duration_seconds=5.234,
    ),
    "gemini": Usage(
        input_tokens=9320,
        cached_input_tokens=4096,
        output_tokens=661,
        model="gemini-2.5-pro",
        models=(
            ModelUsage(
                model="gemini-2.5-pro",
                input_tokens=8800,
                cached_input_tokens=4096,
                output_tokens=650,
            ),
            ModelUsage(
                model="gemini-2.5-flash-lite",
                input_tokens=520,
                cached_input_tokens=0,
                output_tokens=11,
            ),
        ),
        session_id=out.GEMINI_SESSION,
    ),
    "qwen": Usage(
        input_tokens=16323,
        cached_input_tokens=6000,
        output_tokens=166,
        reasoning_tokens=120,
        turns=2,
        model="qwen3-coder-plus",
        models=(
            ModelUsage(
                model="qwen3-coder-plus",
                input_tokens=16323,
                cached_input_tokens=6000,
                output_tokens=166,
                reasoning_tokens=120,
            ),
        ),
        session_id="s1",
        api_duration_seconds=4.1,
    ),
    "opencode": Usage(
        input_tokens=16564,
        cached_input_tokens=16079,
        cache_write_tokens=128,
        output_tokens=115,
        reasoning_tokens=67,
        turns=2,
        cost_usd=0.0031 + 0.0012,
        cost_source="reported",
        session_id=out.OC_SESSION,
    ),
    "aider": Usage(
        # "12k sent" counted the 1.2k cache write twice
        input_tokens=10800,
        cached_input_tokens=2400,
        cache_write_tokens=1200,
        output_tokens=345,
        turns=1,
        cost_usd=0.05,
        cost_source="reported",
        model="anthropic/claude-sonnet-4-20250514",
    ),
    "goose": Usage(
        input_tokens=5257,
        cached_input_tokens=4352,
        cache_write_tokens=0,
        output_tokens=100,
        cost_usd=0.0184,
        cost_source="reported",
        model="claude-sonnet-4-5",
    ),
    "copilot": Usage(
        output_tokens=53,
        turns=2,
        model="claude-sonnet-4.6",
        session_id=out.COPILOT_SESSION,
        api_duration_seconds=2.833,
    ),
    "ollama": Usage(input_tokens=12, output_tokens=10, model="llama3.2"),
}


@pytest.mark.parametrize("name", ALL)
def test_usage_of_a_successful_run(name: str) -> None:
    assert read(name, "success").usage == USAGE[name]


def test_codex_usage_is_the_threads_running_total() -> None:
    # two turns: turn.completed holds the thread's total so far, so the last one is the run's
    reading = read("codex", "turns")
    assert reading.usage == Usage(
        input_tokens=85681,
        cached_input_tokens=16384,
        cache_write_tokens=0,
        output_tokens=530,
        reasoning_tokens=192,
        turns=2,
        session_id=out.CODEX_THREAD,
    )
    assert reading.final_text == out.ANSWER


def test_codex_rerouted_model_is_the_model_that_answered() -> None:
    stdout = jsonl(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "error",
                "message": "model rerouted: gpt-5-codex -> gpt-5-codex-mini (HighRisk)",
            },
        },
        {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "ok"}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2},
        },
    )
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.usage is not None and reading.usage.model == "gpt-5-codex-mini"
    assert reading.usage.reasoning_tokens is None  # older codex: three fields only


def test_claude_usage_without_model_usage() -> None:
    # the max-turns run: result.usage only, thinking tokens reported apart
    reading = read("claude", "maxturns")
    assert reading.usage == Usage(
        input_tokens=10 + 3118 + 16248,
        cached_input_tokens=16248,
        cache_write_tokens=3118,
        output_tokens=532,
        reasoning_tokens=346,
        turns=2,
        cost_usd=0.0115208,
        cost_source="reported",
        model="claude-haiku-4-5-20251001",
        session_id=out.CLAUDE_SESSION,
        api_duration_seconds=3.091,
    )


def test_a_zero_cost_with_tokens_spent_is_unknown() -> None:
    stdout = jsonl(
        {"type": "step_start", "sessionID": "s", "part": {"type": "step-start"}},
        {"type": "text", "sessionID": "s", "part": {"type": "text", "text": "ok"}},
        {
            "type": "step_finish",
            "sessionID": "s",
            "part": {
                "type": "step-finish",
                "reason": "stop",
                "tokens": {
                    "input": 5,
                    "output": 2,
                    "reasoning": 0,
                    "cache": {"read": 0, "write": 0},
                },
                "cost": 0,
            },
        },
    )
    usage = AGENTS["opencode"].read(exit_code=0, stdout=stdout, stderr="", now=NOW).usage
    assert usage is not None
    assert (usage.input_tokens, usage.cost_usd, usage.cost_source) == (5, None, "unknown")


def test_copilot_usage_per_call_when_reported() -> None:
    calls = [
        {
            "type": "assistant.usage",
            "data": {
                "model": "gpt-5.4",
                "inputTokens": 14677,
                "outputTokens": 90,
                "cacheReadTokens": 3584,
                "cacheWriteTokens": 0,
                "cost": 1,
            },
        },
        {
            "type": "assistant.usage",
            "data": {
                "model": "gpt-5.4",
                "inputTokens": 15000,
                "outputTokens": 10,
                "cacheReadTokens": 14000,
            },
        },
    ]
    _, stdout, _ = SAMPLES["copilot"]["success"]
    lines = stdout.splitlines()
    stdout = "\n".join([*lines[:-1], *map(json.dumps, calls), lines[-1]]) + "\n"
    usage = AGENTS["copilot"].read(exit_code=0, stdout=stdout, stderr="", now=NOW).usage
    assert usage == Usage(
        input_tokens=29677,
        cached_input_tokens=17584,
        cache_write_tokens=0,
        output_tokens=100,
        turns=2,
        model="claude-sonnet-4.6",
        models=(
            ModelUsage(
                model="gpt-5.4",
                input_tokens=29677,
                cached_input_tokens=17584,
                cache_write_tokens=0,
                output_tokens=100,
            ),
        ),
        session_id=out.COPILOT_SESSION,
        api_duration_seconds=2.833,
    )


# ---------------------------------------------------------------- transcripts


def call(name: str, data: object, call_id: str) -> Entry:
    return Entry(kind="tool_call", name=name, input=data, call_id=call_id)


def result(name: str, output: str, call_id: str, is_error: bool = False) -> Entry:
    return Entry(kind="tool_result", name=name, output=output, is_error=is_error, call_id=call_id)


def said(text: str, role: str = "assistant") -> Entry:
    return Entry(kind="message", role=role, text=text)


def system(text: str) -> Entry:
    return Entry(kind="system", text=text)


TRANSCRIPTS: dict[str, tuple[Entry, ...] | None] = {
    "claude": (
        system("model claude-sonnet-4-6"),
        call("Read", {"file_path": "/work/README.md"}, "toolu_01Mo"),
        result("Read", "1\t# demo\n", "toolu_01Mo"),
        said(out.ANSWER),
    ),
    "codex": (
        Entry(kind="reasoning", text="**Checking the repo layout**"),
        call("shell", {"command": "bash -lc ls"}, "item_1"),
        result("shell", "README.md\nsrc\n", "item_1"),
        said(out.ANSWER),
    ),
    "cursor": (
        system("model Claude 4 Sonnet"),
        said("(prompt)", "user"),
        Entry(kind="reasoning", text="Reading the README."),
        call("read", {"path": "README.md"}, "toolu_vrtx_01NnjaR886UcE8whekg2MGJd"),
        result("read", "# demo\n", "toolu_vrtx_01NnjaR886UcE8whekg2MGJd"),
        said(out.ANSWER),
    ),
    "gemini": (
        system("model auto-gemini-2.5"),
        said("(prompt)", "user"),
        said("I'll look at the files."),
        call("list_directory", {"dir_path": "."}, "list_directory__abc123"),
        result("list_directory", "README.md\nsrc", "list_directory__abc123"),
        said(out.ANSWER),
    ),
    "qwen": (
        system("model qwen3-coder-plus"),
        call("run_shell_command", {"command": "ls"}, "call_1"),
        result("run_shell_command", "README.md", "call_1"),
        said(out.ANSWER),
    ),
    "opencode": (
        said("Looking."),
        call("bash", {"command": "ls -la"}, "tool-a04824fda33d"),
        result("bash", "total 15\nREADME.md\n", "tool-a04824fda33d"),
        said(out.ANSWER),
    ),
    "aider": None,
    "goose": (
        said("(prompt)", "user"),
        said("I'll list the files."),
        call("developer__shell", {"command": "ls"}, "call_1"),
        result("developer__shell", "README.md\nsrc\n", "call_1"),
        said(out.ANSWER),
    ),
    "copilot": (
        said("(prompt)", "user"),
        call("view", {"path": "README.md"}, "c1"),
        result("view", "# demo", "c1"),
        said(out.ANSWER),
    ),
    "ollama": None,
}


@pytest.mark.parametrize("name", ALL)
def test_transcript_of_a_successful_run(name: str) -> None:
    assert read(name, "success").transcript == TRANSCRIPTS[name]


def test_claude_transcript_of_a_failure_keeps_the_retries_and_the_error() -> None:
    transcript = read("claude", "overloaded").transcript
    assert transcript is not None
    message = EXPECTED["claude"]["overloaded"][1]
    assert message is not None
    assert transcript == (
        system("model claude-sonnet-4-6"),
        system("API retry 1/2 in 2000 ms after overloaded (529)"),
        system("API retry 2/2 in 2000 ms after overloaded (529)"),
        Entry(kind="error", text=message.detail),
        Entry(kind="error", text=message.detail),
    )


def test_failed_tool_results_are_marked() -> None:
    stdout = jsonl(
        {"type": "init", "timestamp": "t", "session_id": "a1", "model": "gemini-2.5-pro"},
        {
            "type": "tool_use",
            "timestamp": "t",
            "tool_name": "read_file",
            "tool_id": "read_file__17f",
            "parameters": {"absolute_path": "/w/foo.txt"},
        },
        {
            "type": "tool_result",
            "timestamp": "t",
            "tool_id": "read_file__17f",
            "status": "error",
            "error": {"type": "FILE_NOT_FOUND", "message": "File not found: /w/foo.txt"},
        },
        {
            "type": "message",
            "timestamp": "t",
            "role": "assistant",
            "content": "no file",
            "delta": True,
        },
        {"type": "result", "timestamp": "t", "status": "success", "stats": {}},
    )
    reading = AGENTS["gemini"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.final_text == "no file"
    assert reading.transcript is not None
    assert reading.transcript[2] == result(
        "read_file", "File not found: /w/foo.txt", "read_file__17f", is_error=True
    )


# ---------------------------------------------------------------- fault details


def test_claude_invalid_key_and_credit_balance() -> None:
    invalid = out.claude_failure(
        "Invalid API key · Please run /login", "authentication_failed", 401
    )
    credit = out.claude_failure("Credit balance is too low", "billing_error", 400)
    claude = AGENTS["claude"]
    assert claude.read(exit_code=1, stdout=invalid, stderr="", now=NOW).fault == Fault(
        kind="auth", detail="Invalid API key · Please run /login"
    )
    assert claude.read(exit_code=1, stdout=credit, stderr="", now=NOW).fault == Fault(
        kind="quota", detail="Credit balance is too low"
    )


def test_claude_json_mode_output_is_read_too() -> None:
    # `--output-format json` prints the result object alone (or, verbose, an array)
    result_doc = out.claude_result("hi", num_turns=1)
    for stdout in (json.dumps(result_doc), json.dumps([out.claude_init(), result_doc])):
        reading = AGENTS["claude"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
        assert (reading.final_text, reading.fault) == ("hi", None)


def test_claude_error_text_is_never_the_answer() -> None:
    for case in ("auth", "quota", "rate", "maxturns", "plain"):
        assert read("claude", case).final_text == ""


def test_claude_usage_limit_with_an_epoch_and_a_wall_clock_reset() -> None:
    # older wording: the reset time after a bar, in epoch seconds
    stdout = jsonl(
        out.claude_result(
            f"Claude AI usage limit reached|{int(NOW) + 7200}", is_error=True, api_error_status=429
        )
    )
    reading = AGENTS["claude"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault is not None
    assert (reading.fault.kind, reading.fault.retry_after_seconds) == ("quota", 7200.0)


def test_claude_without_a_result_reads_stderr() -> None:
    stderr = "Error: When using --print, --output-format=stream-json requires --verbose\n"
    reading = AGENTS["claude"].read(exit_code=1, stdout="", stderr=stderr, now=NOW)
    assert reading == Reading("")
    stderr = "API Error: Unable to connect to API (ECONNRESET)\n"
    reading = AGENTS["claude"].read(
        exit_code=1, stdout=out.jsonl(out.claude_init()), stderr=stderr, now=NOW
    )
    assert reading.fault == Fault(kind="transport_drop", detail=stderr.strip())


def test_qwen_after_its_error_fix() -> None:
    stdout = json.dumps(
        [
            *out.qwen_messages("", usage=False),
            out.qwen_result(
                "",
                subtype="error_during_execution",
                is_error=True,
                error={"message": "Incorrect API key provided"},
            ),
        ]
    )
    stderr = json.dumps(
        {"error": {"type": "Error", "message": "Incorrect API key provided", "code": 401}}
    )
    reading = AGENTS["qwen"].read(exit_code=1, stdout=stdout, stderr=stderr, now=NOW)
    assert reading.fault == Fault(kind="auth", detail="Incorrect API key provided")


def test_qwen_answer_that_quotes_an_api_error_in_a_longer_text_is_an_answer() -> None:
    text = "The log said: [API Error: 429 Too Many Requests] so I added a retry."
    stdout = out.qwen_answer(text)
    reading = AGENTS["qwen"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert (reading.final_text, reading.fault) == (text, None)


def test_gemini_json_output_of_an_older_setup() -> None:
    stdout = "Loaded cached credentials.\n" + json.dumps({"response": "All good."}, indent=2)
    reading = AGENTS["gemini"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading == Reading("All good.")
    stdout = json.dumps(
        {"response": "", "error": {"type": "Error", "message": "Quota exceeded", "code": 429}}
    )
    reading = AGENTS["gemini"].read(exit_code=173, stdout=stdout, stderr="", now=NOW)
    assert reading.fault == Fault(kind="rate_limited", detail="Quota exceeded")


def test_gemini_untrusted_folder() -> None:
    stderr = "Gemini CLI is not running in a trusted directory. To proceed, trust it.\n"
    reading = AGENTS["gemini"].read(exit_code=55, stdout="", stderr=stderr, now=NOW)
    assert reading.fault == Fault(kind="workspace_untrusted", detail=stderr.strip())


def test_aider_reply_after_a_retried_error() -> None:
    stdout = (
        out.AIDER_BANNER
        + "litellm.RateLimitError: RateLimitError: AnthropicException - rate limit exceeded\n"
        + "The API provider has rate limited you. Try again later or check your quotas.\n"
        + "Retrying in 0.2 seconds...\n"
        + "All good.\n\n"
        + "Tokens: 2.4k sent, 4 received. Cost: $0.0073 message, $0.0073 session.\n"
    )
    reading = AGENTS["aider"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert (reading.final_text, reading.fault) == ("All good.", None)
    assert reading.usage == Usage(
        input_tokens=2400,
        output_tokens=4,
        turns=1,
        cost_usd=0.0073,
        cost_source="reported",
        model="anthropic/claude-sonnet-4-20250514",
    )


def test_aider_reply_lines_that_look_like_usage_inside_the_answer() -> None:
    answer = "Use `Tokens: 12k sent` as the header.\nDone."
    stdout = out.AIDER_BANNER + answer + "\n\nTokens: 1.2k sent, 40 received.\n"
    reading = AGENTS["aider"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.final_text == answer


def test_goose_typed_error_in_an_earlier_message_is_history() -> None:
    stdout = out.goose_output(
        out.goose_message(
            "assistant", {"type": "error", "kind": "authentication", "message": "expired"}
        ),
        out.goose_message("assistant", {"type": "text", "text": "All good."}),
    )
    reading = AGENTS["goose"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert (reading.final_text, reading.fault) == ("All good.", None)


def test_goose_answer_that_merely_mentions_the_error_template_is_an_answer() -> None:
    text = "Ran into this error: none. The tests pass."
    stdout = out.goose_output(out.goose_message("assistant", {"type": "text", "text": text}))
    reading = AGENTS["goose"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert (reading.final_text, reading.fault) == (text, None)


def test_opencode_error_retried_away_is_not_a_fault() -> None:
    _, stdout, _ = SAMPLES["opencode"]["success"]
    error = {"type": "error", "sessionID": "s", "error": out.oc_api_error("Overloaded", 529, True)}
    stdout = json.dumps(error) + "\n" + stdout
    reading = AGENTS["opencode"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert (reading.final_text, reading.fault) == (out.ANSWER, None)


def test_copilot_weekly_limit_is_a_quota() -> None:
    stdout = out.copilot_error(
        {
            "errorType": "rate_limit",
            "message": "You've reached your weekly rate limit.",
            "errorCode": "user_weekly_rate_limited",
        }
    )
    reading = AGENTS["copilot"].read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.fault == Fault(kind="quota", detail="You've reached your weekly rate limit.")


def test_codex_untrusted_directory() -> None:
    stderr = "Not inside a trusted directory and --skip-git-repo-check was not specified.\n"
    reading = AGENTS["codex"].read(exit_code=1, stdout="", stderr=stderr, now=NOW)
    assert reading.fault == Fault(kind="workspace_untrusted", detail=stderr.strip())


def test_cursor_workspace_trust_refusal() -> None:
    # the block cursor-agent 2026.09.10 prints (its last line names no fault)
    _, refusal = TRUST_REFUSALS["cursor"]
    reading = AGENTS["cursor"].read(exit_code=1, stdout="", stderr=refusal + "\n", now=NOW)
    assert reading.fault == Fault(kind="workspace_untrusted", detail="Workspace Trust Required")


def test_plain_text_answer_mentioning_faults_is_not_a_fault() -> None:
    answer = "I added a 429 response when the rate limit is hit; 401 means invalid API key.\n"
    for name in ("aider", "ollama"):
        for code in (0, 1):
            reading = adapter_named(name).read(exit_code=code, stdout=answer, stderr="", now=NOW)
            assert reading.fault is None, (name, code)


def test_empty_output_prefers_a_recognised_stderr_cause() -> None:
    reading = OllamaAdapter("llama3.2").read(
        exit_code=0, stdout="", stderr="Error: connection reset by peer\n", now=NOW
    )
    assert reading.fault == Fault(kind="transport_drop", detail="Error: connection reset by peer")


def test_unparseable_json_output_falls_back_to_plain_text() -> None:
    for name in ("claude", "codex", "cursor", "gemini", "opencode", "goose", "qwen", "copilot"):
        reading = AGENTS[name].read(exit_code=0, stdout="just text\n", stderr="", now=NOW)
        assert reading == Reading(final_text="just text"), name


# ---------------------------------------------------------------- exec


def exec_read(code: int, stderr: str, files: dict[str, str] | None = None) -> Reading:
    return ExecAdapter("true").read(
        exit_code=code, stdout="out", stderr=stderr, files=files, now=NOW
    )


def test_exec_invocation_names_a_usage_file(tmp_path: Path) -> None:
    inv = ExecAdapter("{python} agent.py").invocation(request(tmp_path, seat("exec:x")))
    assert inv.env == {"BRIGADE_USAGE_FILE": str(tmp_path / "run" / "usage.json")}
    assert inv.output_files == ("usage.json",)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "provider answered 503 Service Unavailable",
            Fault("overloaded", "provider answered 503 Service Unavailable"),
        ),
        ("socket closed", Fault("transport_drop", "socket closed")),
        ("quota: out of credits for today", Fault("quota", "out of credits for today")),
        (
            "rate_limited: slow down, retry after 20s",
            Fault("rate_limited", "slow down, retry after 20s", 20.0),
        ),
        ("nonsense: the kind is not one", Fault("transport_drop", "nonsense: the kind is not one")),
    ],
)
def test_exec_tempfail_kind(line: str, expected: Fault) -> None:
    assert exec_read(75, f"warming up\n{line}\n").fault == expected


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("provider returned 500", "provider_5xx"),
        ("upstream: 502 Bad Gateway", "provider_5xx"),
        ("upstream 502", "provider_5xx"),
        ("server error", "provider_5xx"),
        ("Internal Server Error", "provider_5xx"),
        ("internal error from provider", "provider_5xx"),
        ("bad gateway", "provider_5xx"),
        ("HTTP 503", "overloaded"),
        ("model overloaded, try later", "overloaded"),
        ("connection reset by peer", "transport_drop"),
        ("HTTP 429 too many requests", "rate_limited"),
        ("stream closed before the final message", "transport_drop"),
        ("HTTP 5030", "transport_drop"),
        ("status 404", "transport_drop"),
        ("connection reset after 512 bytes", "transport_drop"),
    ],
)
def test_exec_fault_line_words(line: str, kind: str) -> None:
    # a program's own fault line: a 5xx status in it is a provider's; sizes are not statuses
    assert exec_read(75, f"{line}\n").fault == Fault(kind, line)


def test_exec_fault_without_a_line() -> None:
    assert exec_read(75, "").fault == Fault(
        "transport_drop", "exited 75 (EX_TEMPFAIL) without a detail line"
    )


def test_exec_other_exits_are_the_agents_own() -> None:
    assert exec_read(1, "rate limit exceeded\n") == Reading("out")


def test_exec_usage_file() -> None:
    doc = {"input_tokens": 100, "output_tokens": 7, "cost_usd": 0.01, "model": "local-7b"}
    reading = exec_read(0, "", {"usage.json": json.dumps(doc)})
    assert reading.usage == Usage(
        input_tokens=100, output_tokens=7, cost_usd=0.01, cost_source="reported", model="local-7b"
    )
    assert reading.notes == ()


@pytest.mark.parametrize(
    ("text", "note"),
    [
        (
            '{"input_tokens": -1}',
            "usage ignored: usage.json.input_tokens: must be a whole number of 0 or more, or null",
        ),
        (
            '{"tokens": 3}',
            "usage ignored: usage.json: unknown key 'tokens' (known: input_tokens, "
            "cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, turns, "
            "cost_usd, cost_source, model, models, session_id, api_duration_seconds)",
        ),
        (
            "not json",
            "usage ignored: usage.json: not JSON (Expecting value: line 1 column 1 (char 0))",
        ),
    ],
)
def test_exec_bad_usage_file_is_ignored_with_a_note(text: str, note: str) -> None:
    reading = exec_read(0, "", {"usage.json": text})
    assert (reading.final_text, reading.fault, reading.usage, reading.notes) == (
        "out",
        None,
        None,
        (note,),
    )


# ---------------------------------------------------------------- classification and hints


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ('API Error: 429 {"type":"rate_limit_error"}', "rate_limited"),
        ("RESOURCE_EXHAUSTED: too many requests", "rate_limited"),
        ("API Error: 529 Overloaded", "overloaded"),
        ("unexpected status 502 Bad Gateway", "provider_5xx"),
        ("unexpected status 401 Unauthorized: Incorrect API key provided", "auth"),
        ("OAuth token has expired. Please obtain a new token", "auth"),
        ("Your credit balance is too low to access the Anthropic API", "quota"),
        ("You've hit your usage limit. Try again later.", "quota"),
        ("5-hour limit reached ∙ resets 3pm", "quota"),
        ("Quota exceeded. Check your plan and billing details.", "quota"),
        ("Server is temporarily limiting requests (not your usage limit)", "rate_limited"),
        ("You've hit your rate limit on this model", "rate_limited"),
        ("stream disconnected before completion", "transport_drop"),
        ("fetch failed", "transport_drop"),
        ("Not inside a trusted directory", "workspace_untrusted"),
        ("SyntaxError in generated code", None),
        ("disk quota exceeded", None),
        ("tests: 500 passed", None),
        ("error: 512 files changed", None),
        ("MCP server error: github failed to start", None),
        ("permission denied: ./build.sh", None),
    ],
)
def test_classify_fault(message: str, kind: str | None) -> None:
    assert classify_fault(message) == kind


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "", "auth"),
        (403, "", "auth"),
        (402, "", "quota"),
        (429, "Rate limit reached", "rate_limited"),
        (429, "You exceeded your current quota", "quota"),
        (503, "", "overloaded"),
        (529, "", "overloaded"),
        (500, "", "provider_5xx"),
        (408, "", "transport_drop"),
        (400, "Your credit balance is too low", "quota"),
        (400, "invalid model name", "model_unavailable"),
        (404, "The model `m-1` does not exist", "model_unavailable"),
        (404, "not found", None),
        (None, "connection refused", "transport_drop"),
    ],
)
def test_kind_for_status(status: int | None, message: str, kind: str | None) -> None:
    assert kind_for_status(status, message) == kind


def local(year: int, month: int, day: int, hour: int, minute: int) -> float:
    from datetime import datetime

    zone = datetime.fromtimestamp(NOW).astimezone().tzinfo
    return datetime(year, month, day, hour, minute, tzinfo=zone).timestamp()


@pytest.mark.parametrize(
    ("text", "wait"),
    [
        ("Suggested retry after 34s.", 34.0),
        ("Please try again in 4 days", 4 * 86400.0),
        ("rate limited; retry in 1.5 minutes", 90.0),
        ("Please wait in 250ms", 0.25),
        ("try again in 250 ms", 0.25),
        ("resets 3:43am (UTC)", 17 * 3600 + 43 * 60.0),  # NOW is 10:00 UTC: tomorrow's 3:43
        ("or try again at Oct 8th, 2026 9:15 AM.", local(2026, 10, 8, 9, 15) - NOW),
        ("Claude AI usage limit reached|1791370800", 3600.0),
        ("ends on 11/17/2026.", local(2026, 11, 17, 0, 0) - NOW),
        ("try again at Apr 28th, 2026 10:03 PM.", None),  # already past
        ("try again later", None),
    ],
)
def test_retry_after(text: str, wait: float | None) -> None:
    assert retry_after(text, NOW) == (None if wait is None else round(wait, 3))


def test_codex_transcript_of_file_changes_and_mcp_calls() -> None:
    stdout = jsonl(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "file_change",
                "changes": [{"path": "src/lib.rs", "kind": "update"}],
                "status": "completed",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "mcp_tool_call",
                "server": "github",
                "tool": "search",
                "arguments": {"q": "bug"},
                "result": {
                    "content": [{"type": "text", "text": "3 issues"}],
                    "structured_content": None,
                },
                "error": None,
                "status": "completed",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_2",
                "type": "mcp_tool_call",
                "server": "github",
                "tool": "get",
                "arguments": {},
                "result": None,
                "error": {"message": "not found"},
                "status": "failed",
            },
        },
        {"type": "item.completed", "item": {"id": "item_3", "type": "web_search", "query": "rust"}},
        {
            "type": "item.completed",
            "item": {
                "id": "item_4",
                "type": "command_execution",
                "command": "cargo test",
                "aggregated_output": "1 failed",
                "exit_code": 101,
                "status": "failed",
            },
        },
        {
            "type": "item.completed",
            "item": {"id": "item_5", "type": "agent_message", "text": "done"},
        },
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1},
        },
    )
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.transcript == (
        call("file_change", {"changes": [{"path": "src/lib.rs", "kind": "update"}]}, "item_0"),
        result("file_change", "completed", "item_0"),
        call("github.search", {"q": "bug"}, "item_1"),
        result("github.search", "3 issues", "item_1"),
        call("github.get", {}, "item_2"),
        result("github.get", "not found", "item_2", is_error=True),
        Entry(kind="tool_call", name="web_search", input={"query": "rust"}, call_id="item_3"),
        call("shell", {"command": "cargo test"}, "item_4"),
        result("shell", "1 failed", "item_4", is_error=True),
        said("done"),
    )


def test_cursor_transcript_of_function_tools_and_failures() -> None:
    stdout = jsonl(
        {
            "type": "tool_call",
            "subtype": "started",
            "call_id": "c1",
            "tool_call": {"function": {"name": "grep", "arguments": '{"pattern":"x"}'}},
        },
        {
            "type": "tool_call",
            "subtype": "completed",
            "call_id": "c1",
            "tool_call": {
                "function": {
                    "name": "grep",
                    "arguments": '{"pattern":"x"}',
                    "result": {"error": {"message": "no match"}},
                }
            },
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": "none found"},
    )
    reading = AGENTS["cursor"].read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.final_text == "none found"
    assert reading.transcript == (
        call("grep", '{"pattern":"x"}', "c1"),
        result("grep", '{"message": "no match"}', "c1", is_error=True),
    )


def test_failed_tools_of_opencode_goose_and_copilot() -> None:
    opencode = jsonl(
        {
            "type": "tool_use",
            "sessionID": "s",
            "part": {
                "type": "tool",
                "tool": "edit",
                "callID": "e1",
                "state": {
                    "status": "error",
                    "input": {"filePath": "a.py"},
                    "error": "file not found",
                },
            },
        },
        {"type": "text", "sessionID": "s", "part": {"type": "text", "text": "gave up"}},
    )
    reading = AGENTS["opencode"].read(exit_code=0, stdout=opencode, stderr="", now=NOW)
    assert reading.transcript == (
        call("edit", {"filePath": "a.py"}, "e1"),
        result("edit", "file not found", "e1", is_error=True),
        said("gave up"),
    )
    goose = out.goose_output(
        out.goose_message(
            "assistant",
            {
                "type": "toolRequest",
                "id": "t1",
                "toolCall": {
                    "status": "success",
                    "value": {"name": "developer__shell", "arguments": {"command": "x"}},
                },
            },
        ),
        out.goose_message(
            "user",
            {
                "type": "toolResponse",
                "id": "t1",
                "toolResult": {"status": "error", "error": "-32603: boom"},
            },
        ),
        out.goose_message("assistant", {"type": "text", "text": "failed"}),
    )
    reading = AGENTS["goose"].read(exit_code=0, stdout=goose, stderr="", now=NOW)
    assert reading.transcript is not None
    assert reading.transcript[1:3] == (
        call("developer__shell", {"command": "x"}, "t1"),
        result("developer__shell", "-32603: boom", "t1", is_error=True),
    )
    copilot = jsonl(
        out.cp(
            "tool.execution_start",
            {"toolCallId": "k", "toolName": "shell", "arguments": {"command": "rm"}},
        ),
        out.cp(
            "tool.execution_complete",
            {
                "toolCallId": "k",
                "success": False,
                "error": {"message": "Denied by preToolUse hook: no", "code": "denied"},
            },
        ),
        out.cp("assistant.message", {"content": "not allowed", "model": "gpt-5.4"}),
        out.copilot_result(0),
    )
    reading = AGENTS["copilot"].read(exit_code=0, stdout=copilot, stderr="", now=NOW)
    assert reading.final_text == "not allowed"
    assert reading.transcript == (
        call("shell", {"command": "rm"}, "k"),
        result("shell", "Denied by preToolUse hook: no", "k", is_error=True),
        said("not allowed"),
    )


@pytest.mark.parametrize(
    ("text", "kind", "wait"),
    [
        ("Invalid API key · Please run /login", "auth", None),
        (
            'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":'
            '"Number of request tokens has exceeded your per-minute rate limit"}}',
            "rate_limited",
            None,
        ),
        (
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":'
            '"Overloaded"}}',
            "overloaded",
            None,
        ),
        (
            'API Error: 500 {"type":"error","error":{"type":"api_error","message":'
            '"Internal server error"}}',
            "provider_5xx",
            None,
        ),
        (f"Claude AI usage limit reached|{int(NOW) + 7200}", "quota", 7200.0),
        # a reset without a year, in the zone the CLI names: the next Apr 24, 4am in Tokyo
        ("You're out of extra usage · resets Apr 24, 4am (Asia/Tokyo)", "quota", 17139600.0),
        # nothing matched: still the apparatus's, of a kind unknown
        ("Something the CLI never explained", "unknown", None),
    ],
)
def test_an_unlabelled_claude_error_result_is_classified_by_its_text(
    text: str, kind: str, wait: float | None
) -> None:
    """A result `success` with is_error and no label (no synthetic `error`, no status, no
    terminal_reason): the CLI reporting a failed request, never the seat's failure."""
    reading = adapter_for("claude").read(
        exit_code=1, stdout=out.claude_unlabelled(text), stderr="", now=NOW
    )
    assert reading.own_failure is None and reading.final_text == ""
    fault = reading.fault
    assert fault is not None and (fault.kind, fault.detail, fault.retry_after_seconds) == (
        kind,
        text,
        wait,
    )


def test_a_pretty_document_after_chatter_with_an_empty_object_inside_is_read() -> None:
    """goose's json document after its own notice, a tool call's arguments holding `[{}]`:
    the `{}` line alone is no JSONL event, the document is still the output."""
    doc = json.loads(out.goose_answer(out.ANSWER))
    doc["messages"][1]["content"][1]["toolCall"]["value"]["arguments"] = {"edits": [{}]}
    stdout = "  error: a notice before the document\n" + json.dumps(doc, indent=2) + "\n"
    reading = adapter_for("goose").read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert (reading.final_text, reading.fault) == (out.ANSWER, None)
    calls = [e for e in reading.transcript or () if e.kind == "tool_call"]
    assert [c.input for c in calls] == [{"edits": [{}]}]


def test_a_refused_goose_request_costs_a_known_zero() -> None:
    """goose's totals for a request the provider refused are zero, its cost 0.0: known."""
    reading = read("goose", "auth")
    usage = reading.usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (0, 0)
    assert (usage.cost_usd, usage.cost_source) == (0.0, "reported")


def aider_history(*replies: str) -> str:
    """aider's chat history of one session: its notices quoted, the prompt, each reply."""
    text = "\n# aider chat started at 2026-10-07 10:00:00\n\n> Aider v0.86.2  \n"
    text += "> Model: openai/m-1 with ask edit format  \n\n#### Say it.  \n#### > also this  \n"
    for reply in replies:
        text += f"\n{reply}\n\n\n> Tokens: 1.2k sent, 4 received.  \n"
    return text


def test_aider_answers_with_its_last_reply_as_its_history_keeps_it() -> None:
    """The reply as the model wrote it (a markdown quote in it kept), not stdout's rendering;
    without the history file, stdout's reply."""
    code, stdout, stderr = SAMPLES["aider"]["success"]
    reply = "First line.\n> a quote the model wrote\nLast line."
    files = {
        "aider.chat.history.md": "# aider chat started at old\n\nstale\n"
        + aider_history("an earlier reply", reply)
    }
    adapter = adapter_for("aider")
    reading = adapter.read(exit_code=code, stdout=stdout, stderr=stderr, files=files, now=NOW)
    assert reading.final_text == reply
    assert adapter.read(exit_code=code, stdout=stdout, stderr=stderr, now=NOW).final_text == (
        out.ANSWER
    )
    # a run that ended on a provider error answers nothing, whatever its history holds
    code, stdout, stderr = SAMPLES["aider"]["overloaded"]
    reading = adapter.read(exit_code=code, stdout=stdout, stderr=stderr, files=files, now=NOW)
    assert reading.final_text == ""
    # so does an empty reply: aider's notice of it, not a reply, precedes its usage report
    # (as aider 0.86.2 writes it), also after an earlier call's reply
    empty = (
        "> Empty response received from LLM. Check your provider account?  \n"
        "> Tokens: 1.2k sent, 4 received.  \n"
    )
    for history in (aider_history() + empty, aider_history("an earlier reply") + empty):
        code, stdout, stderr = SAMPLES["aider"]["empty"]
        files = {"aider.chat.history.md": history}
        reading = adapter.read(exit_code=code, stdout=stdout, stderr=stderr, files=files, now=NOW)
        assert reading.final_text == "", history


def test_aider_keeps_its_history_in_the_run_folder_and_reads_it_back() -> None:
    request = SeatRequest(
        seat=SeatSpec(name="s", cli="aider", model="m-1"),
        prompt="hi",
        cwd=Path("/w"),
        run_dir=Path("/r"),
        writable=True,
        cell_id="x",
        coordinate="c:s:1",
    )
    invocation = adapter_for("aider").invocation(request)
    assert "--chat-history-file=/r/aider.chat.history.md" in invocation.argv
    assert invocation.output_files == ("aider.chat.history.md",)


@pytest.mark.parametrize(
    ("message", "kind", "wait"),
    [
        (
            "Ran into this error: Rate limit exceeded: Rate limit exceeded. Please retry after "
            "12 seconds.",
            "rate_limited",
            12.0,
        ),
        (
            "Ran into this error: Server error: Server error (529 <unknown status code>): "
            "Overloaded.",
            "overloaded",
            None,
        ),
        (
            "Ran into this error: Server error: Server error (500 Internal Server Error): "
            "Internal server error.",
            "provider_5xx",
            None,
        ),
        (
            "Ran into this error: Request failed: Request failed with status: 400 Bad Request. "
            "Message: Your credit balance is too low to access the Anthropic API.",
            "quota",
            None,
        ),
    ],
)
def test_a_goose_typed_error_of_kind_other_is_the_fault_its_words_name(
    message: str, kind: str, wait: float | None
) -> None:
    """goose types only auth, credits and context errors (its MessageErrorKind); any other
    provider error is `other`, in goose's `Ran into this error: ...` words."""
    error = {"type": "error", "kind": "other", "message": message}
    stdout = out.goose_output(out.goose_message("assistant", error), status="error", zero=True)
    reading = adapter_for("goose").read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    fault = reading.fault
    assert reading.own_failure is None and fault is not None
    assert (fault.kind, fault.detail, fault.retry_after_seconds) == (kind, message, wait)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_turns", "1e999"),
        ("usage", '{"input_tokens": 1e999, "output_tokens": 3}'),
        ("duration_api_ms", "1e999"),
        ("api_error_status", "1e999"),
        ("total_cost_usd", "-1e999"),
    ],
)
def test_numbers_json_cannot_hold_are_no_numbers(field: str, value: str) -> None:
    """`1e999` parses as an infinite float: as a count, a status or a duration it is unknown,
    never a crash of the run or an `Infinity` written into run.json."""
    doc = {"type": "result", "subtype": "success", "is_error": False, "result": "hi"}
    line = json.dumps(doc)[:-1] + f', "{field}": {value}}}'
    reading = adapter_for("claude").read(exit_code=0, stdout=line + "\n", stderr="", now=NOW)
    assert reading.final_text == "hi" and reading.fault is None
    usage = reading.usage
    assert usage is not None and usage.api_duration_seconds is None
    json.dumps(usage.__dict__, allow_nan=False)
    # NaN reaches a reader through a pretty-printed document after chatter
    pretty = json.dumps({**doc, "num_turns": 1}, indent=1).replace(
        '"num_turns": 1', '"num_turns": NaN'
    )
    reading = adapter_for("claude").read(
        exit_code=0, stdout="notice\n" + pretty, stderr="", now=NOW
    )
    assert reading.final_text == "hi" and reading.usage is not None
    assert reading.usage.turns is None
    # goose's totals
    message = out.goose_message("assistant", {"type": "text", "text": "hi"})
    events = json.dumps({"type": "message", "message": message}) + "\n"
    events += '{"type":"complete","input_tokens":1e999,"output_tokens":2}\n'
    reading = adapter_for("goose").read(exit_code=0, stdout=events, stderr="", now=NOW)
    assert reading.final_text == "hi" and reading.usage is not None
    assert reading.usage.input_tokens is None


@pytest.mark.parametrize(
    "line",
    [
        "rate_limited: resets on 13/45/2026",
        "rate_limited: resets on 1/1/0000",
        "rate_limited: retry after " + "9" * 400 + " seconds",
    ],
)
def test_a_wait_no_clock_can_keep_is_no_wait(line: str) -> None:
    """A reset date that is no date, a delay that is an infinite float: the fault stands,
    with no wait, never a crash or an infinite wait."""
    assert retry_after(line, NOW) is None
    reading = ExecAdapter("prog").read(exit_code=75, stdout="", stderr=line + "\n", now=NOW)
    assert reading.fault is not None and reading.fault.kind == "rate_limited"
    assert reading.fault.retry_after_seconds is None


def test_a_fault_keeps_only_a_finite_wait_of_0_or_more() -> None:
    for wait in (float("inf"), float("nan"), -5.0):
        assert Fault(kind="rate_limited", detail="x", retry_after_seconds=wait).document() == {
            "kind": "rate_limited",
            "message": "x",
        }
    assert Fault(kind="rate_limited", detail="x", retry_after_seconds=2).retry_after_seconds == 2


def test_lines_opening_documents_that_never_close_are_tried_a_few_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A seat's stdout of lines each opening an array inside the one before (`[1,1,...,`):
    every try to read a document after chatter nests through a thousand lines before it
    fails, so trying from each line would take the parser minutes for a megabyte. Only the
    first few lines that open one are tried; a real document after chatter is still read."""
    tries: list[int] = []

    class Counted(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
            tries.append(idx)
            return super().raw_decode(s, idx)

    # the reader of a document after chatter, apart from every other JSON parser
    monkeypatch.setattr(common, "json", SimpleNamespace(JSONDecoder=Counted))
    line = "[" + "1," * 50
    stdout = "chatter\n" + "\n".join([line] * 20_000)
    for name in ("claude", "gemini", "goose", "opencode"):
        tries.clear()
        reading = adapter_for(name).read(exit_code=0, stdout=stdout, stderr="", now=NOW)
        assert reading.fault is None or reading.fault.kind == "empty_output"
        assert 0 < len(tries) <= 8, (name, len(tries))
    tries.clear()
    document = json.dumps({"type": "result", "subtype": "success", "result": "hi"}, indent=2)
    stdout = "notice\n{not json\n" + document
    assert adapter_for("claude").read(
        exit_code=0, stdout=stdout, stderr="", now=NOW
    ).final_text == ("hi")


def test_a_claude_stream_that_goes_on_after_its_result_is_the_seats_own_failure() -> None:
    """claude ends its stream with its one result. A line after it, or a second result
    (a fault's, a success's), was written into its output by a process the seat ran: the
    seat's own failure, never a fault nor an answer."""
    success = {"type": "result", "subtype": "success", "is_error": False, "result": "It is 5."}
    fault = {"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 529"}
    init = {"type": "system", "subtype": "init", "model": "m"}
    for events in ([init, success, fault], [init, fault, success], [init, success, init]):
        reading = adapter_for("claude").read(exit_code=0, stdout=jsonl(*events), stderr="", now=NOW)
        assert reading.fault is None and reading.final_text == ""
        assert reading.own_failure is not None and reading.own_failure.kind == "agent_error"
    reading = adapter_for("claude").read(exit_code=0, stdout=jsonl(init, success), stderr="")
    assert (reading.final_text, reading.own_failure) == ("It is 5.", None)


def test_a_stream_that_goes_on_after_its_end_is_the_seats_own_failure() -> None:
    """gemini's stream-json ends with its result, goose's with `complete` (or `error`): a
    fault's report a process the seat ran appended after it is the seat's own failure."""
    code, success, stderr = SAMPLES["gemini"]["success"]
    appended = [line for line in SAMPLES["gemini"]["overloaded"][1].splitlines() if "{" in line]
    assert appended
    reading = adapter_for("gemini").read(
        exit_code=code, stdout=success + "\n".join(appended) + "\n", stderr=stderr, now=NOW
    )
    assert reading.fault is None and reading.final_text == ""
    assert reading.own_failure is not None and reading.own_failure.kind == "agent_error"
    message = out.goose_message("assistant", {"type": "text", "text": "It is 5."}, msg_id="m")
    stream = jsonl(
        {"type": "message", "message": message},
        {"type": "complete", "input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    )
    goose = adapter_for("goose")
    assert goose.read(exit_code=0, stdout=stream, stderr="", now=NOW).final_text == "It is 5."
    extra = {"type": "error", "error": "Server error: 503 Service Unavailable"}
    reading = goose.read(exit_code=0, stdout=stream + jsonl(extra), stderr="", now=NOW)
    assert reading.fault is None and reading.final_text == ""
    assert reading.own_failure is not None and reading.own_failure.kind == "agent_error"


def test_a_goose_document_with_json_after_it_is_the_seats_own_failure() -> None:
    """goose's json output is one pretty-printed document. A one-line document a process
    the seat ran appended after it (its messages a typed error of an overloaded provider)
    would be read alone, line by line: it is the seat's own failure, never that fault."""
    code, stdout, stderr = SAMPLES["goose"]["success"]
    error = {
        "type": "error",
        "kind": "other",
        "message": "Ran into this error: Server error: Server error (529 <unknown status "
        "code>): Overloaded.",
    }
    appended = {"messages": [out.goose_message("assistant", error)], "metadata": {}}
    goose = adapter_for("goose")
    reading = goose.read(exit_code=code, stdout=stdout + jsonl(appended), stderr=stderr, now=NOW)
    assert reading.fault is None and reading.final_text == ""
    assert reading.own_failure is not None and reading.own_failure.kind == "agent_error"
    # goose's own document, and its failed one, read as before
    assert goose.read(exit_code=code, stdout=stdout, stderr=stderr, now=NOW).final_text == (
        out.ANSWER
    )
    code, stdout, stderr = SAMPLES["goose"]["overloaded"]
    assert goose.read(exit_code=code, stdout=stdout, stderr=stderr, now=NOW).fault is not None


@pytest.mark.parametrize(
    "text",
    [
        "Ran into this error: Server error: Server error (529 <unknown status code>): "
        "Overloaded.\n\nPlease retry if you think this is a transient or recoverable error.",
        "Network error: connection reset\n\nPlease resend your message to try again.",
    ],
)
def test_a_goose_models_reply_in_gooses_words_of_an_error_is_its_answer(text: str) -> None:
    """A model that answers in goose's own phrasing of a provider error: goose records the
    inference (provider, model) of what its model wrote, never of its own messages, so the
    reply is an answer to grade, not a fault left out of the score and retried."""
    reply = out.goose_message("assistant", {"type": "text", "text": text}, msg_id="gen-2")
    reading = adapter_for("goose").read(
        exit_code=0, stdout=out.goose_output(reply), stderr="", now=NOW
    )
    assert (reading.final_text, reading.fault, reading.own_failure) == (text, None, None)
    # goose's own message in those words (no inference) is still its report
    del reply["metadata"]["inference"]
    reading = adapter_for("goose").read(
        exit_code=0, stdout=out.goose_output(reply), stderr="", now=NOW
    )
    assert reading.fault is not None and reading.final_text == ""
