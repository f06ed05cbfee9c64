"""Claude Code: `claude -p`, prompt on stdin, a JSON result object."""

from __future__ import annotations

from brigade.adapters.base import Enforcement, SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    Parsed,
    opt,
    parse_result_object,
)


class ClaudeAdapter(AgentCli):
    """Claude Code in print mode (`claude -p`), prompt on stdin, JSON result."""

    name = "claude"
    binary = "claude"
    # Every built-in tool that can change files; Bash goes too because a shell
    # can write anywhere. Deny rules beat allow rules and permission modes.
    read_only_denied = "Bash,Edit,MultiEdit,Write,NotebookEdit"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        if request.writable:
            # Edits inside the worktree plus shell commands; no prompt can be
            # answered in print mode, so anything else is refused rather than asked.
            permissions: tuple[str, ...] = (
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash",
            )
            enforcement: Enforcement = "none"
        else:
            # An explicit mode overrides a permissive default in the user's settings;
            # --strict-mcp-config keeps configured MCP servers (which may write) out.
            permissions = (
                "--permission-mode",
                "default",
                "--disallowedTools",
                self.read_only_denied,
                "--strict-mcp-config",
            )
            enforcement = "hard"
        args = (
            "-p",
            "--output-format",
            "json",
            *permissions,
            *opt("--model", seat.model),
            *opt("--effort", seat.reasoning),
        )
        return ArgvPlan(args=args, stdin_text=request.prompt, enforcement=enforcement)

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        return parse_result_object(stdout) or Parsed(final_text=stdout.strip())
