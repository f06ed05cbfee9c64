"""opencode: `opencode run --format json`, prompt on stdin, JSONL events.

Every line is `{type, timestamp, sessionID, ...}`: `text` and `reasoning`
parts, finished `tool_use` parts, a `step_finish` per model call (tokens and
cost) and `error` events naming the error (`ProviderAuthError`, `APIError`
with the provider's `statusCode` and `isRetryable`, ...; newer runners give
`{type, message}`).
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime
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
    opt,
    status_of,
    text_of,
    until,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry, as_text
from brigade.core.usage import Usage, reported_cost

# errors that are the agent's own doing (its context, its output, a filter)
_AGENTS_OWN = {
    "ContextOverflowError",
    "ContentFilterError",
    "MessageOutputLengthError",
    "StructuredOutputError",
    "MessageAbortedError",
    "aborted",
}


class OpencodeAdapter(AgentCli):
    """opencode (`opencode run --format json`), prompt on stdin, JSONL events."""

    name = "opencode"
    binary = "opencode"
    state_paths = (
        "~/.config/opencode",
        "~/.local/share/opencode",
        "~/.local/state/opencode",
        "~/.cache/opencode",
    )
    # the providers' keys and logins `opencode auth login` saved; not opencode.json
    auth_files = ("~/.local/share/opencode/auth.json",)

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        # The plan agent denies edits; `run` auto-rejects every permission it would
        # have to ask for, so its shell cannot change anything either.
        agent: tuple[str, ...] = () if request.writable else ("--agent", "plan")
        args = (
            "run",
            "--format",
            "json",
            *agent,
            *opt("--model", seat.model),
            *opt("--variant", seat.reasoning),
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
        steps: list[list[str]] = [[]]
        entries: list[Entry] = []
        tally = _Tally()
        error: dict[str, Any] | None = None
        for event in events:
            kind = event.get("type")
            part = obj(event.get("part"))
            tally.session = tally.session or text_of(event.get("sessionID"))
            if kind == "step_start":
                steps.append([])
            elif kind == "text" and isinstance(part.get("text"), str):
                steps[-1].append(part["text"])
                entries.append(Entry(kind="message", role="assistant", text=part["text"]))
            elif kind == "reasoning" and text_of(part.get("text")):
                entries.append(Entry(kind="reasoning", text=part["text"]))
            elif kind == "tool_use":
                entries.extend(_tool_entries(part))
            elif kind == "step_finish":
                tally.add(part)
                if part.get("reason") == "stop":
                    error = None  # a later answer: the error was retried away
            elif kind == "error":
                error = obj(event.get("error"))
                entries.append(Entry(kind="error", text=_message(error)))
        # The final message is the text of the last step that said anything.
        texts = next((step for step in reversed(steps) if any(t.strip() for t in step)), [])
        answer = "\n".join(t.strip() for t in texts if t.strip())
        usage = tally.usage()
        if error is None:
            return Parsed(answer, usage=usage, transcript=tuple(entries), reported=tally.turns > 0)
        found, own = _error(error, out.now)
        return Parsed(
            "",
            fault=found,
            own_failure=own,
            usage=usage,
            transcript=tuple(entries),
            reported=True,
        )


def _message(error: dict[str, Any]) -> str:
    data = obj(error.get("data"))
    message = text_of(data.get("message")) or text_of(error.get("message"))
    name = text_of(error.get("name")) or text_of(error.get("type")) or "error"
    return f"{name}: {message}" if message else name


def _retry_header(headers: dict[str, Any], now: float) -> float | None:
    value = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value.strip().replace(".", "", 1).isdigit():
            return float(value)
        try:
            return until(parsedate_to_datetime(value).timestamp(), now)
        except (TypeError, ValueError):
            return None
    return None


def _error(error: dict[str, Any], now: float) -> tuple[Fault | None, OwnFailure | None]:
    name = text_of(error.get("name")) or text_of(error.get("type")) or ""
    data = obj(error.get("data"))
    message = _message(error)
    if name in _AGENTS_OWN:
        return None, OwnFailure(kind="agent_error", detail=one_line(message))
    kind: FaultKind | None
    if name == "ProviderAuthError":
        kind = "auth"
    elif name == "provider.transport":
        kind = "transport_drop"
    elif name == "APIError":
        kind = kind_for_status(status_of(data.get("statusCode")), message)
    else:
        kind = classify_fault(message)
    wait = _retry_header(obj(data.get("responseHeaders")), now)
    found = fault(kind, message, now, wait)
    if found is None:
        return None, OwnFailure(kind="agent_error", detail=one_line(message))
    return found, None


class _Tally:
    """step_finish parts added up: one model call each."""

    def __init__(self) -> None:
        self.fields: dict[str, int | None] = dict.fromkeys(
            ("input", "cached", "cache_write", "output", "reasoning")
        )
        self.cost: float | None = None
        self.turns = 0
        self.session: str | None = None

    def _add(self, name: str, value: int | None) -> None:
        if value is not None:
            self.fields[name] = (self.fields[name] or 0) + value

    def add(self, part: dict[str, Any]) -> None:
        self.turns += 1
        tokens = obj(part.get("tokens"))
        cache = obj(tokens.get("cache"))
        read, write = count(cache.get("read")), count(cache.get("write"))
        fresh = count(tokens.get("input"))
        if fresh is not None:
            self._add("input", fresh + (read or 0) + (write or 0))
        self._add("cached", read)
        self._add("cache_write", write)
        output, reasoning = count(tokens.get("output")), count(tokens.get("reasoning"))
        if output is not None:
            self._add("output", output + (reasoning or 0))
        self._add("reasoning", reasoning)
        cost = part.get("cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost = (self.cost or 0.0) + cost

    def usage(self) -> Usage | None:
        if not self.turns and self.session is None:
            return None
        spent = bool(self.fields["input"] or self.fields["output"])
        return Usage(
            input_tokens=self.fields["input"],
            cached_input_tokens=self.fields["cached"],
            cache_write_tokens=self.fields["cache_write"],
            output_tokens=self.fields["output"],
            reasoning_tokens=self.fields["reasoning"],
            turns=self.turns or None,
            session_id=self.session,
            **reported_cost(self.cost, tokens_spent=spent),
        )


def _tool_entries(part: dict[str, Any]) -> list[Entry]:
    state = obj(part.get("state"))
    name = text_of(part.get("tool"))
    # v1 parts name the call `callID`; v2 parts use `id` for it
    call_id = text_of(part.get("callID")) or text_of(part.get("id"))
    failed = state.get("status") == "error"
    output = state.get("error") if failed else state.get("output")
    return [
        Entry(kind="tool_call", name=name, input=state.get("input"), call_id=call_id),
        Entry(
            kind="tool_result",
            name=name,
            output=as_text(output) if output is not None else "",
            is_error=failed,
            call_id=call_id,
        ),
    ]
