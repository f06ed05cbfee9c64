"""The scheduler on its own: caps, plan order without head-of-line blocking, retries with
backoff, seats stopped by lasting faults, the stop switch (no processes: jobs are reported
finished by the test)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from brigade.core.identity import CELL_SCHEMA
from brigade.core.plan import Cell
from brigade.core.receipts import Receipt
from brigade.core.specs import RetryPolicy, SeatSpec
from brigade.run.schedule import (
    MAX_RETRY_WAIT_SECONDS,
    Done,
    Job,
    Limits,
    Scheduler,
    Threads,
    retry_delay,
)


def cell(seat: str, n: int) -> Cell:
    spec = SeatSpec(name=seat, cli="exec:true")
    return Cell(
        cell_id=f"{seat}-{n:04d}".ljust(64, "0"),
        coordinate=f"c{n}:{seat}:1",
        case_id=f"c{n}",
        prompt="p",
        seat=spec,
        trial=1,
        graders=(),
        execution_mode="read-only",
        run_key="k",
    )


class Recorder:
    """Starts nothing: remembers what was started, in order."""

    def __init__(self) -> None:
        self.started: list[Job] = []
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> None:
        with self.lock:
            self.started.append(job)

    def submit(self, job: Job, done: object) -> None:
        """(an Executor: the test reports each run's end itself, `finished`)"""
        self(job)

    def names(self) -> list[str]:
        return [f"{j.cell.coordinate}#{j.tries}" for j in self.started]


def terminal(cell_id: str, state: str, **fields: Any) -> Receipt:
    """A terminal receipt as the runner hands a recorded run over (parsed)."""
    parsed = Receipt.of({"schema": CELL_SCHEMA, "cell_id": cell_id, "state": state, **fields})
    assert parsed is not None
    return parsed


def ok(job: Job) -> Receipt:
    return terminal(job.cell.cell_id, "accepted")


def fault(job: Job, kind: str, message: str = "m", after: float | None = None) -> Receipt:
    doc: dict[str, Any] = {"kind": kind, "message": message}
    if after is not None:
        doc["retry_after_seconds"] = after
    return terminal(job.cell.cell_id, "adapter_error", fault=doc)


def scheduler(
    limits: Limits, recorder: Recorder, policies: dict[str, RetryPolicy] | None = None
) -> Scheduler:
    return Scheduler(limits, policies or {}, recorder, rand=lambda: 0.0)


def test_a_saturated_seat_never_idles_the_others() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=3, seats={"a": 1}), recorder)
    for n in range(3):
        sched.add(cell("a", n))
    for n in range(3):
        sched.add(cell("b", n))
    # a is at its cap after one cell; the free slots go to b's cells, in plan order
    assert recorder.names() == ["c0:a:1#1", "c0:b:1#1", "c1:b:1#1"]
    first_a = recorder.started[0]
    sched.finished(first_a, ok(first_a))
    assert recorder.names()[3:] == ["c1:a:1#1"]
    b0 = recorder.started[1]
    sched.finished(b0, ok(b0))
    assert recorder.names()[4:] == ["c2:b:1#1"]


def test_plan_order_among_seats_with_room() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=1), recorder)
    cells = [cell(s, n) for n in range(2) for s in ("a", "b")]
    for c in cells:
        sched.add(c)
    while len(recorder.started) < len(cells):
        job = recorder.started[-1]
        sched.finished(job, ok(job))
    assert recorder.names() == ["c0:a:1#1", "c0:b:1#1", "c1:a:1#1", "c1:b:1#1"]


def test_group_caps_hold_across_seats() -> None:
    recorder = Recorder()
    limits = Limits(
        total=10,
        seats={"a": 3},
        groups={"a": "acct", "b": "acct"},
        group_caps={"acct": 2},
    )
    sched = scheduler(limits, recorder)
    for n in range(3):
        sched.add(cell("a", n))
        sched.add(cell("b", n))
        sched.add(cell("c", n))
    started = recorder.names()
    assert started == ["c0:a:1#1", "c0:b:1#1", "c0:c:1#1", "c1:c:1#1", "c2:c:1#1"]


def test_retry_delay_doubles_with_jitter_and_honours_the_hint() -> None:
    policy = RetryPolicy(max_retries=5, backoff_seconds=2.0)
    assert [retry_delay(policy, n, None, 0.0) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert retry_delay(policy, 1, None, 1.0) == 3.0  # up to half again as jitter
    assert retry_delay(policy, 1, 30.0, 0.5) == 30.0  # the provider's wait wins when longer
    assert retry_delay(policy, 3, 1.0, 0.0) == 8.0
    assert retry_delay(policy, 1, MAX_RETRY_WAIT_SECONDS + 1, 0.0) is None


class Scripted:
    """Runs each job at once in a thread, answering from a script: coordinate -> the fault
    kinds of its attempts in turn (an empty script: accepted)."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.order: list[str] = []
        self.lock = threading.Lock()
        self.sched: Scheduler | None = None

    def submit(self, job: Job, done: Done) -> None:
        """(an Executor) The run ends at once, in a thread of its own."""
        with self.lock:
            self.order.append(f"{job.cell.coordinate}#{job.tries}")
            kinds = self.script.get(job.cell.coordinate) or []
            kind = kinds.pop(0) if kinds else None
        receipt = ok(job) if kind is None else fault(job, kind)
        threading.Thread(target=done, args=(lambda: receipt,)).start()


def drained(
    script: dict[str, list[str]],
    cells: list[Cell],
    policies: dict[str, RetryPolicy],
    limits: Limits | None = None,
) -> tuple[Scripted, Scheduler, list[str | None]]:
    run = Scripted(script)
    sched = Scheduler(limits or Limits(total=1), policies, run, rand=lambda: 0.0)
    run.sched = sched
    for c in cells:
        sched.add(c)
    counted: list[str | None] = []
    sched.drain(lambda state, receipt: counted.append(state))
    return run, sched, counted


def test_transient_faults_are_retried_up_to_the_limit_without_holding_a_slot() -> None:
    cells = [cell("a", 0), cell("a", 1), cell("b", 0)]
    policy = RetryPolicy(max_retries=2, backoff_seconds=0.01)
    run, sched, counted = drained(
        {"c0:a:1": ["rate_limited", "overloaded"], "c1:a:1": ["provider_5xx"] * 3},
        cells,
        {"a": policy, "b": policy},
    )
    # the first cell waits for its retry while the next one runs in the only slot
    assert run.order[:2] == ["c0:a:1#1", "c1:a:1#1"]
    assert sorted(run.order) == sorted(
        ["c0:a:1#1", "c0:a:1#2", "c0:a:1#3", "c1:a:1#1", "c1:a:1#2", "c1:a:1#3", "c0:b:1#1"]
    )
    assert counted.count("accepted") == 2 and counted.count("adapter_error") == 1
    assert sched.lines() == ["2 cells retried after transient faults (4 retries); 1 still failed"]
    assert not sched.any_stopped


@pytest.mark.parametrize("kind", ["auth", "quota", "empty_output", "timeout"])
def test_faults_that_waiting_does_not_cure_are_never_retried(kind: str) -> None:
    policy = RetryPolicy(max_retries=3, backoff_seconds=0.01)
    run, sched, _ = drained({"c0:a:1": [kind]}, [cell("a", 0)], {"a": policy})
    assert run.order == ["c0:a:1#1"]
    assert not sched.retried


def test_timeouts_are_retried_only_when_asked() -> None:
    policy = RetryPolicy(max_retries=1, backoff_seconds=0.01, timeouts=True)
    run, _, _ = drained({"c0:a:1": ["timeout"]}, [cell("a", 0)], {"a": policy})
    assert run.order == ["c0:a:1#1", "c0:a:1#2"]


def test_a_lasting_fault_stops_its_seat_and_the_others_go_on() -> None:
    cells = [cell(s, n) for n in range(4) for s in ("a", "b")]
    run, sched, counted = drained({"c1:a:1": ["auth"]}, cells, {})
    assert run.order == [
        "c0:a:1#1",
        "c0:b:1#1",
        "c1:a:1#1",
        "c1:b:1#1",
        "c2:b:1#1",
        "c3:b:1#1",
    ]
    assert sched.any_stopped
    assert sched.lines() == ["seat a stopped after an auth fault: m; 2 cells not started"]
    assert counted.count("accepted") == 5 and counted.count("adapter_error") == 1


def test_cells_handed_over_after_a_stop_are_not_started() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=4), recorder)
    sched.add(cell("a", 0))
    job = recorder.started[0]
    sched.finished(job, fault(job, "quota", "credit balance too low"))
    sched.add(cell("a", 1))
    sched.add(cell("b", 1))
    assert recorder.names() == ["c0:a:1#1", "c1:b:1#1"]
    assert sched.lines() == [
        "seat a stopped after a quota fault: credit balance too low; 1 cell not started"
    ]


def test_the_stop_switch_keeps_every_queued_cell_back() -> None:
    recorder = Recorder()
    sched = scheduler(Limits(total=1), recorder)
    seen: list[str] = []

    def budget(receipt: Any) -> None:
        seen.append(receipt.cell_id)
        sched.stop("the spending limit of $1.00 was reached")

    sched.on_recorded(budget)
    for n in range(3):
        sched.add(cell("a", n))
        sched.add(cell("b", n))
    job = recorder.started[0]
    sched.finished(job, ok(job))
    assert recorder.names() == ["c0:a:1#1"]
    assert seen == [job.cell.cell_id]
    sched.drain(lambda state, receipt: None)
    assert sched.lines() == [
        "stopped launching: the spending limit of $1.00 was reached; 5 cells not started"
    ]


def test_the_local_executor_records_each_run_in_its_own_thread() -> None:
    """Threads: the run (and its recording) in a thread of its own; the scheduler gets the
    receipt, or the recording's error, through `done` in its draining thread."""
    ran: list[str] = []

    def run(job: Job) -> dict[str, Any]:
        ran.append(threading.current_thread().name)
        if job.cell.coordinate.startswith("c1:"):
            raise OSError(28, "No space left on device")
        return ok(job)

    sched = Scheduler(Limits(total=2), {}, Threads(run), rand=lambda: 0.0)
    for n in range(3):
        sched.add(cell("a", n))
    counted: list[str | None] = []
    with pytest.raises(OSError, match="No space left"):
        sched.drain(lambda state, receipt: counted.append(state))
    assert sorted(counted) == ["accepted", "accepted", "failed"]
    assert sorted(ran) == ["seat c0:a:1", "seat c1:a:1", "seat c2:a:1"]
