"""Built-in agent CLI adapters: argv per mode, prompt placement, output reading."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from agents.cli_outputs import SAMPLES, claude_result, codex_events, jsonl
from agents.fake_cli import BINARIES

from brigade.adapters import adapter_for, built_in, check_cli, known_names
from brigade.adapters.base import Adapter, Reading, SeatRequest
from brigade.adapters.codex_rpc import Session
from brigade.adapters.common import READ_ONLY_NOTICE, classify_fault
from brigade.adapters.exec import ExecAdapter
from brigade.adapters.ollama import OllamaAdapter
from brigade.core.specs import SeatSpec

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
    return SeatSpec(**fields)  # type: ignore[arg-type]


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
        "json",
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
        "json",
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
    assert inv.driver == (sys.executable, "-m", "brigade.adapters.codex_rpc")
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
    assert AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="") == Reading("All good.")


@pytest.mark.parametrize(
    ("info", "kind", "detail"),
    [
        ("usageLimitExceeded", "rate_limited", "usage limit exceeded"),
        ("rateLimitExceeded", "rate_limited", "rate limit exceeded"),
        ("serverOverloaded", "provider_error", "server overloaded"),
        ("internalServerError", "provider_error", "internal server error"),
        ({"httpConnectionFailed": {"httpStatusCode": 503}}, "provider_error", "HTTP 503"),
        ({"responseStreamConnectionFailed": {"httpStatusCode": 429}}, "rate_limited", "HTTP 429"),
        ({"responseStreamDisconnected": {"httpStatusCode": None}}, "transport_error", "stream"),
        ({"httpConnectionFailed": {}}, "transport_error", "connection failed"),
        ("HttpConnectionFailed", "transport_error", "connection failed"),
    ],
)
def test_codex_app_server_error_info_is_an_apparatus_fault(
    info: object, kind: str, detail: str
) -> None:
    error = {"message": "it broke", "codexErrorInfo": info}
    stdout = rpc(*OPENING, turn_completed("failed", error))
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="")
    assert reading.fault is not None
    assert reading.fault.kind == kind
    assert reading.fault.detail.startswith("it broke (") and detail in reading.fault.detail


@pytest.mark.parametrize(
    "info",
    ["contextWindowExceeded", "badRequest", {"httpConnectionFailed": {"httpStatusCode": 401}}],
)
def test_codex_app_server_agent_failures_are_not_faults(info: object) -> None:
    error = {"message": "the model gave up", "codexErrorInfo": info}
    stdout = rpc(*OPENING, turn_completed("failed", error))
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="")
    assert reading.fault is None


def test_codex_app_server_refused_request_and_overload() -> None:
    overloaded = {"code": -32001, "message": "Server overloaded; retry later."}
    stdout = rpc(OPENING[0], OPENING[1], {"id": 3, "error": overloaded})
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="")
    assert reading.fault is not None and reading.fault.kind == "provider_error"
    invalid = {"code": -32602, "message": "bad sandbox"}
    stdout = rpc(OPENING[0], {"id": 2, "error": invalid})
    assert AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="").fault is None


def test_codex_app_server_ended_before_the_turn_completed() -> None:
    stdout = rpc(*OPENING, agent_item("half"))
    stderr = "brigade: connection closed: codex app-server exited with status 1 before ...\n"
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr=stderr)
    assert reading.fault is not None and reading.fault.kind == "transport_error"
    # a non-retried error notice before the end names the cause instead
    notice = {"error": {"message": "quota", "codexErrorInfo": "usageLimitExceeded"}}
    stdout = rpc(*OPENING, {"method": "error", "params": notice})
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr=stderr)
    assert reading.fault is not None and reading.fault.kind == "rate_limited"


def test_codex_app_server_empty_final_message() -> None:
    stdout = rpc(*OPENING, agent_item(""), turn_completed("completed"))
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="")
    assert reading.fault is not None and reading.fault.kind == "empty_output"


def test_cursor_read_only_argv(tmp_path: Path) -> None:
    inv = AGENTS["cursor"].invocation(request(tmp_path, seat("cursor")))
    assert inv.argv == (
        "cursor-agent",
        "-p",
        "--output-format",
        "json",
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
        "json",
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
    assert inv.argv == ("ollama", "run", "llama3.2")
    assert inv.stdin_text == PROMPT
    assert inv.read_only_enforcement == "hard"
    writable = adapter.invocation(request(tmp_path, spec, writable=True))
    assert writable.argv == ("ollama", "run", "llama3.2")
    assert writable.read_only_enforcement == "none"


def test_ollama_reasoning_and_model_mismatch(tmp_path: Path) -> None:
    adapter = OllamaAdapter("gpt-oss:20b")
    inv = adapter.invocation(request(tmp_path, seat("ollama:gpt-oss:20b", model="other")))
    assert inv.argv == ("ollama", "run", "--think=high", "--hidethinking", "gpt-oss:20b")
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
        "json",
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
        "-s",
        "--allow-all-tools",
        "--deny-tool=write",
        "--deny-tool=shell",
        "--model=m",
        "--reasoning-effort=high",
    )
    writable = AGENTS["copilot"].invocation(request(tmp_path, seat("copilot"), writable=True))
    assert writable.argv == (
        "copilot",
        "-s",
        "--allow-all-tools",
        "--model=m",
        "--reasoning-effort=high",
    )


# ---------------------------------------------------------------- output samples


def adapter_named(name: str) -> Adapter:
    return OllamaAdapter("llama3.2") if name == "ollama" else AGENTS[name]


def read(name: str, case: str) -> Reading:
    exit_code, stdout, stderr = SAMPLES[name][case]
    return adapter_named(name).read(exit_code=exit_code, stdout=stdout, stderr=stderr)


ALL = [*BUILT_IN, "ollama"]


def test_every_adapter_has_samples() -> None:
    assert set(SAMPLES) == set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_read_success(name: str) -> None:
    reading = read(name, "success")
    assert reading.final_text == "All good."
    assert reading.fault is None


@pytest.mark.parametrize("name", ALL)
def test_read_empty_message_is_empty_output(name: str) -> None:
    reading = read(name, "empty")
    assert reading.fault is not None
    assert reading.fault.kind == "empty_output"
    assert reading.fault.detail and "\n" not in reading.fault.detail


@pytest.mark.parametrize("name", ALL)
def test_read_rate_limit(name: str) -> None:
    reading = read(name, "rate")
    assert reading.fault is not None
    assert reading.fault.kind == "rate_limited"
    assert reading.fault.detail and "\n" not in reading.fault.detail


@pytest.mark.parametrize("name", ALL)
def test_read_provider_5xx(name: str) -> None:
    reading = read(name, "5xx")
    assert reading.fault is not None
    assert reading.fault.kind == "provider_error"
    assert "\n" not in reading.fault.detail


@pytest.mark.parametrize("name", ALL)
def test_read_plain_nonzero_exit_is_the_agents_own_failure(name: str) -> None:
    assert read(name, "plain").fault is None


# ---------------------------------------------------------------- reading details


def test_codex_keeps_the_last_agent_message_and_ignores_recovered_reconnects() -> None:
    stdout = jsonl(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "first"}},
        {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"},
        {"type": "item.completed", "item": {"id": "b", "type": "reasoning", "text": "hmm"}},
        {"type": "item.completed", "item": {"id": "c", "type": "agent_message", "text": "final"}},
        {"type": "turn.completed", "usage": {}},
    )
    reading = AGENTS["codex"].read(exit_code=0, stdout=stdout, stderr="")
    assert reading == Reading(final_text="final")


def test_codex_dropped_stream_is_a_transport_error() -> None:
    stdout = codex_events(None, failure="stream disconnected before completion: broken pipe")
    reading = AGENTS["codex"].read(exit_code=1, stdout=stdout, stderr="")
    assert reading.fault is not None
    assert reading.fault.kind == "transport_error"


def test_codex_untrusted_directory() -> None:
    stderr = "Not inside a trusted directory and --skip-git-repo-check was not specified.\n"
    reading = AGENTS["codex"].read(exit_code=1, stdout="", stderr=stderr)
    assert reading.fault is not None
    assert reading.fault.kind == "workspace_untrusted"
    assert reading.fault.detail == stderr.strip()


def test_cursor_workspace_trust_refusal() -> None:
    reading = AGENTS["cursor"].read(
        exit_code=1, stdout="", stderr="Workspace Trust Required: run with --trust\n"
    )
    assert reading.fault is not None
    assert reading.fault.kind == "workspace_untrusted"


def test_claude_usage_limit_printed_as_plain_text() -> None:
    reading = AGENTS["claude"].read(
        exit_code=1, stdout="", stderr="You've hit your limit · resets 1pm (Europe/Lisbon)\n"
    )
    assert reading.fault is not None
    assert reading.fault.kind == "rate_limited"


def test_claude_unrecognised_error_result_is_not_a_fault() -> None:
    stdout = claude_result(
        "Tool permission denied", is_error=True, subtype="error_during_execution"
    )
    reading = AGENTS["claude"].read(exit_code=1, stdout=stdout, stderr="")
    assert reading == Reading(final_text="Tool permission denied")


def test_plain_text_answer_mentioning_rate_limits_is_not_a_fault() -> None:
    answer = "I added a 429 response when the rate limit is hit.\n"
    for name in ("aider", "copilot", "ollama"):
        reading = adapter_named(name).read(exit_code=0, stdout=answer, stderr="")
        assert reading.fault is None
        reading = adapter_named(name).read(exit_code=1, stdout=answer, stderr="")
        assert reading.fault is None


def test_empty_output_prefers_a_recognised_stderr_cause() -> None:
    reading = AGENTS["copilot"].read(
        exit_code=0, stdout="", stderr="request failed: connection reset by peer\n"
    )
    assert reading.fault is not None
    assert reading.fault.kind == "transport_error"


def test_killed_process_gets_no_guessed_fault() -> None:
    reading = AGENTS["copilot"].read(exit_code=None, stdout="", stderr="rate limit\n")
    assert reading == Reading(final_text="")


def test_ollama_server_not_running_is_a_transport_error() -> None:
    reading = OllamaAdapter("llama3.2").read(
        exit_code=1, stdout="", stderr="Error: could not connect to ollama app, is it running?\n"
    )
    assert reading.fault is not None
    assert reading.fault.kind == "transport_error"


def test_gemini_json_after_a_notice_line() -> None:
    stdout = "Loaded cached credentials.\n" + json.dumps({"response": "All good."}, indent=2)
    reading = AGENTS["gemini"].read(exit_code=0, stdout=stdout, stderr="")
    assert reading == Reading(final_text="All good.")


def test_unparseable_json_output_falls_back_to_plain_text() -> None:
    for name in ("claude", "codex", "cursor", "gemini", "opencode", "goose", "qwen"):
        reading = AGENTS[name].read(exit_code=0, stdout="just text\n", stderr="")
        assert reading == Reading(final_text="just text")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ('API Error: 429 {"type":"rate_limit_error"}', "rate_limited"),
        ("RESOURCE_EXHAUSTED: quota", "rate_limited"),
        ("API Error: 529 Overloaded", "provider_error"),
        ("unexpected status 502 Bad Gateway", "provider_error"),
        ("stream disconnected before completion", "transport_error"),
        ("fetch failed", "transport_error"),
        ("Not inside a trusted directory", "workspace_untrusted"),
        ("SyntaxError in generated code", None),
        ("disk quota exceeded", None),
        ("tests: 500 passed", None),
        ("error: 512 files changed", None),
        ("MCP server error: github failed to start", None),
    ],
)
def test_classify_fault(message: str, kind: str | None) -> None:
    assert classify_fault(message) == kind
