"""A local model through `ollama run <model> --verbose`: prompt on stdin, plain text out.

The answer is stdout. `--verbose` adds the generation's statistics to stderr
(`prompt eval count`, `eval count`): the only usage ollama reports, and on
stderr, so the answer is untouched. Errors are `Error: <message>` on stderr
with exit 1; a cloud model without a sign-in prints its notice to stdout and
exits 0.
"""

from __future__ import annotations

import re

from brigade.adapters.base import SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    fault,
)
from brigade.adapters.names import ollama_model
from brigade.core.usage import Usage

_STAT = re.compile(r"^(?P<name>prompt eval count|eval count):\s+(?P<value>\d+) token\(s\)$")
_METRIC = re.compile(
    r"^(?:total duration|load duration|(?:prompt )?eval (?:count|duration|rate)):\s"
)
# what `ollama run` prints instead of an answer when a cloud model needs a sign-in
_SIGN_IN = re.compile(
    r"\A(?P<notice>You need to be signed in to Ollama to run Cloud models\.)\n\n"
    r"If your browser did not open, navigate to:\n"
)


class OllamaAdapter(AgentCli):
    """A local model through `ollama run <model>`, prompt on stdin, plain text out."""

    name = "ollama"
    binary = "ollama"
    state_paths = ("~/.ollama",)
    # the key `ollama signin` made for ollama.com (local models need none)
    auth_files = ("~/.ollama/id_ed25519",)

    def __init__(self, model: str) -> None:
        self.model = ollama_model(model)

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
            args=("run", "--verbose", *think, self.model),
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
            not_applied=not_applied,
        )

    def _parse(self, out: CliOutput) -> Parsed:
        sign_in = _SIGN_IN.match(out.stdout)
        if sign_in is not None and out.exit_code == 0:
            return Parsed("", fault=fault("auth", sign_in["notice"], out.now), reported=True)
        stats = {
            match["name"]: int(match["value"])
            for line in out.stderr.splitlines()
            if (match := _STAT.match(line.strip()))
        }
        usage = None
        if stats:
            usage = Usage(
                input_tokens=stats.get("prompt eval count"),
                output_tokens=stats.get("eval count"),
                model=self.model,
            )
        # the statistics are not an error report: leave them out of the stderr read
        stderr = "\n".join(
            line for line in out.stderr.splitlines() if not _METRIC.match(line.strip())
        )
        return Parsed(final_text=out.stdout.strip(), usage=usage, diagnostic=stderr)
