"""Rosters: named seats (an agent CLI with a pinned model and settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from brigade.core.jsonpath import format_path
from brigade.core.specs import (
    DEFAULT_BACKOFF_SECONDS,
    DEFAULT_CODEX_TRANSPORT,
    DEFAULT_COMMAND_TIMEOUT_SECONDS,
    DEFAULT_HOME_MODE,
    DEFAULT_SANDBOX_MODE,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TRANSPORT,
    ExecutorSpec,
    RetryPolicy,
    Roster,
    SandboxMode,
    SandboxSpec,
    SeatSpec,
)
from brigade.core.usage import price_from_document
from brigade.errors import InputError
from brigade.inputs import schemas
from brigade.inputs.validated import read_valid_document

ROSTER_SCHEMA = "brigade.roster.v1"


# the original tool's roster (.brigade/roster.toml): no `schema` key, seats in [agents.NAME]
TOML_ROSTER_SCHEMA = "brigade.roster_toml.v1"


def load_roster(path: Path, label: str | None = None) -> Roster:
    """Read and validate a roster file (a .toml name: the original tool's roster.toml);
    InputError (exit 2) on any problem."""
    label = label or str(path)
    if path.suffix.lower() == ".toml":
        doc = read_valid_document(path, label, TOML_ROSTER_SCHEMA)
        return roster_from_toml(doc, path, label, validated=True)
    doc = read_valid_document(path, label, ROSTER_SCHEMA)
    return roster_from_document(doc, path, label, validated=True)


# seat fields that reach a command line or the seat's environment
_PASSED_ON = ("cli", "model", "reasoning", "transport", "transport_version")


def _nul_problems(seat: dict[str, Any], where: list[Any], label: str) -> list[str]:
    """A NUL byte cannot be part of a command line or an environment variable: refused here,
    not by every launch of the seat."""
    fields = [([key], seat.get(key)) for key in _PASSED_ON]
    env = seat.get("env")
    fields += [(["env", key], value) for key, value in env.items()] if isinstance(env, dict) else []
    return [
        f"{label}: {format_path([*where, *path])}: contains a NUL byte, which no "
        "command line or environment variable can carry"
        for path, value in fields
        if isinstance(value, str) and "\0" in value
    ]


def roster_from_document(doc: Any, path: Path, label: str, *, validated: bool = False) -> Roster:
    """Validate a parsed roster document (unless already done) and build SeatSpecs."""
    from brigade.adapters import check_cli  # adapters know which CLI names exist

    if not validated:
        schemas.check_input(doc, ROSTER_SCHEMA, label)
    codex_transport = doc.get("codex_transport", DEFAULT_CODEX_TRANSPORT)
    default_timeout = float(doc.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS))
    roster_dir = str(path.resolve().parent)
    limits = {name: int(cap) for name, cap in (doc.get("limits") or {}).items()}
    default_retry = doc.get("retry") or {}
    default_sandbox = doc.get("sandbox", DEFAULT_SANDBOX_MODE)
    default_home = doc.get("home", DEFAULT_HOME_MODE)
    seats: dict[str, SeatSpec] = {}
    problems: list[str] = []  # every problem of the document, listed together
    for name, raw in doc["seats"].items():
        problem = check_cli(raw["cli"])
        if problem:
            problems.append(f"{label}: {format_path(['seats', name, 'cli'])}: {problem}")
        problems.extend(_nul_problems(raw, ["seats", name], label))
        limit = raw.get("limit")
        if limit is not None and limit not in limits:
            known = ", ".join(sorted(limits)) or "none"
            problems.append(
                f"{label}: {format_path(['seats', name, 'limit'])}: no limit {limit!r} in the "
                f"roster's `limits` (defined: {known}); add `limits: {{{limit}: N}}`"
            )
        if problems:
            continue
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
            max_concurrency=raw.get("max_concurrency"),
            limit=limit,
            retry=retry_policy({**default_retry, **(raw.get("retry") or {})}),
            sandbox=_sandbox(raw.get("sandbox"), default_sandbox),
            network=raw.get("network", True),
            acknowledge_read_only=raw.get("acknowledge_read_only", False),
            home=raw.get("home", default_home),
        )
    if problems:
        raise InputError("\n".join(problems))
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
        limits=limits,
        command_timeout_seconds=float(
            doc.get("command_timeout_seconds", DEFAULT_COMMAND_TIMEOUT_SECONDS)
        ),
        prices={
            model: price_from_document(raw) for model, raw in (doc.get("prices") or {}).items()
        },
        max_cost=float(doc["max_cost"]) if doc.get("max_cost") is not None else None,
        secret_env=tuple((doc.get("secrets") or {}).get("env") or ()),
    )


def retry_policy(raw: dict[str, Any]) -> RetryPolicy:
    """A `retry` mapping of a roster (valid: checked by its schema) as a RetryPolicy."""
    return RetryPolicy(
        max_retries=int(raw.get("max", 0)),
        backoff_seconds=float(raw.get("backoff_seconds", DEFAULT_BACKOFF_SECONDS)),
        timeouts=bool(raw.get("timeouts", False)),
    )


def _text(value: Any) -> str | None:
    # the original tool strips these fields before they enter a cell's identity
    return value.strip() if isinstance(value, str) else None


def roster_from_toml(doc: Any, path: Path, label: str, *, validated: bool = False) -> Roster:
    """SeatSpecs from the original tool's roster.toml, with the identity it derives.

    Each `[agents.NAME]` table is a seat: `cli`, `model`, `reasoning` and
    `transport_version` stripped, `transport` defaulting to `direct`, `env` as
    written, `codex_transport` for codex seats. Keys brigade does not use
    (orchestrator, role, purpose, fallback, requires, stats, caveats, most of
    [limits]) are ignored. An agent brigade cannot run (no cli, or a cli it has
    no adapter for) is refused only when a manifest names it.
    """
    from brigade.adapters import check_cli

    if not validated:
        schemas.check_input(doc, TOML_ROSTER_SCHEMA, label)
    codex_transport = doc.get("codex_transport", DEFAULT_CODEX_TRANSPORT)
    limits = doc.get("limits") or {}
    default_timeout = float(limits.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS))
    roster_dir = str(path.resolve().parent)
    seats: dict[str, SeatSpec] = {}
    unusable: dict[str, str] = {}
    for name, raw in doc["agents"].items():
        cli = _text(raw.get("cli"))
        if cli is None:
            where = format_path(["agents", name])
            unusable[name] = (
                f"{label}: {where}: agent {name!r} has no cli (an endpoint seat); "
                "brigade runs agent CLIs only"
            )
            continue
        problem = check_cli(cli)
        if problem:
            unusable[name] = f"{label}: {format_path(['agents', name, 'cli'])}: {problem}"
            continue
        nul = _nul_problems(raw, ["agents", name], label)
        if nul:  # like any agent it cannot run: refused when a manifest names it
            unusable[name] = nul[0]
            continue
        seats[name] = SeatSpec(
            name=name,
            cli=cli,
            model=_text(raw.get("model")),
            reasoning=_text(raw.get("reasoning")),
            transport=raw.get("transport", DEFAULT_TRANSPORT),
            transport_version=_text(raw.get("transport_version")),
            env=dict(raw.get("env") or {}),
            timeout_seconds=float(raw.get("timeout_seconds", default_timeout)),
            codex_transport=codex_transport if cli == "codex" else None,
            roster_dir=roster_dir,
        )
    return Roster(
        path=path,
        seats=seats,
        codex_transport=codex_transport,
        timeout_seconds=default_timeout,
        unusable=unusable,
    )


def _mode(raw: Any) -> SandboxMode:
    """A sandbox mode as the schema allows it: a mode's name, or false (YAML 1.1 reads an
    unquoted `off` as false)."""
    return "off" if raw is False else cast(SandboxMode, raw)


def _sandbox(raw: Any, default_mode: Any) -> SandboxSpec:
    """A seat's `sandbox` (a mode, or an object with the mode and extra paths)."""
    if raw is None:
        return SandboxSpec(mode=_mode(default_mode))
    if isinstance(raw, (str, bool)):
        return SandboxSpec(mode=_mode(raw))  # the schema allows modes only
    return SandboxSpec(
        mode=_mode(raw.get("mode", default_mode)),
        writable=tuple(raw.get("writable", ())),
        readable=tuple(raw.get("readable", ())),
        hidden=tuple(raw.get("hidden", ())),
    )
