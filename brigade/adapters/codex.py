"""OpenAI Codex: `codex exec --json` (JSONL events), or a JSON-RPC session with its app-server.

Codex before 0.44 printed other `exec --json` events (`{"id", "msg": {"type": ...}}`,
`agent_message`, `token_count`, `error`): they are read too.

`exec --json` carries no structured error kind: a failed turn's message (the
provider's, as codex words it) is what tells an expired login from a usage
limit. The app-server's errors carry `codexErrorInfo` (unauthorized,
usageLimitExceeded, serverOverloaded, ...), read first. Usage in both is the
thread's running total (see `brigade.core.usage`).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from brigade.adapters import codex_rpc
from brigade.adapters.base import Fault, OwnFailure, SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    classify_fault,
    count,
    dicts,
    fault,
    json_values,
    kind_for_status,
    message_of,
    obj,
    one_line,
    opt,
    status_of,
    text_of,
    until,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry, as_text
from brigade.core.usage import Usage

_REROUTED = re.compile(r"^model rerouted: (?P<old>\S+) -> (?P<new>\S+)")


class CodexAdapter(AgentCli):
    """OpenAI Codex: `codex exec --json ... -` (prompt on stdin, JSONL events), or a
    JSON-RPC session with `codex app-server` when the roster's codex_transport says so.
    """

    name = "codex"
    # exec --json, --skip-git-repo-check and --sandbox, checked with 0.42.0 (its events are
    # read too)
    min_version: str | None = "0.42.0"
    binary = "codex"
    state_paths = ("~/.codex",)
    # its login (an API key or ChatGPT tokens); not config.toml (MCP servers, profiles)
    auth_files = ("~/.codex/auth.json",)

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        if request.seat.codex_transport == "app-server":
            return self._app_server_plan(request)
        seat = request.seat
        reasoning: tuple[str, ...] = ()
        if seat.reasoning:
            # The value of a -c override is TOML; a JSON string is a valid TOML string.
            reasoning = ("-c", f"model_reasoning_effort={json.dumps(seat.reasoning)}")
        args = (
            "exec",
            "--json",
            # The workspace may be a plain folder; without this codex refuses to start.
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write" if request.writable else "read-only",
            *opt("--model", seat.model),
            *reasoning,
            "-",
        )
        return ArgvPlan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )

    def _app_server_plan(self, request: SeatRequest) -> ArgvPlan:
        # The session (thread/start with the sandbox, turn/start with the prompt)
        # is held by brigade's own client, which runs `codex app-server` itself.
        doc = codex_rpc.session_document(
            prompt=request.prompt,
            cwd=str(request.cwd),
            writable=request.writable,
            model=request.seat.model,
            effort=request.seat.reasoning,
        )
        return ArgvPlan(
            args=("app-server",),
            stdin_text=json.dumps(doc, ensure_ascii=False),
            enforcement="none" if request.writable else "hard",
            driver=(sys.executable, "-m", codex_rpc.DRIVER_MODULE),
        )

    def _parse(self, out: CliOutput) -> Parsed:
        events = dicts(json_values(out.stdout))
        if not events:
            return Parsed(final_text=out.stdout.strip())
        if any("method" in event or "result" in event for event in events):
            return _parse_app_server(events, out.now)
        if any(isinstance(event.get("msg"), dict) for event in events):
            return _parse_legacy_exec(events, out.now)
        return _parse_exec(events, out.now)


def _failed_turn(message: str, now: float) -> tuple[Fault | None, OwnFailure | None]:
    """A failed turn: a fault when its message names one, else the seat's own failure."""
    found = fault(classify_fault(message), message, now)
    if found is not None:
        return found, None
    return None, OwnFailure(kind="agent_error", detail=one_line(message))


def _parse_exec(events: list[dict[str, Any]], now: float) -> Parsed:
    """`codex exec --json`: the last agent message, the failed turn, usage, the items."""
    text = ""
    entries: list[Entry] = []
    thread: str | None = None
    model: str | None = None
    last_usage: dict[str, Any] | None = None
    turns = 0
    failed: str | None = None
    stream_error: str | None = None
    for event in events:
        kind = event.get("type")
        item = obj(event.get("item"))
        if kind == "thread.started":
            thread = text_of(event.get("thread_id")) or thread
        elif kind == "item.completed":
            if item.get("type") in ("agent_message", "assistant_message"):
                text = str(item.get("text") or "")
            rerouted = _REROUTED.match(str(item.get("message") or ""))
            if item.get("type") == "error" and rerouted:
                model = rerouted["new"]
            entries.extend(_exec_item_entries(item))
        elif kind == "turn.completed":
            turns += 1
            last_usage = obj(event.get("usage"))
        elif kind == "turn.failed":
            failed = message_of(obj(event.get("error")).get("message")) or "turn failed"
            entries.append(Entry(kind="error", text=failed))
        elif kind == "error":
            stream_error = message_of(event.get("message")) or "error"
            entries.append(Entry(kind="error", text=stream_error))
    usage = _exec_usage(last_usage, turns, thread, model)
    # Codex reports transient reconnects as error events and then carries on;
    # they only count when the turn never completed.
    error = failed or (None if turns else stream_error)
    if error is None:
        return Parsed(final_text=text, usage=usage, transcript=tuple(entries), reported=turns > 0)
    found, own = _failed_turn(error, now)
    return Parsed(
        final_text="",  # codex drops the answer of a failed turn
        fault=found,
        own_failure=own,
        usage=usage,
        transcript=tuple(entries),
        reported=True,
    )


def _parse_legacy_exec(events: list[dict[str, Any]], now: float) -> Parsed:
    """`codex exec --json` before 0.44: a config line, then `{"id", "msg": {"type", ...}}`
    events; usage is the running total of the last `token_count`, an `error` ends the task
    (exit 0) and `stream_error`s are its retries."""
    text = ""
    entries: list[Entry] = []
    model: str | None = None
    total: dict[str, Any] | None = None
    error: str | None = None
    commands: dict[str, Any] = {}
    for event in events:
        msg = event.get("msg")
        if not isinstance(msg, dict):
            if "prompt" not in event:
                model = text_of(event.get("model")) or model  # the config summary line
            continue
        kind = msg.get("type")
        if kind == "agent_message":
            text = str(msg.get("message") or "")
            error = None
            entries.append(Entry(kind="message", role="assistant", text=text))
        elif kind == "agent_reasoning" and text_of(msg.get("text")):
            entries.append(Entry(kind="reasoning", text=msg["text"]))
        elif kind == "token_count":
            info = msg.get("info")
            if isinstance(info, dict):
                total = obj(info.get("total_token_usage")) or total
            elif "input_tokens" in msg:  # the earliest builds: the counts themselves
                total = msg
        elif kind == "exec_command_begin":
            commands[str(msg.get("call_id"))] = msg.get("command")
        elif kind == "exec_command_end":
            call_id = text_of(msg.get("call_id"))
            output = msg.get("aggregated_output") or msg.get("stdout") or msg.get("stderr")
            code = msg.get("exit_code")
            item = {"command": commands.get(str(call_id), msg.get("command"))}
            entries.extend(_shell(item, call_id, code, output))
        elif kind == "error":
            error = message_of(msg.get("message")) or "error"
            entries.append(Entry(kind="error", text=error))
        elif kind == "stream_error":
            entries.append(Entry(kind="system", text=str(msg.get("message") or "")))
    usage = _exec_usage(total, 0, None, model) if total is not None or model else None
    if error is None:
        return Parsed(final_text=text, usage=usage, transcript=tuple(entries), reported=bool(text))
    found, own = _failed_turn(error, now)
    return Parsed(
        "", fault=found, own_failure=own, usage=usage, transcript=tuple(entries), reported=True
    )


def _exec_usage(
    usage: dict[str, Any] | None, turns: int, thread: str | None, model: str | None
) -> Usage | None:
    if usage is None and thread is None:
        return None
    usage = usage or {}
    # the running total of the thread: the last turn's figures are the run's
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        cached_input_tokens=count(usage.get("cached_input_tokens")),
        cache_write_tokens=count(usage.get("cache_write_input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        reasoning_tokens=count(usage.get("reasoning_output_tokens")),
        turns=turns if turns else None,
        model=model,
        models=(),
        session_id=thread,
    )


def _exec_item_entries(item: dict[str, Any]) -> list[Entry]:
    kind = item.get("type")
    call_id = text_of(item.get("id"))
    status = item.get("status")
    if kind in ("agent_message", "assistant_message"):
        return [Entry(kind="message", role="assistant", text=str(item.get("text") or ""))]
    if kind == "reasoning":
        return [Entry(kind="reasoning", text=str(item.get("text") or ""))]
    if kind == "command_execution":
        return _shell(item, call_id, item.get("exit_code"), item.get("aggregated_output"))
    if kind == "file_change":
        return _call_and_result(
            "file_change",
            {"changes": item.get("changes") or []},
            call_id,
            str(status or ""),
            is_error=status == "failed",
        )
    if kind == "mcp_tool_call":
        return _mcp_call(item, call_id)
    if kind == "web_search":
        return _web_search(item, call_id)
    if kind == "todo_list":
        steps = [
            f"[{'x' if step.get('completed') else ' '}] {step.get('text')}"
            for step in item.get("items") or ()
            if isinstance(step, dict)
        ]
        return [Entry(kind="system", text="\n".join(steps))]
    if kind == "error":
        return [Entry(kind="system", text=str(item.get("message") or ""))]
    return []


# -- app-server ----------------------------------------------------------------------

# CodexErrorInfo names (lower-cased) and the fault each is; anything else that is not
# `other` (context window, bad request, sandbox...) is the agent's own failure.
_CODEX_FAULTS: dict[str, FaultKind] = {
    "unauthorized": "auth",
    "usagelimitexceeded": "quota",
    "serveroverloaded": "overloaded",
    "internalservererror": "provider_5xx",
    "httpconnectionfailed": "transport_drop",
    "responsestreamconnectionfailed": "transport_drop",
    "responsestreamdisconnected": "transport_drop",
    "responsetoomanyfailedattempts": "transport_drop",
}
_AGENTS_OWN = {
    "contextwindowexceeded",
    "badrequest",
    "sandboxerror",
    "threadrollbackfailed",
    "cyberpolicy",
    "activeturnnotsteerable",
}
# JSON-RPC error the server answers a request with when it is overloaded
_SERVER_OVERLOADED = -32001


def _error_info_kind(info: Any, message: str) -> tuple[FaultKind | None, bool]:
    """The fault a codexErrorInfo names and whether it is the agent's own failure."""
    if classify_fault(message) == "model_unavailable":
        # codex wraps a refused model in whatever failed with it (a dropped stream)
        return "model_unavailable", False
    if isinstance(info, str):
        name, detail = info, {}
    elif isinstance(info, dict) and len(info) == 1:
        name, value = next(iter(info.items()))
        detail = obj(value)
    else:
        return classify_fault(message), False
    key = name.replace("_", "").lower()
    if key in _AGENTS_OWN:
        return None, True
    status = status_of(detail.get("httpStatusCode"))
    if key in _CODEX_FAULTS:
        if status is not None:
            # the provider's status is the more precise (a 429 under a failed stream)
            by_status = kind_for_status(status, message)
            return by_status, by_status is None
        return _CODEX_FAULTS[key], False
    # `other`: codex keeps the provider's status in the message text
    return classify_fault(message), False


class _Session:
    """What an app-server transcript says, collected in one pass."""

    def __init__(self) -> None:
        self.text = ""
        self.entries: list[Entry] = []
        self.turns = 0
        self.completed = False
        self.failure: tuple[Fault | None, OwnFailure | None] | None = None
        self.notice: tuple[str, Any] | None = None
        self.thread: str | None = None
        self.model: str | None = None
        self.total: dict[str, Any] | None = None
        self.resets: list[float] = []


def _parse_app_server(messages: list[dict[str, Any]], now: float) -> Parsed:
    """The answer, fault, usage and items from a `codex app-server` session transcript."""
    state = _Session()
    for message in messages:
        method = message.get("method")
        params = obj(message.get("params"))
        if method is None:
            _on_response(state, message, now)
        elif "id" not in message:  # a request from the server is answered by the client
            _on_notification(state, method, params, now)
    usage = _app_server_usage(state)
    transcript = tuple(state.entries)
    if state.failure is None and not state.completed:
        if state.notice is not None:
            state.failure = _turn_error(state.notice[0], state.notice[1], now, state)
        else:
            detail = "connection closed: codex app-server ended before the turn completed"
            state.failure = (Fault(kind="transport_drop", detail=detail), None)
    if state.failure is None:
        return Parsed(final_text=state.text, usage=usage, transcript=transcript, reported=True)
    found, own = state.failure
    return Parsed(
        "", fault=found, own_failure=own, usage=usage, transcript=transcript, reported=True
    )


def _on_response(state: _Session, message: dict[str, Any], now: float) -> None:
    error = message.get("error")
    if error is not None:
        if state.failure is None:
            text = str(obj(error).get("message") or message_of(error) or "request failed")
            if obj(error).get("code") == _SERVER_OVERLOADED:
                state.failure = (fault("overloaded", text, now), None)
            else:
                state.failure = _failed_turn(text, now)
        return
    result = obj(message.get("result"))
    thread = obj(result.get("thread"))
    if thread:
        state.thread = text_of(thread.get("id")) or state.thread
        state.model = text_of(result.get("model")) or state.model


def _on_notification(state: _Session, method: str, params: dict[str, Any], now: float) -> None:
    if method == "item/completed":
        item = obj(params.get("item"))
        if item.get("type") == "agentMessage":
            state.text = str(item.get("text") or "")
        state.entries.extend(_app_item_entries(item))
    elif method == "turn/completed":
        state.completed = True
        state.turns += 1
        turn = obj(params.get("turn"))
        status = turn.get("status")
        if status == "failed" and state.failure is None:
            error = obj(turn.get("error"))
            message = str(error.get("message") or "turn failed")
            state.entries.append(Entry(kind="error", text=message))
            state.failure = _turn_error(message, error.get("codexErrorInfo"), now, state)
        elif status == "interrupted" and state.failure is None:
            state.failure = (None, OwnFailure(kind="agent_error", detail="turn interrupted"))
    elif method == "error":
        error = obj(params.get("error"))
        message = str(error.get("message") or "error")
        details = text_of(error.get("additionalDetails"))
        text = f"{message} ({details})" if details else message
        state.entries.append(Entry(kind="error", text=text))
        if params.get("willRetry") is not True:
            state.notice = (text, error.get("codexErrorInfo"))
    elif method == "thread/tokenUsage/updated":
        state.total = obj(obj(params.get("tokenUsage")).get("total"))
    elif method == "model/rerouted":
        state.model = text_of(params.get("toModel")) or state.model
        state.entries.append(
            Entry(
                kind="system",
                text=f"model rerouted: {params.get('fromModel')} -> {params.get('toModel')}",
            )
        )
    elif method == "account/rateLimits/updated":
        limits = obj(params.get("rateLimits"))
        for window in (obj(limits.get("primary")), obj(limits.get("secondary"))):
            used = window.get("usedPercent")
            reset = window.get("resetsAt")
            if isinstance(used, (int, float)) and used >= 100 and isinstance(reset, (int, float)):
                state.resets.append(float(reset))


def _turn_error(
    message: str, info: Any, now: float, state: _Session
) -> tuple[Fault | None, OwnFailure | None]:
    """A failed turn: the fault its codexErrorInfo (or message) names, or the agent's failure."""
    kind, own = (
        _error_info_kind(info, message) if info is not None else (classify_fault(message), False)
    )
    if kind is None:
        return None, OwnFailure(kind="agent_error", detail=one_line(message))
    wait = until(max(state.resets), now) if kind == "quota" and state.resets else None
    return fault(kind, message, now, wait), None


def _app_server_usage(state: _Session) -> Usage | None:
    if state.total is None and state.thread is None:
        return None
    total = state.total or {}
    return Usage(
        input_tokens=count(total.get("inputTokens")),
        cached_input_tokens=count(total.get("cachedInputTokens")),
        cache_write_tokens=count(total.get("cacheWriteInputTokens")),
        output_tokens=count(total.get("outputTokens")),
        reasoning_tokens=count(total.get("reasoningOutputTokens")),
        turns=state.turns or None,
        model=state.model,
        session_id=state.thread,
    )


def _app_item_entries(item: dict[str, Any]) -> list[Entry]:
    kind = item.get("type")
    call_id = text_of(item.get("id"))
    status = item.get("status")
    if kind == "agentMessage":
        return [Entry(kind="message", role="assistant", text=str(item.get("text") or ""))]
    if kind == "userMessage":
        content = item.get("content")
        return [Entry(kind="message", role="user", text=as_text(content))] if content else []
    if kind == "reasoning":
        parts = [*(item.get("summary") or ()), *(item.get("content") or ())]
        text = "\n".join(part for part in parts if isinstance(part, str))
        return [Entry(kind="reasoning", text=text)] if text else []
    if kind == "commandExecution":
        return _shell(item, call_id, item.get("exitCode"), item.get("aggregatedOutput"))
    if kind == "fileChange":
        return _call_and_result(
            "file_change",
            {"changes": item.get("changes") or []},
            call_id,
            str(status or ""),
            is_error=status in ("failed", "declined"),
        )
    if kind == "mcpToolCall":
        return _mcp_call(item, call_id)
    if kind == "webSearch":
        return _web_search(item, call_id)
    return []


# -- items both protocols share (the same fields, spelled per protocol by the caller) --


def _call_and_result(
    name: str, call_input: Any, call_id: str | None, output: str, *, is_error: bool
) -> list[Entry]:
    return [
        Entry(kind="tool_call", name=name, input=call_input, call_id=call_id),
        Entry(kind="tool_result", name=name, output=output, is_error=is_error, call_id=call_id),
    ]


def _shell(item: dict[str, Any], call_id: str | None, exit_code: Any, output: Any) -> list[Entry]:
    status = item.get("status")
    failed = status in ("failed", "declined") or (isinstance(exit_code, int) and exit_code != 0)
    return _call_and_result(
        "shell", {"command": item.get("command")}, call_id, str(output or ""), is_error=failed
    )


def _mcp_call(item: dict[str, Any], call_id: str | None) -> list[Entry]:
    name = f"{item.get('server')}.{item.get('tool')}"
    error = message_of(obj(item.get("error")).get("message"))
    result = obj(item.get("result"))
    output = error or (as_text(result.get("content")) if result.get("content") else "")
    failed = item.get("status") == "failed" or error is not None
    return _call_and_result(name, item.get("arguments"), call_id, output, is_error=failed)


def _web_search(item: dict[str, Any], call_id: str | None) -> list[Entry]:
    return [
        Entry(
            kind="tool_call", name="web_search", input={"query": item.get("query")}, call_id=call_id
        )
    ]
