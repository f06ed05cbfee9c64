"""The generic `exec:<command line>` adapter: any program that reads the prompt on stdin."""

from __future__ import annotations

import shlex
import sys

from brigade.adapters.base import Fault, Invocation, Reading, SeatRequest, last_line
from brigade.core.specs import SeatSpec

EX_TEMPFAIL = 75


class ExecAdapter:
    """Runs a command line in the workspace: prompt on stdin, stdout is the final output.

    The command reports a fault of the apparatus (a dropped connection, a
    provider 5xx) by exiting 75 (EX_TEMPFAIL) with the detail as its last stderr
    line; any other non-zero exit is the agent's own failure. Two placeholders
    keep rosters portable: `{python}` (the interpreter running brigade) and
    `{roster_dir}` (the roster file's folder).
    """

    name = "exec"

    def __init__(self, command_line: str) -> None:
        try:
            tokens = shlex.split(command_line)
        except ValueError as exc:
            raise ValueError(f"exec: command line cannot be parsed ({exc})") from None
        if not tokens:
            raise ValueError("exec: needs a command line after 'exec:'")
        self.tokens = tuple(tokens)

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command line with placeholders expanded, prompt on stdin."""
        argv = tuple(
            token.replace("{python}", sys.executable).replace(
                "{roster_dir}", request.seat.roster_dir
            )
            for token in self.tokens
        )
        # A generic command gets no sandbox from brigade: read-only is not enforced.
        return Invocation(
            argv=argv,
            stdin_text=request.prompt,
            read_only_enforcement="none",
            transport=request.seat.transport,
        )

    def read(self, *, exit_code: int | None, stdout: str, stderr: str) -> Reading:
        """stdout is the final output; exit 75 is an apparatus fault."""
        if exit_code == EX_TEMPFAIL:
            detail = last_line(stderr) or "exited 75 (EX_TEMPFAIL) without a detail line"
            return Reading(final_text=stdout, fault=Fault(kind="tempfail", detail=detail))
        return Reading(final_text=stdout)

    def version_argv(self, seat: SeatSpec) -> tuple[str, ...] | None:
        """A generic command has no standard version flag."""
        return None
