"""What the agent CLI adapters share: parsing JSON output, reading faults, building argv.

Each adapter drives one CLI non-interactively with the user's own login (no
provider SDKs, no stored keys): it builds the command line for a read-only or
a writable run and reads the final message and any apparatus fault back out of
what the process printed. Flags follow each CLI's own documentation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brigade.adapters.base import Enforcement, Fault, Invocation, Reading, SeatRequest, last_line
from brigade.core.specs import SeatSpec

# Prepended only where the CLI has no native read-only mode (goose): the run
# then happens in the user's shared checkout, so the instruction is all there is.
READ_ONLY_NOTICE = (
    "This is a read-only run: do not create, modify or delete any files and do not run "
    "commands that change the workspace. Inspect, then answer.\n\n"
)

DETAIL_LIMIT = 500

# Checked in this order: a message can mention both a 429 and a dropped stream,
# and the more specific cause should win.
FAULT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "workspace_untrusted",
        re.compile(
            r"not inside a trusted directory|(?:workspace|folder|directory) (?:is )?not trusted"
            r"|untrusted (?:workspace|folder|directory)|trust (?:this|the) (?:workspace|folder)"
            r"|workspace trust",
            re.IGNORECASE,
        ),
    ),
    (
        "rate_limited",
        re.compile(
            r"\b429\b|rate[ _-]?limit|too many requests|usage limit|hit your (?:usage )?limit"
            r"|RESOURCE_EXHAUSTED|(?<!disk )quota exceeded|exceeded (?:your )?(?:current )?quota",
            re.IGNORECASE,
        ),
    ),
    (
        "provider_error",
        re.compile(
            r"(?:status|code|http|error)\W{0,3}(?:50[0-4]|529)\b|\b(?:50[0-4]|529) (?:internal"
            r"|bad gateway|service unavailable|gateway timeout|overloaded)|overloaded"
            r"|internal server error|server_error|service unavailable|bad gateway"
            r"|gateway timeout|InternalServerError|ServiceUnavailable",
            re.IGNORECASE,
        ),
    ),
    (
        "transport_error",
        re.compile(
            r"connection (?:reset|refused|closed|aborted|error|lost)|stream disconnected"
            r"|disconnected before|broken pipe|ECONNRESET|ECONNREFUSED|ETIMEDOUT|ENOTFOUND"
            r"|EAI_AGAIN|socket hang up|network error|fetch failed|error sending request"
            r"|APIConnectionError|could not connect|dial tcp|(?:request|connection|read) timed out",
            re.IGNORECASE,
        ),
    ),
)


def classify_fault(message: str) -> str | None:
    """The apparatus fault kind an error message clearly reports, or None."""
    for kind, pattern in FAULT_PATTERNS:
        if pattern.search(message):
            return kind
    return None


def one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= DETAIL_LIMIT else line[: DETAIL_LIMIT - 3] + "..."


def opt(flag: str, value: str | None) -> tuple[str, ...]:
    return (flag, value) if value else ()


def opt_eq(flag: str, value: str | None) -> tuple[str, ...]:
    # The `--flag=value` form: the CLI's variadic options cannot swallow it and a
    # value starting with '-' is not mistaken for an option.
    return (f"{flag}={value}",) if value else ()


def reasoning_not_applied(seat: SeatSpec) -> tuple[str, ...]:
    return ("reasoning",) if seat.reasoning else ()


def json_values(text: str) -> list[Any]:
    """Every JSON document in text: the whole of it, else one per line (JSONL)."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        return [json.loads(stripped)]
    except ValueError:
        pass
    values: list[Any] = []
    for line in stripped.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                values.append(json.loads(line))
            except ValueError:
                continue
    if values:
        return values
    # A pretty-printed document after a line of chatter (a login notice, a warning).
    start = stripped.find("\n{")
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(stripped[start + 1 :])
            return [value]
        except ValueError:
            pass
    return []


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dicts(values: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON objects among values, arrays flattened one level."""
    found: list[dict[str, Any]] = []
    for value in values:
        if isinstance(value, dict):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, dict))
    return found


def message_of(error: Any) -> str | None:
    """A readable message from an error field (string, or object with message/code)."""
    if error is None or error is False:
        return None
    if isinstance(error, str):
        return error or None
    if isinstance(error, dict):
        data = obj(error.get("data"))
        message = error.get("message") or data.get("message") or error.get("name")
        status = error.get("code") or error.get("status") or data.get("statusCode")
        text = str(message) if message else json.dumps(error, sort_keys=True)
        name = error.get("name") or error.get("type")
        if name and message and str(name) != str(message):
            text = f"{name}: {text}"
        if status is not None and str(status) not in text:
            text = f"{text} (status {status})"
        return text
    return str(error)


@dataclass(frozen=True)
class ArgvPlan:
    """The CLI-specific part of an Invocation."""

    args: tuple[str, ...]
    stdin_text: str | None
    enforcement: Enforcement
    env: Mapping[str, str] = field(default_factory=dict)
    not_applied: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parsed:
    """The final message and any error the CLI reported in its output.

    `fault_kind` is set when the CLI itself said which apparatus fault it was
    (a structured error code); otherwise the error's text is classified.
    """

    final_text: str
    error: str | None = None
    fault_kind: str | None = None


def judge(
    parsed: Parsed,
    *,
    exit_code: int | None,
    stdout: str,
    stderr: str,
    marker: re.Pattern[str] | None,
) -> Reading:
    """Turn a parsed output and exit status into a Reading, flagging only clear faults."""
    text = parsed.final_text
    if parsed.error:
        kind = parsed.fault_kind or classify_fault(parsed.error)
        if kind:
            return Reading(final_text=text, fault=Fault(kind=kind, detail=one_line(parsed.error)))
    if exit_code is None:
        # Killed (timeout or signal): the caller records that; no guessing here.
        return Reading(final_text=text)
    err_line = last_line(stderr)
    # stdout is the agent's answer for plain-text CLIs, so only a line shaped like
    # the CLI's own error report may be read as one.
    marked = [
        line
        for line in (last_line(stdout), err_line)
        if marker is not None and line and marker.search(line)
    ]
    if exit_code != 0:
        for line in (err_line, *marked):
            kind = classify_fault(line) if line else None
            if kind:
                return Reading(final_text=text, fault=Fault(kind=kind, detail=one_line(line)))
        return Reading(final_text=text)
    for line in marked:
        kind = classify_fault(line)
        if kind:
            return Reading(final_text=text, fault=Fault(kind=kind, detail=one_line(line)))
    if not text.strip():
        kind = classify_fault(err_line) if err_line else None
        if kind:
            return Reading(final_text=text, fault=Fault(kind=kind, detail=one_line(err_line)))
        detail = parsed.error or err_line or "exited 0 without a final message"
        return Reading(final_text=text, fault=Fault(kind="empty_output", detail=one_line(detail)))
    return Reading(final_text=text)


class AgentCli:
    """Shared behaviour: subclasses supply the argv plan and the output parser."""

    name: str
    binary: str
    error_marker: re.Pattern[str] | None = None

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command, stdin and environment for this seat and prompt."""
        plan = self._plan(request)
        return Invocation(
            argv=(self.binary, *plan.args),
            stdin_text=plan.stdin_text,
            read_only_enforcement=plan.enforcement,
            env=dict(plan.env),
            settings_not_applied=plan.not_applied,
            transport=request.seat.transport,
            driver=plan.driver,
        )

    def read(self, *, exit_code: int | None, stdout: str, stderr: str) -> Reading:
        """The final message and any apparatus fault from the process output."""
        return judge(
            self._parse(stdout, stderr),
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            marker=self.error_marker,
        )

    def version_argv(self, seat: SeatSpec) -> tuple[str, ...] | None:
        """The CLI's `--version` command."""
        return (self.binary, "--version")

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        raise NotImplementedError

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        return Parsed(final_text=stdout.strip())


def parse_result_object(stdout: str) -> Parsed | None:
    """Claude Code style `{"type": "result", "result": ..., "is_error": ...}` output."""
    results = [d for d in dicts(json_values(stdout)) if d.get("type") == "result"]
    if not results:
        return None
    result = results[-1]
    raw = result.get("result")
    text = raw if isinstance(raw, str) else ""
    subtype = str(result.get("subtype") or "")
    error: str | None = None
    if result.get("is_error") or subtype.startswith("error"):
        error = message_of(result.get("error")) or text or subtype or "error"
    return Parsed(final_text=text, error=error)


def parse_response_object(stdout: str, stderr: str) -> Parsed:
    """Gemini CLI style `{"response": ..., "error": {...}}` (errors may go to stderr)."""
    for document in dicts(json_values(stdout)):
        if "response" in document or "error" in document:
            text = document.get("response")
            return Parsed(
                final_text=text if isinstance(text, str) else "",
                error=message_of(document.get("error")),
            )
    for document in dicts(json_values(stderr)):
        if "error" in document:
            return Parsed(final_text=stdout.strip(), error=message_of(document["error"]))
    return Parsed(final_text=stdout.strip())
