"""What the report's pages show of a cell: its record projected, every text scrubbed and cut.

A cell's record (report/detail.py) holds what the agent said and did as it was
recorded: answers, transcripts and diffs may echo the prompt, env values or
this machine's paths. Every text goes through the projection first (secrets
replaced, then cut to its limit), and the view notes what was replaced and
what was cut, so the page can say so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from brigade.core.accounting import cell_usage
from brigade.core.plan import Cell
from brigade.core.projection import (
    GRADER_RESULT_ROLES,
    Secrets,
    blank_text,
    project,
    project_text,
    without_cut_secret,
)
from brigade.core.receipts import Receipt
from brigade.core.transcript import ENTRY_KINDS
from brigade.report.detail import CellRecord, Text
from brigade.report.model import reused_grades, state_reason, usage_text

# how much of each text a page shows
ANSWER_LIMIT = 8000
CASE_ANSWER_LIMIT = 1500
JUNIT_ANSWER_LIMIT = 4000
STDERR_LIMIT = 4000
ENTRY_LIMIT = 1500
DIFF_LIMIT = 20000
# a transcript longer than this shows its first and last entries
ENTRIES_HEAD = 80
ENTRIES_TAIL = 40


@dataclass(frozen=True)
class Shown:
    """A projected text: what is shown, whether it was cut, which secrets were replaced."""

    text: str
    cut: bool = False
    scrubbed: tuple[str, ...] = ()


BLANK_SHOWN = Shown("·")


def shown(text: str, secrets: Secrets, limit: int | None, more: bool = False) -> Shown:
    """Free text as a page shows it: secrets replaced first, then cut (`more`: the text
    read was already only the start of a longer one)."""
    if more:  # read only in part: the end may hold the start of a secret, cut too short
        text = without_cut_secret(text, secrets)
    hits = secrets.matcher.find(text) if text else []
    kinds = tuple(sorted({hit.kind for hit in hits}))
    scrubbed = project_text(text, secrets) if hits else text
    cut = more or (limit is not None and len(scrubbed) > limit)
    if limit is not None and len(scrubbed) > limit:
        scrubbed = scrubbed[:limit]
    return Shown(scrubbed, cut, kinds)


def _from(value: Text | None, secrets: Secrets, limit: int) -> Shown | None:
    return shown(value.text, secrets, limit, value.more) if value is not None else None


@dataclass(frozen=True)
class EntryView:
    """One transcript entry: its kind, who or which tool, and its text."""

    kind: str
    label: str  # `assistant`, `tool call: Bash`, `tool result: Bash (error)`, ...
    body: Shown


@dataclass(frozen=True)
class AttemptView:
    """One attempt as the page lists it."""

    number: int
    state: str
    started_at: str | None
    duration: float | None
    fault: Shown | None
    reused: str | None = None  # `reused run of cell ...`: its seat run was copied
    usage: str | None = None  # what its seat run consumed, in one line (None: unknown)


@dataclass(frozen=True)
class CellView:
    """Everything a detail page shows of one cell, projected."""

    coordinate: str
    cell_id: str
    case_id: str
    seat: str
    trial: int
    execution_mode: str
    state: str
    failure_reason: str | None
    label: str  # the state with its failure reason
    reason: Shown
    graders: tuple[dict[str, Any], ...]
    attempts: tuple[AttemptView, ...]
    usage: str | None
    fault: Shown | None
    answer: Shown | None
    stderr: Shown | None
    transcript: tuple[EntryView, ...] | None
    omitted_entries: int  # transcript entries left out between the first and the last
    changed: tuple[str, ...] | None
    deleted: tuple[str, ...]
    diff: Shown | None
    diff_note: str | None
    run_dir: str | None  # relative to the output directory
    # grader id -> where its result was reused from (ids and times: nothing to project)
    reused_grades: Mapping[str, str] = field(default_factory=dict)
    # the case's own workspace: the repository's (or folder's) name and its commit (digest)
    workspace: str | None = None


def _workspace_line(cell: Cell, secrets: Secrets) -> str | None:
    """`repo NAME @ COMMIT` (or `dir NAME @ DIGEST`) of a case with a workspace of its own:
    the folder's name only, scrubbed like any text, never its path."""
    workspace = cell.workspace
    if workspace is None:
        return None
    name = shown(os.path.basename(workspace.path.rstrip("/")), secrets, 200).text
    if workspace.kind == "repo":
        return f"repo {name} @ {str(workspace.commit)[:12]}"
    return f"dir {name} @ {str(workspace.digest).removeprefix('sha256:')[:12]}"


def _entry(entry: Mapping[str, Any], secrets: Secrets) -> EntryView:
    kind = entry.get("kind")
    kind = kind if kind in ENTRY_KINDS else "system"  # the file is read as it is on disk
    name = entry.get("name")
    if kind == "tool_call":
        label = f"tool call: {name}" if name else "tool call"
        value = entry.get("input")
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    elif kind == "tool_result":
        label = f"tool result: {name}" if name else "tool result"
        if entry.get("is_error"):
            label += " (error)"
        text = str(entry.get("output") or "")
    else:
        role = entry.get("role")
        label = str(role) if kind == "message" and role else kind
        text = str(entry.get("text") or "")
    return EntryView(kind, shown(label, secrets, 200).text, shown(text, secrets, ENTRY_LIMIT))


def _transcript(
    entries: tuple[dict[str, Any], ...] | None, secrets: Secrets
) -> tuple[tuple[EntryView, ...] | None, int]:
    if entries is None:
        return None, 0
    if len(entries) <= ENTRIES_HEAD + ENTRIES_TAIL:
        return tuple(_entry(e, secrets) for e in entries), 0
    kept = (*entries[:ENTRIES_HEAD], *entries[-ENTRIES_TAIL:])
    return tuple(_entry(e, secrets) for e in kept), len(entries) - len(kept)


def attempts_usage(receipt: Receipt | None) -> dict[int, Any]:
    """attempt number -> the usage its receipt records of it (None: unknown)."""
    entries = receipt.attempts_usage if receipt is not None else ()
    return {entry.attempt: entry.usage for entry in entries}


def _usage(record: CellRecord, secrets: Secrets) -> str | None:
    """The cell's usage: over every attempt whose seat ran when there were several."""
    per = attempts_usage(record.receipt)
    if len(per) > 1:
        total = cell_usage(list(per.values()), {}, record.cell.seat.model)
        text = usage_text(total)
        if text and total.get("cells_cost_unknown"):
            text += " (the cost of some attempts is unknown)"
        text = f"over its {len(per)} attempts: {text}" if text else None
    else:
        text = usage_text(record.usage)
    return shown(text, secrets, 1000).text if text else None


def _attempt_usage(usage: Any, secrets: Secrets) -> str | None:
    text = usage_text(usage) if isinstance(usage, Mapping) else None
    return shown(text, secrets, 1000).text if text else None


def cell_view(record: CellRecord, out: Path, secrets: Secrets) -> CellView:
    """The projected view of a cell's record (paths relative to `out`)."""
    cell, receipt = record.cell, record.receipt
    state = record.state
    reason = receipt.failure_reason if receipt is not None else None
    graders = tuple(
        project(g, GRADER_RESULT_ROLES, secrets)
        for g in (receipt.graders if receipt is not None else ())
    )
    per_attempt = attempts_usage(receipt)
    attempts = tuple(
        AttemptView(
            number=a.number,
            state=a.state + (f" ({a.failure_reason})" if a.failure_reason else ""),
            started_at=a.started_at,
            duration=a.duration,
            fault=shown(a.fault, secrets, 1000) if a.fault else None,
            reused=a.reused,
            usage=_attempt_usage(per_attempt.get(a.number), secrets),
        )
        for a in record.attempts
    )
    transcript, omitted = _transcript(record.transcript, secrets)
    changes = record.changes
    diff_note = None
    if changes is not None and changes.diff is None:
        diff_note = changes.diff_source
    run_dir = (
        os.path.relpath(record.run_dir, out).replace(os.sep, "/")
        if record.run_dir is not None
        else None
    )
    faulty = state in ("execution_error", "adapter_error") or any(
        g.get("status") == "grader_error" for g in graders
    )
    return CellView(
        coordinate=cell.coordinate,
        cell_id=cell.cell_id,
        case_id=cell.case_id,
        seat=cell.seat.name,
        trial=cell.trial,
        execution_mode=cell.execution_mode,
        state=state,
        failure_reason=reason,
        label=f"{state} ({reason})" if reason else state,
        reason=shown(state_reason(state, receipt), secrets, 1000),
        graders=graders,
        attempts=attempts,
        usage=_usage(record, secrets),
        fault=shown(record.fault, secrets, 2000) if record.fault and faulty else None,
        answer=_from(record.answer, secrets, ANSWER_LIMIT),
        stderr=_from(record.stderr_tail, secrets, STDERR_LIMIT),
        transcript=transcript,
        omitted_entries=omitted,
        changed=(
            tuple(shown(p, secrets, 300).text for p in changes.changed)
            if changes is not None
            else None
        ),
        deleted=tuple(shown(p, secrets, 300).text for p in changes.deleted) if changes else (),
        diff=_from(changes.diff, secrets, DIFF_LIMIT) if changes is not None else None,
        diff_note=diff_note,
        run_dir=run_dir,
        workspace=_workspace_line(cell, secrets),
        reused_grades=reused_grades(receipt),
    )


def blank_view(view: CellView) -> CellView:
    """The view with every free text blanked: the page's skeleton for the leak check.

    (Free text added to CellView must be blanked here too.)"""

    def blank(value: Shown | None) -> Shown | None:
        return None if value is None else Shown("·", value.cut, value.scrubbed)

    return replace(
        view,
        reason=Shown("·"),
        graders=tuple(blank_text(g, GRADER_RESULT_ROLES, "·") for g in view.graders),
        attempts=tuple(
            replace(a, fault=blank(a.fault), usage="·" if a.usage else None) for a in view.attempts
        ),
        usage="·" if view.usage else None,
        fault=blank(view.fault),
        answer=blank(view.answer),
        stderr=blank(view.stderr),
        transcript=(
            tuple(replace(e, label="·", body=Shown("·")) for e in view.transcript)
            if view.transcript is not None
            else None
        ),
        changed=tuple("·" for _ in view.changed) if view.changed is not None else None,
        deleted=tuple("·" for _ in view.deleted),
        diff=blank(view.diff),
    )


def scrubbed_kinds(views: Iterable[Shown | None]) -> tuple[str, ...]:
    """Every kind of secret replaced in any of these texts."""
    return tuple(sorted({kind for v in views if v is not None for kind in v.scrubbed}))
