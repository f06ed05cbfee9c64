"""Seat adapters: how to drive one agent CLI non-interactively, as a protocol plus a registry.

An adapter builds the command for a seat and reads the final message and any
apparatus fault out of what the process printed. It never spawns processes
itself (`proc` does) and never decides the cell's state (`outcome` does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from brigade.roster import SeatSpec

Enforcement = Literal["hard", "soft", "none"]


@dataclass(frozen=True)
class SeatRequest:
    """Everything an adapter may use to build a command."""

    seat: SeatSpec
    prompt: str
    cwd: Path
    run_dir: Path
    writable: bool
    cell_id: str
    coordinate: str


@dataclass(frozen=True)
class Invocation:
    """A command to run for a seat."""

    argv: tuple[str, ...]
    stdin_text: str | None
    read_only_enforcement: Enforcement
    env: Mapping[str, str] = field(default_factory=dict)
    settings_not_applied: tuple[str, ...] = ()
    transport: str | None = None
    # A command prefix that runs argv and talks to it (a protocol client such as
    # the codex app-server session); argv stays the agent's own command.
    driver: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault:
    """An apparatus fault the adapter recognised in the seat's output."""

    kind: str  # run.json failure_kind, e.g. "tempfail", "rate_limited"
    detail: str


@dataclass(frozen=True)
class Reading:
    """What the adapter made of a finished process."""

    final_text: str
    fault: Fault | None = None


class Adapter(Protocol):
    """One agent CLI."""

    name: str

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command, stdin and environment for this seat and prompt."""
        ...

    def read(self, *, exit_code: int | None, stdout: str, stderr: str) -> Reading:
        """The final message and any apparatus fault from the process output."""
        ...

    def version_argv(self, seat: SeatSpec) -> tuple[str, ...] | None:
        """A command printing the CLI's version, or None when it has none."""
        ...


def last_line(text: str) -> str:
    """The last non-empty line of text, stripped (the detail of a reported fault)."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def _fixed() -> dict[str, Adapter]:
    from brigade.adapters.agents import AGENTS

    return dict(AGENTS)


def _prefixed() -> dict[str, Callable[[str], Adapter]]:
    from brigade.adapters.agents import OllamaAdapter
    from brigade.adapters.exec import ExecAdapter

    return {"exec:": ExecAdapter, "ollama:": OllamaAdapter}


def adapter_for(cli: str) -> Adapter:
    """The adapter for a roster `cli` value (validated by check_cli first)."""
    for prefix, factory in _prefixed().items():
        if cli.startswith(prefix):
            return factory(cli[len(prefix) :])
    return _fixed()[cli]


def known_names() -> list[str]:
    """Built-in adapter names plus the prefixed forms, for messages and docs."""
    return sorted(_fixed()) + [f"{prefix}<...>" for prefix in _prefixed()]


def check_cli(cli: str) -> str | None:
    """None when `cli` names an adapter, else a one-line problem with the fix."""
    for prefix, factory in _prefixed().items():
        if cli.startswith(prefix):
            try:
                factory(cli[len(prefix) :])
            except ValueError as exc:
                return str(exc)
            return None
    if cli in _fixed():
        return None
    return (
        f"unknown cli {cli!r}; use one of {', '.join(sorted(_fixed()))}, "
        "ollama:<model> or exec:<command line>"
    )
