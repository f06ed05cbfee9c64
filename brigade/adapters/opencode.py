"""opencode: `opencode run --format json`, prompt on stdin, JSONL events."""

from __future__ import annotations

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    Parsed,
    dicts,
    json_values,
    message_of,
    obj,
    opt,
)


class OpencodeAdapter(AgentCli):
    """opencode (`opencode run --format json`), prompt on stdin, JSONL events."""

    name = "opencode"
    binary = "opencode"

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        # The plan agent denies edits; `run` auto-rejects every permission it would
        # have to ask for, so its shell cannot change anything either.
        agent: tuple[str, ...] = () if request.writable else ("--agent", "plan")
        args = (
            "run",
            "--format",
            "json",
            *agent,
            *opt("--model", seat.model),
            *opt("--variant", seat.reasoning),
        )
        return ArgvPlan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )

    def _parse(self, stdout: str, stderr: str) -> Parsed:
        events = dicts(json_values(stdout))
        if not events:
            return Parsed(final_text=stdout.strip())
        steps: list[list[str]] = [[]]
        error: str | None = None
        for event in events:
            kind = event.get("type")
            part = obj(event.get("part"))
            if kind == "step_start":
                steps.append([])
            elif kind == "text" and isinstance(part.get("text"), str):
                steps[-1].append(part["text"])
            elif kind == "error":
                error = message_of(event.get("error")) or "error"
        # The final message is the text of the last step that said anything.
        texts = next((step for step in reversed(steps) if any(t.strip() for t in step)), [])
        return Parsed(final_text="\n".join(t.strip() for t in texts if t.strip()), error=error)
