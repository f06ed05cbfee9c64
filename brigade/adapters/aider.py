"""aider: `aider --message`, no commits, history files kept in the run folder."""

from __future__ import annotations

import re

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    opt,
)


class AiderAdapter(AgentCli):
    """aider with `--message`, no commits, history files kept in the run folder."""

    name = "aider"
    binary = "aider"
    # aider prints provider errors as `litellm.XxxError: ...` and its own advice
    # as `The API provider ...`, often after a 0 exit once its retries run out.
    error_marker = re.compile(r"^litellm\.\w+|^The API provider\b")

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        read_only: tuple[str, ...] = ()
        if not request.writable:
            # Ask mode has no edit format: the model's reply is never applied to files.
            read_only = ("--chat-mode", "ask", "--no-suggest-shell-commands")
        args = (
            # --yes-always answers aider's own questions; the settings after it stop
            # it from committing, touching .gitignore, opting in to analytics or
            # opening a browser on the user's behalf.
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-analytics",
            "--no-check-update",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-stream",
            f"--chat-history-file={request.run_dir / 'aider.chat.history.md'}",
            f"--input-history-file={request.run_dir / 'aider.input.history'}",
            *read_only,
            *opt("--model", seat.model),
            *opt("--reasoning-effort", seat.reasoning),
            f"--message={request.prompt}",
        )
        return ArgvPlan(
            args=args,
            stdin_text=None,
            enforcement="none" if request.writable else "hard",
        )
