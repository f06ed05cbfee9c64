"""The specs a manifest and a roster become once valid: frozen values, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple

from brigade.core.sequential import Rule
from brigade.core.usage import Price

DEFAULT_TIMEOUT_SECONDS = 600.0
# the default time limit of a command grader (the roster's command_timeout_seconds)
DEFAULT_COMMAND_TIMEOUT_SECONDS = 300.0
DEFAULT_TRANSPORT = "direct"
DEFAULT_CODEX_TRANSPORT = "exec"
DEFAULT_MODE = "read-only"
DEFAULT_BACKOFF_SECONDS = 10.0

# How a seat's process is confined (never part of a cell's identity): `auto` uses the
# filesystem sandbox when it works here, `required` refuses to run a seat without it.
SandboxMode = Literal["auto", "required", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "required", "off")
DEFAULT_SANDBOX_MODE: SandboxMode = "auto"

# Which HOME a seat's CLI runs with (never part of a cell's identity, like the sandbox):
# `inherit` the user's own, `isolated` a fresh one per attempt holding only its login.
HomeMode = Literal["inherit", "isolated"]
HOME_MODES: tuple[HomeMode, ...] = ("inherit", "isolated")
DEFAULT_HOME_MODE: HomeMode = "inherit"


# a case's setup: its own time limit, and network on (installing usually needs it)
DEFAULT_SETUP_TIMEOUT_SECONDS = 1800.0


@dataclass(frozen=True)
class WorkspaceSpec:
    """A case's own workspace: a local git repository at a commit, or a folder.

    `path` is absolute. `revision` is what the manifest wrote (`repo` only); `commit` (the
    full sha) and `digest` (a folder's content digest) are filled in when the workspace is
    resolved, before the plan is made (`run/workspaces.resolve`).
    """

    kind: Literal["repo", "dir"]
    path: str
    revision: str | None = None
    commit: str | None = None
    digest: str | None = None

    def identity(self) -> dict[str, str]:
        """The workspace's part of a cell's identity: its content, never its path."""
        if self.kind == "repo":
            return {"commit": str(self.commit)}
        return {"digest": str(self.digest)}

    def document(self) -> dict[str, str]:
        """The workspace as plan.json and receipts record it."""
        if self.kind == "repo":
            return {"repo": self.path, "commit": str(self.commit)}
        return {"dir": self.path, "digest": str(self.digest)}


@dataclass(frozen=True)
class SetupSpec:
    """A case's setup: the commands whose product every attempt of the case starts from.

    A command is an argv list, or a string run by `sh -c`. `inputs` are files or folders
    (absolute, inside the manifest's folder) whose content keys the setup; `digest` (of
    the commands and the inputs' content) is filled in when the workspace is resolved.
    Time limit and network are how it runs, never what it is: neither enters a key.
    """

    commands: tuple[str | tuple[str, ...], ...]
    inputs: tuple[str, ...] = ()
    timeout_seconds: float = DEFAULT_SETUP_TIMEOUT_SECONDS
    network: bool = True
    digest: str | None = None


class Case(NamedTuple):
    """One case with its prompt resolved and defaults applied (a named tuple: built fast)."""

    id: str
    prompt: str
    trials: int  # an adaptive case's `min` (how many it gets before anything is known)
    graders: tuple[dict[str, Any], ...]
    prompt_file: str | None = None
    # the case's own world (None: the run's --workspace, as before)
    workspace: WorkspaceSpec | None = None
    setup: SetupSpec | None = None
    # adaptive trials (`trials: {min, max, until}`): how many more it gets (core/sequential)
    rule: Rule | None = None

    def world(self) -> dict[str, Any] | None:
        """The workspace's part of the cell identity (None: the case has no own workspace)."""
        return world_of(self.workspace, self.setup)


def world_of(
    workspace: WorkspaceSpec | None, setup: SetupSpec | None, *, recorded: bool = False
) -> dict[str, Any] | None:
    """A case's own workspace with its setup's digest: its part of the cell identity, or
    (`recorded`) what plan.json records of it. None: the case uses the run's workspace."""
    if workspace is None:
        return None
    found: dict[str, Any] = workspace.document() if recorded else workspace.identity()
    if setup is not None:
        found["setup"] = setup.digest
    return found


@dataclass(frozen=True)
class Manifest:
    """A loaded, validated manifest."""

    path: Path
    name: str
    seats: tuple[str, ...]
    cases: tuple[Case, ...]
    execution_mode: str
    roster: str | None
    digest: str  # manifest_digest as plan.json, receipts and summary.json record it
    content_digest: str  # changes with any prompt file too (keys of expansion caches)
    # `max_cost`: a run's spending cap in USD when the command line gives none; no identity
    max_cost: float | None = None

    @property
    def directory(self) -> Path:
        """The folder that relative paths in the manifest are resolved against."""
        return self.path.resolve().parent


@dataclass(frozen=True)
class RetryPolicy:
    """How a seat's transient faults are retried within a run (never part of its identity).

    `max_retries` new attempts at most per cell; the first waits `backoff_seconds`,
    each later one twice as long as the one before (plus jitter); `timeouts`: a
    timed-out seat is retried too.
    """

    max_retries: int = 0
    backoff_seconds: float = DEFAULT_BACKOFF_SECONDS
    timeouts: bool = False


@dataclass(frozen=True)
class SandboxSpec:
    """A seat's sandbox settings: the mode, and paths it may also write, read or not see."""

    mode: SandboxMode = DEFAULT_SANDBOX_MODE
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()


@dataclass(frozen=True)
class SeatSpec:
    """One seat, with roster defaults applied.

    `max_concurrency`, `limit` (the name of a shared cap in the roster's `limits`)
    and `retry` say how the seat is scheduled; they are not part of its identity.
    """

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
    max_concurrency: int | None = None
    limit: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # how the seat's process is confined, and whether it may use the network: neither
    # enters the identity, so turning the sandbox on re-runs nothing
    sandbox: SandboxSpec = field(default_factory=SandboxSpec)
    network: bool = True
    # the roster knows read-only is not enforced for this seat: no warning (not identity)
    acknowledge_read_only: bool = False
    # the user's HOME, or a fresh one per attempt with only the CLI's login (not identity)
    home: HomeMode = DEFAULT_HOME_MODE

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
    # shared caps: limit name -> how many runs of the seats naming it may be in flight
    limits: Mapping[str, int] = field(default_factory=dict)
    command_timeout_seconds: float = DEFAULT_COMMAND_TIMEOUT_SECONDS
    # seats a manifest cannot use, with the one-line problem (agents of an original
    # roster.toml that brigade cannot run: no cli, or a cli it has no adapter for)
    unusable: Mapping[str, str] = field(default_factory=dict)
    # model id -> its price (`prices`): fills costs the CLIs do not report; no identity
    prices: Mapping[str, Price] = field(default_factory=dict)
    # `max_cost`: a run's spending cap in USD when the command line gives none; no identity
    max_cost: float | None = None
    # `secrets.env`: more inherited variables (names or patterns) whose values are secrets
    # of the export and the report, besides the credential-like ones; no identity
    secret_env: tuple[str, ...] = ()
