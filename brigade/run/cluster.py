"""The Dask executor: seats run on the workers of a Dask cluster, the coordinator records them.

The coordinator (the process running doit) connects once before anything is
written. The scheduler (run/schedule.py) decides when a cell's seat run starts;
`submit` then hands it to the cluster as one Dask task with
`resources={<adapter>: 1}` and keeps its future here. When the task ends, the
`done` callback it was given receives a function that records the run exactly
as a local run is recorded (`seat.record_run`, then the `record` it was given,
`runner.finish`: graders run on the coordinator), which the scheduler calls in
its draining thread (the `collect` task). A worker runs the seat with
`seat.execute_seat`, the code a local run uses; this module knows nothing of a
cell's lifecycle beyond that. A fault of the engine (a worker that died, a lost
scheduler, a cancelled task) is an apparatus fault of that cell: adapter_error
of kind cluster_lost (failure_reason transport_drop), which --retry-transient re-runs.

A case with a workspace of its own starts from what its setup built in the output
directory, on the coordinator. Its tree's one commit goes to the cluster once per run as
a git bundle (`workspaces.bundle`, scattered under its key and digest); each worker makes
its own copy once, after checking the digest (`workspaces.unbundle`), and branches every
attempt's worktree from it. Graders, regrades included, run on the coordinator against
the tree itself, as for a local run.

`distributed` is imported only here and only when the executor is used, so the
local executor needs nothing beyond brigade's own dependencies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from brigade import fs
from brigade.adapters import adapter_for
from brigade.core.identity import world_key
from brigade.core.plan import Cell
from brigade.core.receipts import Receipt
from brigade.core.specs import SandboxMode, SeatSpec
from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.run import proc, workspaces, worktree
from brigade.run.context import RunContext
from brigade.run.runner import seat_start
from brigade.run.seat import (
    LOG_READ_LIMIT,
    STDERR,
    STDOUT,
    SeatJob,
    SeatRun,
    execute_seat,
    record_run,
    seat_job,
    unlaunched_run,
)

# records one seat run on the coordinator: run.json's document -> the cell's receipt
Record = Callable[[dict[str, Any]], Receipt]
# called once a submitted run ended, with a function that records it (call it once)
Done = Callable[[Callable[[], Receipt]], None]

# on a worker: its own checkout of the workspace (else the coordinator's path, if it exists there)
WORKSPACE_VARIABLE = "BRIGADE_WORKSPACE"
INSTALL_HINT = "pip install 'brigade[dask]'"
# in a worker's local directory: its copies of the cases' own workspaces (made once each)
WORKSPACE_CACHE = "brigade-workspaces"
# Dask groups tasks by the key's prefix (the dashboard shows "brigade-seat")
TASK_PREFIX = "brigade-seat"
CLOSE_TIMEOUT_SECONDS = 5


def resource_name(seat: SeatSpec) -> str:
    """The worker resource a seat needs: its adapter's name (exec, claude, codex, ...)."""
    return adapter_for(seat.cli).name


@dataclass(frozen=True)
class RemoteRun:
    """What a worker sends back: the seat run and the files the seat left in its run folder."""

    run: SeatRun | None
    files: dict[str, bytes]
    worker: str
    # set instead of `run` when this task already started on a worker that died
    lost: str | None = None


@dataclass(frozen=True)
class _Pending:
    cell: Cell
    attempt: int
    job: SeatJob
    record: Record


class DaskExecutor:
    """Submits a session's seat runs to a Dask scheduler and records them as they finish."""

    def __init__(
        self,
        address: str,
        out: Path,
        workspace: Path,
        seats: Mapping[str, SeatSpec],
        writable: bool,
        sandbox: SandboxMode | None = None,
        ctx: RunContext | None = None,
        shared: bool = True,
    ) -> None:
        self.address = address
        # how this coordinator starts a seat run (a case's own workspace built here first)
        self.ctx = ctx
        self.shared = shared  # some case runs in the run's workspace (writable: from its HEAD)
        self.sandbox = sandbox  # --sandbox: every seat's sandbox mode on the workers
        self.out = out
        self.workspace = workspace
        self.seats = dict(seats)  # seats with cells to run at load time
        self.writable = writable
        self.client: Any = None  # distributed.Client once connected
        self.head: str | None = None  # writable runs start from this commit
        self._checked: set[str] = set()  # seats whose resource a worker was seen to offer
        self._pid = os.getpid()  # the futures live in this process
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[_Pending, Any]] = {}  # task key -> (cell, future)
        # built workspaces sent to the cluster: world key -> (what names it, its future)
        self._shipped: dict[str, tuple[workspaces.Shipment, Any]] = {}
        self._shipping: dict[str, threading.Lock] = {}

    # -- coordinator -----------------------------------------------------------

    def start(self) -> None:
        """Connect and check the cluster before anything is written; BrigadeError refuses.

        A run with no seat to run does not contact the cluster at all.
        """
        if not self.seats:
            return
        try:
            self._connect(self.seats)
        except BaseException:
            self.close()
            raise

    def _connect(self, seats: Mapping[str, SeatSpec]) -> None:
        if self.client is None:
            try:
                from distributed import Client
            except ImportError:
                raise EnvironmentProblem(
                    f"the dask executor needs dask.distributed ({INSTALL_HINT})"
                ) from None
            # engine faults end up in receipts, one line each; distributed's own logging
            # (tracebacks while it reconnects to a lost scheduler) would bury that
            for name in ["distributed", *logging.root.manager.loggerDict]:
                if name.startswith("distributed"):  # its config sets some children's levels
                    logging.getLogger(name).setLevel(logging.CRITICAL)
            try:
                self.client = Client(self.address, set_as_default=False)
            except Exception as exc:  # OSError on a timeout, ValueError on a bad address, ...
                raise EnvironmentProblem(
                    f"cannot connect to the dask scheduler at {self.address} ({_one_line(exc)}); "
                    "start `dask scheduler` there or fix --scheduler (doit: scheduler=)"
                ) from None
            proc.on_stop(self.cancel_all)
        unchecked = {name: seat for name, seat in seats.items() if name not in self._checked}
        if not unchecked:
            return
        offered, workers = self._offered()
        for name, seat in sorted(unchecked.items()):
            resource = resource_name(seat)
            if offered.get(resource, 0) <= 0:
                raise EnvironmentProblem(
                    f"dask scheduler {self.address}: seat {name!r} needs worker resource "
                    f"{resource!r}, which none of its {workers} worker(s) offers; start workers "
                    f'with --resources "{resource}=N"'
                )
            self._checked.add(name)
        if self.writable and self.shared and self.head is None:
            self.head = worktree.find_repo(self.workspace).head

    def _offered(self) -> tuple[dict[str, float], int]:
        """The most of each resource any one worker offers, and how many workers there are."""
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # older distributed: every worker, no parameter
            info = self.client.scheduler_info()
        offered: dict[str, float] = {}
        workers = info.get("workers") or {}
        for worker in workers.values():
            for name, amount in (worker.get("resources") or {}).items():
                offered[name] = max(offered.get(name, 0), float(amount))
        return offered, len(workers)

    def submit(self, cell: Cell, attempt: int, record: Record, done: Done) -> None:
        """Hand one seat run to the cluster (its `running` receipt is written); returns at once.

        When the task ends, `done` gets the function that records it; a submission
        the engine refuses is handed to `done` at once, as an apparatus fault.
        """
        if proc.stopping.is_set():
            raise proc.Interrupted("stopped before the seat run was submitted")
        if os.getpid() != self._pid:  # a forked doit worker: its copy of the client is dead
            raise EnvironmentProblem(
                "the dask executor cannot run under doit -P process (its tasks are tracked in "
                "the main process); drop -P process: the cluster runs the seats in parallel"
            )
        key = f"{TASK_PREFIX}-{cell.cell_id[:16]}-{attempt}-{uuid.uuid4().hex[:8]}"
        rdir = store.run_dir(self.out, cell.cell_id, attempt)
        try:
            if cell.seat.name not in self._checked:
                # a cell that needs a run only now (its reuse source went bad) connects late
                self._connect({cell.seat.name: cell.seat})
        except Exception as exc:
            detail = _engine_fault("the seat run could not be submitted", exc)
            unsent = _Pending(cell, attempt, seat_job(cell, attempt, None, self.sandbox), record)
            done(lambda: self._record_fault(unsent, detail))
            return
        start = self._start(cell, attempt)
        if isinstance(start, SeatRun):  # its case's setup failed: nothing to submit
            failed = _Pending(cell, attempt, seat_job(cell, attempt, None, self.sandbox), record)
            done(lambda: self._finish(failed, record_run(rdir, start)))
            return
        pending = _Pending(cell, attempt, start, record)
        shipped: tuple[workspaces.Shipment | None, Any] = (None, None)
        try:
            if cell.workspace is not None:
                shipped = self._ship(cell, str(start.head))
            future = self.client.submit(
                run_on_worker,
                pending.job,
                str(self.workspace),
                *shipped,
                key=key,
                resources={resource_name(cell.seat): 1},
                pure=False,
                retries=0,
            )
        except OSError as exc:  # the built workspace could not be bundled here
            detail = f"dask: the case's workspace could not be sent: {_one_line(exc)}"[:500]
            done(lambda: self._record_fault(pending, detail, "worktree_failed"))
            return
        except Exception as exc:
            detail = _engine_fault("the seat run could not be submitted", exc)
            done(lambda: self._record_fault(pending, detail))
            return
        with self._lock:
            self._pending[key] = (pending, future)

        def ended(future: Any) -> None:
            # in the client's event loop: record nothing here, hand it to the draining thread
            with self._lock:
                self._pending.pop(key, None)
            done(lambda: self._record(pending, future))

        future.add_done_callback(ended)

    def _start(self, cell: Cell, attempt: int) -> SeatJob | SeatRun:
        """The cell's seat job (writable runs of the run's workspace from its HEAD here), or
        the run that never launched because its case's setup failed."""
        if self.ctx is None:
            return seat_job(cell, attempt, self.head, self.sandbox)
        start = seat_start(self.ctx, cell, attempt)
        if isinstance(start, SeatJob) and cell.workspace is None:
            start = dataclasses.replace(start, head=self.head)
        return start

    def _ship(self, cell: Cell, head: str) -> tuple[workspaces.Shipment, Any]:
        """The cell's built workspace on the cluster: bundled and scattered once per run
        (what names it, and the future of its bytes); OSError when it cannot be bundled."""
        world = cell.world()
        assert world is not None
        name = world_key(world)
        with self._lock:
            guard = self._shipping.setdefault(name, threading.Lock())
        with guard:
            found = self._shipped.get(name)
            # (a bundle whose only copy went with a worker that died is sent again)
            if found is not None and found[0].head == head and found[1].status == "finished":
                return found
            shipment, data = workspaces.bundle(self.out, world, head)
            future = self.client.scatter({shipment.name: data}, hash=False)[shipment.name]
            self._shipped[name] = (shipment, future)
            return shipment, future

    def _record(self, pending: _Pending, future: Any) -> Receipt:
        """Record a finished task as a local run would be recorded; engine faults as faults."""
        status = future.status
        if status == "finished":
            try:
                remote = future.result()
            except Exception as exc:
                return self._record_fault(
                    pending, _engine_fault("the seat run's result could not be fetched", exc)
                )
            if remote.run is None:
                return self._record_fault(pending, _engine_fault(remote.lost or "the run was lost"))
            rdir = store.run_dir(self.out, pending.cell.cell_id, pending.attempt)
            _unpack(remote.files, rdir)
            return self._finish(pending, record_run(rdir, remote.run))
        if status == "error":
            error = future.exception()
            if type(error).__name__ == "KilledWorker":
                last = getattr(getattr(error, "last_worker", None), "address", "unknown")
                what = f"the worker running the seat died (KilledWorker; last worker {last})"
                return self._record_fault(pending, _engine_fault(what))
            return self._record_fault(pending, _engine_fault("the seat's task failed", error))
        if status != "cancelled":
            return self._record_fault(pending, _engine_fault(f"the seat's task ended {status}"))
        # the connection to the scheduler was lost, or someone cancelled the task
        try:
            future.result()  # a cancelled future raises at once, with the reason
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            reason = getattr(exc, "reason", None) or type(exc).__name__
            message = getattr(exc, "msg", None)
            what = f"the seat's task was cancelled ({reason}{': ' + message if message else ''})"
            return self._record_fault(pending, _engine_fault(what))
        return self._record_fault(pending, _engine_fault("the seat's task was cancelled"))

    def _record_fault(self, pending: _Pending, detail: str, kind: str = "cluster_lost") -> Receipt:
        rdir = store.run_dir(self.out, pending.cell.cell_id, pending.attempt)
        run = unlaunched_run(pending.job, rdir, self.workspace, detail, kind, "apparatus_fault")
        return self._finish(pending, record_run(rdir, run))

    def _finish(self, pending: _Pending, run_doc: dict[str, Any]) -> Receipt:
        """Classify, grade (here, on the coordinator) and write the terminal receipt."""
        return pending.record(run_doc)

    def cancel_all(self) -> None:
        """Cancel the seat runs still on the cluster (terminate_all calls it on SIGTERM/Ctrl-C)."""
        client = self.client
        with self._lock:
            futures = [future for _, future in self._pending.values()]
        if client is None or not futures:
            return
        # not in the signal handler itself: the interrupted thread may hold a lock the
        # client needs; workers then stop the seats whose tasks were cancelled
        threading.Thread(target=client.cancel, args=(futures,), daemon=True).start()

    def close(self) -> None:
        """Disconnect from the scheduler (tasks still wanted only by us are dropped)."""
        client, self.client = self.client, None
        self._shipped.clear()  # the cluster may drop the workspaces' bundles now
        if client is not None:
            try:
                client.close(timeout=CLOSE_TIMEOUT_SECONDS)
            except Exception:  # the scheduler may already be gone; nothing left to tidy
                pass


def _engine_fault(what: str, exc: BaseException | None = None) -> str:
    """A one-line detail for a fault of the engine (its kind is always cluster_lost)."""
    detail = f"dask: {what}" + (f" ({type(exc).__name__}: {_one_line(exc)})" if exc else "")
    return detail[:500]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _unpack(files: Mapping[str, bytes], rdir: Path) -> None:
    """Write the files a worker sent back into the attempt's run folder (never outside it)."""
    for name, data in files.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            continue
        folder = fs.folder_in(rdir, relative.parts[:-1])  # no link followed on the way
        try:
            fs.write_at(folder, relative.parts[-1], data, durable=False)
        finally:
            os.close(folder)


# -- worker ---------------------------------------------------------------------


def run_on_worker(
    job: SeatJob,
    coordinator_workspace: str,
    shipment: workspaces.Shipment | None = None,
    bundle: bytes | None = None,
) -> RemoteRun:
    """The Dask task: run one seat on this worker, as a local run would, in its own workspace
    (a case's own: this worker's copy of the `shipment`, made from `bundle` once)."""
    from distributed import get_worker

    worker = get_worker()
    key = worker.get_current_task()
    if not _claim(key, worker.address):
        lost = (
            "the worker first running the seat was lost; its task was restarted on "
            f"{worker.address}, which did not run the seat a second time"
        )
        return RemoteRun(run=None, files={}, worker=worker.address, lost=lost)
    job = worker_hidden(job, Path(worker.local_directory))
    scratch = tempfile.mkdtemp(prefix="brigade-seat-")
    try:
        # brigade's files of the run here go back; the seat's own folder stays
        rdir, sdir = Path(scratch) / "run", Path(scratch) / "seat"
        rdir.mkdir()
        workspace, problem = worker_workspace(coordinator_workspace)
        if shipment is not None:
            if workspace is not None:  # a roster folder in this machine's checkout, as ever
                job = localise(job, Path(coordinator_workspace), workspace)
            cache = Path(worker.local_directory) / WORKSPACE_CACHE
            try:
                own = workspaces.unbundle(cache, shipment, bundle or b"")
            except OSError as exc:
                detail = f"dask worker {worker.address}: the case's workspace: {_one_line(exc)}"
                run = unlaunched_run(job, rdir, cache, detail, "worktree_failed")
            else:
                run = execute_seat(job, own, rdir, sdir, should_stop=_cancelled(worker, key))
        elif workspace is None:
            detail = f"dask worker {worker.address}: {problem}"
            run = unlaunched_run(job, rdir, Path(coordinator_workspace), detail, "launch_failed")
        else:
            job = localise(job, Path(coordinator_workspace), workspace)
            run = execute_seat(job, workspace, rdir, sdir, should_stop=_cancelled(worker, key))
        return RemoteRun(run=run, files=_pack(rdir), worker=worker.address)
    finally:
        # the seat's own folder is in there, nested as deep as it liked
        with contextlib.suppress(OSError):
            fs.remove(scratch)


def worker_hidden(job: SeatJob, local: Path) -> SeatJob:
    """The job with the worker's own folder hidden from its seat's sandbox: the copies of
    other cases' workspaces, what the worker spilled to disk (other seats' results). Its
    own copy, inside, stays visible (the sandbox binds the folder it runs from)."""
    box = job.seat.sandbox
    seat = dataclasses.replace(
        job.seat, sandbox=dataclasses.replace(box, hidden=(*box.hidden, str(local)))
    )
    return dataclasses.replace(job, seat=seat)


def worker_workspace(coordinator_workspace: str) -> tuple[Path | None, str]:
    """This machine's workspace: $BRIGADE_WORKSPACE, else the coordinator's path if it is here."""
    configured = os.environ.get(WORKSPACE_VARIABLE)
    if configured:
        path = Path(configured)
        if path.is_dir():
            return path, ""
        return None, f"{WORKSPACE_VARIABLE}={configured} is not a folder"
    path = Path(coordinator_workspace)
    if path.is_dir():
        return path, ""
    return None, (
        f"the workspace {coordinator_workspace} does not exist here; set "
        f"{WORKSPACE_VARIABLE} to this machine's checkout when starting the worker"
    )


def _claim(key: object, address: str) -> bool:
    """Whether this is the task's first start; records it on the scheduler.

    When a worker dies mid-task Dask restarts the task elsewhere (up to
    `distributed.scheduler.allowed-failures` times). A seat run is one attempt,
    so a restart reports the loss instead of silently running the agent again.
    The scheduler drops the mark when it forgets the task.
    """
    from distributed import get_client

    client = get_client()
    if client.get_metadata(key, None) is not None:
        return False
    client.set_metadata(key, address)
    return True


def _cancelled(worker: Any, key: object) -> Callable[[], bool]:
    """Whether the coordinator cancelled this task (or went away): the seat is then stopped."""

    def cancelled() -> bool:
        try:
            task = worker.state.tasks.get(key)
        except AttributeError:  # a distributed without the worker state machine: never stop
            return False
        # only an explicit cancellation stops a seat: a wrong guess would end a good run
        return task is not None and task.state == "cancelled"

    return cancelled


def localise(job: SeatJob, coordinator_workspace: Path, workspace: Path) -> SeatJob:
    """The job with a roster folder inside the coordinator's workspace moved into this one."""
    if workspace == coordinator_workspace:
        return job
    try:
        relative = Path(job.seat.roster_dir).relative_to(coordinator_workspace)
    except ValueError:
        return job
    seat = dataclasses.replace(job.seat, roster_dir=str(workspace / relative))
    return dataclasses.replace(job, seat=seat)


def _pack(rdir: Path) -> dict[str, bytes]:
    """Every regular file brigade left in its scratch run folder (logs, changes/, records),
    found without following a link or recursing: an unconfined seat can reach the folder
    and nest folders in it deeper than a path may be long."""
    files: dict[str, bytes] = {}
    stack = [""]
    while stack:
        relative = stack.pop()
        try:
            with os.scandir(rdir / relative) as listed:
                entries = [
                    (
                        entry.name,
                        entry.is_dir(follow_symlinks=False),
                        entry.is_file(follow_symlinks=False),
                    )
                    for entry in listed
                ]
        except OSError:  # gone, or deeper than a path can name: nothing brigade wrote
            continue
        for entry_name, is_dir, is_file in entries:
            name = f"{relative}/{entry_name}" if relative else entry_name
            if is_dir:
                stack.append(name)
                continue
            if not is_file:
                continue
            path = rdir / name
            try:
                if name in (STDOUT, STDERR):
                    # the seat held both open and may have made them any size (sparse):
                    # as much is shipped as the coordinator would read
                    files[name] = fs.read_regular(path, LOG_READ_LIMIT)[:LOG_READ_LIMIT]
                else:
                    files[name] = store.read_regular(path)
            except OSError:  # a link, gone or swapped for a FIFO since: not a file to ship
                continue
    return dict(sorted(files.items()))
