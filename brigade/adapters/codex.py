"""OpenAI Codex: `codex exec --json` (JSONL events), or a JSON-RPC session with its app-server."""

from __future__ import annotations

import json
import sys
from typing import Any

from brigade.adapters import codex_rpc
from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    Parsed,
    dicts,
    json_values,
    message_of,
    obj,
    opt,
)


class CodexAdapter(AgentCli):
    """OpenAI Codex: `codex exec --json ... -` (prompt on stdin, JSONL events), or a
    JSON-RPC session with `codex app-server` when the roster's codex_transport says so.
    """

    name = "codex"
    binary = "codex"

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
            driver=(sys.executable, "-m", codex_rpc.__name__),
        )

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        events = dicts(json_values(stdout))
        if not events:
            return Parsed(final_text=stdout.strip())
        if any("method" in event or "result" in event for event in events):
            return _parse_app_server(events)
        text = ""
        failed: str | None = None
        stream_error: str | None = None
        completed = False
        for event in events:
            kind = event.get("type")
            item = obj(event.get("item"))
            item_type = item.get("type") or item.get("item_type")
            if kind == "item.completed" and item_type in ("agent_message", "assistant_message"):
                text = str(item.get("text") or "")
            elif kind == "turn.completed":
                completed = True
            elif kind == "turn.failed":
                failed = message_of(event.get("error")) or "turn failed"
            elif kind == "error":
                stream_error = message_of(event.get("message")) or "error"
        # Codex reports transient reconnects as error events and then carries on;
        # they only count when the turn never completed.
        error = failed or (None if completed else stream_error)
        return Parsed(final_text=text, error=error)


def _parse_app_server(messages: list[dict[str, Any]]) -> Parsed:
    """The final message and any error from a `codex app-server` session transcript."""
    text = ""
    completed = False
    failure: Parsed | None = None
    notice: Parsed | None = None
    for message in messages:
        method = message.get("method")
        params = obj(message.get("params"))
        if method is None:
            error = message.get("error")
            if error is not None and failure is None:
                # The server refused one of brigade's requests (-32001: overloaded).
                code = obj(error).get("code")
                kind = "provider_error" if code == -32001 else None
                failure = Parsed("", message_of(error) or "request failed", kind)
            continue
        if "id" in message:
            continue  # a request from the server; the client has answered it
        if method == "item/completed":
            item = obj(params.get("item"))
            if item.get("type") == "agentMessage":
                text = str(item.get("text") or "")
        elif method == "turn/completed":
            completed = True
            turn = obj(params.get("turn"))
            status = turn.get("status")
            if status == "failed" and failure is None:
                failure = _codex_error(turn.get("error"), "turn failed")
            elif status == "interrupted" and failure is None:
                failure = Parsed("", "turn interrupted")
        elif method == "error" and params.get("willRetry") is not True:
            notice = _codex_error(params.get("error"), "error")
    if failure is None and not completed:
        failure = notice or Parsed(
            "",
            "connection closed: codex app-server ended before the turn completed",
            "transport_error",
        )
    if failure is None:
        return Parsed(final_text=text)
    return Parsed(final_text=text, error=failure.error, fault_kind=failure.fault_kind)


def _codex_error(error: Any, fallback: str) -> Parsed:
    """An app-server TurnError: its message, and the fault its codexErrorInfo names."""
    body = obj(error)
    message = str(body.get("message") or fallback)
    info = body.get("codexErrorInfo")
    if info is None:
        return Parsed("", message)
    kind, label = _codex_error_kind(info)
    return Parsed("", f"{message} ({label})", kind)


# CodexErrorInfo names (lower-cased) that are apparatus faults, with the fault and
# a readable label; anything else (context window, bad request...) is the agent's.
_CODEX_FAULTS = {
    "usagelimitexceeded": ("rate_limited", "usage limit exceeded"),
    "ratelimitexceeded": ("rate_limited", "rate limit exceeded"),
    "serveroverloaded": ("provider_error", "server overloaded"),
    "internalservererror": ("provider_error", "internal server error"),
    "httpconnectionfailed": ("transport_error", "connection failed"),
    "responsestreamconnectionfailed": ("transport_error", "stream connection failed"),
    "responsestreamdisconnected": ("transport_error", "stream disconnected"),
    "responsetoomanyfailedattempts": ("transport_error", "connection failed, retries exhausted"),
}


def _codex_error_kind(info: Any) -> tuple[str | None, str]:
    """The apparatus fault a CodexErrorInfo value names (or None), and a readable label."""
    if isinstance(info, str):
        name, detail = info, {}
    elif isinstance(info, dict) and len(info) == 1:
        name, value = next(iter(info.items()))
        detail = obj(value)
    else:
        return None, json.dumps(info, sort_keys=True)
    kind, label = _CODEX_FAULTS.get(name.replace("_", "").lower(), (None, name))
    status = detail.get("httpStatusCode")
    if isinstance(status, int):
        label = f"{label}, HTTP {status}"
        if status == 429:
            kind = "rate_limited"
        elif status >= 500:
            kind = "provider_error"
        elif status >= 400:
            kind = None  # the provider refused the request (auth, bad request)
    return kind, label
