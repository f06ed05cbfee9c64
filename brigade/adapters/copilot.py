"""GitHub Copilot CLI: prompt piped on stdin, response only (`-s`)."""

from __future__ import annotations

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    opt_eq,
)


class CopilotAdapter(AgentCli):
    """GitHub Copilot CLI, prompt piped on stdin, response only (`-s`)."""

    name = "copilot"
    binary = "copilot"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        # Non-interactive runs need --allow-all-tools; deny rules take precedence
        # over it, and shell goes too because a shell can write anywhere.
        denied: tuple[str, ...] = (
            () if request.writable else ("--deny-tool=write", "--deny-tool=shell")
        )
        args = (
            "-s",
            "--allow-all-tools",
            *denied,
            *opt_eq("--model", seat.model),
            *opt_eq("--reasoning-effort", seat.reasoning),
        )
        return ArgvPlan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )
