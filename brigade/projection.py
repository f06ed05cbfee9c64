"""Projection for anything that leaves the output directory, and the leak check (pure).

Receipts inline full prompts, absolute paths and seat env values. A projected
document replaces prompts by `prompt_digest: sha256:...`, makes paths relative
to the output directory and redacts env values; `find_leaks` proves it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from brigade.identity import text_digest
from brigade.schemas import format_path

REDACTED = "<redacted>"
# secrets shorter than this are only matched as whole string values, so an env
# value like "1" does not flag every coordinate ending in ":1"
MIN_SUBSTRING = 6


@dataclass(frozen=True)
class Secrets:
    """What must never appear in an exported file."""

    prompts: frozenset[str]
    paths: tuple[tuple[str, str], ...]  # (absolute path, what it becomes when relativised)
    env_values: frozenset[str]

    def items(self) -> Iterator[tuple[str, str]]:
        """(kind, text) pairs, longest first so nested secrets scrub cleanly."""
        pairs = (
            [("prompt", p) for p in self.prompts]
            + [("absolute path", p) for p, _ in self.paths]
            + [("env value", v) for v in self.env_values]
        )
        return iter(sorted(pairs, key=lambda pair: -len(pair[1])))


def make_secrets(
    prompts: Iterable[str], paths: Iterable[tuple[str, str]], env_values: Iterable[str]
) -> Secrets:
    """Secrets without empty strings or useless root paths."""
    usable_paths = tuple(
        (os.path.normpath(p), r) for p, r in paths if p and len(os.path.normpath(p).strip("/")) > 1
    )
    return Secrets(
        prompts=frozenset(p for p in prompts if p.strip()),
        paths=tuple(sorted(set(usable_paths), key=lambda pair: -len(pair[0]))),
        env_values=frozenset(v for v in env_values if v.strip()),
    )


def scrub_text(text: str, secrets: Secrets) -> str:
    """A string with every secret replaced by its safe stand-in."""
    for absolute, relative in secrets.paths:
        if absolute in text:
            text = text.replace(absolute + os.sep, relative + os.sep if relative != "." else "")
            text = text.replace(absolute, relative)
    for prompt in secrets.prompts:
        if prompt == text or (len(prompt) >= MIN_SUBSTRING and prompt in text):
            text = text.replace(prompt, f"<prompt {text_digest(prompt)}>")
    for value in secrets.env_values:
        if value == text or (len(value) >= MIN_SUBSTRING and value in text):
            text = text.replace(value, REDACTED)
    return text


def scrub(value: Any, secrets: Secrets) -> Any:
    """Scrub every string (and key) of a JSON value."""
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, list):
        return [scrub(item, secrets) for item in value]
    if isinstance(value, dict):
        return {scrub_text(k, secrets): scrub(v, secrets) for k, v in value.items()}
    return value


def _strip_prompt(doc: dict[str, Any]) -> dict[str, Any]:
    """Replace `prompt` by `prompt_digest` at this level and inside `case`."""
    projected = dict(doc)
    if "prompt" in projected:
        projected["prompt_digest"] = text_digest(projected.pop("prompt"))
    case = projected.get("case")
    if isinstance(case, dict) and "prompt" in case:
        case = dict(case)
        case["prompt_digest"] = text_digest(case.pop("prompt"))
        projected["case"] = case
    seat = projected.get("seat")
    if isinstance(seat, dict) and seat.get("env"):
        projected["seat"] = {**seat, "env": {k: REDACTED for k in seat["env"]}}
    return projected


def project_receipt(receipt: dict[str, Any], out: str, secrets: Secrets) -> dict[str, Any]:
    """A cell receipt safe to leave the output directory."""
    projected = _strip_prompt(receipt)
    if isinstance(projected.get("run_dir"), str):
        projected["run_dir"] = os.path.relpath(projected["run_dir"], out)
    return scrub(projected, secrets)


def project_plan(plan: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    """plan.json safe to leave the output directory."""
    projected = dict(plan)
    projected["cells"] = [_strip_prompt(cell) for cell in plan.get("cells", [])]
    return scrub(projected, secrets)


def project_summary(summary: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    """summary.json safe to leave the output directory."""
    return scrub(summary, secrets)


@dataclass(frozen=True)
class Leak:
    """A secret found in an exported file."""

    file: str
    where: str
    kind: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: contains {self.kind}"


def _contains(text: str, secret: str) -> bool:
    return text == secret or (len(secret) >= MIN_SUBSTRING and secret in text)


def find_leaks_in_json(name: str, doc: Any, secrets: Secrets) -> list[Leak]:
    """Every string (or key) of a JSON document that contains a secret, with its JSON path."""
    leaks: list[Leak] = []
    stack: list[tuple[Any, list[Any]]] = [(doc, [])]
    pairs = list(secrets.items())
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                for kind, secret in pairs:
                    if _contains(key, secret):
                        leaks.append(Leak(name, format_path([*path, key]) + " (key)", kind))
                stack.append((item, [*path, key]))
        elif isinstance(value, list):
            stack.extend((item, [*path, i]) for i, item in enumerate(value))
        elif isinstance(value, str):
            for kind, secret in pairs:
                if _contains(value, secret):
                    leaks.append(Leak(name, format_path(path), kind))
                    break
    return leaks


def find_leaks_in_text(name: str, text: str, secrets: Secrets) -> list[Leak]:
    """Secrets in a non-JSON exported file (long secrets only, by substring)."""
    return [
        Leak(name, "(text)", kind)
        for kind, secret in secrets.items()
        if len(secret) >= MIN_SUBSTRING and secret in text
    ]
