"""Rosters: named seats (an agent CLI with a pinned model and settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from brigade import schemas
from brigade.documents import read_valid_document
from brigade.errors import InputError

ROSTER_SCHEMA = "brigade.roster.v1"
DEFAULT_TIMEOUT_SECONDS = 600.0
DEFAULT_TRANSPORT = "direct"
DEFAULT_CODEX_TRANSPORT = "exec"


@dataclass(frozen=True)
class SeatSpec:
    """One seat, with roster defaults applied."""

    name: str
    cli: str
    model: str | None = None
    reasoning: str | None = None
    transport: str = DEFAULT_TRANSPORT
    transport_version: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    codex_transport: str | None = None
    roster_dir: str = "."

    def identity(self) -> dict[str, Any]:
        """The seat's part of the cell identity payload (frozen field set)."""
        return dict(self._identity)

    @cached_property
    def _identity(self) -> dict[str, Any]:
        return {
            "seat": self.name,
            "cli": self.cli,
            "model": self.model,
            "reasoning": self.reasoning,
            "transport": self.transport,
            "transport_version": self.transport_version,
            "env": dict(self.env) if self.env else None,
            "codex_transport": self.codex_transport if self.cli == "codex" else None,
        }


ExecutorKind = Literal["local", "dask"]


@dataclass(frozen=True)
class ExecutorSpec:
    """Where seats run: here, or on a Dask cluster (never part of a cell's identity)."""

    kind: ExecutorKind = "local"
    scheduler: str | None = None


@dataclass(frozen=True)
class Roster:
    """A loaded, validated roster."""

    path: Path
    seats: Mapping[str, SeatSpec]
    codex_transport: str
    timeout_seconds: float
    executor: ExecutorSpec | None = None  # the roster's `executor`, when it has one


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
            where = schemas.format_path(["seats", name, "cli"])
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
