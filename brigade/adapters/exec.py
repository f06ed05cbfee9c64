"""The generic `exec:<command line>` adapter: any program that reads the prompt on stdin."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping

from brigade.adapters.base import Fault, Invocation, Reading, SeatRequest, last_line
from brigade.adapters.common import classify_fault, one_line, retry_after
from brigade.adapters.names import exec_tokens
from brigade.core import jsontext
from brigade.core.specs import SeatSpec
from brigade.core.taxonomy import FAULT_KINDS, FaultKind
from brigade.core.usage import Usage, UsageError, usage_from_document

EX_TEMPFAIL = 75
# the file (in the run folder) a program may write its usage to; named in BRIGADE_USAGE_FILE
USAGE_FILE = "usage.json"
USAGE_VARIABLE = "BRIGADE_USAGE_FILE"


class ExecAdapter:
    """Runs a command line in the workspace: prompt on stdin, stdout is the final output.

    The command reports a fault of the apparatus (a dropped connection, a
    provider 5xx) by exiting 75 (EX_TEMPFAIL) with the detail as its last stderr
    line, optionally starting with the fault's kind (`rate_limited: ...`); any
    other non-zero exit is the agent's own failure. It may write its usage as
    JSON to the file named in `$BRIGADE_USAGE_FILE`. Two placeholders keep
    rosters portable: `{python}` (the interpreter running brigade) and
    `{roster_dir}` (the roster file's folder).
    """

    name = "exec"
    min_version: str | None = None  # any program
    state_paths: tuple[str, ...] = ()  # a generic command: the seat's roster lists its own
    auth_files: tuple[str, ...] = ()  # and an isolated one starts from an empty HOME

    def __init__(self, command_line: str) -> None:
        self.tokens = exec_tokens(command_line)

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command line with placeholders expanded, prompt on stdin."""
        argv = tuple(
            token.replace("{python}", sys.executable).replace(
                "{roster_dir}", request.seat.roster_dir
            )
            for token in self.tokens
        )
        # A generic command gets no sandbox from brigade: read-only is not enforced.
        return Invocation(
            argv=argv,
            stdin_text=request.prompt,
            read_only_enforcement="none",
            env={USAGE_VARIABLE: str(request.run_dir / USAGE_FILE)},
            transport=request.seat.transport,
            output_files=(USAGE_FILE,),
        )

    def read(
        self,
        *,
        exit_code: int | None,
        stdout: str,
        stderr: str,
        files: Mapping[str, str] | None = None,
        now: float | None = None,
    ) -> Reading:
        """stdout is the final output; exit 75 is an apparatus fault; usage from its file."""
        usage, notes = _usage(dict(files or {}))
        if exit_code == EX_TEMPFAIL:
            line = last_line(stderr) or "exited 75 (EX_TEMPFAIL) without a detail line"
            kind, detail = _reported_kind(line)
            clock = time.time() if now is None else now
            found = Fault(
                kind=kind, detail=one_line(detail), retry_after_seconds=retry_after(detail, clock)
            )
            return Reading(final_text=stdout, fault=found, usage=usage, notes=notes)
        return Reading(final_text=stdout, usage=usage, notes=notes)

    def version_argv(self, seat: SeatSpec) -> tuple[str, ...] | None:
        """A generic command has no standard version flag."""
        return None


# a 5xx status in a program's own fault line: a standalone 500-599 that is not a size,
# a duration or a count
_5XX = re.compile(
    r"\b5\d\d\b(?!\s*(?:bytes?|b\b|kib|kb|mib|mb|ms|s\b|secs?|seconds?|lines?|tokens?|chars?"
    r"|characters?|items?|files?|%))|server error|internal error|bad gateway"
    r"|gateway time-?out",
    re.IGNORECASE,
)


def _reported_kind(line: str) -> tuple[FaultKind, str]:
    """The kind a detail line names (`quota: ...`), else the one its words give: a provider's
    report, any other 5xx status (provider_5xx), else a dropped transport."""
    head, sep, rest = line.partition(":")
    if sep and head.strip() in FAULT_KINDS:
        kind: FaultKind = head.strip()  # type: ignore[assignment]
        return kind, rest.strip() or line
    found = classify_fault(line)
    if found is None:
        found = "provider_5xx" if _5XX.search(line) else "transport_drop"
    return found, line


def _usage(files: dict[str, str]) -> tuple[Usage | None, tuple[str, ...]]:
    text = files.get(USAGE_FILE)
    if text is None:
        return None, ()
    try:
        return usage_from_document(jsontext.parse(text), USAGE_FILE), ()
    except ValueError as exc:  # UsageError, or not JSON brigade reads (jsontext.BadJSON)
        problem = str(exc) if isinstance(exc, UsageError) else f"{USAGE_FILE}: {exc}"
        return None, (f"usage ignored: {one_line(problem)}",)
