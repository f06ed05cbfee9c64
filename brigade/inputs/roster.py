"""Rosters: named seats (an agent CLI with a pinned model and settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brigade.core.jsonpath import format_path
from brigade.core.specs import (
    DEFAULT_CODEX_TRANSPORT,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TRANSPORT,
    ExecutorSpec,
    Roster,
    SeatSpec,
)
from brigade.errors import InputError
from brigade.inputs import schemas
from brigade.inputs.validated import read_valid_document

ROSTER_SCHEMA = "brigade.roster.v1"


def load_roster(path: Path, label: str | None = None) -> Roster:
    """Read and validate a roster file; InputError (exit 2) on any problem."""
    label = label or str(path)
    doc = read_valid_document(path, label, ROSTER_SCHEMA)
    return roster_from_document(doc, path, label, validated=True)


def roster_from_document(doc: Any, path: Path, label: str, *, validated: bool = False) -> Roster:
    """Validate a parsed roster document (unless already done) and build SeatSpecs."""
    from brigade.adapters import check_cli  # adapters know which CLI names exist

    if not validated:
        schemas.check_input(doc, ROSTER_SCHEMA, label)
    codex_transport = doc.get("codex_transport", DEFAULT_CODEX_TRANSPORT)
    default_timeout = float(doc.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS))
    roster_dir = str(path.resolve().parent)
    seats: dict[str, SeatSpec] = {}
    for name, raw in doc["seats"].items():
        problem = check_cli(raw["cli"])
        if problem:
            where = format_path(["seats", name, "cli"])
            raise InputError(f"{label}: {where}: {problem}")
        seats[name] = SeatSpec(
            name=name,
            cli=raw["cli"],
            model=raw.get("model"),
            reasoning=raw.get("reasoning"),
            transport=raw.get("transport", DEFAULT_TRANSPORT),
            transport_version=raw.get("transport_version"),
            env=dict(raw.get("env") or {}),
            timeout_seconds=float(raw.get("timeout_seconds", default_timeout)),
            codex_transport=codex_transport if raw["cli"] == "codex" else None,
            roster_dir=roster_dir,
        )
    raw_executor = doc.get("executor")
    return Roster(
        path=path,
        seats=seats,
        codex_transport=codex_transport,
        timeout_seconds=default_timeout,
        executor=(
            ExecutorSpec(kind=raw_executor["kind"], scheduler=raw_executor.get("scheduler"))
            if raw_executor is not None
            else None
        ),
    )
