"""Cursor Agent: `cursor-agent -p`, trusted workspace, prompt after `--`."""

from __future__ import annotations

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    Parsed,
    opt,
    parse_result_object,
    reasoning_not_applied,
)


class CursorAdapter(AgentCli):
    """Cursor Agent (`cursor-agent -p`), trusted workspace, prompt after `--`."""

    name = "cursor"
    binary = "cursor-agent"

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
            "json",
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

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        return parse_result_object(stdout) or Parsed(final_text=stdout.strip())
