"""Gemini CLI and Qwen Code (its fork): headless mode, prompt on stdin, JSON output."""

from __future__ import annotations

from collections.abc import Mapping

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    Parsed,
    opt,
    parse_response_object,
    parse_result_object,
    reasoning_not_applied,
)


def headless_plan(request: SeatRequest, env: Mapping[str, str] | None = None) -> ArgvPlan:
    """The headless argv both CLIs share: JSON output, an approval mode, the model."""
    seat = request.seat
    args = (
        "--output-format",
        "json",
        # In headless mode the default approval mode refuses every tool that
        # would need a confirmation (edits, shell); yolo approves them all.
        "--approval-mode",
        "yolo" if request.writable else "default",
        *opt("--model", seat.model),
    )
    return ArgvPlan(
        args=args,
        stdin_text=request.prompt,
        enforcement="none" if request.writable else "hard",
        env=dict(env or {}),
        not_applied=reasoning_not_applied(seat),
    )


class GeminiAdapter(AgentCli):
    """Gemini CLI in headless mode, prompt on stdin, JSON output."""

    name = "gemini"
    binary = "gemini"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        # With folder trust enabled, an untrusted folder silently drops yolo back
        # to default, and a writable run would then change nothing.
        return headless_plan(request, {"GEMINI_CLI_TRUST_WORKSPACE": "true"})

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        return parse_response_object(stdout, stderr)


class QwenAdapter(AgentCli):
    """Qwen Code in headless mode, prompt on stdin, JSON message array."""

    name = "qwen"
    binary = "qwen"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        return headless_plan(request)

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        return parse_result_object(stdout) or parse_response_object(stdout, stderr)
