"""Gemini CLI (`--output-format stream-json`) and Qwen Code (its fork, `--output-format json`).

Gemini's stream has the messages, tool calls and results, and ends with a
`result` event (`status`, `error{type,message}`, `stats`). An API error exits
with the HTTP status as exit code (truncated to a byte, so 429 exits 173);
startup failures use the CLI's own codes (41 auth, 53 turn limit, 55 an
untrusted folder). Qwen Code prints one JSON array of Claude-style messages
ending with a `result`; versions before its error fix report a provider error
as the text `[API Error: ...]` in a successful result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from brigade.adapters.base import OwnFailure, OwnFailureKind, SeatRequest
from brigade.adapters.claude import content_entries
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    after_the_end,
    count,
    dicts,
    error_report,
    fault,
    json_values,
    kind_for_status,
    message_of,
    obj,
    one_line,
    opt,
    reasoning_not_applied,
    status_of,
    text_of,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry
from brigade.core.usage import ModelUsage, Usage

# exit codes of the Fatal* errors both CLIs inherit
EXIT_AUTH = 41
EXIT_TURN_LIMIT = 53
# HTTP statuses as the exit code of an API error (process.exit(status) keeps the low byte)
_STATUS_EXITS = {
    status & 0xFF: status for status in (400, 401, 402, 403, 404, 408, 429, 500, 502, 503, 504, 529)
}
# a daily or credit quota is not a rate limit, though Google words both as "quota"
_GOOGLE_QUOTA = re.compile(r"per ?day|daily|credits|billing account", re.IGNORECASE)
_API_ERROR = re.compile(r"^\[API Error: (?P<message>.*?)\](?:\n.*)?$", re.DOTALL)


def headless_plan(
    request: SeatRequest, output: str, env: Mapping[str, str] | None = None
) -> ArgvPlan:
    """The headless argv both CLIs share: an output format, an approval mode, the model."""
    seat = request.seat
    args = (
        "--output-format",
        output,
        # In headless mode the default approval mode refuses every tool that
        # would need a confirmation (edits, shell); yolo approves them all.
        "--approval-mode",
        "yolo" if request.writable else "default",
        *opt("--model", seat.model),
    )
    return ArgvPlan(
        args=args,
        stdin_text=request.prompt,
        enforcement="none" if request.writable else "hard",
        env=dict(env or {}),
        not_applied=reasoning_not_applied(seat),
    )


def _google_kind(status: int | None, message: str) -> FaultKind | None:
    if status == 429:
        return "quota" if _GOOGLE_QUOTA.search(message) else "rate_limited"
    return kind_for_status(status, message)


class GeminiAdapter(AgentCli):
    """Gemini CLI in headless mode, prompt on stdin, stream-json events."""

    name = "gemini"
    # --output-format stream-json: 0.10.0 has only text and json
    min_version: str | None = "0.11.3"
    binary = "gemini"
    state_paths = ("~/.gemini",)
    # its Google login and the account it is for; not settings.json (MCP servers, hooks,
    # and the auth type it selected: set GOOGLE_GENAI_USE_GCA=true in the seat's env to
    # use that login, or give GEMINI_API_KEY)
    auth_files = ("~/.gemini/oauth_creds.json", "~/.gemini/google_accounts.json")

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        # With folder trust enabled, an untrusted folder silently drops yolo back
        # to default, and a writable run would then change nothing.
        return headless_plan(request, "stream-json", {"GEMINI_CLI_TRUST_WORKSPACE": "true"})

    def _parse(self, out: CliOutput) -> Parsed:
        events = dicts(json_values(out.stdout))
        code = out.exit_code
        if code == EXIT_AUTH:
            message = error_report(out.stderr) or "authentication failed (exit 41)"
            return Parsed("", fault=fault("auth", message, out.now), reported=True)
        if code == 55:
            message = error_report(out.stderr) or "the folder is not trusted (exit 55)"
            return Parsed("", fault=fault("workspace_untrusted", message, out.now), reported=True)
        legacy = next((e for e in events if "response" in e), None)
        if legacy is not None:
            return _parse_gemini_json(legacy, out)
        if not events:
            # json mode reports a fatal error as a JSON document on stderr (0.6.1 captured)
            error = _stderr_json(out.stderr)
            if error is not None:
                message = str(error.get("message") or "error")
                kind = _google_kind(status_of(error.get("code")), message)
                found = fault(kind, message, out.now)
                return Parsed("", fault=found, error=None if found else message, reported=True)
            return Parsed(final_text=out.stdout.strip())
        return _parse_gemini_stream(events, out)


def _parse_gemini_stream(events: list[dict[str, Any]], out: CliOutput) -> Parsed:
    # the result is the last event gemini prints: lines after it are the seat's
    tampered = after_the_end(events, ("result",), "gemini")
    if tampered is not None:
        return Parsed("", own_failure=tampered, reported=True)
    init: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    entries: list[Entry] = []
    names: dict[str, str] = {}
    answer: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "init":
            init = event
            if text_of(event.get("model")):
                entries.append(Entry(kind="system", text=f"model {event['model']}"))
        elif kind == "message":
            role = str(event.get("role") or "assistant")
            content = event.get("content")
            if not isinstance(content, str):
                continue
            if role == "assistant":
                answer.append(content)
                _append_text(entries, content)
            else:
                entries.append(Entry(kind="message", role=role, text=content))
        elif kind == "tool_use":
            call_id = text_of(event.get("tool_id"))
            name = text_of(event.get("tool_name"))
            if call_id and name:
                names[call_id] = name
            entries.append(
                Entry(kind="tool_call", name=name, input=event.get("parameters"), call_id=call_id)
            )
        elif kind == "tool_result":
            call_id = text_of(event.get("tool_id"))
            failed = event.get("status") == "error"
            output = event.get("output")
            if failed and not isinstance(output, str):
                output = message_of(obj(event.get("error")).get("message"))
            entries.append(
                Entry(
                    kind="tool_result",
                    name=names.get(call_id or ""),
                    output=output if isinstance(output, str) else "",
                    is_error=failed,
                    call_id=call_id,
                )
            )
            # the answer is the last model turn, which starts after the tool results
            answer = []
        elif kind == "error":
            entries.append(Entry(kind="error", text=str(event.get("message") or "")))
        elif kind == "result":
            result = event
    transcript = tuple(entries)
    if result is None:
        return Parsed(final_text="", transcript=transcript)
    usage = _gemini_usage(obj(result.get("stats")), init)
    if result.get("status") != "error":
        return Parsed("".join(answer), usage=usage, transcript=transcript, reported=True)
    error = obj(result.get("error"))
    message = str(error.get("message") or "error")
    entries.append(Entry(kind="error", text=message))
    transcript = tuple(entries)
    error_type = str(error.get("type") or "")
    if error_type in ("FatalTurnLimitedError",) or out.exit_code == EXIT_TURN_LIMIT:
        own = OwnFailure(kind="turn_limit", detail=one_line(message))
        return Parsed("", own_failure=own, usage=usage, transcript=transcript, reported=True)
    if error_type == "INVALID_STREAM":
        # the model's stream ended badly: whatever it said is the answer
        return Parsed("".join(answer), usage=usage, transcript=transcript, reported=True)
    found_kind: FaultKind | None
    if error_type in ("FatalAuthenticationError", "UnauthorizedError", "AccountSuspendedError"):
        found_kind = "auth"
    else:
        found_kind = _google_kind(_STATUS_EXITS.get(out.exit_code or 0), message)
    found = fault(found_kind, message, out.now)
    if found is None:
        own = OwnFailure(kind="agent_error", detail=one_line(message))
        return Parsed("", own_failure=own, usage=usage, transcript=transcript, reported=True)
    return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)


def _append_text(entries: list[Entry], delta: str) -> None:
    """Assistant text arrives in deltas: consecutive ones make one message."""
    if entries and entries[-1].kind == "message" and entries[-1].role == "assistant":
        entries[-1] = Entry(kind="message", role="assistant", text=(entries[-1].text or "") + delta)
    else:
        entries.append(Entry(kind="message", role="assistant", text=delta))


def _output(total: int | None, prompt: int | None, candidates: int | None) -> int | None:
    # the API's total counts thoughts, which stream-json does not report apart
    if total is not None and prompt is not None and total >= prompt:
        return total - prompt
    return candidates


def _gemini_usage(stats: dict[str, Any], init: dict[str, Any]) -> Usage | None:
    if not stats and not init:
        return None
    shares = tuple(
        ModelUsage(
            model=name,
            input_tokens=count(raw.get("input_tokens")),
            cached_input_tokens=count(raw.get("cached")),
            output_tokens=_output(
                count(raw.get("total_tokens")),
                count(raw.get("input_tokens")),
                count(raw.get("output_tokens")),
            ),
        )
        for name, raw in ((n, obj(r)) for n, r in obj(stats.get("models")).items())
    )
    configured = text_of(init.get("model"))
    names = [share.model for share in shares]
    if configured in names:
        model = configured
    elif shares:
        model = max(shares, key=lambda share: share.output_tokens or 0).model
    else:
        model = None
    return Usage(
        input_tokens=count(stats.get("input_tokens")),
        cached_input_tokens=count(stats.get("cached")),
        output_tokens=_output(
            count(stats.get("total_tokens")),
            count(stats.get("input_tokens")),
            count(stats.get("output_tokens")),
        ),
        model=model,
        models=shares,
        session_id=text_of(init.get("session_id")),
    )


def _parse_gemini_json(document: dict[str, Any], out: CliOutput) -> Parsed:
    """`--output-format json` (an older setup): `{session_id, response, stats, error}`."""
    text = document.get("response")
    error = obj(document.get("error"))
    if error and error.get("type") != "INVALID_STREAM":
        message = str(error.get("message") or "error")
        kind = _google_kind(status_of(error.get("code")), message)
        found = fault(kind, message, out.now)
        return Parsed("", fault=found, error=None if found else message, reported=True)
    return Parsed(final_text=text if isinstance(text, str) else "", reported=True)


# -- Qwen Code ---------------------------------------------------------------------

# Qwen's own exit codes differ from Gemini's above 53: 55 is its budget limit
_QWEN_STOPS: dict[int, OwnFailureKind] = {EXIT_TURN_LIMIT: "turn_limit", 55: "budget_limit"}
_QWEN_SUBTYPES: dict[str, OwnFailureKind] = {
    "error_max_turns": "turn_limit",
    "error_max_structured_output_retries": "agent_error",
}


class QwenAdapter(AgentCli):
    """Qwen Code in headless mode, prompt on stdin, one JSON array of messages."""

    name = "qwen"
    # --output-format json and --approval-mode, checked with 0.1.4 (its json document is read too)
    min_version: str | None = "0.1.4"
    binary = "qwen"
    state_paths = ("~/.qwen",)
    # its Qwen OAuth login; not settings.json
    auth_files = ("~/.qwen/oauth_creds.json",)

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        # json (not stream-json): only its result carries the per-model stats,
        # where the thought tokens are
        return headless_plan(request, "json")

    def _parse(self, out: CliOutput) -> Parsed:
        messages = dicts(json_values(out.stdout))
        code = out.exit_code
        stop = _QWEN_STOPS.get(code or 0)
        if code == EXIT_AUTH:
            message = _stderr_error(out.stderr) or "authentication failed (exit 41)"
            return Parsed("", fault=fault("auth", message, out.now), reported=True)
        results = [m for m in messages if m.get("type") == "result"]
        legacy = next((m for m in messages if "response" in m and "type" not in m), None)
        if not results and legacy is not None:
            # before its message array (0.1.x), qwen printed gemini's json document
            parsed = _parse_gemini_json(legacy, out)
            return replace(parsed, usage=_qwen_stats_usage(obj(legacy.get("stats"))))
        if not results:
            if stop is not None:
                detail = _stderr_error(out.stderr) or f"exited {code}"
                return Parsed("", own_failure=OwnFailure(stop, one_line(detail)), reported=True)
            stderr_error = _stderr_json(out.stderr)
            if stderr_error is not None:
                message = str(stderr_error.get("message") or "error")
                kind = kind_for_status(status_of(stderr_error.get("code")), message)
                found = fault(kind, message, out.now)
                return Parsed("", fault=found, error=None if found else message, reported=True)
            if not messages:
                return Parsed(final_text=out.stdout.strip())
            return Parsed("", transcript=tuple(_qwen_entries(messages)))
        return _parse_qwen_result(messages, results[-1], out)


def _stderr_json(stderr: str) -> dict[str, Any] | None:
    for document in dicts(json_values(stderr)):
        if isinstance(document.get("error"), dict):
            error: dict[str, Any] = document["error"]
            return error
    return None


def _stderr_error(stderr: str) -> str:
    error = _stderr_json(stderr)
    if error is not None:
        return str(error.get("message") or "")
    return error_report(stderr)


def _parse_qwen_result(
    messages: list[dict[str, Any]], result: dict[str, Any], out: CliOutput
) -> Parsed:
    transcript = tuple(_qwen_entries(messages))
    usage = _qwen_usage(result, messages)
    text = result.get("result")
    text = text if isinstance(text, str) else ""
    subtype = str(result.get("subtype") or "")
    if result.get("is_error") or subtype != "success":
        message = message_of(obj(result.get("error")).get("message")) or text or subtype
        if subtype in _QWEN_SUBTYPES:
            own = OwnFailure(_QWEN_SUBTYPES[subtype], one_line(message))
            return Parsed("", own_failure=own, usage=usage, transcript=transcript, reported=True)
        stderr_error = _stderr_json(out.stderr) or {}
        status = status_of(stderr_error.get("code")) or _leading_status(message)
        found = fault(kind_for_status(status, message), message, out.now)
        if found is None:
            own = OwnFailure("agent_error", one_line(message))
            return Parsed("", own_failure=own, usage=usage, transcript=transcript, reported=True)
        return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)
    api_error = _API_ERROR.match(text.strip())
    if api_error and _last_text_is(messages, text):
        # before its error fix qwen appended the provider error as the turn's only text
        message = api_error["message"]
        kind = kind_for_status(_leading_status(message), message)
        found = fault(kind, text, out.now)
        if found is not None:
            return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)
    return Parsed(final_text=text, usage=usage, transcript=transcript, reported=True)


def _leading_status(message: str) -> int | None:
    # the OpenAI-compatible client words provider errors as "<status> <message>"
    match = re.match(r"\s*(\d{3})\b", message)
    return status_of(match[1]) if match else None


def _last_text_is(messages: list[dict[str, Any]], text: str) -> bool:
    """Whether the last assistant message holds exactly one text block, equal to text."""
    for message in reversed(messages):
        if message.get("type") != "assistant":
            continue
        content = obj(message.get("message")).get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        return (
            len(blocks) == 1 and blocks[0].get("type") == "text" and blocks[0].get("text") == text
        )
    return False


def _qwen_stats_usage(stats: dict[str, Any]) -> Usage | None:
    """Usage from the per-model stats alone (the json document of qwen 0.1.x)."""
    shares = _qwen_shares(obj(stats.get("models")))
    if not shares:
        return None
    return Usage(
        input_tokens=_sum(share.input_tokens for share in shares),
        cached_input_tokens=_sum(share.cached_input_tokens for share in shares),
        output_tokens=_sum(share.output_tokens for share in shares),
        reasoning_tokens=_sum(share.reasoning_tokens for share in shares),
        model=max(shares, key=lambda share: share.output_tokens or 0).model,
        models=tuple(shares),
    )


def _qwen_usage(result: dict[str, Any], messages: list[dict[str, Any]]) -> Usage:
    raw = obj(result.get("usage"))
    shares = _qwen_shares(obj(obj(result.get("stats")).get("models")))
    thoughts_total = _sum(share.reasoning_tokens for share in shares)
    system = next((m for m in messages if m.get("type") == "system"), {})
    duration = result.get("duration_api_ms")
    return Usage(
        input_tokens=count(raw.get("input_tokens")),
        cached_input_tokens=count(raw.get("cache_read_input_tokens")),
        output_tokens=_plus(count(raw.get("output_tokens")), thoughts_total),
        reasoning_tokens=thoughts_total,
        turns=count(result.get("num_turns")),
        model=text_of(system.get("model")),
        models=tuple(shares),
        session_id=text_of(result.get("session_id")) or text_of(system.get("session_id")),
        api_duration_seconds=duration / 1000 if isinstance(duration, (int, float)) else None,
    )


def _qwen_shares(stats_models: dict[str, Any]) -> list[ModelUsage]:
    shares: list[ModelUsage] = []
    for name, model in stats_models.items():
        tokens = obj(obj(model).get("tokens"))
        thoughts = count(tokens.get("thoughts"))
        candidates = count(tokens.get("candidates"))
        shares.append(
            ModelUsage(
                model=name,
                input_tokens=count(tokens.get("prompt")),
                cached_input_tokens=count(tokens.get("cached")),
                output_tokens=_plus(candidates, thoughts),
                reasoning_tokens=thoughts,
            )
        )
    return shares


def _plus(a: int | None, b: int | None) -> int | None:
    if a is None:
        return None
    return a + (b or 0)


def _sum(values: Any) -> int | None:
    found = [value for value in values if value is not None]
    return sum(found) if found else None


def _qwen_entries(messages: list[dict[str, Any]]) -> list[Entry]:
    entries: list[Entry] = []
    names: dict[str, str] = {}
    for message in messages:
        kind = message.get("type")
        if kind == "system" and message.get("subtype") == "session_start":
            if text_of(message.get("model")):
                entries.append(Entry(kind="system", text=f"model {message['model']}"))
        elif kind == "system" and message.get("subtype") == "model_fallback":
            data = obj(message.get("data"))
            entries.append(
                Entry(
                    kind="system",
                    text=f"model fallback: {data.get('fromModel')} -> {data.get('toModel')}",
                )
            )
        elif kind in ("assistant", "user"):
            content = obj(message.get("message")).get("content")
            entries.extend(content_entries(content, str(kind), names))
        elif kind == "result" and (message.get("is_error") or message.get("subtype") != "success"):
            error = message_of(obj(message.get("error")).get("message"))
            entries.append(Entry(kind="error", text=error or str(message.get("subtype"))))
    return entries
