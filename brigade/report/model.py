"""What reports show of a cell: the projected view every report format is rendered from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from brigade.core.accounting import model_run
from brigade.core.receipts import Receipt
from brigade.core.taxonomy import is_measurement_failure, is_real_failure
from brigade.core.usage import money


@dataclass(frozen=True)
class ReportCell:
    """One planned cell as reports show it (projected: safe to leave the output directory)."""

    coordinate: str
    case_id: str
    seat: str
    trial: int
    cell_id: str
    state: str  # a receipt state, or "missing"
    attempt: int | None
    duration: float | None
    score: float | None
    failure_reason: str | None
    failure_detail: str | None
    run_dir: str | None
    graders: tuple[dict[str, Any], ...]
    # the answer (projected and cut, with a note when cut) and the fault, as JUnit shows them
    answer: str | None = None
    fault: str | None = None
    fault_kind: str | None = None  # the kind of the receipt's fault (auth, rate_limited, ...)
    # what the cell spent over every attempt (core.accounting's document for one cell);
    # None when its receipt records no usage
    usage: Mapping[str, Any] | None = None
    # what its graders that ran a model (judges) spent in their last grading (summary.json's
    # grader_usage document for one cell); None when none ran
    grader_usage: Mapping[str, Any] | None = None

    @property
    def measurement_failure(self) -> bool:
        """An apparatus fault, not a statement about the seat."""
        return is_measurement_failure(self.state, self.failure_reason)

    @property
    def real_failure(self) -> bool:
        """rejected, or execution_error that is not a timeout."""
        return is_real_failure(self.state, self.failure_reason)

    @property
    def label(self) -> str:
        """The state, with the kind of its fault (else its failure reason) when it has one."""
        why = self.fault_kind or self.failure_reason
        return f"{self.state} ({why})" if why else self.state

    def document(self) -> dict[str, Any]:
        """The cell as `brigade report --json` prints it."""
        return {
            "coordinate": self.coordinate,
            "case_id": self.case_id,
            "seat": self.seat,
            "trial": self.trial,
            "cell_id": self.cell_id,
            "state": self.state,
            "failure_reason": self.failure_reason,
            "failure_detail": self.failure_detail,
            "fault_kind": self.fault_kind,
            "attempt": self.attempt,
            "duration_seconds": self.duration,
            "score": self.score,
            "run_dir": self.run_dir,
            "graders": list(self.graders),
            "usage_all_attempts": dict(self.usage) if self.usage is not None else None,
            "grader_usage": dict(self.grader_usage) if self.grader_usage is not None else None,
        }


def grader_lines(cell: ReportCell) -> list[str]:
    """One line per grader: id, status, score and detail."""
    lines = []
    for grader in cell.graders:
        score = "" if grader.get("score") is None else f" {grader['score']:g}"
        lines.append(
            f"{grader.get('grader_id')}: {grader.get('status')}{score}: {grader.get('detail')}"
        )
    return lines


# how many failed component checks of a grader show and the text of each at most
CHECKS_SHOWN = 10
CHECK_CHARACTERS = 300


def failed_checks(grader: Mapping[str, Any]) -> tuple[list[str], int]:
    """A grader's failed component checks (a failed test, a violated constraint, the exit
    status) as `name: detail` lines: the first CHECKS_SHOWN, each cut to CHECK_CHARACTERS;
    and how many more failed."""
    checks = grader.get("component_checks")
    failed = [
        check
        for check in (checks if isinstance(checks, list) else ())
        if isinstance(check, dict) and check.get("passed") is False
    ]
    lines = []
    for check in failed[:CHECKS_SHOWN]:
        name = " ".join(str(check.get("name") or "?").split())
        detail = " ".join(str(check.get("detail") or "").split())
        line = f"{name}: {detail}" if detail else name
        if len(line) > CHECK_CHARACTERS:
            line = line[: CHECK_CHARACTERS - 1] + "…"
        lines.append(line)
    return lines, max(0, len(failed) - CHECKS_SHOWN)


def failure_reasons(cells: Iterable[ReportCell]) -> dict[str, dict[str, int]]:
    """Measurement failures: reason -> seat -> count."""
    table: dict[str, dict[str, int]] = {}
    for cell in cells:
        if cell.measurement_failure:
            per_seat = table.setdefault(cell.label, {})
            per_seat[cell.seat] = per_seat.get(cell.seat, 0) + 1
    return dict(sorted(table.items()))


def _ids(graders: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join(str(g.get("grader_id")) for g in graders)


def passed(grader: Mapping[str, Any]) -> bool:
    """Whether a grader result passed: it scored its maximum and no component check failed
    (as `taxonomy.grader_passed` decides a cell's state)."""
    score, top = grader.get("score"), grader.get("score_max", 1)
    return (
        grader.get("status") == "scored"
        and isinstance(score, (int, float))
        and isinstance(top, (int, float))
        and score >= top
        and not failed_checks(grader)[0]
    )


def state_reason(state: str, receipt: Receipt | None) -> str:
    """Why a cell is in its state, in one line (from its receipt)."""
    graders = receipt.graders if receipt is not None else ()
    detail = receipt.failure_detail if receipt is not None else None
    if state == "missing":
        return "not run yet"
    if state == "unreadable":
        return (
            "its cell.json is no receipt brigade reads (too big, too deep, not JSON, a link or "
            "not a regular file); the next run runs the cell again"
        )
    if state == "running":
        return (
            f"attempt {receipt and receipt.attempt} started at {receipt and receipt.started_at} "
            "and has not "
            "finished: it is still running, or its run was killed (the next run starts a new "
            "attempt)"
        )
    if state == "accepted":
        return f"all {len(graders)} grader(s) passed"
    if state == "rejected":
        failed = [g for g in graders if not passed(g)]
        return f"failed {_ids(failed)} ({len(graders) - len(failed)} of {len(graders)} passed)"
    if state == "unscored":
        return "no graders: the answer is recorded, not scored"
    if state == "grader_error":
        broken = [g for g in graders if g.get("status") == "grader_error"]
        return f"grader(s) could not run: {_ids(broken)} (a fault of the apparatus)"
    if state == "execution_error":
        return str(detail or "the seat failed")
    if state == "adapter_error":
        kind = receipt.fault.kind if receipt is not None and receipt.fault is not None else None
        kind = kind or (receipt.failure_reason if receipt is not None else None) or "fault"
        return f"{kind}: {detail}" if detail else str(kind)
    return str(detail or state)


def short_reason(state: str, receipt: Receipt | None) -> str:
    """The reason column of a cell list: a failure reason, fault kind or grader ids; `-`."""
    if receipt is None:
        return "-"
    if receipt.failure_reason:
        return receipt.failure_reason
    if receipt.fault is not None and receipt.fault.kind:
        return receipt.fault.kind
    graders = receipt.graders
    if state == "rejected":
        return _ids(g for g in graders if not passed(g)) or "-"
    if state == "grader_error":
        return _ids(g for g in graders if g.get("status") == "grader_error") or "-"
    if state == "execution_error" and receipt.exit_code is not None:
        return f"exit {receipt.exit_code}"
    return "-"


def seconds_text(value: Any) -> str:
    """`1.25 s`, or `–` when unknown."""
    return f"{value:.2f} s" if isinstance(value, (int, float)) else "–"


def cost_text(usage: Mapping[str, Any] | None) -> str:
    """A usage's cost as every report and page shows money (`money`: `$0.0040`,
    `$0.000559` below a cent, `$1,234.56` from $100), or `–` when it is unknown."""
    return money(usage.get("cost_usd") if usage else None)


def _count(value: Any) -> str | None:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else None


def usage_text(usage: Mapping[str, Any] | None) -> str | None:
    """A run's usage in one line (only what is known), None when nothing is."""
    if not usage:
        return None
    parts = []
    tokens = _count(usage.get("input_tokens"))
    if tokens is not None:
        cached = _count(usage.get("cached_input_tokens"))
        parts.append(f"{tokens} input tokens" + (f" ({cached} cached)" if cached else ""))
    tokens = _count(usage.get("output_tokens"))
    if tokens is not None:
        reasoning = _count(usage.get("reasoning_tokens"))
        parts.append(f"{tokens} output tokens" + (f" ({reasoning} reasoning)" if reasoning else ""))
    turns = _count(usage.get("turns"))
    if turns is not None:
        parts.append(f"{turns} turn(s)")
    if isinstance(usage.get("cost_usd"), (int, float)):
        source = usage.get("cost_source")
        parts.append(cost_text(usage) + (f" ({source})" if source else ""))
    models = usage.get("models")
    names = list(models) if isinstance(models, (Mapping, list)) else []
    if not names and isinstance(usage.get("model"), str):
        names = [usage["model"]]
    if names:
        parts.append("model " + ", ".join(str(n) for n in names))
    return ", ".join(parts) or None


def reused_grades(receipt: Receipt | None) -> dict[str, str]:
    """grader id -> where its result was reused from, in words, for the graders of a
    receipt's grading that did not run again (their spec and inputs were unchanged)."""
    found: dict[str, str] = {}
    for entry in receipt.reused_grades if receipt is not None else ():
        if not isinstance(entry.get("grader_id"), str):
            continue
        same = receipt is not None and entry.get("cell_id") == receipt.cell_id
        where = "this cell" if same else f"cell {str(entry.get('cell_id'))[:12]}"
        when = f", graded {entry['graded_at']}" if isinstance(entry.get("graded_at"), str) else ""
        found[entry["grader_id"]] = (
            f"reused: not run again (its spec and inputs are unchanged); the result of "
            f"{entry.get('source_grader_id')} of {where}, attempt {entry.get('attempt')}{when}"
        )
    return found


def reused_run_text(receipt: Mapping[str, Any] | None) -> str | None:
    """Where a receipt's seat run was reused from, in words; None when its seat ran."""
    reused = (receipt or {}).get("reused_run")
    if not isinstance(reused, Mapping):
        return None
    return f"reused run of cell {str(reused.get('cell_id'))[:12]}, attempt {reused.get('attempt')}"


def grader_spent(grader: Mapping[str, Any]) -> str | None:
    """What a grader that ran a model (a judge) spent, in one line; None for a grader that
    ran none."""
    ran, usage = model_run(grader)
    if not ran:
        return None
    if not isinstance(usage, Mapping):
        return "unknown: the judge reported no usage"
    text = usage_text(usage) or "nothing known"
    return text if isinstance(usage.get("cost_usd"), (int, float)) else f"{text}, cost unknown"


def state_class(state: str, failure_reason: str | None) -> str:
    """The CSS class of a state: accepted, failed (a real failure), fault, or other."""
    if state == "accepted":
        return "accepted"
    if is_real_failure(state, failure_reason):
        return "failed"
    if is_measurement_failure(state, failure_reason):
        return "fault"
    return "other"
