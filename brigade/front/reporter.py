"""The doit reporter: takes the run lock, shows progress, and sets the process exit code.

It runs in doit's main process for every parallel mode, so it is where the
0/1/3 bucket of the whole current plan becomes `doit`'s own exit code.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, ClassVar

from doit.dependency import JsonDB

from brigade.core.plan import Cell, Plan
from brigade.core.receipts import ReceiptView
from brigade.core.taxonomy import (
    COUNT_KEYS,
    EXIT_MEASUREMENT,
    EXIT_UNUSABLE,
    exit_bucket,
    outcome_name,
)
from brigade.core.terminal import printable
from brigade.errors import BrigadeError
from brigade.front.progress import Progress, duration
from brigade.outdir import lock, store
from brigade.outdir.results import current_views, fault_kinds, kinds_text, summary_headline
from brigade.report.build import HTML_FILE, REPORT_DIR
from brigade.run import proc

if TYPE_CHECKING:
    from brigade.run.budget import Budget
    from brigade.run.schedule import Scheduler

# a task refused for bad input or tampering carries this prefix in its message
REFUSED = "brigade-refused: "


@dataclass
class RunInfo:
    """What the reporter needs to know about the session (and hands back to the CLI)."""

    out: Path
    plan: Plan
    total: int  # cells the run is about: the plan's, or its subset's
    wait: bool
    notes: list[str] = field(default_factory=list)
    # cells with a task of their own: doit task name -> cell_id, cell_id -> recorded state
    cell_tasks: dict[str, str] = field(default_factory=dict)
    loaded_states: dict[str, str | None] = field(default_factory=dict)
    coordinates: dict[str, str] = field(default_factory=dict)  # cell_id -> coordinate
    # finished cells sharing one task: how many of each recorded state
    collected: Counter[str] = field(default_factory=Counter)
    # called before anything is written (the dask executor connects); BrigadeError refuses
    start: Callable[[], None] | None = None
    # plain doit: called with doit's tasks and the ones it selected when the run starts,
    # to resolve the task names of the command line (BrigadeError refuses)
    prepare: Callable[[Mapping[str, Any], Sequence[str]], None] | None = None
    started: bool = False  # the reporter started the run (doit runs tasks)
    # doit's DB did not exist when the run started: a refused run removes the one doit
    # writes on its way out
    fresh_db: bool = False
    # set by the reporter: counts a cell recorded outside its own task (the collect task)
    count: Callable[..., None] | None = None
    # set by the reporter: a round of adaptive trials added this many cells to the run
    grow: Callable[[int], None] | None = None
    exit_code: int | None = None
    # `doit` itself: the process ends right after the run (the CLI still has work to do)
    end_process: bool = False
    # the scheduler of the seat runs, when any may run; the cells handed to it (counted
    # when their runs are recorded, not when their tasks end)
    scheduler: Scheduler | None = None
    handed: set[str] = field(default_factory=set)
    budget: Budget | None = None  # the spending cap: what it kept back is said at the end
    # finished cells with an apparatus fault this run left as they are (no --retry-transient)
    kept_faults: int = 0
    # the subset the run is about (cell ids; None: the whole plan), how it was chosen
    subset: frozenset[str] | None = None
    subset_how: str = ""
    named: tuple[Cell, ...] = ()  # cells named one by one: their outcome is printed
    # views of the receipts this run does not change (read under the lock at load time)
    unchanged: Mapping[str, ReceiptView | None] = field(default_factory=dict)
    done_at_start: int = 0  # cells of the run already finished when it starts
    resumed: bool = False  # the output directory held a plan before
    quiet: bool = False  # no progress (the final line stays)
    progress_rate: int | None = None  # per-cell lines per 30 s without a terminal
    # what to say when a cell's seat is launched (cell -> lines; a seat's warnings come
    # with its first cell that runs, not on every run)
    launch_notes: Callable[[Cell], list[str]] | None = None

    def reset_cells(self) -> None:
        """Forget what was said of the cells' tasks (they are chosen again)."""
        self.cell_tasks.clear()
        self.loaded_states.clear()
        self.coordinates.clear()
        self.collected.clear()
        self.done_at_start = 0

    # What a run says at its end: the final line (headline; elapsed time; the report's
    # path), then `final_notes`, one line each, in one place.

    def final_notes(self) -> tuple[list[str], bool]:
        """What the run says after its final line (one line each), and whether it is a
        measurement failure whatever the cells' states (a seat stopped, launching stopped)."""
        lines: list[str] = []
        stopped = False
        if self.scheduler is not None:
            lines.extend(self.scheduler.lines())
            stopped = self.scheduler.any_stopped
        if self.budget is not None and self.budget.kept_back:
            lines.extend(self.budget.lines())
            stopped = True
        if self.kept_faults:
            many = self.kept_faults != 1
            lines.append(
                f"{self.kept_faults} cell{'s' if many else ''} with apparatus faults kept; "
                f"re-run {'them' if many else 'it'} with --retry-transient "
                "(doit: retry_transient=1)"
            )
        return lines, stopped


def plan_bucket(out: Path, plan: Plan) -> int:
    """The exit bucket of the whole current plan as recorded on disk."""
    views = current_views(out, plan)
    return exit_bucket(
        (view.state, view.failure_reason) if view is not None else (None, None)
        for view in views.values()
    )


def subset_outcome(info: RunInfo) -> tuple[str, int]:
    """The subset's headline and exit bucket, from its receipts as recorded now."""
    chosen = info.subset or frozenset()
    cells = [cell for cell in info.plan.cells if cell.cell_id in chosen]
    subset_plan = dataclasses.replace(info.plan, cells=tuple(cells), stale_cells=())
    known = {
        cell.cell_id: info.unchanged[cell.cell_id]
        for cell in cells
        if cell.cell_id in info.unchanged
    }
    views = current_views(info.out, subset_plan, known)
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
    how = f": {info.subset_how}" if info.subset_how else ""
    total = len(info.plan.cells)
    line = (
        f"{len(cells)} of {total} cells (subset{how}): {states or 'none'}{extra} "
        f"-> {outcome_name(bucket, incomplete)} (exit {bucket})"
    )
    return line, bucket


def make_reporter(info: RunInfo, inner: type | None = None) -> type:
    """A reporter class bound to one session (doit instantiates it itself).

    `inner`: a reporter doit was asked for (`doit -r json`); it reports as it
    does, from inside this one, which keeps the lock, progress and exit code.
    """

    class BrigadeReporter:
        desc = "brigade: progress on a terminal, exit code from the recorded results"

        def __init__(self, outstream: IO[str], options: dict[str, Any]) -> None:
            # (before the inner reporter: doit's json reporter takes stderr over until the end)
            self.err = sys.stderr
            self.tty = self.err.isatty()
            self.inner = inner(outstream, options) if inner is not None else None
            self.progress = Progress(
                self.err,
                total=info.total,
                tty=self.tty,
                quiet=info.quiet,
                rate=info.progress_rate,
            )
            self.refused: list[str] = []
            self.errors: list[str] = []
            self.interrupted: int | None = None
            self.summary_ran = False
            self.locked = False
            self.refused_at_start = False

        def _say(self, text: str) -> None:
            """Write a line of brigade's (agent text in it shown, never obeyed)."""
            self.err.write(printable(text))

        # -- doit reporter protocol --------------------------------------------

        def initialize(self, tasks: dict[str, Any], selected_tasks: list[str]) -> None:
            info.started = True
            try:
                # first the lock (a no-op when the dodo took it): a refusal below discards it
                lock.acquire(info.out, wait=info.wait)
                self.locked = True
                if info.prepare is not None:
                    info.prepare(tasks, selected_tasks)
                    self.progress.total = info.total  # (the cells were chosen again)
                if info.start is not None:
                    info.start()
            except BrigadeError as exc:
                self.refused.append(str(exc))
                self.refused_at_start = True
                raise SystemExit(EXIT_UNUSABLE) from None
            info.count = self._count
            info.grow = self._grow
            if info.scheduler is not None:
                info.scheduler.on_start(self._started)
            # a closed terminal (SIGHUP) stops the run like Ctrl-C or SIGTERM
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, self._on_signal)
            for note in info.notes:
                self._say(f"brigade: {note}\n")
            self.progress.found_done(info.collected)
            self.progress.begin(
                done=info.done_at_start,
                to_run=info.total - info.done_at_start,
                resumed=info.resumed,
            )
            self._forward("initialize", tasks, selected_tasks)

        def get_status(self, task: Any) -> None:
            self._forward("get_status", task)

        def execute_task(self, task: Any) -> None:
            self._forward("execute_task", task)

        def add_success(self, task: Any) -> None:
            self._forward("add_success", task)
            cell_id = info.cell_tasks.get(task.name)
            if cell_id in info.handed:
                return  # counted once its seat run is recorded
            if cell_id is not None:
                receipt = store.read_receipt(info.out, cell_id)
                state = receipt["state"] if receipt is not None else None
                self._count(state, receipt, info.coordinates[cell_id])
            elif task.name == "summary":
                self.summary_ran = True

        def skip_uptodate(self, task: Any) -> None:
            cell_id = info.cell_tasks.get(task.name)
            if cell_id is not None:
                self.progress.finish(
                    info.loaded_states.get(cell_id), info.coordinates[cell_id], None, ran=False
                )
            self._forward("skip_uptodate", task)

        def skip_ignore(self, task: Any) -> None:
            self._forward("skip_ignore", task)

        def add_failure(self, task: Any, fail: Any) -> None:
            self._forward("add_failure", task, fail)
            if self.interrupted is not None:
                return
            message = str(getattr(fail, "message", fail))
            if message.startswith(REFUSED):
                self.refused.append(message[len(REFUSED) :])
            elif type(fail).__name__ == "UnmetDependency":
                return
            else:
                text = fail.get_msg() if hasattr(fail, "get_msg") else message
                self.errors.append(f"task {task.name} failed: {text.strip()}")
            cell_id = info.cell_tasks.get(task.name)
            if cell_id is not None:
                self._count("failed", None, info.coordinates[cell_id])

        def cleanup_error(self, exception: Any) -> None:
            self._forward("cleanup_error", exception)
            self.errors.append(str(exception.get_msg()).strip())

        def runtime_error(self, msg: str) -> None:
            self._forward("runtime_error", msg)
            self.errors.append(msg)

        def teardown_task(self, task: Any) -> None:
            self._forward("teardown_task", task)

        def complete_run(self) -> None:
            self._finish_handed()
            self.progress.stop()
            self._forward("complete_run")
            code = self._exit_code()
            info.exit_code = code
            if self.refused_at_start:
                # refused before anything ran: doit still wrote its DB on its way out
                if info.fresh_db:
                    store.remove_fresh_db(info.out)
                lock.discard_refused()
            elif self.locked:
                lock.release(info.out)
            if info.end_process and self.interrupted is None:
                proc.end_process(code)
            raise SystemExit(code)

        # -- helpers -------------------------------------------------------------

        def _finish_handed(self) -> None:
            """Cells handed to the scheduler whose runs no `collect` task waited for (doit
            was asked for single cell tasks): wait for them here, so none is cut short."""
            scheduler = info.scheduler
            if scheduler is None or self.interrupted is not None or not scheduler.busy:
                return
            try:
                scheduler.drain(self._count)
            except BrigadeError as exc:
                self.refused.append(str(exc))
            except Exception as exc:  # any other failure is brigade's own
                if self.interrupted is None:
                    self.errors.append(f"seat runs: {exc}")

        def _forward(self, method: str, *args: Any) -> None:
            call = getattr(self.inner, method, None)  # (doit's reporters may lack some)
            if call is not None:
                call(*args)

        def _on_signal(self, signum: int, frame: FrameType | None) -> None:
            self.interrupted = signum
            proc.terminate_all()
            raise KeyboardInterrupt

        def _count(
            self,
            state: str | None,
            receipt: Mapping[str, Any] | None = None,
            coordinate: str | None = None,
        ) -> None:
            """A cell is final (its receipt as recorded, when there is one)."""
            receipt = receipt or {}
            seconds = receipt.get("duration_seconds")
            took = float(seconds) if isinstance(seconds, (int, float)) else None
            coordinate = coordinate or receipt.get("coordinate")
            self.progress.finish(state, coordinate if isinstance(coordinate, str) else None, took)

        def _grow(self, added: int) -> None:
            """A round of adaptive trials added cells: they count toward the total."""
            self.progress.total += added

        def _started(self, cell: Cell) -> None:
            """A seat run starts: what to say of its seat first (once), then it is running."""
            for note in info.launch_notes(cell) if info.launch_notes else ():
                self.progress.note(note)
            self.progress.start(cell.coordinate)

        def _exit_code(self) -> int:
            for message in self.refused:
                for line in message.splitlines():
                    self._say(f"brigade: {line}\n")
            for message in self.errors:
                self._say(f"brigade: {message}\n")
            elapsed = duration(self.progress.elapsed())
            for problem in CacheDB.problems:
                self.refused.append(problem)
            CacheDB.problems.clear()
            if self.interrupted is not None:
                self._say(
                    f"brigade: interrupted after {self.progress.counts_line()} in {elapsed}; "
                    "cells left running re-run on the next run\n"
                )
                return 128 + self.interrupted
            if self.refused:
                return EXIT_UNUSABLE
            self._outcome_lines()
            headline: str | None = None
            if info.subset is not None:
                headline, bucket = subset_outcome(info)
            else:
                written = summary_headline(info.out) if self.summary_ran else None
                if written is not None:
                    headline, bucket = written
                else:
                    bucket = plan_bucket(info.out, info.plan)
            if headline is not None:
                parts = [headline, elapsed]
                if self.summary_ran:
                    parts.append(f"report: {shown_path(info.out / REPORT_DIR / HTML_FILE)}")
                self._say(f"brigade: {'; '.join(parts)}\n")
            notes, stopped = info.final_notes()
            for note in notes:
                self._say(f"brigade: {note}\n")
            if self.errors or stopped:
                return EXIT_MEASUREMENT
            return bucket

        def _outcome_lines(self) -> None:
            """One line per cell named on the command line (a few): its state and why."""
            if not info.named or len(info.named) > NAMED_SHOWN:
                return
            from brigade.report.model import state_reason

            for cell in info.named:
                receipt = store.read_receipt(info.out, cell.cell_id)
                state = receipt["state"] if receipt is not None else "missing"
                facts = []
                if receipt is not None and receipt.get("attempt"):
                    facts.append(f"attempt {receipt['attempt']}")
                if receipt is not None and isinstance(
                    receipt.get("duration_seconds"), (int, float)
                ):
                    facts.append(duration(float(receipt["duration_seconds"])))
                more = f" ({', '.join(facts)})" if facts else ""
                self._say(
                    f"brigade: {cell.coordinate}: {state}{more}: {state_reason(state, receipt)}\n"
                )

    return BrigadeReporter


# cells named on the command line get an outcome line each, up to this many
NAMED_SHOWN = 10


def shown_path(path: Path) -> str:
    """A path as the user will want it: relative to the current folder when under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class CacheDB(JsonDB):
    """doit's JSON DB in brigade's own doit runs (`brigade run`, `brigade doit`; a backend
    plugin, `CACHE_BACKEND`): written atomically, and a full or read-only disk when doit
    writes it at the end of a run is one line and exit 2, not a traceback (it is only a
    cache: the receipts are written). Plain doit uses doit's own `json` backend."""

    problems: ClassVar[list[str]] = []

    def dump(self) -> None:
        """Write the DB (doit calls it once, when the run ends)."""
        try:
            data = self.codec.encode(self._db).encode()
            store.atomic_write_bytes(Path(self.name), data, durable=False, sync_dir=False)
        except OSError as exc:
            problem = store.storage_problem(exc)
            if problem is None:
                raise
            CacheDB.problems.append(problem + " (doit's DB, a cache: the results are kept)")


# the backend of brigade's own doit runs, registered through DoitMain's configuration
CACHE_BACKEND = "brigade-json"
CACHE_PLUGINS = {"BACKEND": {CACHE_BACKEND: f"{__name__}:CacheDB"}}
