"""When seat runs start: caps per seat, per shared limit and overall, retries after a
backoff, seats stopped by a fault that waiting does not cure, and a stop switch.

Cell tasks hand over the cells whose seat must run (`add`) and return at once;
a seat run starts as soon as a slot is free for it: under the overall cap
(`-n`), its seat's `max_concurrency` and its limit group's cap. While one seat
waits at its cap the free slots go to the next cells of other seats, in plan
order, so a saturated seat never idles the run. One `drain` (the `collect`
task) waits until no cell is queued, waiting for a retry, or running.

The scheduler knows nothing of how a seat runs: it hands each job to an
`Executor` (`submit(job, done)`, which returns at once) and the executor hands
back, once the run has ended, the function that records it (`done(record)`),
which the scheduler calls in its draining thread. The local executor
(`Threads`) runs each job in a thread of its own (a seat is a subprocess, so a
thread per seat in flight is all it costs) and records it there; the Dask
executor submits a task to the cluster and records it on the coordinator.

Nothing of this module is imported or built when no cell has to run.
"""

from __future__ import annotations

import functools
import heapq
import os
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from brigade.core.plan import Cell
from brigade.core.receipts import Receipt
from brigade.core.specs import RetryPolicy, SeatSpec
from brigade.core.taxonomy import PERSISTENT_FAULTS, TRANSIENT_FAULTS
from brigade.errors import EnvironmentProblem
from brigade.run import proc

# A provider that asks for a longer wait than this gets no retry in this run:
# its cell keeps its fault (a later run, or --retry-transient, tries again).
MAX_RETRY_WAIT_SECONDS = 900.0
# how long the draining thread sleeps at most between looks at the stop signal
WAKE_SECONDS = 1.0
# the jitter added to each backoff: up to half of it, so retries of many cells spread out
JITTER = 0.5

# records a job's run when the scheduler calls it: the terminal receipt (None: the run was
# interrupted and records nothing; an exception: recording failed, the cell keeps its disk)
Record = Callable[[], "Receipt | None"]
# what an executor calls, once, when a job's run has ended: with the function recording it
Done = Callable[[Record], None]


@dataclass(frozen=True)
class Limits:
    """How many seat runs may be in flight: overall, per seat, per shared limit."""

    total: int | None = None  # None: no overall cap (the dask executor)
    seats: Mapping[str, int] = field(default_factory=dict)  # seat -> max_concurrency
    groups: Mapping[str, str] = field(default_factory=dict)  # seat -> its limit group
    group_caps: Mapping[str, int] = field(default_factory=dict)  # limit group -> cap


@dataclass
class Job:
    """One cell's seat run to start (again, for a retry)."""

    seq: int  # the cell's place in the plan: the order cells start in
    cell: Cell
    tries: int = 1  # attempts this run makes for the cell, this one included
    ready_at: float = 0.0  # a retry starts no earlier (monotonic clock)

    @property
    def seat(self) -> str:
        """The seat's name."""
        return self.cell.seat.name

    def __lt__(self, other: Job) -> bool:
        return (self.seq, self.tries) < (other.seq, other.tries)


@dataclass
class Stop:
    """Why launching stopped (for one seat, or for all) and how many runs it kept back."""

    reason: str | Callable[[], str]  # a function: the text is made when the run ends
    not_started: int = 0
    retries_dropped: int = 0


def fault_kind(receipt: Receipt) -> str | None:
    """The kind of the apparatus fault a receipt records (`timeout` for a timed-out seat)."""
    if receipt.fault is not None and receipt.fault.kind is not None:
        return receipt.fault.kind
    if receipt.failure_reason == "timeout":
        return "timeout"
    return None


def retry_delay(policy: RetryPolicy, retry: int, hint: float | None, rand: float) -> float | None:
    """Seconds to wait before retry number `retry` (1 = the first): the backoff doubled at each
    retry plus jitter, at least the provider's own hint; None when the hint asks for more than
    MAX_RETRY_WAIT_SECONDS."""
    if hint is not None and hint > MAX_RETRY_WAIT_SECONDS:
        return None
    backoff = policy.backoff_seconds * 2 ** (retry - 1) * (1 + JITTER * rand)
    return max(backoff, hint or 0.0)


class Executor(Protocol):
    """Where seat runs happen: the local threads (`Threads`), a Dask cluster."""

    def submit(self, job: Job, done: Done) -> None:
        """Start the job's run and return at once; call `done(record)` once when it has
        ended (from any thread). An exception here: the run could not even be prepared."""


class Threads:
    """The local executor: each job's run in a thread of its own, recorded there (`run(job)`
    runs the seat and writes its receipt; the seat's process must be waited for on the
    thread that started it)."""

    def __init__(self, run: Callable[[Job], Receipt]) -> None:
        self._run = run

    def submit(self, job: Job, done: Done) -> None:
        """Run the job in a new thread; `done` gets its receipt (or its error)."""
        threading.Thread(
            target=self._work, args=(job, done), name=f"seat {job.cell.coordinate}", daemon=True
        ).start()

    def _work(self, job: Job, done: Done) -> None:
        try:
            receipt = self._run(job)
        except Exception as exc:  # interrupted, or the storage failed: the cell keeps its disk
            error = exc

            def failed() -> Receipt | None:
                raise error

            done(failed)
        else:
            done(lambda: receipt)


class Scheduler:
    """Starts seat runs under the caps; retries transient faults; stops seats on lasting ones."""

    def __init__(
        self,
        limits: Limits,
        policies: Mapping[str, RetryPolicy],
        executor: Executor,
        *,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.policies = dict(policies)
        self._executor = executor
        self._rand = rand
        self._clock = clock
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._seq = 0
        self._queued: dict[str, list[Job]] = {}  # seat -> heap of jobs ready to start
        self._waiting: list[tuple[float, Job]] = []  # retries: (ready_at, job) heap
        self._running: Counter[str] = Counter()  # seat -> runs in flight
        self._group_running: Counter[str] = Counter()
        self._in_flight = 0
        self._events: deque[tuple[Job, Callable[[], Receipt | None]]] = deque()
        # final states (and receipts) not yet shown on the progress line
        self._counted: list[tuple[str | None, Receipt | None]] = []
        self._errors: list[BaseException] = []
        self._recorded: list[Callable[[Receipt], None]] = []
        self._starting: list[Callable[[Cell], None]] = []
        self._gate: Callable[[Job], bool | None] | None = None
        self._closed: Callable[[], bool] | None = None
        self._ended: Callable[[Job], None] | None = None
        self.stopped: dict[str, Stop] = {}  # seat -> why it stopped
        self.stopped_all: Stop | None = None
        self.retried: set[str] = set()  # cell ids retried at least once
        self.retries = 0
        self.still_failed: set[str] = set()  # retried cells whose last attempt failed too

    # -- hand-over ---------------------------------------------------------------

    def add(self, cell: Cell) -> None:
        """Queue a cell whose seat must run; it starts as soon as a slot is free for it."""
        if os.getpid() != self._pid:
            raise EnvironmentProblem(
                "brigade cannot run under doit -P process (its seat runs are scheduled in the "
                "main process); drop -P process: -n N alone runs N seats at once"
            )
        with self._cond:
            job = Job(self._seq, cell)
            self._seq += 1
            if not self._drop_if_stopped(job):
                heapq.heappush(self._queued.setdefault(job.seat, []), job)
            starting = self._pick()
        self._launch(starting)

    def on_start(self, callback: Callable[[Cell], None]) -> None:
        """Call `callback` with the cell of every seat run about to start (a retry too), in
        the thread that starts it."""
        self._starting.append(callback)

    def on_recorded(self, callback: Callable[[Receipt], None]) -> None:
        """Call `callback` with every terminal receipt a seat run of this run writes (in the
        thread that recorded it; it may call `stop`)."""
        self._recorded.append(callback)

    def admit(
        self,
        gate: Callable[[Job], bool | None],
        closed: Callable[[], bool],
        ended: Callable[[Job], None] | None = None,
    ) -> None:
        """Ask `gate` before each job starts (a retry too): a job it refuses (False) is not
        started and its cell keeps what is on disk (the gate counts what it refused and says
        so); one it defers (None) stays queued, and its seat starts nothing more until a run
        ends. Once `closed()` says it refuses everything, a retry is offered to it as soon as
        it is due rather than after its backoff. `ended` hears of every job whose run ended,
        recorded or not. All are called under the scheduler's lock; `gate` may call
        `drop_all`."""
        self._gate = gate
        self._closed = closed
        self._ended = ended

    def drop_all(self, each: Callable[[Job], object]) -> None:
        """Drop every job queued or waiting for its retry, calling `each` with each (whoever
        keeps them back counts them): a spent budget keeps back retries at once, not when
        their backoff ends."""
        with self._cond:
            dropped = [job for heap in self._queued.values() for job in heap]
            dropped += [job for _, job in self._waiting]
            self._queued.clear()
            self._waiting = []
            for job in dropped:
                each(job)
            self._cond.notify_all()

    def stop(self, reason: str | Callable[[], str], seat: str | None = None) -> None:
        """Launch nothing more (of `seat`, or of any seat): cells not started stay as they are
        on disk (unfinished, or their last result) and run again on the next run. Runs in
        flight finish and are recorded. `reason` may be a function that gives the text when
        the final lines are written (a budget says what was spent by then). A stop of every
        seat that kept nothing back (every cell had started) says nothing and fails nothing."""
        with self._cond:
            self._stop(reason, seat)
            self._cond.notify_all()

    # -- reports from whoever runs a job -------------------------------------------

    def finished(
        self, job: Job, receipt: Receipt | None, error: BaseException | None = None
    ) -> None:
        """A job's run ended: its terminal receipt (None with `error` when recording failed or
        the run was interrupted: the cell keeps what is on disk)."""
        if receipt is not None:
            for callback in self._recorded:
                callback(receipt)
        with self._cond:
            self._release(job)
            if self._ended is not None:
                self._ended(job)
            if error is not None:
                self._errors.append(error)
                self._counted.append(("failed", None))
            elif receipt is not None:
                self._settle(job, receipt)
            starting = self._pick()
            self._cond.notify_all()
        self._launch(starting)

    def post(self, job: Job, record: Record) -> None:
        """A job's run ended: `record` records it, called in the draining thread."""
        with self._cond:
            self._events.append((job, record))
            self._cond.notify_all()

    # -- the collect task ----------------------------------------------------------

    def drain(self, count: Callable[[str | None, Receipt | None], None]) -> None:
        """Wait until every queued cell has run (or was stopped), recording what was posted and
        counting each cell once it is final (its state and receipt; None when recording
        failed); the first error is raised at the end."""
        while True:
            with self._cond:
                self._promote()
                starting = self._pick()
                counted, self._counted = self._counted, []
                event = self._events.popleft() if self._events else None
                idle = (
                    not starting
                    and event is None
                    and not counted
                    and not self._in_flight
                    and not self._waiting
                    and not any(self._queued.values())
                )
                if not starting and event is None and not counted and not idle:
                    self._cond.wait(self._timeout())
            for state, receipt in counted:
                count(state, receipt)
            self._launch(starting)
            if event is not None:
                job, record = event
                try:
                    receipt = record()
                except Exception as exc:
                    self.finished(job, None, exc)
                else:
                    self.finished(job, receipt)
            if proc.stopping.is_set():
                raise proc.Interrupted("stopped while seats were running")
            if idle:
                break
        if self._errors:
            raise self._errors[0]

    # -- what the final lines say ----------------------------------------------------

    def lines(self) -> list[str]:
        """One line per stopped seat (and for a stop of everything), one for the retries."""
        lines = []
        for seat, stop in sorted(self.stopped.items()):
            lines.append(f"seat {seat} stopped after {_reason(stop)}; {_kept(stop)}")
        if self._stopped_all_kept_back:
            assert self.stopped_all is not None
            stop = self.stopped_all
            lines.append(f"stopped launching: {_reason(stop)}; {_kept(stop)}")
        if self.retried:
            cells = len(self.retried)
            failed = len(self.still_failed)
            lines.append(
                f"{cells} cell{'s' if cells != 1 else ''} retried after transient faults "
                f"({self.retries} retr{'ies' if self.retries != 1 else 'y'}); "
                f"{failed} still failed"
            )
        return lines

    @property
    def busy(self) -> bool:
        """Whether a cell is queued, waiting for a retry or running, or a run is unrecorded."""
        with self._cond:
            return bool(
                self._in_flight
                or self._waiting
                or self._events
                or self._counted
                or any(self._queued.values())
            )

    @property
    def any_stopped(self) -> bool:
        """Whether a seat stopped, or a stop of everything kept a run back: the run then
        exits 3."""
        return bool(self.stopped) or self._stopped_all_kept_back

    @property
    def _stopped_all_kept_back(self) -> bool:
        # a stop of everything that came after the last cell had started changed nothing
        stop = self.stopped_all
        return stop is not None and bool(stop.not_started or stop.retries_dropped)

    # -- inside the lock --------------------------------------------------------------

    def _drop_if_stopped(self, job: Job) -> bool:
        stop = self.stopped_all or self.stopped.get(job.seat)
        if stop is None:
            return False
        if job.tries > 1:
            stop.retries_dropped += 1
        else:
            stop.not_started += 1
        return True

    def _stop(self, reason: str | Callable[[], str], seat: str | None) -> None:
        if seat is None:
            if self.stopped_all is None:
                self.stopped_all = Stop(reason)
        elif seat not in self.stopped and self.stopped_all is None:
            self.stopped[seat] = Stop(reason)
        else:
            return
        kept: list[Job] = []
        for name in [seat] if seat is not None else list(self._queued):
            kept.extend(self._queued.pop(name, []))
        dropped = [entry for entry in self._waiting if seat is None or entry[1].seat == seat]
        if dropped:
            gone = {id(job) for _, job in dropped}
            self._waiting = [entry for entry in self._waiting if id(entry[1]) not in gone]
            heapq.heapify(self._waiting)
            kept.extend(job for _, job in dropped)
        for job in kept:
            self._drop_if_stopped(job)

    def _settle(self, job: Job, receipt: Receipt) -> None:
        """Retry a transient fault, stop the seat on a lasting one, or count the cell final."""
        kind = fault_kind(receipt)
        cell_id = job.cell.cell_id
        if kind in PERSISTENT_FAULTS:
            message = receipt.fault.message if receipt.fault is not None else None
            self._stop(f"{_article(kind)} {kind} fault: {message}", job.seat)
        retry = self._retry(job, kind, receipt)
        if retry is not None and self._closed is not None and self._closed():
            assert self._gate is not None
            self._gate(retry)  # refused now, not when its backoff ends (the gate counts it)
            retry = None
        if retry is not None and not self._drop_if_stopped(retry):
            self.retried.add(cell_id)
            self.retries += 1
            heapq.heappush(self._waiting, (retry.ready_at, retry))
            return
        if cell_id in self.retried and kind is not None:
            self.still_failed.add(cell_id)
        self._counted.append((receipt.state, receipt))

    def _retry(self, job: Job, kind: str | None, receipt: Receipt) -> Job | None:
        policy = self.policies.get(job.seat)
        if policy is None or kind is None or job.tries > policy.max_retries:
            return None
        if kind not in TRANSIENT_FAULTS and not (kind == "timeout" and policy.timeouts):
            return None
        hint = receipt.fault.retry_after_seconds if receipt.fault is not None else None
        wait = float(hint) if hint is not None else None
        delay = retry_delay(policy, job.tries, wait, self._rand())
        if delay is None:
            return None
        return Job(job.seq, job.cell, job.tries + 1, self._clock() + delay)

    def _promote(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, job = heapq.heappop(self._waiting)
            if not self._drop_if_stopped(job):
                heapq.heappush(self._queued.setdefault(job.seat, []), job)

    def _timeout(self) -> float:
        # woken by every report; the wait is bounded so a stop signal is seen soon
        if not self._waiting:
            return WAKE_SECONDS
        return min(WAKE_SECONDS, max(0.0, self._waiting[0][0] - self._clock()))

    def _room(self, seat: str) -> bool:
        cap = self.limits.seats.get(seat)
        if cap is not None and self._running[seat] >= cap:
            return False
        group = self.limits.groups.get(seat)
        if group is not None and self._group_running[group] >= self.limits.group_caps[group]:
            return False
        return True

    def _pick(self) -> list[Job]:
        """Take the jobs that may start now (plan order among seats with room), reserving
        their slots."""
        if proc.stopping.is_set():
            return []
        chosen: list[Job] = []
        deferred: set[str] = set()  # seats whose next job the gate said to hold for now
        total = self.limits.total
        while total is None or self._in_flight < total:
            best: Job | None = None
            for seat, heap in self._queued.items():
                if heap and (best is None or heap[0] < best) and seat not in deferred:
                    if self._room(seat):
                        best = heap[0]
            if best is None:
                break
            heapq.heappop(self._queued[best.seat])
            if self._gate is not None:
                verdict = self._gate(best)
                if verdict is None:  # not yet: it waits for a run to end
                    heapq.heappush(self._queued[best.seat], best)
                    deferred.add(best.seat)
                    continue
                if not verdict:
                    continue  # kept back (the gate counted it)
            self._reserve(best)
            chosen.append(best)
        return chosen

    def _reserve(self, job: Job) -> None:
        self._in_flight += 1
        self._running[job.seat] += 1
        group = self.limits.groups.get(job.seat)
        if group is not None:
            self._group_running[group] += 1

    def _release(self, job: Job) -> None:
        self._in_flight -= 1
        self._running[job.seat] -= 1
        group = self.limits.groups.get(job.seat)
        if group is not None:
            self._group_running[group] -= 1

    # -- outside the lock --------------------------------------------------------------

    def _launch(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            try:
                for callback in self._starting:
                    callback(job.cell)
                self._executor.submit(job, functools.partial(self.post, job))
            except Exception as exc:  # a run that could not even be prepared (a full disk)
                self.finished(job, None, exc)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _reason(stop: Stop) -> str:
    return stop.reason() if callable(stop.reason) else stop.reason


def _kept(stop: Stop) -> str:
    text = f"{stop.not_started} cell{'s' if stop.not_started != 1 else ''} not started"
    if stop.retries_dropped:
        many = stop.retries_dropped != 1
        text += f", {stop.retries_dropped} retr{'ies' if many else 'y'} not made"
    return text


def limits_for(
    seats: Iterable[SeatSpec], group_caps: Mapping[str, int], total: int | None
) -> Limits:
    """The caps of a run: `total` overall (-n), each seat's `max_concurrency` and the caps of
    the limits its seats name."""
    seat_caps: dict[str, int] = {}
    groups: dict[str, str] = {}
    for seat in seats:
        if seat.max_concurrency is not None:
            seat_caps[seat.name] = seat.max_concurrency
        if seat.limit is not None:
            groups[seat.name] = seat.limit
    used = {group: group_caps[group] for group in set(groups.values())}
    return Limits(total=total, seats=seat_caps, groups=groups, group_caps=used)
