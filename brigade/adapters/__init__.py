"""Seat adapters: how to drive one agent CLI non-interactively, as a protocol plus a registry.

An adapter builds the command for a seat and reads the final message and any
apparatus fault out of what the process printed. It never spawns processes
itself (`proc` does) and never decides the cell's state (`taxonomy` does).
The protocol and its value types are in `base`; one module per agent family.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from brigade.adapters.names import (
    BUILT_IN_NAMES,
    EXEC_PREFIX,
    OLLAMA_PREFIX,
    exec_tokens,
    ollama_model,
)

if TYPE_CHECKING:
    from brigade.adapters.base import Adapter


@cache
def built_in() -> dict[str, Adapter]:
    """The built-in agent CLIs by roster name (imported when first needed)."""
    from brigade.adapters.aider import AiderAdapter
    from brigade.adapters.claude import ClaudeAdapter
    from brigade.adapters.codex import CodexAdapter
    from brigade.adapters.copilot import CopilotAdapter
    from brigade.adapters.cursor import CursorAdapter
    from brigade.adapters.gemini import GeminiAdapter, QwenAdapter
    from brigade.adapters.goose import GooseAdapter
    from brigade.adapters.opencode import OpencodeAdapter

    adapters: tuple[Adapter, ...] = (
        ClaudeAdapter(),
        CodexAdapter(),
        CursorAdapter(),
        GeminiAdapter(),
        OpencodeAdapter(),
        AiderAdapter(),
        GooseAdapter(),
        QwenAdapter(),
        CopilotAdapter(),
    )
    return {adapter.name: adapter for adapter in adapters}


def _prefixed() -> dict[str, Callable[[str], Adapter]]:
    from brigade.adapters.exec import ExecAdapter
    from brigade.adapters.ollama import OllamaAdapter

    return {EXEC_PREFIX: ExecAdapter, OLLAMA_PREFIX: OllamaAdapter}


def adapter_for(cli: str) -> Adapter:
    """The adapter for a roster `cli` value (validated by check_cli first)."""
    for prefix, factory in _prefixed().items():
        if cli.startswith(prefix):
            return factory(cli[len(prefix) :])
    return built_in()[cli]


def known_names() -> list[str]:
    """Built-in adapter names plus the prefixed forms, for messages and docs."""
    return sorted(built_in()) + [f"{prefix}<...>" for prefix in _prefixed()]


def check_cli(cli: str) -> str | None:
    """None when `cli` names an adapter, else a one-line problem with the fix (no adapter
    is imported: a resume loads its roster without them)."""
    try:
        if cli.startswith(EXEC_PREFIX):
            exec_tokens(cli[len(EXEC_PREFIX) :])
        elif cli.startswith(OLLAMA_PREFIX):
            ollama_model(cli[len(OLLAMA_PREFIX) :])
        elif cli not in BUILT_IN_NAMES:
            return (
                f"unknown cli {cli!r}; use one of {', '.join(sorted(BUILT_IN_NAMES))}, "
                "ollama:<model> or exec:<command line>"
            )
    except ValueError as exc:
        return str(exc)
    return None
