"""What reports show of a cell: the projected view every report format is rendered from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from brigade.core.taxonomy import is_measurement_failure, is_real_failure


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
        """The state, with its failure reason when there is one."""
        return f"{self.state} ({self.failure_reason})" if self.failure_reason else self.state

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
            "attempt": self.attempt,
            "duration_seconds": self.duration,
            "score": self.score,
            "run_dir": self.run_dir,
            "graders": list(self.graders),
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


def failure_reasons(cells: Iterable[ReportCell]) -> dict[str, dict[str, int]]:
    """Measurement failures: reason -> seat -> count."""
    table: dict[str, dict[str, int]] = {}
    for cell in cells:
        if cell.measurement_failure:
            per_seat = table.setdefault(cell.label, {})
            per_seat[cell.seat] = per_seat.get(cell.seat, 0) + 1
    return dict(sorted(table.items()))
