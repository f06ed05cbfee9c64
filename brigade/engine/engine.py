"""The run engine: one run of a session, the one way every front door runs it.

`Engine(session, choice)` runs a frozen session: what the run is about is its
`scope` (engine/selection's `Scope`, made again by an adaptive round), what it
accumulates its `tally` (the cells handed to the scheduler, what was refused
or broke, the signal that stopped it, the exit code); besides those it holds
the session as adaptive rounds grow its plan, the scheduler and the progress.
A run is: the lock (`locked`, a context manager; `start` takes it when no front
door did) → the run starts (`start`: confinement, the cluster, signal handlers,
progress) → plan.json → each cell brought up to date (`bring`: seat runs handed
to the scheduler, which runs them through its `Executor`: threads here or the
Dask cluster) and re-graded (`regrade`) → the scheduler drained (`drain`, with
adaptive rounds) → `finish` (summary.json, export, report) → `end`: the final
line and the exit code (0/1/3; 2 refused; 128+N on a signal).

`run()` does all of it in this process (`brigade run`). The doit tasks and
reporter (front/tasks, front/reporter) call the same steps from doit's tasks
and hand doit's events over (`task_done`, `task_found`, `task_failed`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import signal
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from brigade.core.plan import Cell, Plan
from brigade.core.selection import filter_cells
from brigade.core.taxonomy import (
    COUNT_KEYS,
    EXIT_MEASUREMENT,
    EXIT_UNUSABLE,
    exit_bucket,
    outcome_name,
)
from brigade.core.terminal import printable
from brigade.engine.progress import Progress, duration
from brigade.engine.selection import (
    CellTask,
    Choice,
    Named,
    Selection,
    choose,
    scope_of,
    select,
)
from brigade.engine.session import (
    Session,
    build_scheduler,
    next_round,
    open_session,
)
from brigade.errors import BrigadeError, EnvironmentProblem
from brigade.outdir import forgotten, lock, store
from brigade.outdir.planfile import write_plan
from brigade.outdir.results import current_views, fault_kinds, kinds_text, summary_headline
from brigade.report.build import HTML_FILE, REPORT_DIR
from brigade.report.finish import finish_run, leak_lines
from brigade.run import proc

if TYPE_CHECKING:
    from brigade.core.receipts import Receipt
    from brigade.engine.options import Options
    from brigade.run.cluster import DaskExecutor
    from brigade.run.schedule import Scheduler

# cells named on the command line get an outcome line each, up to this many
NAMED_SHOWN = 10
# a closed terminal (SIGHUP) stops the run like Ctrl-C or SIGTERM
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# how long the main thread waits at most between looks at a signal, while steps run
WAKE_SECONDS = 1.0
# how Python's traceback starts (also in what doit says of an action that raised)
TRACEBACK = "Traceback (most recent call last):"


@contextlib.contextmanager
def locked(out: Path, *, wait: bool) -> Iterator[None]:
    """Hold the output directory's lock (waiting for it with `wait`); a refusal inside
    (BrigadeError), or a Ctrl-C before the run's own handlers are in, lets it go with what
    taking it made (only what nothing was written into since), anything else releases it."""
    lock.acquire(out, wait=wait)
    try:
        yield
    except (BrigadeError, KeyboardInterrupt):
        lock.discard_refused()
        raise
    finally:
        lock.release(out)


def run(options: Options) -> int:
    """Bring a battery up to date in this process (`brigade run`): its exit code."""
    from brigade.engine.session import checked_output, load_inputs

    inputs = load_inputs(options.manifest, options.roster, options.workspace)
    # hold the lock before scanning, so the scan sees a quiet output directory
    with locked(checked_output(options, inputs[0]), wait=options.wait):
        return Engine(open_session(options, inputs, finishing=True)).run()


class Engine:
    """One run of a session: what it accumulates, and each step of bringing it up to date."""

    def __init__(
        self,
        session: Session,
        choice: Choice | None = None,
        *,
        listing: bool = False,
        check: bool = True,
        stream: IO[str] | None = None,
        here: Path | None = None,
    ) -> None:
        """`listing`: a command that runs nothing (every cell is selected one by one, no
        scheduler); `check`: refuse now a seat with a cell to run whose program is missing
        (a front door that learns its task names later checks then: `check_programs`);
        `here`: the folder the user ran the command in, which the paths the run names are
        shown from (default: the current folder; plain doit runs in the dodo's folder)."""
        self.session = session  # replaced by each adaptive round (the plan grows)
        self.loaded = session  # what the run was loaded with (its scan, its plan)
        self.choice = choice if choice is not None else choose(session)
        self.listing = listing
        self.stream = stream or sys.stderr
        self.here = here
        self.chosen = self.selection(self.choice, listing)
        self.cluster = _cluster(session)
        self.scope = scope_of(session, self.choice, self.chosen, listing)
        self.scheduler: Scheduler | None = None
        if not listing and any(task.action in ("run", "reuse") for task in self.chosen.own):
            if check:
                self.check_programs()
            self.scheduler = build_scheduler(session, self.cluster)
        self.tally = Tally()  # what the run accumulates, written by this engine alone
        self.on_hand: Callable[[Cell], None] | None = None  # told of every cell handed over
        self.progress: Progress | None = None
        self._locked = False
        self._settled = False
        self._signals: dict[int, Any] = {}
        self._built: dict[str, threading.Lock] = {}  # cases whose workspace this run saw to
        self._setups: dict[str, bool] = {}  # case -> its setup step ended well
        self._warned: set[str] = set()  # seats whose confinement warnings were said
        self._sources: dict[str, str] | None = None  # reusable seat runs, for rounds

    # -- what the run is about ---------------------------------------------------------

    def selection(self, choice: Choice, listing: bool) -> Selection:
        """Which cells of a choice get a step of their own (`listing`: every cell does)."""
        session = self.loaded
        return select(
            session.planned.plan,
            session.scan.recorded,
            session.scan.actions,
            always=choice.always,
            share=not listing and not choice.always,
            named=frozenset(cell.cell_id for cell in choice.named),
            subset=choice.subset,
            forced=choice.forced,
            plan_is_current=session.planned.written,
            receipts_changed=session.scan.changed,
        )

    def rechoose(self, named: Named) -> None:
        """The task names of the run are known now (plain doit): choose and select again."""
        self.choice = choose(self.loaded, named, always=self.choice.always)
        self.chosen = self.selection(self.choice, self.listing)
        self.scope = scope_of(self.loaded, self.choice, self.chosen, self.listing)

    @property
    def plan(self) -> Plan:
        """The plan as the run has it now (adaptive rounds add cells)."""
        return self.session.planned.plan

    @property
    def out(self) -> Path:
        """The output directory."""
        return self.loaded.inputs.out

    def notes(self) -> list[str]:
        """What the run says before it starts: the graders' problems, the stale cells."""
        session = self.loaded
        notes = list(session.inputs.warnings)
        planned = session.planned
        stale = len(planned.plan.stale_cells)
        if stale and planned.resumed and planned.stale_changed:  # said once, when it changes
            notes.append(
                f"{stale} stale cell{'s' if stale != 1 else ''} from an earlier plan "
                "(kept on disk, not counted; listed in plan.json stale_cells; brigade prune "
                "removes them)"
            )
        return notes

    def check_programs(self) -> None:
        """Refuse the run (exit 2, one line) when a seat with a cell to run has no program
        here; seats whose cells are all up to date are not asked. (On a Dask cluster the
        workers' resources say which CLIs they have: checked when it connects.)"""
        if self.cluster is not None:
            return
        seats = {t.cell.seat.name: t.cell.seat for t in self.chosen.own if t.action == "run"}
        if not seats:
            return
        from brigade.run.doctor import missing_programs

        missing = missing_programs(seats.values(), self.loaded.inputs.workspace)
        if missing:
            listed = "; ".join(f"seat {seat} needs {program!r}" for seat, program in missing)
            raise EnvironmentProblem(
                f"{listed}, which cannot be run here (not found on PATH, or not executable): "
                "install it or fix the seat's cli in the roster (brigade doctor checks every seat)"
            )

    def confinement_check(self) -> None:
        """Before anything is written: a required sandbox that cannot run refuses the run
        (EnvironmentProblem); nothing is probed when no seat will launch. The warnings of
        seats left unconfined come with each seat's first launch (`launch_notes`)."""
        if not self.scope.judging and not self.scope.launching:
            return
        from brigade.run.doctor import refuse_required

        override = self.loaded.inputs.options.sandbox
        # a judge seat runs here, wherever the seats run, when its cell is graded
        refuse_required(self.scope.judging.values(), override=override, what="judge seat")
        if self.scope.launching:
            self._confinement(list(self.scope.launching.values()))

    def _confinement(self, seats: list[Any]) -> list[str]:
        from brigade.run.doctor import confinement_notes

        session = self.loaded
        return confinement_notes(
            seats,
            session.inputs.workspace,
            read_only=session.inputs.manifest.execution_mode == "read-only",
            override=session.inputs.options.sandbox,
            local=session.inputs.executor.kind == "local",
        )

    def launch_notes(self, cell: Cell) -> list[str]:
        """What to say when a cell's seat is launched: once per seat, how its run is not
        confined as asked (read-only, network: false)."""
        if cell.seat.name in self._warned:
            return []
        self._warned.add(cell.seat.name)
        return self._confinement([cell.seat])

    # -- the run starts --------------------------------------------------------------------

    def start(self, prepare: Callable[[], None] | None = None) -> bool:
        """The run starts, before anything is written: the lock (a no-op when held), what
        the front door learns only now (`prepare`: plain doit's task names), the sandbox
        and the cluster checked, signal handlers, the first progress lines. False: refused
        (the reasons are in `refused`; `end` says them)."""
        self.tally.started = True
        options = self.loaded.inputs.options
        tty = self.stream.isatty()
        self.progress = Progress(
            self.stream,
            total=self.scope.total,
            tty=tty,
            quiet=options.quiet,
            rate=options.progress_rate,
        )
        # a stop is heard from here on: connecting to a cluster may take its whole timeout
        for signum in STOP_SIGNALS:
            self._signals[signum] = signal.signal(signum, self._on_signal)
        try:
            lock.acquire(self.out, wait=options.wait)
            self._locked = True
            if prepare is not None:
                prepare()
                self.progress.total = self.scope.total  # (the cells were chosen again)
            self.confinement_check()
            if self.cluster is not None:
                self.cluster.start()
        except BrigadeError as exc:
            self.tally.refused.append(str(exc))
            self.tally.refused_at_start = True
            return False
        except KeyboardInterrupt:
            # stopped before the run started: it wrote nothing, and leaves nothing
            if self.tally.interrupted is None:
                self.tally.interrupted = signal.SIGINT
            self.tally.refused_at_start = True
            return False
        if self.scheduler is not None:
            self.scheduler.on_start(self._started)
        for note in self.notes():
            self._say(f"brigade: {note}\n")
        self.progress.found_done(self.scope.collected)
        self.progress.begin(
            done=self.scope.done_at_start,
            to_run=self.scope.total - self.scope.done_at_start,
            resumed=self.loaded.planned.resumed,
        )
        return True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.tally.interrupted = signum
        proc.terminate_all()
        raise KeyboardInterrupt

    def _started(self, cell: Cell) -> None:
        """A seat run starts: what to say of its seat first (once), then it is running."""
        if self.progress is None:
            return
        for note in self.launch_notes(cell):
            self.progress.note(note)
        self.progress.start(cell.coordinate)

    # -- the steps -----------------------------------------------------------------------

    def plan_current(self) -> bool:
        """Whether plan.json and its index already hold this plan (nothing to write)."""
        return self.loaded.planned.written and not self.loaded.inputs.options.always

    def write_plan(self) -> None:
        """Write plan.json and its index for the current manifest."""
        session = self.loaded
        write_plan(
            session.inputs.out, session.planned.plan, session.planned.key, session.planned.inputs
        )

    def setup_current(self, cell: Cell) -> bool:
        """Whether a case's workspace is built with its key (a failed setup too, unless
        --retry-transient asks for it again)."""
        from brigade.run import workspaces

        world = cell.world()
        assert world is not None
        built = workspaces.state(self.out, world)
        return built is not None and (built.ok or not self.loaded.inputs.options.retry_transient)

    def build_setup(self, cell: Cell) -> None:
        """Build the workspace of a cell's case (its files, its setup), saying what it did."""
        from brigade.run.runner import build_workspace

        built, now = build_workspace(self.loaded.ctx, cell)
        if now and not built.ok:
            self._say(f"brigade: setup of {cell.case_id} failed: {built.detail}\n")

    def bring(self, task: CellTask, hand: bool = True) -> str:
        """Bring a cell up to date: a seat that must run is handed to the scheduler (`hand`
        and a scheduler: runs start as slots free), a reused run copied and graded here."""
        from brigade.run.runner import bring_up_to_date

        handing = self._hand if hand and self.scheduler is not None else None
        cell = task.cell
        reuse = self.loaded.scan.reuse.get(cell.cell_id)
        return bring_up_to_date(self.loaded.ctx, cell, reuse, task.forced, handing)

    def _hand(self, cell: Cell) -> None:
        if self.on_hand is not None:
            self.on_hand(cell)
        self.tally.handed.add(cell.cell_id)
        assert self.scheduler is not None
        self.scheduler.add(cell)

    def regrade(self, cell: Cell) -> str:
        """Verify a graded cell's stored output; re-grade a grader_error cell from it."""
        from brigade.run.runner import regrade_if_needed

        return regrade_if_needed(self.loaded.ctx, cell)

    def drain(self) -> None:
        """Wait for the seat runs handed over, recording and counting each (then let go of
        the Dask cluster); with adaptive trials, hand over each further round the rules ask
        for once a round is recorded, until every case has stopped."""
        assert self.scheduler is not None
        try:
            self.scheduler.drain(self._count)
            while self._next_round():
                self.scheduler.drain(self._count)
        finally:
            if self.cluster is not None:
                self.cluster.close()

    def _next_round(self) -> bool:
        """The next round of adaptive trials, handed over: True when it added cells to run.
        A run of chosen cells (rerun, task names) gets no further round; a subset by case,
        seat or trial gets the new cells it chooses."""
        from brigade.outdir.scan import reuse_index
        from brigade.run.runner import bring_up_to_date

        choice, options = self.choice, self.loaded.inputs.options
        if self.session.counts is None or choice.named or choice.by_names or options.rerun:
            return False
        grown, added = next_round(self.session)
        self.session = grown
        if options.cells:
            added = filter_cells(added, options.cells)
        if not added:
            return False
        self.scope = self.scope.grown(added)
        if self.progress is not None:
            self.progress.total += len(added)
        if self._sources is None:  # seat runs of cells only their graders tell apart
            current = {cell.cell_id for cell in grown.planned.plan.cells}
            self._sources = reuse_index(self.out, current, options.retry_transient)
        for cell in added:
            bring_up_to_date(
                self.loaded.ctx, cell, self._sources.get(cell.run_key), False, self._hand
            )
        return True

    def finish(self) -> str | None:
        """Finish the run: summary.json, the export, the report and their leak checks, the
        caches kept, forgotten cells that ran settled. The leak check's failure (an error
        of brigade's: exit 3), or None."""
        session, ahead = self.session, self.loaded.ahead
        try:
            finished = finish_run(
                session.inputs.out,
                session.planned.plan,
                session.inputs.workspace,
                known=self.chosen.unchanged,
                key=session.planned.key or None,
                untouched=self.chosen.untouched,
                # what a helper read of the export at load time holds while nothing ran
                ahead=ahead.export_answers if ahead and self.chosen.untouched else None,
            )
        finally:
            if ahead is not None:
                ahead.close()
        if finished.leaks:
            return f"export leak check failed: {leak_lines(finished.leaks)}"
        self.loaded.scan.save()
        if self.loaded.scan.forgotten_file:  # forgotten cells that ran are done
            forgotten.settle(session.inputs.out)
        self.tally.summary_ran = True
        return None

    # -- what the run hears of its cells ----------------------------------------------------

    def task_done(self, cell_id: str) -> None:
        """A cell's step ended: counted from its receipt (a cell handed over is counted once
        its seat run is recorded)."""
        if cell_id in self.tally.handed:
            return
        receipt = store.read_receipt(self.out, cell_id)
        state = receipt.state if receipt is not None else None
        self._count(state, receipt, self.scope.own[cell_id].cell.coordinate)

    def task_found(self, cell_id: str) -> None:
        """A cell's step had nothing to do: counted as it was recorded at load time."""
        if self.progress is not None:
            task = self.scope.own[cell_id]
            self.progress.finish(task.state, task.cell.coordinate, None, ran=False)

    def task_failed(self, cell_id: str) -> None:
        """A cell's step failed (refused or broken)."""
        self._count("failed", None, self.scope.own[cell_id].cell.coordinate)

    def _count(
        self,
        state: str | None,
        receipt: Receipt | None = None,
        coordinate: str | None = None,
    ) -> None:
        """A cell is final (its receipt as recorded, when there is one)."""
        if self.progress is None:
            return
        seconds = receipt.duration_seconds if receipt is not None else None
        took = float(seconds) if seconds is not None else None
        coordinate = coordinate or (receipt.coordinate if receipt is not None else None)
        self.progress.finish(state, coordinate, took)

    # -- the whole run, in this process ---------------------------------------------------

    def run(self) -> int:
        """Every step of the run in this process (`brigade run`): its exit code."""
        if self.start():
            try:
                self._steps()
            except KeyboardInterrupt:
                if self.tally.interrupted is None:
                    raise
        return self.end()

    def _steps(self) -> None:
        """plan.json, each cell, each regrade, the seat runs, the finish; the first step
        refused or broken stops the run (the seat runs already handed over still end)."""
        if not self.plan_current() and not self._step("plan", self.write_plan):
            return
        tasks = self.chosen.own
        regrades = self.chosen.regrade
        jobs = self.loaded.inputs.options.jobs
        if jobs > 1:
            # seats to run are handed over here, in plan order (the order the scheduler
            # starts them in); copying reused runs and grading go `jobs` at once
            handed = [task for task in tasks if task.action == "run"]
            rest = [task for task in tasks if task.action != "run"]
            ok = all(self._cell_step(task) for task in handed) and self._in_threads(
                jobs, rest, regrades
            )
        else:
            ok = all(self._cell_step(task) for task in tasks) and all(
                self._regrade_step(cell) for cell in regrades
            )
        if not ok:
            return
        if self.scheduler is not None and not self._step("collect", self.drain):
            return
        self._step("summary", self._finish_step)

    def _in_threads(self, jobs: int, tasks: list[CellTask], regrades: list[Cell]) -> bool:
        """The cells' and regrades' steps, `jobs` at once, taken in plan order (they copy a
        reused run, grade); the first failure stops the rest."""
        steps: list[Callable[[], bool]] = [functools.partial(self._cell_step, t) for t in tasks]
        steps += [functools.partial(self._regrade_step, cell) for cell in regrades]
        queue = iter(steps)
        taken = threading.Lock()
        failed = threading.Event()

        def work() -> None:
            while not failed.is_set():
                with taken:
                    step = next(queue, None)
                if step is None:
                    return
                if not step():
                    failed.set()

        if len(steps) < 2:
            return all(step() for step in steps)
        workers = [
            threading.Thread(target=work, name=f"brigade-step-{n}", daemon=True)
            for n in range(min(jobs, len(steps)))
        ]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                while worker.is_alive():  # (a signal reaches the main thread while it waits)
                    worker.join(WAKE_SECONDS)
        except BaseException:
            failed.set()  # interrupted: no worker takes another step
            raise
        return not failed.is_set()

    def _setup_for(self, cell: Cell) -> bool:
        """See to the workspace of a cell's case once (its setup step; the cells of other
        cases go on meanwhile). False: its setup step was refused or broke."""
        if cell.workspace is None:
            return True
        case_id = cell.case_id
        with _SETUP_LOCK:
            case_lock = self._built.setdefault(case_id, threading.Lock())
        with case_lock:
            if case_id not in self._setups:
                ready = (
                    case_id not in self.scope.needed
                    or self.setup_current(cell)
                    or self._step(f"setup:{case_id}", self.build_setup, cell)
                )
                self._setups[case_id] = ready
            return self._setups[case_id]

    def _cell_step(self, task: CellTask) -> bool:
        cell = task.cell
        if not self._setup_for(cell):
            return False
        if task.action in ("skip", "regrade"):
            self.task_found(cell.cell_id)
            return True
        if not self._step(f"cell:{cell.coordinate}", self.bring, task):
            self.task_failed(cell.cell_id)
            return False
        self.task_done(cell.cell_id)
        return True

    def _regrade_step(self, cell: Cell) -> bool:
        return self._setup_for(cell) and self._step(f"grade:{cell.coordinate}", self.regrade, cell)

    def _finish_step(self) -> None:
        problem = self.finish()
        if problem is not None:
            raise _Broken(problem)

    def _step(self, what: str, function: Callable[..., Any], *args: Any) -> bool:
        """Run a step; a refusal (bad input, tampering, unwritable storage) or a failure of
        brigade's own is kept for the end. False: the run stops here."""
        try:
            function(*args)
        except BrigadeError as exc:
            self.refuse(str(exc))
        except _Broken as exc:
            self.fail(f"task {what} failed: {exc}")
        except OSError as exc:
            problem = store.storage_problem(exc)
            if problem is None:
                self.broke(what, traceback.format_exc())
            else:
                self.refuse(problem)
        except Exception:
            self.broke(what, traceback.format_exc())
        else:
            return True
        return False

    def refuse(self, message: str) -> None:
        """The run is refused (exit 2): bad input, tampering, storage (ignored once
        interrupted: what a stop breaks is not a refusal)."""
        if self.tally.interrupted is None:
            self.tally.refused.append(message)

    def fail(self, message: str, trace: str | None = None) -> None:
        """brigade itself broke (exit 3): `message` one line, `trace` its traceback."""
        if self.tally.interrupted is None:
            self.tally.errors.append(message)
            if trace is not None:
                self.tally.traces.append(trace)

    def broke(self, what: str, report: str) -> None:
        """The step `what` broke with `report` (a traceback, or what doit says of the
        failure): kept as the traceback, for a bug report, and one line naming the step
        and the error (the traceback's last line), said last."""
        start = report.find(TRACEBACK)
        if start < 0:
            self.fail(f"task {what} failed: {report.strip() or 'no detail'}")
            return
        trace = report[start:].rstrip()
        self.fail(f"task {what} failed: {trace.splitlines()[-1].strip()}", trace)

    # -- the run ends ----------------------------------------------------------------------

    def end(self, problems: tuple[str, ...] = ()) -> int:
        """The run ends: seat runs no step waited for are waited for, the final lines said,
        the lock let go (with what taking it made, when the run was refused at its start);
        the exit code. `problems`: refusals the front door met on its way out."""
        self.settle()
        code = self._exit_code(problems)
        self.tally.exit_code = code
        for signum, handler in self._signals.items():
            with contextlib.suppress(ValueError, TypeError):  # (not the main thread)
                signal.signal(signum, handler)
        self._signals.clear()
        if self.tally.refused_at_start:
            lock.discard_refused()
        elif self._locked:
            lock.release(self.out)
        return code

    def settle(self) -> None:
        """Before the final lines: the seat runs no step waited for are waited for, the
        progress line is taken down (once)."""
        if self._settled:
            return
        self._settled = True
        if self.progress is None:
            options = self.loaded.inputs.options
            self.progress = Progress(
                self.stream,
                total=self.scope.total,
                tty=self.stream.isatty(),
                quiet=options.quiet,
                rate=options.progress_rate,
            )
        self._finish_handed()
        self.progress.stop()

    def _finish_handed(self) -> None:
        """Cells handed to the scheduler whose runs no step waited for (doit was asked for
        single cell tasks, or a step failed): wait for them here, so none is cut short."""
        scheduler = self.scheduler
        if scheduler is None or self.tally.interrupted is not None or not scheduler.busy:
            return
        try:
            scheduler.drain(self._count)
        except BrigadeError as exc:
            self.tally.refused.append(str(exc))
        except Exception as exc:  # any other failure is brigade's own
            if self.tally.interrupted is None:
                self.tally.errors.append(f"seat runs: {exc}")

    def _say(self, text: str) -> None:
        """Write a line of brigade's (agent text in it shown, never obeyed)."""
        self.stream.write(printable(text))

    # What a run says at its end: the final line (headline; elapsed time; the report's
    # path), then `final_notes`, one line each, in one place.

    def _exit_code(self, problems: tuple[str, ...]) -> int:
        assert self.progress is not None
        for message in self.tally.refused:
            for line in message.splitlines():
                self._say(f"brigade: {line}\n")
        for trace in self.tally.traces:
            self._say(f"{trace}\n")
        for message in self.tally.errors:
            self._say(f"brigade: {message}\n")
        elapsed = duration(self.progress.elapsed())
        self.tally.refused.extend(problems)
        if self.tally.interrupted is not None:
            self._say(
                f"brigade: interrupted after {self.progress.counts_line()} in {elapsed}; "
                "cells left running re-run on the next run\n"
            )
            return 128 + self.tally.interrupted
        if self.tally.refused:
            return EXIT_UNUSABLE
        self._outcome_lines()
        headline: str | None = None
        if self.scope.subset is not None:
            headline, bucket = self.subset_outcome()
        else:
            written = summary_headline(self.out) if self.tally.summary_ran else None
            if written is not None:
                headline, bucket = written
            else:
                bucket = plan_bucket(self.out, self.plan)
        if headline is not None:
            parts = [headline, elapsed]
            if self.tally.summary_ran:
                report = self.out / REPORT_DIR / HTML_FILE
                parts.append(f"report: {shown_path(report, self.here)}")
            self._say(f"brigade: {'; '.join(parts)}\n")
        notes, stopped = self.final_notes()
        for note in notes:
            self._say(f"brigade: {note}\n")
        if self.tally.errors or stopped:
            return EXIT_MEASUREMENT
        return bucket

    def final_notes(self) -> tuple[list[str], bool]:
        """What the run says after its final line (one line each), and whether it is a
        measurement failure whatever the cells' states (a seat stopped, launching stopped)."""
        lines: list[str] = []
        stopped = False
        if self.scheduler is not None:
            lines.extend(self.scheduler.lines())
            stopped = self.scheduler.any_stopped
        budget = self.loaded.ctx.budget
        if budget is not None and budget.kept_back:
            lines.extend(budget.lines())
            stopped = True
        if self.scope.kept_faults:
            many = self.scope.kept_faults != 1
            lines.append(
                f"{self.scope.kept_faults} cell{'s' if many else ''} with apparatus faults kept; "
                f"re-run {'them' if many else 'it'} with --retry-transient "
                "(doit: retry_transient=1)"
            )
        return lines, stopped

    def subset_outcome(self) -> tuple[str, int]:
        """The subset's headline and exit bucket, from its receipts as recorded now."""
        chosen = self.scope.subset or frozenset()
        plan = self.plan
        cells = [cell for cell in plan.cells if cell.cell_id in chosen]
        subset_plan = dataclasses.replace(plan, cells=tuple(cells), stale_cells=())
        unchanged = self.chosen.unchanged
        known = {
            cell.cell_id: unchanged[cell.cell_id] for cell in cells if cell.cell_id in unchanged
        }
        views = current_views(self.out, subset_plan, known)
        bucket = exit_bucket(
            (view.state, view.failure_reason) if view is not None else (None, None)
            for view in views.values()
        )
        counts: Counter[str] = Counter(
            view.state if view is not None else "missing" for view in views.values()
        )
        incomplete = counts["running"] + counts["missing"] > 0
        states = ", ".join(f"{key} {counts[key]}" for key in COUNT_KEYS if counts[key])
        kinds = fault_kinds(views)
        failures = sum(kinds.values())
        extra = f"; measurement failures {failures} ({kinds_text(kinds)})" if failures else ""
        how = f": {self.choice.how}" if self.choice.how else ""
        line = (
            f"{len(cells)} of {len(plan.cells)} cells (subset{how}): {states or 'none'}{extra} "
            f"-> {outcome_name(bucket, incomplete)} (exit {bucket})"
        )
        return line, bucket

    def _outcome_lines(self) -> None:
        """One line per cell named on the command line (a few): its state and why."""
        named = self.choice.named
        if not named or len(named) > NAMED_SHOWN:
            return
        from brigade.report.model import state_reason

        for cell in named:
            receipt = store.read_receipt(self.out, cell.cell_id)
            state = receipt.state if receipt is not None else "missing"
            facts = []
            if receipt is not None and receipt.attempt:
                facts.append(f"attempt {receipt.attempt}")
            if receipt is not None and receipt.duration_seconds is not None:
                facts.append(duration(float(receipt.duration_seconds)))
            more = f" ({', '.join(facts)})" if facts else ""
            self._say(
                f"brigade: {cell.coordinate}: {state}{more}: {state_reason(state, receipt)}\n"
            )


@dataclass
class Tally:
    """What a run accumulates as it goes (its engine writes it; front doors read it)."""

    handed: set[str] = field(default_factory=set)  # cells handed to the scheduler
    refused: list[str] = field(default_factory=list)  # why it was refused (exit 2)
    errors: list[str] = field(default_factory=list)  # how brigade itself broke (exit 3)
    traces: list[str] = field(default_factory=list)  # the tracebacks of those errors
    interrupted: int | None = None  # the signal that stopped it
    started: bool = False  # the run started (doit runs tasks)
    refused_at_start: bool = False  # refused before anything was written
    summary_ran: bool = False  # the finish wrote summary.json, the export and the report
    exit_code: int | None = None


class _Broken(Exception):
    """A step found brigade's own work failing (the leak check): exit 3."""


_SETUP_LOCK = threading.Lock()


def _cluster(session: Session) -> DaskExecutor | None:
    """The Dask executor of a session whose seats run on a cluster (None: they run here)."""
    executor = session.inputs.executor
    if executor.kind != "dask" or not executor.scheduler:
        return None
    from brigade.run.cluster import DaskExecutor

    options, scanned = session.inputs.options, session.scan
    to_run = {
        cell.seat.name: cell.seat
        for cell in session.planned.plan.cells
        if options.always or scanned.actions[cell.cell_id] == "run"
    }
    return DaskExecutor(
        executor.scheduler,
        session.inputs.out,
        session.inputs.workspace,
        to_run,
        session.inputs.manifest.execution_mode == "writable-worktree",
        sandbox=options.sandbox,
        ctx=session.ctx,
        shared=any(case.workspace is None for case in session.inputs.manifest.cases),
    )


def plan_bucket(out: Path, plan: Plan) -> int:
    """The exit bucket of the whole current plan as recorded on disk."""
    views = current_views(out, plan)
    return exit_bucket(
        (view.state, view.failure_reason) if view is not None else (None, None)
        for view in views.values()
    )


def shown_path(path: Path, here: Path | None = None) -> str:
    """A path as the user will want it: relative to the folder they ran the command in
    (`here`; default the current folder) when under it, else as it is."""
    try:
        return str(path.relative_to(here or Path.cwd()))
    except ValueError:
        return str(path)
