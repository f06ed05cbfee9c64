"""The doit reporter: takes the run lock, shows progress, and sets the process exit code.

It runs in doit's main process for every parallel mode, so it is where the
0/1/3 bucket of the whole current plan becomes `doit`'s own exit code.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from brigade.core.plan import Plan
from brigade.core.taxonomy import EXIT_MEASUREMENT, EXIT_UNUSABLE, exit_bucket
from brigade.errors import BrigadeError
from brigade.outdir import lock, store
from brigade.outdir.results import current_views, summary_headline
from brigade.run import proc

if TYPE_CHECKING:
    from brigade.run.schedule import Scheduler

# a task refused for bad input or tampering carries this prefix in its message
REFUSED = "brigade-refused: "


@dataclass
class RunInfo:
    """What the reporter needs to know about the session (and hands back to the CLI)."""

    out: Path
    plan: Plan
    total: int  # cells in the plan
    wait: bool
    notes: list[str] = field(default_factory=list)
    # cells with a task of their own: doit task name -> cell_id, cell_id -> recorded state
    cell_tasks: dict[str, str] = field(default_factory=dict)
    loaded_states: dict[str, str | None] = field(default_factory=dict)
    # finished cells sharing one task: how many of each recorded state
    collected: Counter[str] = field(default_factory=Counter)
    # called before anything is written (the dask executor connects); BrigadeError refuses
    start: Callable[[], None] | None = None
    # set by the reporter: counts a cell recorded outside its own task (the collect task)
    count: Callable[[str | None], None] | None = None
    exit_code: int | None = None
    # `doit` itself: the process ends right after the run (the CLI still has work to do)
    end_process: bool = False
    # the scheduler of the seat runs, when any may run; the cells handed to it (counted
    # when their runs are recorded, not when their tasks end)
    scheduler: Scheduler | None = None
    handed: set[str] = field(default_factory=set)
    # finished cells with an apparatus fault this run left as they are (no --retry-transient)
    kept_faults: int = 0

    def final_notes(self) -> tuple[list[str], bool]:
        """What the run says after its headline (one line each), and whether it is a
        measurement failure whatever the cells' states (a seat stopped, launching stopped)."""
        lines: list[str] = []
        stopped = False
        if self.scheduler is not None:
            lines.extend(self.scheduler.lines())
            stopped = self.scheduler.any_stopped
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


def make_reporter(info: RunInfo) -> type:
    """A reporter class bound to one session (doit instantiates it itself)."""

    class BrigadeReporter:
        desc = "brigade: progress on a terminal, exit code from the recorded results"

        def __init__(self, outstream: IO[str], options: dict[str, Any]) -> None:
            self.err = sys.stderr
            self.tty = self.err.isatty()
            self.done: Counter[str] = Counter()
            self.finished = 0
            self.refused: list[str] = []
            self.errors: list[str] = []
            self.interrupted: int | None = None
            self.summary_ran = False
            self.locked = False

        # -- doit reporter protocol --------------------------------------------

        def initialize(self, tasks: dict[str, Any], selected_tasks: list[str]) -> None:
            try:
                if info.start is not None:
                    info.start()
                lock.acquire(info.out, wait=info.wait)
            except BrigadeError as exc:
                self.refused.append(str(exc))
                _skip_db_dump()
                raise SystemExit(EXIT_UNUSABLE) from None
            self.locked = True
            _guard_db_dump(self.refused)
            info.count = self._count
            # a closed terminal (SIGHUP) stops the run like Ctrl-C or SIGTERM
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, self._on_signal)
            for note in info.notes:
                self.err.write(f"brigade: {note}\n")
            self.finished += sum(info.collected.values())
            self.done.update(info.collected)
            self._progress()

        def get_status(self, task: Any) -> None:
            pass

        def execute_task(self, task: Any) -> None:
            pass

        def add_success(self, task: Any) -> None:
            cell_id = info.cell_tasks.get(task.name)
            if cell_id in info.handed:
                return  # counted once its seat run is recorded
            if cell_id is not None:
                receipt = store.read_receipt(info.out, cell_id)
                state = receipt["state"] if receipt is not None else None
                if state != "running":  # else handed to the cluster: counted when collected
                    self._count(state)
            elif task.name == "summary":
                self.summary_ran = True

        def skip_uptodate(self, task: Any) -> None:
            cell_id = info.cell_tasks.get(task.name)
            if cell_id is not None:
                self._count(info.loaded_states.get(cell_id))

        def skip_ignore(self, task: Any) -> None:
            pass

        def add_failure(self, task: Any, fail: Any) -> None:
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
                self._count("failed")

        def cleanup_error(self, exception: Any) -> None:
            self.errors.append(str(exception.get_msg()).strip())

        def runtime_error(self, msg: str) -> None:
            self.errors.append(msg)

        def teardown_task(self, task: Any) -> None:
            pass

        def complete_run(self) -> None:
            self._finish_handed()
            self._clear_progress()
            code = self._exit_code()
            info.exit_code = code
            if self.locked:
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

        def _on_signal(self, signum: int, frame: FrameType | None) -> None:
            self.interrupted = signum
            proc.terminate_all()
            raise KeyboardInterrupt

        def _count(self, state: str | None) -> None:
            self.finished += 1
            self.done[state or "missing"] += 1
            self._progress()

        def _progress(self) -> None:
            if not self.tty:
                return
            total = info.total
            states = " · ".join(f"{k} {v}" for k, v in sorted(self.done.items()))
            self.err.write(f"\r\x1b[K[{self.finished}/{total}] {states}")
            self.err.flush()

        def _clear_progress(self) -> None:
            if self.tty:
                self.err.write("\r\x1b[K")
                self.err.flush()

        def _exit_code(self) -> int:
            for message in self.refused:
                self.err.write(f"brigade: {message}\n")
            for message in self.errors:
                self.err.write(f"brigade: {message}\n")
            if self.interrupted is not None:
                self.err.write("brigade: interrupted; cells left running re-run on the next run\n")
                return 128 + self.interrupted
            if self.refused:
                return EXIT_UNUSABLE
            written = summary_headline(info.out) if self.summary_ran else None
            if written is not None:
                line, bucket = written
                self.err.write(f"brigade: {line}\n")
            else:
                bucket = plan_bucket(info.out, info.plan)
            notes, stopped = info.final_notes()
            for note in notes:
                self.err.write(f"brigade: {note}\n")
            if self.errors or stopped:
                return EXIT_MEASUREMENT
            return bucket

    return BrigadeReporter


def _guard_db_dump(refused: list[str]) -> None:
    """doit writes its DB after the last task: a full or read-only disk there is one line
    and exit 2, not a traceback. The DB is a cache (a truncated one is dropped next time);
    the receipts are already written."""
    from doit.globals import Globals

    manager = Globals.dep_manager
    if manager is None:
        return
    close = manager.close

    def guarded_close() -> None:
        try:
            close()
        except OSError as exc:
            problem = store.storage_problem(exc)
            if problem is None:
                raise
            refused.append(problem + " (doit's DB, a cache: the results are kept)")

    manager.close = guarded_close


def _skip_db_dump() -> None:
    """A refused run writes nothing: on its way out doit would still rewrite its DB in the
    output directory (another run's, or an unwritable folder: a traceback)."""
    from doit.globals import Globals

    if Globals.dep_manager is not None:
        Globals.dep_manager.close = lambda: None
