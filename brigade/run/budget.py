"""A run's spending cap (`--max-cost`, `max_cost=`, the manifest's or the roster's
`max_cost`): once what the seat runs recorded in this run cost reaches it, the scheduler
launches nothing more.

Only what this run recorded counts (every attempt, retries and judges included);
an attempt whose cost is unknown adds nothing and is counted apart, so the final
line says how much of the spending it could not see.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from brigade.core.accounting import attempt_cost
from brigade.core.usage import Price, money
from brigade.run.schedule import Scheduler


class Budget:
    """Adds up the cost of every attempt a scheduler records; stops it at the cap."""

    def __init__(self, cap: float, prices: Mapping[str, Price], scheduler: Scheduler) -> None:
        self.cap = cap
        self.prices = prices
        self.spent = 0.0
        self.runs = 0  # attempts recorded in this run
        self.unknown = 0  # of them, those whose cost is unknown
        self._lock = threading.Lock()  # receipts are recorded from several threads
        self._scheduler = scheduler
        scheduler.on_recorded(self.record)

    def record(self, receipt: Mapping[str, Any]) -> None:
        """Count a recorded attempt's cost; stop launching once the cap is reached."""
        cost = attempt_cost(receipt, self.prices)
        with self._lock:
            self.runs += 1
            if cost is None:
                self.unknown += 1
            else:
                self.spent += cost
            reached = self.spent >= self.cap
        if reached:
            self._scheduler.stop(self.reason)

    def reason(self) -> str:
        """Why launching stopped, with what was spent (read when the run ends)."""
        with self._lock:
            runs, unknown, spent = self.runs, self.unknown, self.spent
        text = (
            f"the budget of {money(self.cap)} was reached: {money(spent)} spent by "
            f"{runs} seat run{'s' if runs != 1 else ''} of this run"
        )
        if unknown:
            text += f", {unknown} of them of unknown cost (not counted)"
        return text
