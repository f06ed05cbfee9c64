"""What a run tells on stderr while its cells run.

On a terminal: one live line (done / total, states so far, elapsed, ETA, the
cells running now), redrawn in place. Without one (CI logs): a plain line per
finished cell (`[19/40] greet:opus:2 accepted 3.1 s`); past `rate` lines in a
30-second window, a summary line per window instead. Quiet: neither.

A live line of a few fields needs no terminal library (one carriage return and
an erase-line sequence); keeping it here also keeps the no-op resume from
importing one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import IO

from brigade.core.terminal import printable

# per-cell lines allowed in a window before summary lines take over (without a terminal)
DEFAULT_RATE = 60
WINDOW_SECONDS = 30.0
# the live line's cells running now: how many are named before "+N"
RUNNING_SHOWN = 3
ERASE = "\r\x1b[K"


def duration(seconds: float) -> str:
    """`3.1 s`, `1m05s`, `2h03m`: short and steady in width."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def states_text(counts: Counter[str], sep: str = " · ") -> str:
    """`accepted 10 · rejected 2` (sorted by state)."""
    return sep.join(f"{state} {n}" for state, n in sorted(counts.items()) if n)


class Progress:
    """Counts cells as they finish and shows it (thread-safe: cells finish in threads)."""

    def __init__(
        self,
        stream: IO[str],
        *,
        total: int,
        tty: bool,
        quiet: bool = False,
        rate: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        window: float = WINDOW_SECONDS,
    ) -> None:
        self.stream = stream
        self.total = total
        self.tty = tty
        self.quiet = quiet
        self.rate = DEFAULT_RATE if rate is None else rate
        self.clock = clock
        self.window = window
        self.started = clock()
        self.done: Counter[str] = Counter()
        self.finished = 0
        self.ran = 0  # cells finished by this run (not found done): the ETA's pace
        self.running: dict[str, None] = {}  # coordinates, in the order they started
        self._lock = threading.RLock()
        self._window_start = self.started
        self._window_lines = 0
        self._held_back = 0  # cells finished in this window without a line of their own
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._drawn = False

    # -- events -----------------------------------------------------------------

    def found_done(self, counts: Counter[str]) -> None:
        """Cells already finished when the run started (counted, not shown one by one)."""
        with self._lock:
            self.done.update(counts)
            self.finished += sum(counts.values())

    def begin(self, *, done: int, to_run: int, resumed: bool) -> None:
        """The run starts: on a resume, say what is done and what is left; start redrawing."""
        with self._lock:
            if self.quiet or to_run == 0:
                return
            if resumed and done:
                self._line(f"{done} of {self.total} cells done, {to_run} to run")
            self._draw()
            self._start_ticker()

    def start(self, coordinate: str) -> None:
        """A cell starts running."""
        with self._lock:
            self.running[coordinate] = None
            self._draw()

    def finish(
        self, state: str | None, coordinate: str | None, seconds: float | None, *, ran: bool = True
    ) -> None:
        """A cell finished (its recorded state; None when it has no receipt). `ran`: this run
        brought it up to date (else it was found so: counted, no line of its own)."""
        with self._lock:
            if coordinate is not None:
                self.running.pop(coordinate, None)
            self.finished += 1
            self.done[state or "missing"] += 1
            if not ran:
                self._draw()
                return
            self.ran += 1
            if self.quiet:
                return
            if self.tty:
                self._draw()
                return
            self._roll_window()
            if self._window_lines < self.rate:
                self._window_lines += 1
                took = f" {duration(seconds)}" if seconds is not None else ""
                what = f"{coordinate} " if coordinate else ""
                self._line(f"[{self.finished}/{self.total}] {what}{state or 'missing'}{took}")
            else:
                self._held_back += 1

    def note(self, text: str) -> None:
        """A line of its own (a warning), above the live line."""
        with self._lock:
            self._line(text)
            self._draw()

    def tick(self) -> None:
        """Time passed: redraw the live line; without a terminal, a summary line once a
        window ends with cells held back."""
        with self._lock:
            if self.quiet:
                return
            if self.tty:
                self._draw()
            else:
                self._roll_window()

    def stop(self) -> None:
        """Stop redrawing and clear the live line."""
        self._stop.set()
        with self._lock:
            if self._held_back and not self.tty and not self.quiet:
                self._summary_line()
            if self._drawn:
                self.stream.write(ERASE)
                self.stream.flush()
                self._drawn = False

    # -- what it says ----------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return self.clock() - self.started

    def eta(self) -> float | None:
        """Seconds left at this run's pace so far (None before a cell finished)."""
        left = self.total - self.finished
        if self.ran == 0 or left <= 0:
            return None
        return self.elapsed() / self.ran * left

    def counts_line(self) -> str:
        """`12 of 40 cells (accepted 10, rejected 2)` — what is done so far."""
        states = states_text(self.done, sep=", ")
        return f"{self.finished} of {self.total} cells" + (f" ({states})" if states else "")

    def live_line(self) -> str:
        """The terminal's line: `[12/40] accepted 10 · rejected 2 · 1m05s · ETA 2m10s ·
        running a:s:1, b:s:1 +2`."""
        parts = []
        states = states_text(self.done)
        if states:
            parts.append(states)
        parts.append(duration(self.elapsed()))
        eta = self.eta()
        if eta is not None:
            parts.append(f"ETA {duration(eta)}")
        if self.running:
            names = list(self.running)
            shown = ", ".join(names[:RUNNING_SHOWN])
            more = f" +{len(names) - RUNNING_SHOWN}" if len(names) > RUNNING_SHOWN else ""
            parts.append(f"running {shown}{more}")
        return f"[{self.finished}/{self.total}] " + " · ".join(parts)

    # -- drawing ---------------------------------------------------------------

    def _line(self, text: str) -> None:
        self.stream.write((ERASE if self._drawn else "") + printable(f"brigade: {text}\n"))
        self._drawn = False
        self.stream.flush()

    def _draw(self) -> None:
        if not self.tty or self.quiet:
            return
        self.stream.write(ERASE + printable(self.live_line()))
        self.stream.flush()
        self._drawn = True

    def _roll_window(self) -> None:
        now = self.clock()
        if now - self._window_start < self.window:
            return
        if self._held_back:
            self._summary_line()
        self._window_start = now
        self._window_lines = 0

    def _summary_line(self) -> None:
        eta = self.eta()
        parts = [f"[{self.finished}/{self.total}] {states_text(self.done)}"]
        parts.append(f"{duration(self.elapsed())} elapsed")
        if eta is not None:
            parts.append(f"ETA {duration(eta)}")
        if self.running:
            parts.append(f"{len(self.running)} running")
        self._line(" · ".join(parts))
        self._held_back = 0

    def _start_ticker(self) -> None:
        if self._ticker is not None or self.quiet:
            return
        interval = 1.0 if self.tty else self.window

        def loop() -> None:
            while not self._stop.wait(interval):
                self.tick()

        self._ticker = threading.Thread(target=loop, name="brigade-progress", daemon=True)
        self._ticker.start()
