"""The doit reporter: hands doit's events over to the run engine (engine/engine) and
reports through it.

It runs in doit's main process for every parallel mode. The engine takes the lock,
installs the signal handlers, drains the scheduler and computes the exit code; this
class maps doit's calls onto it (`initialize` starts the run, a cell task's end counts
its cell, `complete_run` ends the run) and raises the exit code, so `doit` exits
0/1/3 like `brigade run`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

from doit.dependency import JsonDB

from brigade.core.taxonomy import EXIT_UNUSABLE
from brigade.engine.engine import Engine
from brigade.engine.names import cell_task_name
from brigade.outdir import store
from brigade.run import proc

# a task refused for bad input or tampering carries this prefix in its message
REFUSED = "brigade-refused: "

# called with doit's tasks and the ones it selected when a plain doit run starts
Prepare = Callable[[Mapping[str, Any], Sequence[str]], None]


def make_reporter(
    engine: Engine,
    inner: type | None = None,
    *,
    prepare: Prepare | None = None,
    fresh_db: bool = False,
    end_process: bool = False,
) -> type:
    """A reporter class bound to one run (doit instantiates it itself).

    `inner`: a reporter doit was asked for (`doit -r json`); it reports as it
    does, from inside this one, which keeps the lock, progress and exit code.
    `prepare`: plain doit, where the task names come with the run (BrigadeError
    refuses). `fresh_db`: doit's DB did not exist when the run was loaded (a
    refused run removes the one doit writes on its way out). `end_process`:
    `doit` itself, whose process ends right after the run.
    """

    class BrigadeReporter:
        desc = "brigade: progress on a terminal, exit code from the recorded results"

        def __init__(self, outstream: IO[str], options: dict[str, Any]) -> None:
            # (after the engine took stderr: doit's json reporter takes it over until the end)
            self.inner = inner(outstream, options) if inner is not None else None
            self.cells: dict[str, str] = {}  # doit task name -> cell id, of own cell tasks

        # -- doit reporter protocol --------------------------------------------

        def initialize(self, tasks: dict[str, Any], selected_tasks: list[str]) -> None:
            ready = engine.start(
                (lambda: prepare(tasks, selected_tasks)) if prepare is not None else None
            )
            if not ready:
                raise SystemExit(EXIT_UNUSABLE)
            self.cells = {
                cell_task_name(task.cell.coordinate): cell_id
                for cell_id, task in engine.scope.own.items()
            }
            self._forward("initialize", tasks, selected_tasks)

        def get_status(self, task: Any) -> None:
            self._forward("get_status", task)

        def execute_task(self, task: Any) -> None:
            self._forward("execute_task", task)

        def add_success(self, task: Any) -> None:
            self._forward("add_success", task)
            cell_id = self.cells.get(task.name)
            if cell_id is not None:
                engine.task_done(cell_id)

        def skip_uptodate(self, task: Any) -> None:
            cell_id = self.cells.get(task.name)
            if cell_id is not None:
                engine.task_found(cell_id)
            self._forward("skip_uptodate", task)

        def skip_ignore(self, task: Any) -> None:
            self._forward("skip_ignore", task)

        def add_failure(self, task: Any, fail: Any) -> None:
            self._forward("add_failure", task, fail)
            if engine.tally.interrupted is not None:
                return
            message = str(getattr(fail, "message", fail))
            if message.startswith(REFUSED):
                engine.refuse(message[len(REFUSED) :])
            elif type(fail).__name__ == "UnmetDependency":
                return
            else:
                engine.broke(task.name, fail.get_msg() if hasattr(fail, "get_msg") else message)
            cell_id = self.cells.get(task.name)
            if cell_id is not None:
                engine.task_failed(cell_id)

        def cleanup_error(self, exception: Any) -> None:
            self._forward("cleanup_error", exception)
            engine.fail(str(exception.get_msg()).strip())

        def runtime_error(self, msg: str) -> None:
            self._forward("runtime_error", msg)
            engine.fail(msg)

        def teardown_task(self, task: Any) -> None:
            self._forward("teardown_task", task)

        def complete_run(self) -> None:
            engine.settle()
            self._forward("complete_run")
            problems = tuple(CacheDB.problems)
            CacheDB.problems.clear()
            if engine.tally.refused_at_start and fresh_db:
                # refused before anything ran: doit still wrote its DB on its way out
                store.remove_fresh_db(engine.out)
            code = engine.end(problems)
            # (a run stopped before it started has nothing in flight: a thread of a cluster
            # connection cut short would keep the process from ending the ordinary way)
            if end_process and (engine.tally.interrupted is None or engine.tally.refused_at_start):
                proc.end_process(code)
            raise SystemExit(code)

        # -- helpers -------------------------------------------------------------

        def _forward(self, method: str, *args: Any) -> None:
            call = getattr(self.inner, method, None)  # (doit's reporters may lack some)
            if call is not None:
                call(*args)

    return BrigadeReporter


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
