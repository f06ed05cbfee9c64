"""Cursor Agent: `cursor-agent -p --output-format stream-json`, prompt after `--`.

The stream carries the messages, the tool calls (`tool_call` started/completed)
and a terminal `result` event whose `result` joins every assistant text of the
run with no separator (as json mode prints it): the answer is the last assistant
message, the whole run is in the transcript. Its reasoning comes as `thinking`
events (`delta` pieces, then `completed`) with or without partial output; text
deltas, when a build streams them, are `assistant` events with a `timestamp_ms`
and no `model_call_id`, each followed by the whole message, so they are left out.
On a failure cursor-agent writes its error to stderr (`Error: ...`,
`ActionRequiredError: ...`), exits non-zero and prints no result: that error
report is all there is to read a fault from.
"""

from __future__ import annotations

from typing import Any

from brigade.adapters.base import Fault, SeatRequest
from brigade.adapters.claude import content_entries
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    classify_fault,
    count,
    dicts,
    error_report,
    fault,
    json_values,
    message_of,
    obj,
    opt,
    reasoning_not_applied,
    text_of,
)
from brigade.core.transcript import Entry, as_text
from brigade.core.usage import Usage


class CursorAdapter(AgentCli):
    """Cursor Agent (`cursor-agent -p`), trusted workspace, prompt after `--`."""

    name = "cursor"
    binary = "cursor-agent"
    state_paths = ("~/.cursor", "~/.config/cursor")
    # its login token (`$XDG_CONFIG_HOME/cursor/auth.json`); not ~/.cursor/cli-config.json
    # (permissions, the account's name beside them) or ~/.cursor/mcp.json
    auth_files = ("~/.config/cursor/auth.json",)

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        if request.writable:
            # Without --force print mode proposes edits and commands but applies none.
            mode: tuple[str, ...] = ("--force",)
        else:
            mode = ("--mode", "ask")
        args = (
            "-p",
            "--output-format",
            "stream-json",
            # An untrusted workspace makes headless runs stop without doing anything.
            "--trust",
            *mode,
            *opt("--model", seat.model),
            "--",
            request.prompt,
        )
        return ArgvPlan(
            args=args,
            stdin_text=None,
            enforcement="none" if request.writable else "hard",
            not_applied=reasoning_not_applied(seat),
        )

    def _parse(self, out: CliOutput) -> Parsed:
        events = dicts(json_values(out.stdout))
        refusal = _refusal(out)
        if not events:
            return Parsed(final_text=out.stdout.strip(), fault=refusal)
        init = next(
            (e for e in events if e.get("type") == "system" and e.get("subtype") == "init"), {}
        )
        transcript = tuple(_entries(events))
        results = [e for e in events if e.get("type") == "result"]
        if not results:
            return Parsed(final_text="", transcript=transcript, fault=refusal)
        result = results[-1]
        usage = _usage(result, init)
        answer = result.get("result")
        text = answer if isinstance(answer, str) else ""
        if result.get("is_error") or result.get("subtype") != "success":
            error = message_of(result.get("error")) or text or str(result.get("subtype"))
            return Parsed("", error=error, usage=usage, transcript=transcript, reported=True)
        # the result joins every assistant text of the run with no separator ("...the
        # fileBased on the README, ...Done!"): the answer is the last message, and the
        # whole run stays in the transcript
        last = _last_message(events)
        answer_text = text if last is None else last
        return Parsed(final_text=answer_text, usage=usage, transcript=transcript, reported=True)


def _refusal(out: CliOutput) -> Fault | None:
    """A refusal printed as a block on stderr whose first line names it ("⚠ Workspace Trust
    Required", then advice that does not), when the error line itself names nothing."""
    if out.exit_code in (0, None) or classify_fault(error_report(out.stderr)) is not None:
        return None
    for line in out.stderr.splitlines():
        headline = line.strip().lstrip("\u26a0\ufe0f ").strip()
        if headline:
            return fault(classify_fault(headline), headline, out.now)
    return None


def _delta(event: dict[str, Any]) -> bool:
    """A piece of an assistant message still streaming (the whole message follows it)."""
    return "timestamp_ms" in event and not event.get("model_call_id")


def _last_message(events: list[dict[str, Any]]) -> str | None:
    """The text of the last whole assistant message that has any, or None."""
    for event in reversed(events):
        if event.get("type") != "assistant" or _delta(event):
            continue
        content = obj(event.get("message")).get("content")
        if isinstance(content, str):
            blocks = [content]
        else:
            blocks = (
                [
                    str(block.get("text") or "")
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "text"
                ]
                if isinstance(content, list)
                else []
            )
        text = "".join(blocks)
        if text.strip():
            return text
    return None


def _usage(result: dict[str, Any], init: dict[str, Any]) -> Usage:
    raw = obj(result.get("usage"))
    fresh = count(raw.get("inputTokens"))
    cache_read = count(raw.get("cacheReadTokens"))
    cache_write = count(raw.get("cacheWriteTokens"))
    parts = [part for part in (fresh, cache_read, cache_write) if part is not None]
    duration = result.get("duration_api_ms")
    return Usage(
        input_tokens=sum(parts) if parts else None,
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=count(raw.get("outputTokens")),
        # cursor names the model for display only ("Claude 4 Sonnet")
        model=text_of(init.get("model")),
        session_id=text_of(result.get("session_id")) or text_of(init.get("session_id")),
        api_duration_seconds=duration / 1000 if isinstance(duration, (int, float)) else None,
    )


def _tool(call: dict[str, Any]) -> tuple[str | None, Any, dict[str, Any]]:
    """A tool_call payload's tool name, its input and its result object."""
    for key, value in call.items():
        body = obj(value)
        if key == "function":
            arguments = body.get("arguments")
            return text_of(body.get("name")), arguments, obj(body.get("result"))
        if key.endswith("ToolCall"):
            return key[: -len("ToolCall")], body.get("args"), obj(body.get("result"))
    return None, None, {}


def _entries(events: list[dict[str, Any]]) -> list[Entry]:
    entries: list[Entry] = []
    names: dict[str, str] = {}
    thinking: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "thinking":
            # its pieces make one reasoning step, ended by `completed` (or by what follows)
            piece = event.get("text")
            if isinstance(piece, str):
                thinking.append(piece)
            if event.get("subtype") != "completed":
                continue
        if thinking and "".join(thinking).strip():
            entries.append(Entry(kind="reasoning", text="".join(thinking)))
        thinking = []
        if kind == "system" and event.get("subtype") == "init" and text_of(event.get("model")):
            entries.append(Entry(kind="system", text=f"model {event['model']}"))
        elif kind in ("assistant", "user") and not _delta(event):
            content = obj(event.get("message")).get("content")
            entries.extend(content_entries(content, str(kind), names))
        elif kind == "tool_call":
            call_id = text_of(event.get("call_id"))
            name, arguments, result = _tool(obj(event.get("tool_call")))
            if event.get("subtype") == "started":
                entries.append(Entry(kind="tool_call", name=name, input=arguments, call_id=call_id))
            elif event.get("subtype") == "completed":
                success = result.get("success")
                failure = next((value for key, value in result.items() if key != "success"), None)
                output = obj(success).get("content", success) if success is not None else failure
                entries.append(
                    Entry(
                        kind="tool_result",
                        name=name,
                        output=as_text(output) if output is not None else "",
                        is_error=success is None,
                        call_id=call_id,
                    )
                )
        elif kind == "result" and (event.get("is_error") or event.get("subtype") != "success"):
            entries.append(
                Entry(kind="error", text=str(event.get("result") or event.get("subtype")))
            )
    if thinking and "".join(thinking).strip():
        entries.append(Entry(kind="reasoning", text="".join(thinking)))
    return entries
