"""What every adapter shares: the request it gets, the command it builds, what it reads back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from brigade.core.specs import SeatSpec

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
