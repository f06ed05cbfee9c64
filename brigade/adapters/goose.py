"""goose: `goose run --no-session --output-format json`; read-only only by instruction.

The json output is `{messages, metadata}`: the visible messages (text,
thinking, toolRequest / toolResponse, systemNotification and a typed `error`
content for auth, credits and context errors) and the session's token totals
and cost with a `status` (`error` when the run failed). Other provider errors
reach the output only as goose's own assistant text, `Ran into this error:
<error>.` plus its retry advice; that exact template, as the whole message,
is read as goose's error report, unless the message carries the inference
(provider, model) goose records only for what its model wrote: a model that
answers in those words gave an answer. A run that failed outside the model's reply (an
error of the stream goose could not handle) has `status: error` and no typed
error: goose printed its error on stderr (`Error: ...`), and its own notice
("The error above was an exception...") on stdout before the document, whose
messages then end with goose's own question ("Yes — what would you like me to
do?"), never the model's answer. That failure is goose's: the kind its error
line names, else `unknown`.

Its stream-json output (`{"type":"message"}` events, a reply in chunks of one
message id, then `complete` with the totals or `error`) is read as the same
document. goose 1.50.1 (a recorded run, tests/data/cli_samples) printed its
banner on stdout before the events and exited 0 on a refused key, the typed
error then reading `Ran into this error: Authentication error: ...`.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from brigade.adapters.base import Enforcement, OwnFailure, SeatRequest
from brigade.adapters.common import (
    READ_ONLY_NOTICE,
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    after_the_end,
    classify_fault,
    count,
    dicts,
    error_report,
    fault,
    json_values,
    kind_for_status,
    obj,
    one_line,
    opt,
    reasoning_not_applied,
    retry_after,
    text_of,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry, as_text
from brigade.core.usage import Usage, reported_cost

# goose's own wording of a provider error it turned into the assistant's reply
_RAN_INTO = re.compile(
    r"^Ran into this error: (?P<error>.*)\.\n\nPlease retry if you think this is a transient"
    r" or recoverable error\.$",
    re.DOTALL,
)
_RESEND = re.compile(
    r"^(?P<error>Network error: .*)\n\nPlease resend your message to try again\.$", re.DOTALL
)
_STATUS = re.compile(r"\((\d{3})\b|Status: (\d{3})\b|\b(\d{3}) [A-Z][a-z]")

# goose's provider error kinds, by the prefix of their message
_PREFIXES: tuple[tuple[str, FaultKind | None], ...] = (
    ("Authentication error:", "auth"),
    ("Credits exhausted", "quota"),
    ("Rate limit exceeded:", "rate_limited"),
    ("Server error:", "provider_5xx"),
    ("Network error:", "transport_drop"),
    ("Context length exceeded:", None),
    ("Request failed:", None),
)
_ERROR_KINDS: dict[str, FaultKind | None] = {
    "authentication": "auth",
    "creditsExhausted": "quota",
    "contextLengthExceeded": None,
}


def _provider_kind(error: str) -> FaultKind | None:
    match = _STATUS.search(error)
    status = int(next(group for group in match.groups() if group)) if match else None
    for prefix, kind in _PREFIXES:
        if error.startswith(prefix):
            if kind in ("rate_limited", "provider_5xx") or prefix == "Request failed:":
                # the status and the provider's words refine it (a 529, a 400 credit error)
                return kind_for_status(status, error) or kind
            return kind
    return classify_fault(error)


class GooseAdapter(AgentCli):
    """goose (`goose run --no-session -t`), JSON output; read-only only by instruction."""

    name = "goose"
    binary = "goose"
    state_paths = ("~/.config/goose", "~/.local/share/goose", "~/.local/state/goose")
    # its secrets when no keyring holds them; not config.yaml (provider, model and
    # extensions: give GOOSE_PROVIDER in the seat's env) or permission.yaml
    auth_files = ("~/.config/goose/secrets.yaml",)

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        env: dict[str, str] = {}
        if request.writable:
            text = request.prompt
            # A configured approve/chat mode would block or drop tool calls headless.
            env["GOOSE_MODE"] = "auto"
            enforcement: Enforcement = "none"
        else:
            text = READ_ONLY_NOTICE + request.prompt
            enforcement = "soft"
        # clap would take a leading '-' for an option; the joined form is unambiguous.
        text_args = (f"--text={text}",) if text.startswith("-") else ("-t", text)
        args = (
            "run",
            "--no-session",
            "--output-format",
            "json",
            *opt("--model", seat.model),
            *text_args,
        )
        return ArgvPlan(
            args=args,
            stdin_text=None,
            enforcement=enforcement,
            env=env,
            not_applied=reasoning_not_applied(seat),
        )

    def _parse(self, out: CliOutput) -> Parsed:
        pretty, rest = _pretty_document(out.stdout)
        if pretty is not None and _JSON_LINE.search(rest):
            # goose's json output is its one document: JSON after it is no line of goose's
            # (a process the seat ran can append to goose's stdout through /proc)
            detail = (
                "goose's output holds JSON after its document: lines a process the seat ran "
                "wrote into it; none of them is read"
            )
            return Parsed("", own_failure=OwnFailure("agent_error", detail), reported=True)
        values = dicts(json_values(out.stdout))
        document = next((d for d in values if "messages" in d), None)
        stream_error: str | None = None
        if document is None:
            # its stream-json ends with `complete` or `error`: lines after it are the seat's
            tampered = after_the_end(values, ("complete", "error"), "goose")
            if tampered is not None:
                return Parsed("", own_failure=tampered, reported=True)
            document, stream_error = _from_stream(values)
        if document is None:
            return Parsed(final_text=out.stdout.strip())
        messages = [m for m in document.get("messages") or () if isinstance(m, dict)]
        metadata = obj(document.get("metadata"))
        entries, typed = _entries(messages)
        usage = _usage(metadata, messages)
        transcript = tuple(entries)
        failed = metadata.get("status") == "error"
        if typed is not None:
            kind_name, message = typed
            kind = _ERROR_KINDS.get(kind_name, classify_fault(message))
            found = fault(kind, message, out.now)
            if found is not None:
                return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)
            own = OwnFailure(kind="agent_error", detail=one_line(message))
            return Parsed("", own_failure=own, usage=usage, transcript=transcript, reported=True)
        answer, replied = _answer(messages)
        # a message goose's model wrote carries its inference (provider, model): its words,
        # even in goose's own phrasing of an error, are an answer and never goose's report
        report = None if replied else _RAN_INTO.match(answer) or _RESEND.match(answer)
        if report is not None:
            error = report["error"]
            found = fault(_provider_kind(error), error, out.now)
            if found is not None:
                return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)
            own = OwnFailure(kind="agent_error", detail=one_line(error))
            return Parsed("", own_failure=own, usage=usage, transcript=transcript, reported=True)
        if failed:
            # a failed run with no error in its messages: goose's stderr says why, and
            # whatever text the messages end with is goose's, not an answer
            error = (
                stream_error
                or error_report(out.stderr)
                or "goose reported a failed run (status: error)"
            )
            found = fault(
                classify_fault(error) or "unknown", error, out.now, retry_after(out.stderr, out.now)
            )
            return Parsed("", fault=found, usage=usage, transcript=transcript, reported=True)
        return Parsed(answer, usage=usage, transcript=transcript, reported=True)


# how goose prints its json output: a pretty-printed document from a line `{` of its own
_DOCUMENT_START = re.compile(r"^\{$", re.MULTILINE)
_JSON_LINE = re.compile(r"^\s*[{\[]", re.MULTILINE)
# lines `{` a document is tried from (each try fails at once on a line that is not one)
_DOCUMENT_TRIES = 8


def _pretty_document(stdout: str) -> tuple[dict[str, Any] | None, str]:
    """goose's pretty-printed json document (with its messages) and what follows it."""
    starts = (m.start() for m in _DOCUMENT_START.finditer(stdout))
    for start in itertools.islice(starts, _DOCUMENT_TRIES):
        try:
            value, end = json.JSONDecoder().raw_decode(stdout, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and "messages" in value:
            return value, stdout[end:]
    return None, ""


def _from_stream(values: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """goose's stream-json events as the json document, and the run's error event if any.

    Both formats print the same messages; stream-json prints a reply in chunks of one
    message id (joined here), its totals in a `complete` event, and a run that failed
    as an `error` event in place of `complete`.
    """
    messages: list[dict[str, Any]] = []
    metadata: dict[str, Any] = {}
    error: str | None = None
    seen = False
    for event in values:
        kind = event.get("type")
        message = event.get("message")
        if kind == "message" and isinstance(message, dict):
            seen = True
            content = [c for c in message.get("content") or () if isinstance(c, dict)]
            last = messages[-1] if messages else None
            if (
                last is not None
                and message.get("id") is not None
                and (last.get("id"), last.get("role")) == (message.get("id"), message.get("role"))
            ):
                last["content"] = _joined(last["content"], content)
            else:
                messages.append({**message, "content": content})
        elif kind == "complete":
            seen = True
            metadata = {k: v for k, v in event.items() if k != "type"}
            metadata["status"] = "completed"
        elif kind == "error":
            seen = True
            error = text_of(event.get("error")) or "goose reported an error"
    if not seen:
        return None, None
    if error is not None:
        metadata["status"] = "error"
    return {"messages": messages, "metadata": metadata}, error


def _joined(content: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Content of one streamed message: adjacent text (or thinking) chunks made one."""
    joined = [dict(item) for item in content]
    for item in more:
        kind = item.get("type")
        field = {"text": "text", "thinking": "thinking"}.get(str(kind))
        last = joined[-1] if joined else None
        if (
            field is not None
            and last is not None
            and last.get("type") == kind
            and isinstance(last.get(field), str)
            and isinstance(item.get(field), str)
        ):
            last[field] += item[field]
        else:
            joined.append(dict(item))
    return joined


def _answer(messages: list[dict[str, Any]]) -> tuple[str, bool]:
    """The text of the last assistant message that has any, and whether the model wrote it
    (goose records the inference of a message its model wrote: provider, model)."""
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        items = content if isinstance(content, list) else [content]
        texts = [
            item["text"]
            for item in items
            if isinstance(item, dict)
            and item.get("type") == "text"
            and isinstance(item.get("text"), str)
        ]
        if any(t.strip() for t in texts):
            inference = obj(obj(message.get("metadata")).get("inference"))
            return "\n".join(t.strip() for t in texts if t.strip()), bool(inference)
    return "", False


def _entries(messages: list[dict[str, Any]]) -> tuple[list[Entry], tuple[str, str] | None]:
    """The transcript, and the typed error (kind, message) of the last message, if any."""
    entries: list[Entry] = []
    names: dict[str, str] = {}
    typed: tuple[str, str] | None = None
    for index, message in enumerate(messages):
        role = str(message.get("role") or "assistant")
        last = index == len(messages) - 1
        for item in message.get("content") or ():
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "text" and text_of(item.get("text")):
                entries.append(Entry(kind="message", role=role, text=item["text"]))
            elif kind == "thinking" and text_of(item.get("thinking")):
                entries.append(Entry(kind="reasoning", text=item["thinking"]))
            elif kind == "toolRequest":
                call = obj(item.get("toolCall"))
                value = obj(call.get("value"))
                call_id = text_of(item.get("id"))
                name = text_of(value.get("name"))
                if call_id and name:
                    names[call_id] = name
                entries.append(
                    Entry(
                        kind="tool_call", name=name, input=value.get("arguments"), call_id=call_id
                    )
                )
            elif kind == "toolResponse":
                result = obj(item.get("toolResult"))
                value = obj(result.get("value"))
                call_id = text_of(item.get("id"))
                failed = result.get("status") == "error" or bool(value.get("isError"))
                raw = (
                    result.get("error") if result.get("status") == "error" else value.get("content")
                )
                entries.append(
                    Entry(
                        kind="tool_result",
                        name=names.get(call_id or ""),
                        output=as_text(raw) if raw is not None else "",
                        is_error=failed,
                        call_id=call_id,
                    )
                )
            elif kind == "systemNotification":
                text = str(item.get("msg") or "")
                if item.get("notificationType") == "creditsExhausted":
                    typed = ("creditsExhausted", text) if last else typed
                    entries.append(Entry(kind="error", text=text))
                else:
                    entries.append(Entry(kind="system", text=text))
            elif kind == "error":
                text = str(item.get("message") or "")
                # the run failed on it when it is in the last message
                typed = (str(item.get("kind") or "other"), text) if last else typed
                entries.append(Entry(kind="error", text=text))
    return entries, typed


def _usage(metadata: dict[str, Any], messages: list[dict[str, Any]]) -> Usage:
    inputs = count(metadata.get("input_tokens"))
    output = count(metadata.get("output_tokens"))
    model = None
    for message in reversed(messages):
        inference = obj(obj(message.get("metadata")).get("inference"))
        model = text_of(inference.get("requestedModel"))
        if model:
            break
    return Usage(
        input_tokens=inputs,
        cached_input_tokens=count(metadata.get("cache_read_input_tokens")),
        cache_write_tokens=count(metadata.get("cache_write_input_tokens")),
        output_tokens=output,
        model=model,
        **reported_cost(metadata.get("cost_usd"), tokens_spent=bool(inputs or output)),
    )
