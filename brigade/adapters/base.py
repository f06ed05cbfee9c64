"""What every adapter shares: the request it gets, the command it builds, what it reads back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from brigade.core.specs import SeatSpec
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry
from brigade.core.usage import Usage

Enforcement = Literal["hard", "soft", "none"]
# why a run that the seat itself ended short failed (not an apparatus fault)
OwnFailureKind = Literal["turn_limit", "budget_limit", "agent_error"]


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
    # Files (names in the run folder) the seat may write for the adapter to read
    # back: the runner passes their text to `read(files=...)`.
    output_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault:
    """An apparatus fault the adapter recognised in the seat's output.

    `detail` is the provider's or CLI's own message, on one line;
    `retry_after_seconds` how long the CLI said to wait (a reset time or a
    retry-after), counted from when the output was read; None when it said nothing.
    """

    kind: FaultKind
    detail: str
    retry_after_seconds: float | None = None

    def __post_init__(self) -> None:
        # a wait is read from what a CLI (or a program it ran) printed: one that is no
        # finite number of 0 or more (1e999, a negative Retry-After) is no wait, never a
        # value run.json and the receipt's schema refuse
        wait = self.retry_after_seconds
        if wait is not None and (
            isinstance(wait, bool)
            or not isinstance(wait, (int, float))
            or not math.isfinite(wait)
            or wait < 0
        ):
            object.__setattr__(self, "retry_after_seconds", None)

    def document(self) -> dict[str, Any]:
        """The receipt's `fault` object: kind, message and, when known, the wait."""
        doc: dict[str, Any] = {"kind": self.kind, "message": self.detail}
        if self.retry_after_seconds is not None:
            doc["retry_after_seconds"] = self.retry_after_seconds
        return doc


@dataclass(frozen=True)
class OwnFailure:
    """The seat ended the run itself without an answer (a turn or budget limit, its own
    error): a real result of the seat, never a fault, with the CLI's reason."""

    kind: OwnFailureKind
    detail: str


@dataclass(frozen=True)
class Reading:
    """What the adapter made of a finished process.

    - `final_text`: the answer (never an error message the CLI printed instead)
    - `fault`: an apparatus fault, or None
    - `own_failure`: why the seat failed by itself, when the CLI says so
    - `usage`: tokens, cost, turns, models; None when the CLI reports none
    - `transcript`: the normalised steps; None when the CLI gives none
    - `notes`: problems with what the seat reported (bad usage data), one line each
    """

    final_text: str
    fault: Fault | None = None
    own_failure: OwnFailure | None = None
    usage: Usage | None = None
    transcript: tuple[Entry, ...] | None = None
    notes: tuple[str, ...] = ()


class Adapter(Protocol):
    """One agent CLI."""

    name: str
    # the oldest version of the CLI that takes the command line the adapter builds (None:
    # not known); `brigade doctor` warns below it
    min_version: str | None

    @property
    def state_paths(self) -> tuple[str, ...]:
        """Where the CLI keeps its login and state (`~`: the seat's home); writable in a sandbox."""
        ...

    @property
    def auth_files(self) -> tuple[str, ...]:
        """The files (`~/...`) the CLI needs to log in, and nothing of its settings: all an
        isolated HOME (`home: isolated`) is given of the user's, read-only."""
        ...

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command, stdin and environment for this seat and prompt."""
        ...

    def read(
        self,
        *,
        exit_code: int | None,
        stdout: str,
        stderr: str,
        files: Mapping[str, str] | None = None,
        now: float | None = None,
    ) -> Reading:
        """The answer, fault, usage and transcript from the process output.

        `files` holds the text of the invocation's `output_files` the seat wrote;
        `now` (epoch seconds, default the clock) turns reset times into waits.
        """
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
