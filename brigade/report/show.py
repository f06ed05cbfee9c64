"""`brigade show` as text: one cell in full, or the plan's cells one per line.

The terminal is the user's own: texts are shown as recorded (not projected),
and paths are absolute so they can be opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.plan import Cell, Plan
from brigade.core.receipts import Receipt
from brigade.core.taxonomy import COUNT_KEYS
from brigade.errors import InputError
from brigade.report.detail import CellRecord, Text
from brigade.report.model import (
    cost_text,
    failed_checks,
    grader_spent,
    reused_grades,
    seconds_text,
    short_reason,
    state_reason,
    usage_text,
)

# an answer longer than a screenful is cut (--full shows it all)
SCREEN_LINES = 40
SCREEN_CHARACTERS = 4000
INDENT = "  "


def find_cell(plan: Plan, key: str) -> Cell:
    """The planned cell with this coordinate, or whose id starts with `key`.

    InputError (exit 2) when none does, or when an id prefix fits several (listed).
    """
    for cell in plan.cells:
        if cell.coordinate == key:
            return cell
    lowered = key.lower()
    matches = [cell for cell in plan.cells if lowered and cell.cell_id.startswith(lowered)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(
            f"no cell {key!r} in the plan: give a coordinate (case:seat:trial, see "
            "`brigade show DIR --cells`) or the start of a cell id"
        )
    listed = ", ".join(f"{c.cell_id[:12]} ({c.coordinate})" for c in matches[:10])
    more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
    raise InputError(
        f"{key!r} is the start of {len(matches)} cell ids: {listed}{more}; give more of it"
    )


def _indented(text: str) -> list[str]:
    return [INDENT + line if line else "" for line in text.splitlines()] or [INDENT]


def _answer_lines(answer: Text, full: bool) -> list[str]:
    text = answer.text
    lines = text.splitlines()
    if full or (len(lines) <= SCREEN_LINES and len(text) <= SCREEN_CHARACTERS):
        shown = _indented(text) if text else [f"{INDENT}(empty)"]
        if answer.more:
            shown.append(f"{INDENT}[the file is longer than brigade reads; open it to see all]")
        return shown
    kept, size = [], 0
    for line in lines[:SCREEN_LINES]:
        if size + len(line) > SCREEN_CHARACTERS:
            kept.append(line[: max(0, SCREEN_CHARACTERS - size)])
            break
        kept.append(line)
        size += len(line) + 1
    hidden_lines = len(lines) - len(kept)
    hidden = len(text) - sum(len(line) + 1 for line in kept)
    what = f"{hidden_lines} more line(s)" if hidden_lines > 0 else f"{hidden} more character(s)"
    return [
        *_indented("\n".join(kept)),
        f"{INDENT}[truncated: {what}; --full shows the whole answer]",
    ]


def _grader_lines(receipt: Receipt | None, out: Path) -> list[str]:
    lines = []
    reused = reused_grades(receipt)
    for grader in receipt.graders if receipt is not None else ():
        score = grader.get("score")
        shown = "" if score is None else f" {score:g}"
        detail = " ".join(str(grader.get("detail") or "").split())
        lines.append(f"{INDENT}{grader.get('grader_id')}  {grader.get('status')}{shown}  {detail}")
        failed, more = failed_checks(grader)
        lines += [f"{INDENT * 2}failed  {line}" for line in failed]
        if more:
            lines.append(f"{INDENT * 2}and {more} more failed check(s) (--json lists them all)")
        logs = grader.get("logs")
        if isinstance(logs, dict) and logs:  # a grader that ran a process (a command, a judge)
            code = grader.get("exit_code")
            lines.append(f"{INDENT * 2}exit {'–' if code is None else code}")
            lines += [f"{INDENT * 2}{name:<6}  {out / path}" for name, path in logs.items()]
        spent = grader_spent(grader)
        if spent is not None:
            lines.append(f"{INDENT * 2}spent   {spent}")
        if grader.get("grader_id") in reused:
            lines.append(f"{INDENT * 2}{reused[grader['grader_id']]}")
    return lines


def cell_text(record: CellRecord, *, full: bool = False) -> str:
    """Everything recorded of one cell, for the terminal."""
    cell, receipt, state = record.cell, record.receipt, record.state
    label = state
    if receipt is not None and receipt.failure_reason:
        label = f"{state} ({receipt.failure_reason})"
    lines = [
        f"{cell.coordinate}  {label}",
        f"{INDENT}{state_reason(state, receipt)}",
        f"{INDENT}cell {cell.cell_id}",
        f"{INDENT}case {cell.case_id}, seat {cell.seat.name}, trial {cell.trial}, "
        f"{cell.execution_mode}",
    ]
    lines += ["", "attempts:"]
    if not record.attempts:
        lines.append(f"{INDENT}none")
    labels = [
        a.state + (f" ({a.failure_reason})" if a.failure_reason else "") for a in record.attempts
    ]
    width = max(map(len, labels), default=0)
    for attempt, shown in zip(record.attempts, labels, strict=True):
        row = (
            f"{INDENT}{attempt.number:>3}  {shown:<{width}}  "
            f"{attempt.started_at or '–'}  {seconds_text(attempt.duration):>9}"
        )
        if attempt.fault:
            row += f"  fault {' '.join(attempt.fault.split())}"
        if attempt.reused:
            row += f"  ({attempt.reused}; started then)"
        lines.append(row.rstrip())
    graders = _grader_lines(receipt, record.cell_dir.parent.parent)
    if graders:
        lines += ["", "graders:", *graders]
    usage = usage_text(record.usage)
    if usage:
        lines += ["", f"usage: {usage}"]
    notes = receipt.notes if receipt is not None else ()
    if notes:
        # what the seat reported that was ignored (a bad usage file): it changed nothing else
        lines += ["", "notes:", *(f"{INDENT}{note}" for note in notes)]
    if record.answer is not None:
        count = len(record.answer.text.splitlines())
        lines += ["", f"answer (final.txt, {count} line(s)):", *_answer_lines(record.answer, full)]
    if record.stderr_tail is not None and record.stderr_tail.text:
        head = "stderr (last lines):" if record.stderr_tail.more else "stderr:"
        lines += ["", head, *_indented(record.stderr_tail.text)]
    if record.changes is not None:
        changes = record.changes
        lines += ["", "changed files:"]
        lines += [f"{INDENT}changed  {path}" for path in changes.changed]
        lines += [f"{INDENT}deleted  {path}" for path in changes.deleted]
        if not changes.changed and not changes.deleted:
            lines.append(f"{INDENT}none")
    lines += ["", "folders:", f"{INDENT}cell  {record.cell_dir}"]
    if record.run_dir is not None:
        lines.append(f"{INDENT}run   {record.run_dir}")
        present = [
            name
            for name in (
                "final.txt",
                "stdout.log",
                "stderr.log",
                "run.json",
                "transcript.json",
                "changes.patch",
            )
            if (record.run_dir / name).is_file()
        ]
        if present:
            lines.append(f"{INDENT}      {' '.join(present)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class CellRow:
    """One line of `brigade show DIR --cells`."""

    coordinate: str
    cell_id: str
    state: str
    reason: str
    attempt: int | None
    duration: float | None
    cost: float | None

    def document(self) -> dict[str, Any]:
        """The row as `--cells --json` prints it."""
        return {
            "coordinate": self.coordinate,
            "cell_id": self.cell_id,
            "state": self.state,
            "reason": self.reason,
            "attempt": self.attempt,
            "duration_seconds": self.duration,
            "cost_usd": self.cost,
        }


def _choose(what: str, wanted: Sequence[str], known: Iterable[str]) -> set[str]:
    names = list(dict.fromkeys(known))
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise InputError(f"--{what}: no {what} {unknown[0]!r} (known: {', '.join(names)})")
    return set(wanted)


def cell_rows(
    plan: Plan,
    receipts: Mapping[str, Receipt | None],
    *,
    states: Sequence[str] = (),
    seats: Sequence[str] = (),
    cases: Sequence[str] = (),
) -> list[CellRow]:
    """The plan's cells (in plan order) that pass every filter given (unknown names: exit 2)."""
    wanted_states = _choose("state", states, COUNT_KEYS)
    wanted_seats = _choose("seat", seats, (c.seat.name for c in plan.cells))
    wanted_cases = _choose("case", cases, (c.case_id for c in plan.cells))
    rows = []
    for cell in plan.cells:
        if wanted_seats and cell.seat.name not in wanted_seats:
            continue
        if wanted_cases and cell.case_id not in wanted_cases:
            continue
        receipt = receipts.get(cell.cell_id)
        state = receipt.state if receipt is not None else "missing"
        if wanted_states and state not in wanted_states:
            continue
        usage = receipt.usage if receipt is not None else None
        cost = usage.get("cost_usd") if usage is not None else None
        duration = receipt.duration_seconds if receipt is not None else None
        attempt = receipt.attempt if receipt is not None else None
        rows.append(
            CellRow(
                coordinate=cell.coordinate,
                cell_id=cell.cell_id,
                state=state,
                reason=short_reason(state, receipt),
                attempt=attempt,
                duration=duration,
                cost=cost if isinstance(cost, (int, float)) else None,
            )
        )
    return rows


def rows_text(rows: Sequence[CellRow]) -> str:
    """The cell list as aligned columns under a header line."""
    table = [("coordinate", "state", "reason", "attempt", "duration", "cost")]
    for row in rows:
        table.append(
            (
                row.coordinate,
                row.state,
                row.reason,
                str(row.attempt) if row.attempt is not None else "–",
                seconds_text(row.duration),
                cost_text({"cost_usd": row.cost}),
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(6)]
    right = {3, 4, 5}
    return "\n".join(
        "  ".join(
            value.rjust(widths[i]) if i in right else value.ljust(widths[i])
            for i, value in enumerate(line)
        ).rstrip()
        for line in table
    )
