"""Claude Code: `claude -p --output-format stream-json --verbose`, prompt on stdin.

The stream holds every message of the run and ends with a `result` event,
the same object `--output-format json` prints. Faults are read from it: the
synthetic assistant message's `error` label (authentication_failed,
billing_error, rate_limit, server_error...), the result's `api_error_status`,
a rejected `rate_limit_event` (a plan limit, with its reset time) and the
result `subtype` (a turn or budget limit is the seat's own failure). An error
result whose subtype is `success` is the CLI reporting a failed request (older
builds label nothing): its text is classified, and when it names nothing the
fault is `unknown`, never the seat's. The text of an error result is never
taken as the answer. The stream ends with its one result: events after it
were written into claude's output by a process the seat ran (its stdout is
reachable through /proc), and make the run the seat's own failure.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from brigade.adapters.base import Enforcement, Fault, OwnFailure, OwnFailureKind, SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    after_the_end,
    classify_fault,
    count,
    dicts,
    fault,
    json_values,
    kind_for_status,
    obj,
    one_line,
    opt,
    status_of,
    text_of,
    until,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry, as_text
from brigade.core.usage import ModelUsage, Usage, from_models, reported_cost

# result subtypes where the seat stopped itself
_OWN_STOPS: dict[str, OwnFailureKind] = {
    "error_max_turns": "turn_limit",
    "error_max_budget_usd": "budget_limit",
    "error_max_structured_output_retries": "agent_error",
    "error_during_execution": "agent_error",
}
_OWN_REASONS: dict[OwnFailureKind, str] = {
    "turn_limit": "reached its turn limit",
    "budget_limit": "reached its budget",
    "agent_error": "stopped with an error",
}


class ClaudeAdapter(AgentCli):
    """Claude Code in print mode (`claude -p`), prompt on stdin, stream-json events."""

    name = "claude"
    # --effort (a seat's reasoning) came in 2.1.38; --strict-mcp-config is older
    min_version: str | None = "2.1.38"
    binary = "claude"
    # ~/.claude.json is a file: the sandbox lets it be rewritten in place, not replaced
    state_paths = ("~/.claude", "~/.claude.json")
    # its login on Linux (macOS keeps it in the keychain); not settings.json, its hooks,
    # ~/.claude.json (MCP servers, projects) or plugins
    auth_files = ("~/.claude/.credentials.json",)
    # Every built-in tool that can change files; Bash goes too because a shell
    # can write anywhere. Deny rules beat allow rules and permission modes.
    read_only_denied = "Bash,Edit,MultiEdit,Write,NotebookEdit"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        if request.writable:
            # Edits inside the worktree plus shell commands; no prompt can be
            # answered in print mode, so anything else is refused rather than asked.
            permissions: tuple[str, ...] = (
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash",
            )
            enforcement: Enforcement = "none"
        else:
            # An explicit mode overrides a permissive default in the user's settings;
            # --strict-mcp-config keeps configured MCP servers (which may write) out.
            permissions = (
                "--permission-mode",
                "default",
                "--disallowedTools",
                self.read_only_denied,
                "--strict-mcp-config",
            )
            enforcement = "hard"
        args = (
            "-p",
            # every message of the run, then the result object json mode prints;
            # print mode refuses stream-json without --verbose
            "--output-format",
            "stream-json",
            "--verbose",
            *permissions,
            *opt("--model", seat.model),
            *opt("--effort", seat.reasoning),
        )
        return ArgvPlan(args=args, stdin_text=request.prompt, enforcement=enforcement)

    def _parse(self, out: CliOutput) -> Parsed:
        return parse_claude_stream(out)


def parse_claude_stream(out: CliOutput) -> Parsed:
    """The answer, fault, usage and transcript from Claude Code's stream (or json) output."""
    events = dicts(json_values(out.stdout))
    if not events:
        return Parsed(final_text=out.stdout.strip())
    results = [e for e in events if e.get("type") == "result"]
    init = next((e for e in events if e.get("type") == "system" and e.get("subtype") == "init"), {})
    transcript = tuple(_entries(events))
    if not results:
        # no end-of-run report: the process died (its exit status and stderr tell)
        return Parsed(final_text="", transcript=transcript)
    # claude ends its stream with its one result: lines after it are the seat's
    tampered = after_the_end(events, ("result",), "claude")
    if tampered is not None:
        return Parsed("", own_failure=tampered, transcript=transcript, reported=True)
    result = results[-1]
    usage = _usage(result, init)
    subtype = str(result.get("subtype") or "")
    if not result.get("is_error") and subtype == "success":
        answer = result.get("result")
        return Parsed(
            final_text=answer if isinstance(answer, str) else "",
            usage=usage,
            transcript=transcript,
            reported=True,
        )
    message = _error_message(result)
    found = _fault(events, result, message, out.now)
    if found is None and subtype == "success":
        # An error result that is no stop of the CLI's own: the request failed, and the
        # text says nothing brigade can name (older builds label nothing). Still the
        # apparatus's fault: only the CLI's own stop reasons are the seat's failures.
        found = Fault(kind="unknown", detail=one_line(message or "the request failed"))
    if found is not None:
        return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)
    stop = _OWN_STOPS.get(subtype, "agent_error")
    detail = message or _OWN_REASONS[stop]
    return Parsed(
        "",
        own_failure=OwnFailure(kind=stop, detail=one_line(detail)),
        usage=usage,
        transcript=transcript,
        reported=True,
    )


def _error_message(result: dict[str, Any]) -> str:
    errors = [e for e in result.get("errors") or () if isinstance(e, str) and e]
    if errors:
        return "; ".join(errors)
    text = result.get("result")
    return text if isinstance(text, str) else ""


def _api_error(events: list[dict[str, Any]]) -> tuple[str | None, str]:
    """The error label and text of the last synthetic assistant error message."""
    for event in reversed(events):
        if event.get("type") == "assistant" and isinstance(event.get("error"), str):
            content = obj(event.get("message")).get("content")
            return event["error"], as_text(content) if content else ""
    return None, ""


def _rejected_limit(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for event in reversed(events):
        if event.get("type") == "rate_limit_event":
            info = obj(event.get("rate_limit_info"))
            return info if info.get("status") == "rejected" else None
    return None


def _fault(
    events: list[dict[str, Any]], result: dict[str, Any], message: str, now: float
) -> Fault | None:
    label, label_text = _api_error(events)
    status = status_of(result.get("api_error_status"))
    text = message or label_text
    limit = _rejected_limit(events)
    wait = until(_number(limit.get("resetsAt")), now) if limit else None
    kind: FaultKind | None
    if label == "authentication_failed":
        kind = "auth"
    elif label == "billing_error":
        kind = "quota"
    elif label == "rate_limit":
        # a rejected limit with a window (five_hour, seven_day...) or a reset time
        # is the plan's usage limit; a bare 429 is the server limiting requests
        plan = limit is not None and bool(limit.get("rateLimitType") or limit.get("resetsAt"))
        kind = "quota" if plan or classify_fault(text) == "quota" else "rate_limited"
    elif label == "server_error":
        kind = "overloaded" if status in (503, 529) else "provider_5xx"
    elif label in ("invalid_request", "max_output_tokens"):
        kind = kind_for_status(status or 400, text)
    elif status is not None:
        kind = kind_for_status(status, text)
    elif (
        result.get("terminal_reason") == "api_error"
        or label == "unknown"
        or result.get("subtype") == "success"
    ):
        # an error result of a request, unlabelled: what its text says (the reset time
        # of a plan limit included)
        kind = classify_fault(text)
    else:
        kind = None
    return fault(kind, text, now, wait)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # `1e999` parses as infinity, which no JSON document brigade writes can hold
    return float(value) if math.isfinite(value) else None


def _usage(result: dict[str, Any], init: dict[str, Any]) -> Usage:
    usage = obj(result.get("usage"))
    thinking = count(obj(usage.get("output_tokens_details")).get("thinking_tokens"))
    shares = tuple(
        _model_share(name, obj(raw)) for name, raw in obj(result.get("modelUsage")).items()
    )
    duration = _number(result.get("duration_api_ms"))
    rest: dict[str, Any] = {
        "turns": count(result.get("num_turns")),
        "session_id": text_of(result.get("session_id")),
        "api_duration_seconds": duration / 1000 if duration is not None else None,
        "model": text_of(init.get("model")) or _main_model(shares),
    }
    if shares:
        if all(share.reasoning_tokens is None for share in shares):
            rest["reasoning_tokens"] = thinking
        found = from_models(shares, **rest)
        spent = bool(found.input_tokens or found.output_tokens)
        cost = result.get("total_cost_usd", found.cost_usd)
        return replace(found, **reported_cost(cost, tokens_spent=spent))
    fresh = count(usage.get("input_tokens"))
    cache_read = count(usage.get("cache_read_input_tokens"))
    cache_write = count(usage.get("cache_creation_input_tokens"))
    parts = [part for part in (fresh, cache_read, cache_write) if part is not None]
    output = count(usage.get("output_tokens"))
    return Usage(
        input_tokens=sum(parts) if parts else None,
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=output,
        reasoning_tokens=thinking,
        # zero tokens and a zero cost is a known cost (a refused request costs nothing)
        **reported_cost(result.get("total_cost_usd"), tokens_spent=bool(sum(parts) or output)),
        **rest,
    )


def _model_share(name: str, raw: dict[str, Any]) -> ModelUsage:
    fresh = count(raw.get("inputTokens"))
    cache_read = count(raw.get("cacheReadInputTokens"))
    cache_write = count(raw.get("cacheCreationInputTokens"))
    parts = [part for part in (fresh, cache_read, cache_write) if part is not None]
    return ModelUsage(
        model=name,
        input_tokens=sum(parts) if parts else None,
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=count(raw.get("outputTokens")),
        reasoning_tokens=count(raw.get("thinkingTokens")),
        cost_usd=_number(raw.get("costUSD")),
    )


def _main_model(shares: tuple[ModelUsage, ...]) -> str | None:
    # without an init event, the model that wrote the most did the work
    if not shares:
        return None
    return max(shares, key=lambda share: share.output_tokens or 0).model


def _entries(events: list[dict[str, Any]]) -> list[Entry]:
    entries: list[Entry] = []
    names: dict[str, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "system":
            subtype = event.get("subtype")
            if subtype == "init" and text_of(event.get("model")):
                entries.append(Entry(kind="system", text=f"model {event['model']}"))
            elif subtype == "api_retry":
                entries.append(Entry(kind="system", text=_retry_notice(event)))
        elif kind == "assistant":
            content = obj(event.get("message")).get("content")
            if isinstance(event.get("error"), str):
                text = as_text(content) if content else event["error"]
                entries.append(Entry(kind="error", text=text))
                continue
            entries.extend(content_entries(content, "assistant", names))
        elif kind == "user":
            content = obj(event.get("message")).get("content")
            entries.extend(content_entries(content, "user", names))
        elif kind == "result" and (event.get("is_error") or event.get("subtype") != "success"):
            entries.append(
                Entry(kind="error", text=_error_message(event) or str(event.get("subtype")))
            )
    return entries


def _retry_notice(event: dict[str, Any]) -> str:
    status = event.get("error_status")
    attempt, most = event.get("attempt"), event.get("max_retries")
    delay = event.get("retry_delay_ms")
    return f"API retry {attempt}/{most} in {delay} ms after {event.get('error')} ({status})"


def content_entries(content: Any, role: str, names: dict[str, str]) -> list[Entry]:
    """Entries for Anthropic-style message content: text, thinking, tool_use, tool_result.

    `names` maps tool-call ids to tool names, so a result can name its tool.
    """
    if isinstance(content, str):
        return [Entry(kind="message", role=role, text=content)] if content else []
    entries: list[Entry] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and text_of(block.get("text")):
            entries.append(Entry(kind="message", role=role, text=block["text"]))
        elif kind == "thinking" and text_of(block.get("thinking")):
            entries.append(Entry(kind="reasoning", text=block["thinking"]))
        elif kind == "tool_use":
            call_id = text_of(block.get("id"))
            name = text_of(block.get("name"))
            if call_id and name:
                names[call_id] = name
            entries.append(
                Entry(kind="tool_call", name=name, input=block.get("input"), call_id=call_id)
            )
        elif kind == "tool_result":
            call_id = text_of(block.get("tool_use_id"))
            raw = block.get("content")
            entries.append(
                Entry(
                    kind="tool_result",
                    name=names.get(call_id or ""),
                    output=as_text(raw) if raw is not None else "",
                    is_error=bool(block.get("is_error")),
                    call_id=call_id,
                )
            )
    return entries
