"""A run's spending cap (`--max-cost`, `max_cost=`, the manifest's or the roster's
`max_cost`; `brigade regrade --max-cost`): what this run spends on seat runs and on the
graders that call a model (judges), wherever they run, is kept within it.

Before a seat run, or a grading that runs a judge, starts (`admit`), the budget adds what
this run spent, what the runs in flight are expected to cost and what this one is expected
to cost: the most a run of the same seat, or of the same judge seat, cost in this run so far.
While no run of a seat (or judge seat) has ended yet, one run of it is in flight at a time: the
scheduler holds the others back until that first one says what a run costs (or that its cost is
unknown), so `-n 16` does not start sixteen runs of an unknown price. When that would pass the
cap, or the cap is
reached, the budget is spent: that run and every one after it are kept back (their cells
keep what is on disk and run on the next run), and the run ends with exit 3 and one line
saying what was spent. A run whose cost is unknown adds nothing and is counted apart.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from brigade.core.accounting import judge_seats
from brigade.core.plan import Cell
from brigade.core.usage import money

if TYPE_CHECKING:
    from brigade.run.schedule import Job, Scheduler

# what a run the budget kept back would have been: a cell's first start, a retry, a regrade
Kept = Literal["start", "retry", "regrade"]
# what one run cost: the seat (or judge seat) it ran, and USD (None: unknown)
Spent = tuple[str, float | None]


class Budget:
    """Keeps what one run spends within its cap; says what it kept back."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.spent = 0.0
        self.seat_runs = 0
        self.judge_runs = 0
        self.unknown = 0  # runs whose cost is unknown
        self.spent_out = False  # the cap is reached, or the next run would pass it
        self.next_cost: float | None = None  # what the run that did not fit would cost
        self.kept: dict[Kept, int] = {"start": 0, "retry": 0, "regrade": 0}
        self._most: dict[str, float] = {}  # "seat NAME" / "judge NAME" -> the most one cost
        self._reserved: dict[str, float] = {}  # cell_id -> what its runs in flight may cost
        self._learned: set[str] = set()  # keys of which a run has ended and been counted
        self._probing: dict[str, str] = {}  # key -> the cell whose run is learning its cost
        self._lock = threading.RLock()  # runs end in several threads (and the scheduler's)
        self._scheduler: Scheduler | None = None

    def attach(self, scheduler: Scheduler) -> None:
        """Let the scheduler start a seat run only when the budget admits it."""
        self._scheduler = scheduler
        scheduler.admit(self._admit_job, lambda: self.spent_out, self._ended)

    def _admit_job(self, job: Job) -> bool | None:
        """Admit a seat run (True), keep it back (False), or hold it (None) while another run
        of one of its seats is still learning what a run of that seat costs."""
        cell = job.cell
        keys = _keys(cell, seat=True)
        with self._lock:
            learning = [] if self.spent_out else [k for k in keys if k not in self._learned]
            if any(self._probing.get(key, cell.cell_id) != cell.cell_id for key in learning):
                return None
            admitted = self.admit(cell, seat=True, kept="retry" if job.tries > 1 else "start")
            if admitted:
                for key in learning:
                    self._probing.setdefault(key, cell.cell_id)
            return admitted

    def _ended(self, job: Job) -> None:
        """A seat run ended, counted or not (interrupted, its storage failed): what it held
        is released."""
        with self._lock:
            self._release(job.cell.cell_id)

    def _release(self, cell_id: str) -> None:
        self._reserved.pop(cell_id, None)
        for key in [key for key, owner in self._probing.items() if owner == cell_id]:
            del self._probing[key]

    def _keep_job(self, job: Job) -> None:
        with self._lock:
            self.kept["retry" if job.tries > 1 else "start"] += 1

    def admit(self, cell: Cell, *, seat: bool, kept: Kept = "start") -> bool:
        """Whether a run of the cell's seat (`seat`) and of its judges may start now; one
        that may not is counted as kept back. A grading that runs no judge is free."""
        keys = _keys(cell, seat=seat)
        if not keys:
            return True
        with self._lock:
            if not self.spent_out:
                expected = sum(self._most.get(key, 0.0) for key in keys)
                committed = self.spent + sum(self._reserved.values())
                if self.spent < self.cap and committed + expected <= self.cap:
                    self._reserved[cell.cell_id] = self._reserved.get(cell.cell_id, 0) + expected
                    return True
                self.spent_out = True
                self.next_cost = expected if self.spent < self.cap else None
                newly = True
            else:
                newly = False
            self.kept[kept] += 1
        if newly:
            self._drop_waiting()
        return False

    def record(self, cell_id: str, seat: Spent | None, judges: Sequence[Spent]) -> None:
        """Count what a seat run (None: none ran here) and the judges of a grading cost; the
        budget is spent once the cap is reached."""
        with self._lock:
            self._release(cell_id)
            runs = [("seat", seat)] if seat is not None else []
            runs += [("judge", judge) for judge in judges]
            for what, (name, cost) in runs:
                if what == "seat":
                    self.seat_runs += 1
                else:
                    self.judge_runs += 1
                key = f"{what} {name}"
                self._learned.add(key)
                if cost is None:
                    self.unknown += 1
                    continue
                self.spent += cost
                self._most[key] = max(cost, self._most.get(key, 0.0))
            reached = not self.spent_out and self.spent >= self.cap
            if reached:
                self.spent_out = True
        if reached:
            self._drop_waiting()

    def _drop_waiting(self) -> None:
        """The seat runs the scheduler still holds (queued, or retries waiting for their
        backoff) are kept back now."""
        if self._scheduler is not None:
            self._scheduler.drop_all(self._keep_job)

    @property
    def kept_back(self) -> bool:
        """Whether the budget kept a run back: the run is then a measurement failure."""
        with self._lock:
            return any(self.kept.values())

    def reason(self) -> str:
        """Why runs were kept back, with what was spent."""
        with self._lock:
            spent, unknown = self.spent, self.unknown
            seats, judges, upcoming = self.seat_runs, self.judge_runs, self.next_cost
        runs = [_many(seats, "seat run")] if seats or not judges else []
        runs += [_many(judges, "judge run")] if judges else []
        text = (
            f"the budget of {money(self.cap)} was reached: {money(spent)} spent by "
            f"{' and '.join(runs)} of this run"
        )
        if unknown:
            text += f", {unknown} of them of unknown cost (not counted)"
        if upcoming is not None:
            text += f"; the next would cost about {money(upcoming)}, past the cap"
        return text

    def lines(self) -> list[str]:
        """The final line, when the budget kept a run back."""
        with self._lock:
            kept = dict(self.kept)
        if not any(kept.values()):
            return []
        parts = []
        if kept["start"]:
            parts.append(f"{_many(kept['start'], 'cell')} not started")
        if kept["retry"]:
            parts.append(f"{kept['retry']} retr{'ies' if kept['retry'] != 1 else 'y'} not made")
        if kept["regrade"]:
            parts.append(f"{_many(kept['regrade'], 'cell')} not regraded")
        return [f"stopped launching: {self.reason()}; {', '.join(parts)}"]


def _keys(cell: Cell, *, seat: bool) -> list[str]:
    """What a run of the cell spends on: its seat (`seat`) and its judges' seats."""
    keys = [f"seat {cell.seat.name}"] if seat else []
    return keys + [f"judge {name}" for name in judge_seats(cell.graders)]


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"
