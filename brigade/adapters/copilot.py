"""GitHub Copilot CLI: prompt piped on stdin, JSONL events (`--output-format json`).

Every event is `{type, data, id, timestamp}`: `assistant.message` (content,
tool requests, model, output tokens), `tool.execution_start/complete`,
`assistant.usage` per model call when the CLI emits it, `session.error` with
a structured `errorType` (authentication, quota, rate_limit, ...),
`statusCode` and `errorCode`, and a final `result` (session id, exit code,
premium requests). The answer is the last non-empty assistant message.
"""

from __future__ import annotations

from typing import Any

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
    obj,
    one_line,
    opt_eq,
    status_of,
    text_of,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry, as_text
from brigade.core.usage import ModelUsage, Usage, from_models, merge_models

# session.error errorType values and the fault each is (None: the agent's own)
_ERROR_TYPES: dict[str, FaultKind | None] = {
    "authentication": "auth",
    "authorization": "auth",
    "quota": "quota",
    "rate_limit": "rate_limited",
    "context_limit": None,
}


class CopilotAdapter(AgentCli):
    """GitHub Copilot CLI, prompt piped on stdin, JSONL events."""

    name = "copilot"
    # --output-format json came in 0.0.423 (0.0.420 has none)
    min_version: str | None = "0.0.423"
    binary = "copilot"
    state_paths = ("~/.copilot",)
    # its token where no keychain holds it (config.json, beside its settings), and the
    # GitHub CLI's, which it falls back to; not mcp-config.json or its agents
    auth_files = ("~/.copilot/config.json", "~/.config/gh/hosts.yml")

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        # Non-interactive runs need --allow-all-tools; deny rules take precedence
        # over it, and shell goes too because a shell can write anywhere.
        denied: tuple[str, ...] = (
            () if request.writable else ("--deny-tool=write", "--deny-tool=shell")
        )
        args = (
            # JSONL events: the answer, the tool calls, errors by type, the model
            "--output-format",
            "json",
            "--allow-all-tools",
            *denied,
            *opt_eq("--model", seat.model),
            *opt_eq("--reasoning-effort", seat.reasoning),
        )
        return ArgvPlan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )

    def _parse(self, out: CliOutput) -> Parsed:
        events = dicts(json_values(out.stdout))
        if not events:
            return Parsed(final_text=out.stdout.strip())
        entries: list[Entry] = []
        names: dict[str, str] = {}
        answer = ""
        error: dict[str, Any] | None = None
        result: dict[str, Any] | None = None
        for event in events:
            kind = event.get("type")
            data = obj(event.get("data"))
            if kind == "assistant.message":
                content = data.get("content")
                if isinstance(content, str) and content.strip():
                    answer = content
                    entries.append(Entry(kind="message", role="assistant", text=content))
            elif kind == "user.message" and text_of(data.get("content")):
                entries.append(Entry(kind="message", role="user", text=data["content"]))
            elif kind == "assistant.reasoning" and text_of(data.get("content")):
                entries.append(Entry(kind="reasoning", text=data["content"]))
            elif kind == "tool.execution_start":
                call_id = text_of(data.get("toolCallId"))
                name = text_of(data.get("toolName"))
                if call_id and name:
                    names[call_id] = name
                entries.append(
                    Entry(kind="tool_call", name=name, input=data.get("arguments"), call_id=call_id)
                )
            elif kind == "tool.execution_complete":
                entries.append(_tool_result(data, names))
            elif kind == "session.error":
                error = data
                entries.append(Entry(kind="error", text=str(data.get("message") or "")))
            elif kind == "result":
                result = event
        usage = _usage(events, result)
        transcript = tuple(entries)
        if error is not None:
            found, own = _error(error, out.now)
            return Parsed(
                "", fault=found, own_failure=own, usage=usage, transcript=transcript, reported=True
            )
        return Parsed(
            answer,
            usage=usage,
            transcript=transcript,
            reported=result is not None and result.get("exitCode") == 0,
        )


def _error(data: dict[str, Any], now: float) -> tuple[Fault | None, OwnFailure | None]:
    message = str(data.get("message") or "error")
    error_type = str(data.get("errorType") or "")
    status = status_of(data.get("statusCode"))
    if error_type in _ERROR_TYPES:
        kind = _ERROR_TYPES[error_type]
        # a weekly limit lasts days: it is the plan's quota, not a burst
        if kind == "rate_limited" and "weekly" in str(data.get("errorCode") or ""):
            kind = "quota"
    else:
        kind = kind_for_status(status, message) if status is not None else classify_fault(message)
    found = fault(kind, message, now)
    if found is None:
        return None, OwnFailure(kind="agent_error", detail=one_line(message))
    return found, None


def _tool_result(data: dict[str, Any], names: dict[str, str]) -> Entry:
    call_id = text_of(data.get("toolCallId"))
    success = data.get("success") is not False
    result = obj(data.get("result"))
    error = obj(data.get("error"))
    output: Any = result.get("content") if success else error.get("message")
    return Entry(
        kind="tool_result",
        name=names.get(call_id or ""),
        output=as_text(output) if output is not None else "",
        is_error=not success,
        call_id=call_id,
    )


def _usage(events: list[dict[str, Any]], result: dict[str, Any] | None) -> Usage | None:
    calls = [obj(e.get("data")) for e in events if e.get("type") == "assistant.usage"]
    messages = [obj(e.get("data")) for e in events if e.get("type") == "assistant.message"]
    model = next(
        (text_of(m.get("model")) for m in reversed(messages) if text_of(m.get("model"))), None
    )
    duration = obj((result or {}).get("usage")).get("totalApiDurationMs")
    rest: dict[str, Any] = {
        "turns": len(messages) or None,
        "model": model,
        "session_id": text_of((result or {}).get("sessionId")),
        "api_duration_seconds": duration / 1000 if isinstance(duration, (int, float)) else None,
        # copilot's `cost` counts premium requests, not dollars
        "cost_usd": None,
        "cost_source": "unknown",
    }
    if calls:
        shares = [
            ModelUsage(
                model=text_of(call.get("model")) or model or "unknown",
                input_tokens=count(call.get("inputTokens")),
                cached_input_tokens=count(call.get("cacheReadTokens")),
                cache_write_tokens=count(call.get("cacheWriteTokens")),
                output_tokens=count(call.get("outputTokens")),
            )
            for call in calls
        ]
        return from_models(merge_models(shares), **rest)
    outputs = [count(m.get("outputTokens")) for m in messages]
    known = [o for o in outputs if o is not None]
    if not known and result is None:
        return None
    return Usage(output_tokens=sum(known) if known else None, **rest)
