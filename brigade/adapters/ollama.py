"""A local model through `ollama run <model>`: prompt on stdin, plain text out."""

from __future__ import annotations

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
)


class OllamaAdapter(AgentCli):
    """A local model through `ollama run <model>`, prompt on stdin, plain text out."""

    name = "ollama"
    binary = "ollama"

    def __init__(self, model: str) -> None:
        model = model.strip()
        if not model:
            raise ValueError("ollama: needs a model name after 'ollama:' (e.g. ollama:llama3.2)")
        self.model = model

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        not_applied: tuple[str, ...] = ()
        if seat.model and seat.model != self.model:
            # The model named in `ollama:<model>` is the one that runs.
            not_applied = ("model",)
        think: tuple[str, ...] = ()
        if seat.reasoning:
            # Thinking text would otherwise be printed ahead of the answer.
            think = (f"--think={seat.reasoning}", "--hidethinking")
        # A bare model has no tools at all, so nothing can write the workspace.
        return ArgvPlan(
            args=("run", *think, self.model),
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
            not_applied=not_applied,
        )
