"""Projection for anything that leaves the output directory, and the leak check (pure).

Receipts inline full prompts, absolute paths and seat env values. A projected
document replaces prompts by `prompt_digest: sha256:...`, makes paths relative
to the output directory and redacts env values; `find_leaks` proves it.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import ahocorasick

from brigade.core.identity import text_digest
from brigade.core.jsonpath import format_path

REDACTED = "<redacted>"
# Shorter prompts are only matched as whole string values, and shorter env
# values not at all: "1" or "on" would match everywhere. Both are still
# stripped where they live (prompt fields, seat.env).
MIN_SUBSTRING = 6
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True)
class Secrets:
    """What must never appear in an exported file."""

    prompts: frozenset[str]
    paths: tuple[tuple[str, str], ...]  # (absolute path, what it becomes when relativised)
    env_values: frozenset[str]

    def items(self) -> Iterator[tuple[str, str]]:
        """(kind, text) pairs, longest first."""
        pairs = (
            [("prompt", p) for p in self.prompts]
            + [("absolute path", p) for p, _ in self.paths]
            + [("env value", v) for v in self.env_values]
        )
        return iter(sorted(pairs, key=lambda pair: -len(pair[1])))

    @cached_property
    def digest(self) -> str:
        """Changes whenever the secrets do (a key for caches of projected files)."""
        material = {
            "prompts": text_digest("\0".join(sorted(self.prompts))),
            "paths": [list(pair) for pair in self.paths],
            "env": text_digest("\0".join(sorted(self.env_values))),
        }
        return text_digest(json.dumps(material, sort_keys=True))

    @cached_property
    def matcher(self) -> Matcher:
        """A multi-secret searcher built once."""
        return Matcher(self)


class Matcher:
    """Finds every secret in a string in one pass: secrets indexed by their first characters.

    Checking each of thousands of prompts against each exported string would be
    quadratic; here each string costs one dictionary lookup per position. Most
    strings hold no secret at all: an Aho-Corasick automaton over every secret
    (pyahocorasick, in C) says so first, and only strings it finds a secret in
    are walked position by position (path boundaries, longest match).
    """

    def __init__(self, secrets: Secrets) -> None:
        self.stand_in: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        self.exact: dict[str, str] = {}  # short prompts: whole strings only
        for absolute, relative in secrets.paths:
            self._add(absolute, "absolute path", relative)
        for prompt in secrets.prompts:
            stand_in = f"<prompt {text_digest(prompt)}>"
            if len(prompt) < MIN_SUBSTRING:
                self.exact[prompt] = stand_in
            else:
                self._add(prompt, "prompt", stand_in)
        for value in secrets.env_values:
            if len(value) >= MIN_SUBSTRING:
                self._add(value, "env value", REDACTED)
        # index by the first `width` characters; paths may be shorter than MIN_SUBSTRING
        self.width = min([MIN_SUBSTRING, *(len(s) for s in self.kind)])
        self._first_seen: dict[str, str | None] = {}
        self._replaced: dict[str, str] = {}
        self.index: dict[str, list[str]] = {}
        for secret in sorted(self.kind, key=len, reverse=True):
            self.index.setdefault(secret[: self.width], []).append(secret)
        self._automaton = ahocorasick.Automaton()
        for secret in self.kind:
            self._automaton.add_word(secret, None)
        if self.kind:
            self._automaton.make_automaton()

    def _holds_any(self, text: str) -> bool:
        """Whether any secret occurs anywhere in text (where it ends does not matter)."""
        if not self.kind:
            return False
        for _ in self._automaton.iter(text):
            return True
        return False

    def _add(self, secret: str, kind: str, stand_in: str) -> None:
        if secret not in self.kind:
            self.kind[secret] = kind
            self.stand_in[secret] = stand_in

    def _match_at(self, text: str, position: int) -> str | None:
        bucket = self.index.get(text[position : position + self.width])
        if not bucket:
            return None
        for secret in bucket:  # longest first
            if text.startswith(secret, position):
                end = position + len(secret)
                if (
                    self.kind[secret] == "absolute path"
                    and end < len(text)
                    and (text[end] in _PATH_CHARS)
                ):
                    continue  # /w/out is not inside /w/out2
                return secret
        return None

    def kinds(self, text: str, *, first_only: bool = False) -> list[str]:
        """The kinds of secret found in text (all of them, or the first)."""
        if text in self.exact:
            return ["prompt"]
        if not self._holds_any(text):
            return []
        found: list[str] = []
        for position in range(len(text) - self.width + 1) if self.index else ():
            secret = self._match_at(text, position)
            if secret is not None and self.kind[secret] not in found:
                found.append(self.kind[secret])
                if first_only:
                    break
        return found

    def first(self, text: str) -> str | None:
        """The kind of the first secret in text, or None."""
        # documents repeat the same strings (keys, states, seat names) thousands of times
        try:
            return self._first_seen[text]
        except KeyError:
            found = self.kinds(text, first_only=True)
            kind = self._first_seen[text] = found[0] if found else None
            return kind

    def replace(self, text: str) -> str:
        """Text with every secret replaced by its stand-in (longest match wins)."""
        try:
            return self._replaced[text]
        except KeyError:
            result = self._replaced[text] = self._replace(text)
            return result

    def _replace(self, text: str) -> str:
        if text in self.exact:
            return self.exact[text]
        if not self.index or len(text) < self.width or not self._holds_any(text):
            return text
        pieces: list[str] = []
        position = last = 0
        while position <= len(text) - self.width:
            secret = self._match_at(text, position)
            if secret is None:
                position += 1
                continue
            pieces.append(text[last:position])
            end = position + len(secret)
            stand_in = self.stand_in[secret]
            if self.kind[secret] == "absolute path" and stand_in == ".":
                # `<out>/cells/x` becomes `cells/x`; `<out>` alone becomes `.`
                if text.startswith("/", end):
                    end += 1
                    stand_in = ""
            pieces.append(stand_in)
            position = last = end
        pieces.append(text[last:])
        return "".join(pieces)


def make_secrets(
    prompts: Iterable[str], paths: Iterable[tuple[str, str]], env_values: Iterable[str]
) -> Secrets:
    """Secrets without empty strings or useless root paths."""
    stand_ins: dict[str, str] = {}
    for path, stand_in in paths:
        normal = posixpath.normpath(path) if path else ""
        if len(normal.strip("/")) > 1:
            stand_ins.setdefault(normal, stand_in)  # the first stand-in named wins
    return Secrets(
        prompts=frozenset(p for p in prompts if p.strip()),
        paths=tuple(sorted(stand_ins.items(), key=lambda pair: (-len(pair[0]), pair[0]))),
        env_values=frozenset(v for v in env_values if v.strip()),
    )


def scrub_text(text: str, secrets: Secrets) -> str:
    """A string with every secret replaced by its safe stand-in."""
    return secrets.matcher.replace(text)


def scrub(value: Any, secrets: Secrets) -> Any:
    """Scrub every string (and key) of a JSON value."""
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, list):
        return [
            scrub(item, secrets) if isinstance(item, (str, list, dict)) else item for item in value
        ]
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
        projected["run_dir"] = posixpath.relpath(projected["run_dir"], out)
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


def find_leaks_in_json(name: str, doc: Any, secrets: Secrets) -> list[Leak]:
    """Every string (or key) of a JSON document that contains a secret, with its JSON path."""
    leaks: list[Leak] = []
    stack: list[tuple[Any, list[Any]]] = [(doc, [])]
    first = secrets.matcher.first
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                kind = first(key)
                if kind:
                    leaks.append(Leak(name, format_path([*path, key]) + " (key)", kind))
                stack.append((item, [*path, key]))
        elif isinstance(value, list):
            stack.extend(
                (item, [*path, i])
                for i, item in enumerate(value)
                if isinstance(item, (str, list, dict))  # numbers cannot leak anything
            )
        elif isinstance(value, str):
            kind = first(value)
            if kind:
                leaks.append(Leak(name, format_path(path), kind))
    return leaks


def find_leaks_in_text(name: str, text: str, secrets: Secrets) -> list[Leak]:
    """Secrets in a non-JSON exported file."""
    return [Leak(name, "(text)", kind) for kind in sorted(secrets.matcher.kinds(text))]
