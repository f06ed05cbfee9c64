"""What every grader kind shares: the context it grades in, its fields, its faults, safe reads.

A grader kind is a `GraderType` (its fields and a `grade` function) in the
registry of run/graders.py. Kinds that run a process (run/command_grader.py,
run/judge.py) also get the cell's `Setting`: where its run is, where their
logs go, which roster seats exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Union

from brigade import fs
from brigade.core.specs import SandboxMode, SeatSpec

GRADER_RESULT_SCHEMA = "brigade.grader_result.v1"
# results of graders that run a process: v1 plus the process's exit_code and logs
GRADER_RESULT_V2 = "brigade.grader_result.v2"
# seconds a built-in grader may take (a grader's `timeout_seconds` changes it)
DEFAULT_TIME_LIMIT = 10.0
MAX_TIME_LIMIT = 3600.0
# what graders read of an output or a file
MAX_READ_BYTES = 16 * 1024 * 1024
# a detail never grows longer than this (the quoted parts are bounded already)
DETAIL_CHARACTERS = 500


class GraderFault(Exception):
    """The grader could not run; the message becomes the result's detail.

    `extra` holds what a grader that ran a process still knows (its exit code,
    its logs): a grader_error result records it too.
    """

    def __init__(self, message: str, extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.extra: dict[str, Any] = dict(extra or {})


class NotReadable(Exception):
    """A file a grader reads is not a regular file of at most MAX_READ_BYTES."""


def as_is(text: str) -> str:
    """No redaction (for contexts without secrets)."""
    return text


class WorkspaceView(Protocol):
    """Files of the workspace as the seat left them (live folder or recorded snapshot)."""

    def read_bytes(self, relative: str) -> bytes | None:
        """Contents of a workspace-relative file, None when absent."""
        ...

    def exists(self, relative: str) -> bool:
        """Whether a workspace-relative path exists."""
        ...


@dataclass(frozen=True)
class Setting:
    """Where graders that run a process work for one cell (one attempt of it).

    Their logs go to `<attempt>/graders/<type>-<index>/`; a command runs in the
    workspace (read-only runs; a fresh worktree of the built commit for a case with a
    workspace of its own) or in a fresh worktree of the run's base commit with the run's
    stored changes applied (writable runs); a judge is a roster seat.
    """

    out: Path  # the output directory: log paths are recorded relative to it
    workspace: Path
    run_dir: Path  # the attempt's run folder (final.txt, changes.patch)
    graders_dir: Path  # <attempt>/graders
    coordinate: str
    attempt: int
    prompt: str  # the case's prompt (a judge may be shown it)
    execution_mode: str
    seat: str  # the cell's seat
    # a writable run's base: {"head", "prefix"} as run.json's workspace_snapshot has them
    snapshot: Mapping[str, Any] | None = None
    changes_digest: str | None = None  # what run/changes.patch must hash to
    # roster seats by name: what a judge's spec does not say (time limit, roster folder)
    seats: Mapping[str, SeatSpec] = field(default_factory=dict)
    roster_dir: str = "."  # the roster's folder, for a judge seat the roster no longer has
    command_timeout: float = 300.0  # the default time limit of command graders
    # --sandbox: the mode a command runs in (None: the cell's seat's own, as its run did)
    sandbox: SandboxMode | None = None
    # a read-only run of a case with a workspace of its own: its built commit (a command
    # runs in a fresh worktree of it, never in the tree every attempt starts from)
    own_head: str | None = None
    # what a command must not see: its case's source (a repository with its later history)
    unseen: tuple[str, ...] = ()


@dataclass(frozen=True)
class GradeContext:
    """What graders may look at: the stored output and where relative paths point."""

    cell_id: str
    final_text: str
    output_digest: str | None
    output_ref: str
    exit_code: int | None
    manifest_dir: Path
    workspace: WorkspaceView | None
    changed_files: tuple[str, ...] | None
    # replaces the cell's secrets in text a detail quotes (before it is cut or escaped)
    redact: Callable[[str], str] = as_is
    # when the running grader's time is up (time.monotonic), and its limit in seconds
    deadline: float | None = None
    time_limit: float = DEFAULT_TIME_LIMIT
    # graders that run a process: the cell's setting (None: they cannot run here), and
    # the running grader's own folder in it
    setting: Setting | None = None
    folder: Path | None = None


Outcome = tuple[bool, str, list[dict[str, Any]]]  # passed, detail, component checks


@dataclass(frozen=True)
class Graded:
    """A grade with a score of its own (a share of tests passed) and result fields of its
    schema revision (a v2 result's exit_code and logs)."""

    score: float
    detail: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Field:
    """One field of a grader spec."""

    types: tuple[type, ...]
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class GraderType:
    """A grader kind: its fields and how it scores.

    A kind that runs a process (`process`) writes grader_result.v2, gets a
    folder for its logs and enforces its time limit on that process itself
    (`default_limit` gives the limit when the spec has none; `max_limit` the
    most a spec may ask for).
    """

    version: str
    fields: Mapping[str, Field]
    grade: Callable[[Mapping[str, Any], GradeContext], Union[Outcome, Graded]]
    check: Callable[[Mapping[str, Any]], None] | None = None
    process: bool = False
    default_limit: Callable[[Mapping[str, Any], GradeContext], float] | None = None
    max_limit: float = MAX_TIME_LIMIT
    # what the kind reads besides the cell's run and its own spec (for its grader key,
    # run/reuse.py); None from it: inputs that cannot be named, the grader always runs
    inputs: Callable[[Mapping[str, Any], GradeContext], Mapping[str, Any] | None] | None = None

    @property
    def result_schema(self) -> str:
        """The schema tag of this kind's results."""
        return GRADER_RESULT_V2 if self.process else GRADER_RESULT_SCHEMA


COMMON_FIELDS = {"type", "name", "description", "timeout_seconds"}


def relative_path(value: str, what: str) -> str:
    """A workspace- or manifest-relative path; absolute or `..` paths are a GraderFault."""
    path = Path(value)
    if not value or path.is_absolute() or ".." in path.parts:
        raise GraderFault(f"{what} {value!r} must be a relative path inside its folder")
    return value


def contained_file(root: Path, relative: str, what: str) -> Path:
    """`root/relative`, refusing paths (or symlinks) that lead outside root."""
    relative_path(relative, what)
    base = root.resolve()
    target = (base / relative).resolve()
    if base != target and base not in target.parents:
        raise GraderFault(f"{what} {relative!r} leads outside its folder")
    return target


def read_regular(path: Path | str, what: str) -> bytes:
    """A regular file's bytes (at most MAX_READ_BYTES), never opening anything else: a FIFO
    or a device would block or never end. NotReadable says why not; OSError when absent."""
    try:
        # (a path contained_file resolved: what is there now is no link to follow)
        data = fs.read_regular(path, MAX_READ_BYTES)
    except fs.NotRegularFile:
        raise NotReadable(f"{what} is not a regular file") from None
    if len(data) > MAX_READ_BYTES:
        raise NotReadable(f"{what} is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB")
    return data


def need_setting(ctx: GradeContext, kind: str) -> tuple[Setting, Path]:
    """The cell's setting and the grader's folder (created); GraderFault where there is none."""
    if ctx.setting is None or ctx.folder is None:
        raise GraderFault(f"{kind} graders run only on a cell of a run (no run folder here)")
    ctx.folder.mkdir(parents=True, exist_ok=True)
    return ctx.setting, ctx.folder


def tail(text: str, limit: int) -> str:
    """The last `limit` characters of text (trailing whitespace dropped), `…` where cut."""
    text = text.rstrip()
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]
