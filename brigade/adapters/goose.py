"""goose: `goose run --no-session`, JSON output; read-only only by instruction."""

from __future__ import annotations

from brigade.adapters.base import Enforcement, SeatRequest
from brigade.adapters.common import (
    READ_ONLY_NOTICE,
    AgentCli,
    ArgvPlan,
    Parsed,
    dicts,
    json_values,
    opt,
    reasoning_not_applied,
)


class GooseAdapter(AgentCli):
    """goose (`goose run --no-session -t`), JSON output; read-only only by instruction."""

    name = "goose"
    binary = "goose"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        env: dict[str, str] = {}
        if request.writable:
            text = request.prompt
            # A configured approve/chat mode would block or drop tool calls headless.
            env["GOOSE_MODE"] = "auto"
            enforcement: Enforcement = "none"
        else:
            text = READ_ONLY_NOTICE + request.prompt
            enforcement = "soft"
        # clap would take a leading '-' for an option; the joined form is unambiguous.
        text_args = (f"--text={text}",) if text.startswith("-") else ("-t", text)
        args = (
            "run",
            "--no-session",
            "--output-format",
            "json",
            *opt("--model", seat.model),
            *text_args,
        )
        return ArgvPlan(
            args=args,
            stdin_text=None,
            enforcement=enforcement,
            env=env,
            not_applied=reasoning_not_applied(seat),
        )

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        for document in dicts(json_values(stdout)):
            messages = document.get("messages")
            if not isinstance(messages, list):
                continue
            for message in reversed(messages):
                if not isinstance(message, dict) or message.get("role") != "assistant":
                    continue
                content = message.get("content")
                items = content if isinstance(content, list) else [content]
                texts = [
                    item["text"]
                    for item in items
                    if isinstance(item, dict)
                    and item.get("type") == "text"
                    and isinstance(item.get("text"), str)
                ]
                if any(t.strip() for t in texts):
                    return Parsed(final_text="\n".join(t.strip() for t in texts if t.strip()))
            return Parsed(final_text="")
        return Parsed(final_text=stdout.strip())
