"""The names a roster's `cli` may take, and the prefixed adapters' own checks of what
follows the prefix: what checking a roster needs, without importing any adapter."""

from __future__ import annotations

import shlex

# the roster names of the built-in agent CLIs, which `built_in()` holds the adapters of (a
# test keeps the two the same): a roster is checked without importing any adapter
BUILT_IN_NAMES = (
    "aider",
    "claude",
    "codex",
    "copilot",
    "cursor",
    "gemini",
    "goose",
    "opencode",
    "qwen",
)
EXEC_PREFIX = "exec:"
OLLAMA_PREFIX = "ollama:"


def exec_tokens(command_line: str) -> tuple[str, ...]:
    """The words of an `exec:` seat's command line; ValueError (the problem, one line)
    when it has none or cannot be parsed."""
    try:
        tokens = shlex.split(command_line)
    except ValueError as exc:
        raise ValueError(f"exec: command line cannot be parsed ({exc})") from None
    if not tokens:
        raise ValueError("exec: needs a command line after 'exec:'")
    return tuple(tokens)


def ollama_model(model: str) -> str:
    """The model of an `ollama:` seat; ValueError (the problem, one line) when it has none."""
    model = model.strip()
    if not model:
        raise ValueError("ollama: needs a model name after 'ollama:' (e.g. ollama:llama3.2)")
    return model
