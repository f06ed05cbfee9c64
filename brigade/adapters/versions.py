"""Which versions of its CLI an adapter drives: the version a CLI prints, the oldest one
that takes brigade's command line, and what to say when a CLI refused that command line."""

from __future__ import annotations

import re

from brigade.adapters.common import refused_command_line

_NUMBER = re.compile(r"\d+(?:\.\d+)+")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """The first dotted version number in a CLI's version line (`2.1.38 (Claude Code)`,
    `codex-cli 0.44.0`, `aider 0.86.2`), else None."""
    found = _NUMBER.search(text or "")
    return tuple(int(part) for part in found[0].split(".")) if found else None


def older_than(version: str | None, minimum: str | None) -> bool:
    """Whether a version line names a version older than the minimum (False when either is
    unknown: nothing is said about what cannot be compared)."""
    have, need = parse_version(version), parse_version(minimum)
    if have is None or need is None:
        return False
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) < need + (0,) * (width - len(need))


def supported(minimum: str | None) -> str:
    """The versions an adapter drives, in words."""
    return f"{minimum} or newer" if minimum else "no minimum version known"


def incompatible_detail(name: str, minimum: str | None, version: str | None, message: str) -> str:
    """The one line of a `cli_incompatible` fault: the CLI's refusal, then which version
    refused which flag and what to do."""
    refused = refused_command_line(message)
    flag = refused[1] if refused and refused[1] else "brigade's command line"
    which = f"{name} (version unknown)"
    if version:
        # `aider 0.72.0` and `codex-cli 0.44.0` name the CLI already; `1.0.30 (Claude Code)` not
        first = version.split()[0].lower() if version.split() else ""
        which = version if first.startswith(name) else f"{name} {version}"
    if minimum and (version is None or older_than(version, minimum)):
        advice = f"brigade's {name} adapter needs {minimum} or newer: upgrade it"
    else:
        advice = (
            f"brigade's {name} adapter passes it ({supported(minimum)}): check the seat's "
            "model and reasoning, or whether this version dropped the option"
        )
    return f"{message} ({which} refused {flag}; {advice}; brigade doctor checks every seat)"
