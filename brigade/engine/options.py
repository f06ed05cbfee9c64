"""What a run is asked for, declared once: each option's type, `brigade run` flag, doit
variable, help and check, in one table (`OPTIONS`).

The table generates `brigade run`'s arguments (`add_arguments`) and reads
doit's `NAME=VALUE` variables (`from_variables`); both give an `Options`,
whose every value is checked in one place (`check`, run when it is made), so
`--max-cost 0` and `doit max_cost=0` are refused by the same line.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from brigade.core.selection import CellFilter, did_you_mean
from brigade.core.specs import SANDBOX_MODES, ExecutorKind, RetryPolicy, SandboxMode, SeatSpec
from brigade.errors import BrigadeError, InputError

# as the roster schema allows for `retry`
MAX_RETRIES = 100
MAX_BACKOFF = 86400.0
EXECUTORS: tuple[ExecutorKind, ...] = ("local", "dask")
DEFAULT_MANIFEST = "manifests/demo.yaml"

Kind = Literal["path", "flag", "int", "count", "number", "choice", "text", "names", "trials"]


@dataclass(frozen=True)
class Options:
    """What the user asked for (CLI flags or doit command-line variables)."""

    manifest: Path
    roster: Path | None = None
    out: Path | None = None
    workspace: Path | None = None
    retry_transient: bool = False
    wait: bool = False
    always: bool = False
    executor: ExecutorKind | None = None  # None: the roster's `executor`, else local
    scheduler: str | None = None  # the dask scheduler's address (overrides the roster's)
    jobs: int = 1  # seat runs in flight at most (-n); the dask executor has no such cap
    # retries of transient faults within the run, over each seat's roster `retry`
    retries: int | None = None  # --retries N (doit: retries=N)
    retry_backoff: float | None = None  # --retry-backoff B (doit: retry_backoff=B)
    retry_timeouts: bool = False  # --retry-timeouts (doit: retry_timeouts=1)
    # --max-cost USD (doit: max_cost=USD); None: the manifest's, else the roster's
    max_cost: float | None = None
    sandbox: SandboxMode | None = None  # every seat's sandbox mode (None: each seat's own)
    # a subset: the cells the run is about (the exit code covers them alone)
    cells: CellFilter = field(default_factory=CellFilter)
    rerun: tuple[str, ...] = ()  # coordinates (or patterns) to run again as new attempts
    quiet: bool = False  # no progress on stderr (the final line stays)
    progress_rate: int | None = None  # per-cell lines per 30 s without a terminal (None: default)

    def __post_init__(self) -> None:
        check(self)

    def retry_policy(self, seat: SeatSpec) -> RetryPolicy:
        """The seat's roster `retry`, with what the command line says instead."""
        base = seat.retry
        return RetryPolicy(
            max_retries=base.max_retries if self.retries is None else self.retries,
            backoff_seconds=(
                base.backoff_seconds if self.retry_backoff is None else self.retry_backoff
            ),
            timeouts=base.timeouts or self.retry_timeouts,
        )


def _between(low: float, high: float, what: str) -> Callable[[Any], str | None]:
    def within(value: Any) -> str | None:
        return None if low <= value <= high else what

    return within


def _positive_money(value: Any) -> str | None:
    return None if 0 < value < math.inf else "use a number of US dollars above 0"


def _at_least_one(value: Any) -> str | None:
    return None if value >= 1 else "use 1 or more seat runs at once"


@dataclass(frozen=True)
class Option:
    """One option of a run: its `Options` field, how its text is read, its `brigade run`
    flag and doit variable (None: not on that side), its help and its check."""

    field: str
    kind: Kind
    help: str
    flag: str | None = None
    short: str | None = None
    variable: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    what: str = ""  # what a doit variable's text must be, when it cannot be read
    # the check of a given value, both sides: None, or what to use instead ("use ...")
    check: Callable[[Any], str | None] | None = None
    default: Any = None  # brigade run's default when the flag is not given

    @property
    def name(self) -> str:
        """How a message names the option: its flag, else its doit variable."""
        return self.flag or f"{self.variable}="


OPTIONS: tuple[Option, ...] = (
    Option("manifest", "path", "manifest file (YAML or JSON)", variable="manifest"),
    Option(
        "roster",
        "path",
        "roster file (default: the manifest's `roster` key, else roster.yaml beside it, "
        "else .brigade/roster.toml in the workspace)",
        flag="--roster",
        variable="roster",
    ),
    Option(
        "out",
        "path",
        "output directory (default: <workspace>/.brigade/evals/<name>)",
        flag="--out",
        variable="out",
    ),
    Option(
        "workspace",
        "path",
        "where seats run (default: current directory)",
        flag="--workspace",
        variable="workspace",
    ),
    Option(
        "jobs",
        "count",
        "seat runs in flight at once, over all seats",
        flag="--jobs",
        short="-n",
        variable="jobs",
        what="a whole number",
        check=_at_least_one,
        default=1,
    ),
    Option(
        "retry_transient",
        "flag",
        "re-run adapter_error and timed-out cells as new attempts",
        flag="--retry-transient",
        variable="retry_transient",
    ),
    Option(
        "retries",
        "int",
        "retry a transient fault (rate limit, overload, 5xx, dropped connection) up to N "
        "times within the run (default: each seat's roster `retry.max`, else 0)",
        flag="--retries",
        variable="retries",
        metavar="N",
        what="a whole number",
        check=_between(0, MAX_RETRIES, f"use 0 to {MAX_RETRIES} retries"),
    ),
    Option(
        "retry_backoff",
        "number",
        "wait before the first retry, doubled at each one, plus jitter (default: the "
        "roster's `retry.backoff_seconds`, else 10)",
        flag="--retry-backoff",
        variable="retry_backoff",
        metavar="SECONDS",
        what="a number of seconds",
        check=_between(0, MAX_BACKOFF, f"use 0 to {MAX_BACKOFF:g} seconds"),
    ),
    Option(
        "retry_timeouts",
        "flag",
        "retry seats that hit their time limit too",
        flag="--retry-timeouts",
        variable="retry_timeouts",
    ),
    Option(
        "max_cost",
        "number",
        "launch no more seats once what this run's seat runs cost reaches USD (exit 3; "
        "default: the manifest's `max_cost`, else the roster's, else no cap)",
        flag="--max-cost",
        variable="max_cost",
        metavar="USD",
        what="a number of US dollars",
        check=_positive_money,
    ),
    Option(
        "always",
        "flag",
        "run every cell again as a new attempt",
        flag="--always",
        variable="always",
    ),
    Option(
        "wait",
        "flag",
        "wait for another run on the same output directory",
        flag="--wait",
        variable="wait",
    ),
    Option(
        "executor",
        "choice",
        "where seats run: here (local) or on a Dask cluster (default: the roster's "
        "`executor`, else local)",
        flag="--executor",
        variable="executor",
        choices=EXECUTORS,
    ),
    Option(
        "scheduler",
        "text",
        "the Dask scheduler, e.g. tcp://host:8786 (default: the roster's executor.scheduler)",
        flag="--scheduler",
        variable="scheduler",
        metavar="ADDRESS",
    ),
    Option(
        "sandbox",
        "choice",
        "every seat's filesystem sandbox: auto (when it works here), required (refuse to "
        "run without it) or off (default: each seat's `sandbox`, else the roster's, else auto)",
        flag="--sandbox",
        variable="sandbox",
        choices=SANDBOX_MODES,
    ),
    Option(
        "cases",
        "names",
        "run only cells of this case (a glob pattern too; repeatable)",
        flag="--case",
        variable="cases",
        metavar="ID",
    ),
    Option(
        "seats",
        "names",
        "run only cells of this seat (a glob pattern too; repeatable)",
        flag="--seat",
        variable="seats",
        metavar="SEAT",
    ),
    Option(
        "trials",
        "trials",
        "run only this trial number (repeatable)",
        flag="--trial",
        variable="trials",
        metavar="N",
        what="trial numbers, e.g. 1,2",
    ),
    Option(
        "rerun",
        "names",
        "run these cells again as new attempts (case:seat:trial, or a pattern)",
        variable="rerun",
    ),
    Option(
        "quiet",
        "flag",
        "no progress on stderr (the final line stays)",
        flag="--quiet",
        short="-q",
        variable="quiet",
    ),
    Option(
        "progress_rate",
        "count",
        "without a terminal: a line per finished cell up to N per 30 s, then a summary line "
        "every 30 s (default 60)",
        flag="--progress-rate",
        variable="progress_rate",
        metavar="N",
        what="a whole number",
    ),
)
BY_FIELD = {option.field: option for option in OPTIONS}
# doit command-line variables (`doit manifest=PATH ...`)
DOIT_VARIABLES = tuple(option.variable for option in OPTIONS if option.variable)
_CELL_FIELDS = ("cases", "seats", "trials")


def check(options: Options) -> None:
    """Every given value within what its option allows (InputError, one line naming the
    option on both sides: `--max-cost 0 (doit: max_cost=): use ...`)."""
    for option in OPTIONS:
        if option.check is not None:
            check_value(option.field, getattr(options, option.field, None))


def check_value(name: str, value: Any) -> None:
    """One option's value (by field; None: not given) within what it allows (InputError)."""
    option = BY_FIELD[name]
    if value is None or option.check is None:
        return
    problem = option.check(value)
    if problem is not None:
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        side = f" (doit: {option.variable}=)" if option.variable and option.flag else ""
        raise InputError(f"{option.name} {shown}{side}: {problem}")


# -- brigade run: argparse ----------------------------------------------------------


def _trial(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a trial number: {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """Add the flags of these options (by field) to a command's parser."""
    for name in names:
        option = BY_FIELD[name]
        assert option.flag is not None, name
        flags = [option.short, option.flag] if option.short else [option.flag]
        spec: dict[str, Any] = {"dest": option.field, "help": option.help}
        if option.metavar:
            spec["metavar"] = option.metavar
        if option.kind == "flag":
            spec["action"] = "store_true"
        elif option.kind in ("names", "trials"):
            spec["action"] = "append"
            if option.kind == "trials":
                spec["type"] = _trial
        elif option.kind == "path":
            spec["type"] = Path
        elif option.kind in ("int", "count"):
            spec["type"] = int
        elif option.kind == "number":
            spec["type"] = float
        elif option.choices:
            spec["choices"] = option.choices
        if option.default is not None:
            spec["default"] = option.default
        parser.add_argument(*flags, **spec)


def from_arguments(args: argparse.Namespace, **given: Any) -> Options:
    """The Options of a command's parsed arguments (the options its parser has), and the
    values `given` (a positional manifest, what a command sets itself)."""
    values: dict[str, Any] = dict(given)
    cells: dict[str, tuple[Any, ...]] = {}
    for option in OPTIONS:
        if option.field in values or not hasattr(args, option.field):
            continue
        value = getattr(args, option.field)
        if option.field in _CELL_FIELDS:
            cells[option.field] = tuple(value or ())
        elif option.kind in ("names", "trials"):
            values[option.field] = tuple(value or ())
        elif value is not None:
            values[option.field] = value
    if cells:
        values["cells"] = CellFilter(**cells)
    return Options(**values)


# -- doit: NAME=VALUE variables ------------------------------------------------------


def from_variables(
    variables: Mapping[str, str],
    *,
    base: Path | None = None,
    default_manifest: str | None = None,
) -> Options:
    """Options from doit command-line variables; unknown names are refused.

    A relative path is relative to `base` (the folder doit was run from; None: the
    current folder); the manifest defaults to `default_manifest` (the dodo's, relative
    to the current folder: the dodo's), else manifests/demo.yaml.
    """
    _refuse_unknown(variables)
    values: dict[str, Any] = {}
    cells: dict[str, tuple[Any, ...]] = {}
    for option in OPTIONS:
        if option.variable is None or option.variable not in variables:
            continue
        value = _read(option, variables[option.variable], base)
        if value is None:
            continue
        if option.field in _CELL_FIELDS:
            cells[option.field] = value
        else:
            values[option.field] = value
    values.setdefault("manifest", Path(default_manifest or DEFAULT_MANIFEST).absolute())
    if cells:
        values["cells"] = CellFilter(**cells)
    return Options(**values)


def _refuse_unknown(variables: Mapping[str, str]) -> None:
    from brigade.engine import names

    unknown = sorted(set(variables) - set(DOIT_VARIABLES))
    for name in unknown:
        if name.startswith((names.CELL_PREFIX, names.GRADE_PREFIX)):
            # doit reads `a=b` as a variable: a task name writes `=` as %3D
            task = names.escape(f"{name}={variables[name]}")
            raise BrigadeError(
                f"{name}={variables[name]}: doit reads NAME=VALUE as a variable; in a task "
                f"name '=' is written %3D: {task}"
            )
    if unknown:
        raise BrigadeError(
            f"unknown doit variable {unknown[0]!r}"
            f"{did_you_mean(unknown[0], DOIT_VARIABLES)} (known: {', '.join(DOIT_VARIABLES)})"
        )


def _read(option: Option, text: str, base: Path | None) -> Any:
    """A doit variable's text as its option's value (None: not given, an empty value)."""
    name = option.variable
    stripped = text.strip()
    kind = option.kind
    if kind == "flag":
        lowered = stripped.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise BrigadeError(f"doit variable {name}={text!r}: use 1 or 0")
    if kind == "path":
        if not text:
            return None
        path = Path(text)
        return base / path if base is not None and not path.is_absolute() else path
    if kind == "names":
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if kind == "trials":
        items = [item.strip() for item in text.split(",") if item.strip()]
        if any(not item.isdigit() or int(item) < 1 for item in items):
            raise BrigadeError(f"doit variable {name}={text!r}: use {option.what}")
        return tuple(int(item) for item in items)
    if not stripped:
        return None
    if kind == "text":
        return stripped
    if kind == "choice":
        for choice in option.choices:
            if stripped.lower() == choice:
                return choice
        allowed = ", ".join(option.choices[:-1]) + f" or {option.choices[-1]}"
        if len(option.choices) == 2:
            allowed = " or ".join(option.choices)
        raise BrigadeError(f"doit variable {name}={text!r}: use {allowed}")
    try:
        if kind == "count":
            if not stripped.isdigit():
                raise ValueError(stripped)
            return int(stripped)
        return int(stripped) if kind == "int" else float(stripped)
    except ValueError:
        raise BrigadeError(f"doit variable {name}={text!r}: use {option.what}") from None


assert {option.field for option in OPTIONS} - set(_CELL_FIELDS) <= {
    f.name for f in fields(Options)
}, "every option is a field of Options"
