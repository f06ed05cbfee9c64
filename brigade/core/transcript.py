"""What the agent did, as one normalised sequence of entries for every CLI.

An adapter that can read a transcript from its CLI's output returns a tuple of
`Entry`: messages (the agent's text, a user message the CLI echoes), reasoning,
tool calls with their input, tool results with their output and error flag,
errors the CLI reported along the way and system notices (the model in use, a
retry). Text is kept as the CLI printed it; projection and truncation are for
whoever shows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

EntryKind = Literal["message", "reasoning", "tool_call", "tool_result", "error", "system"]
ENTRY_KINDS: tuple[str, ...] = get_args(EntryKind)

TRANSCRIPT_SCHEMA = "brigade.transcript.v1"


@dataclass(frozen=True)
class Entry:
    """One step of a transcript; fields that do not apply to its kind are None.

    - `role`: who speaks in a message (`assistant`, `user`)
    - `text`: a message, reasoning, an error or a system notice
    - `name`: the tool of a tool call or result
    - `input`: a tool call's input (a JSON value)
    - `output`: a tool result's output, as text
    - `is_error`: whether a tool result is a failure
    - `call_id`: the CLI's id linking a tool call to its result
    """

    kind: EntryKind
    role: str | None = None
    text: str | None = None
    name: str | None = None
    input: Any = None
    output: str | None = None
    is_error: bool | None = None
    call_id: str | None = None


_FIELDS = ("kind", "role", "text", "name", "input", "output", "is_error", "call_id")


def entry_document(entry: Entry) -> dict[str, Any]:
    """The JSON form of an entry: its kind and the fields that apply (no nulls)."""
    return {
        name: getattr(entry, name)
        for name in _FIELDS
        if getattr(entry, name) is not None or name == "kind"
    }


def transcript_document(entries: Iterable[Entry]) -> dict[str, Any]:
    """The run/transcript.json document."""
    return {"schema": TRANSCRIPT_SCHEMA, "entries": [entry_document(e) for e in entries]}


def as_text(value: Any) -> str:
    """A tool output or error as text: strings as they are, text blocks joined, JSON otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [block_text(block) for block in value]
        if all(part is not None for part in parts):
            return "\n".join(part for part in parts if part is not None)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def block_text(block: Any) -> str | None:
    """The text of a `{"type": "text", "text": ...}` content block, else None."""
    if isinstance(block, str):
        return block
    if (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ):
        text: str = block["text"]
        return text
    return None
