"""Running a seat once: its environment, the agent process, and run.json's record of it.

Shared by both executors: the local one runs a seat in the attempt's run
folder, a Dask worker in a scratch folder whose files it sends back. What a
run means for its cell (grading, the receipt) is the runner's business.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.adapters import adapter_for
from brigade.adapters.base import Adapter, Reading, SeatRequest
from brigade.adapters.versions import incompatible_detail
from brigade.core import jsontext
from brigade.core.clock import utc_now
from brigade.core.identity import digest
from brigade.core.plan import Cell
from brigade.core.specs import SandboxMode, SeatSpec
from brigade.core.transcript import TRANSCRIPT_SCHEMA, Entry, transcript_document
from brigade.core.usage import Usage, usage_document
from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.run import home, proc, sandbox, worktree
from brigade.run.doctor import executable_version

FINAL = "final.txt"
RUN_RECORD = "run.json"
RUN_SCHEMA = "brigade.run.v1"
WORKER_RESULTS = "worker-results.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
# how much of the seat's stdout and stderr brigade reads: the seat holds both open for
# writing and can make them any size (a sparse 16 GiB file costs it nothing)
LOG_READ_LIMIT = 64 * 1024 * 1024
TRANSCRIPT = "transcript.json"
# a seat's own folder (its BRIGADE_RUN_DIR) beside brigade's run folder, or in a judge's
SEAT_DIR = store.SEAT_DIR
# what brigade writes in a run folder once the seat has ended: nothing but a regular file of
# its own may be there then (a judge's folder keeps its last grading's), never `changes`
RUN_FILES = (FINAL, RUN_RECORD, WORKER_RESULTS, TRANSCRIPT, worktree.PATCH, "seat_run.json")
# set for every seat process (and so for all it starts): its attempt's run folder
RUN_DIR_VARIABLE = "BRIGADE_RUN_DIR"


def seat_environment(request: SeatRequest, extra: dict[str, str]) -> dict[str, str]:
    """The seat's environment: ours, the adapter's, the seat's `env`, then BRIGADE_*."""
    seat = request.seat
    env = dict(os.environ)
    env.update(extra)
    env.update(seat.env)
    env.update(
        {
            "BRIGADE_CELL_ID": request.cell_id,
            "BRIGADE_COORDINATE": request.coordinate,
            RUN_DIR_VARIABLE: str(request.run_dir),
            "BRIGADE_WORKSPACE": str(request.cwd),
            "BRIGADE_SEAT": seat.name,
            "BRIGADE_MODEL": seat.model or "",
            "BRIGADE_REASONING": seat.reasoning or "",
            "BRIGADE_EXECUTION_MODE": "writable-worktree" if request.writable else "read-only",
        }
    )
    return env


@dataclass(frozen=True)
class SeatJob:
    """One seat run, whatever executes it (the Dask executor pickles it to a worker)."""

    cell_id: str
    coordinate: str
    attempt: int
    seat: SeatSpec
    prompt: str
    execution_mode: str
    # writable runs: the commit the worktree starts from (None: the workspace's HEAD now);
    # a read-only run of a case with a workspace of its own: its built commit, of which the
    # attempt gets a fresh copy, made read-only
    head: str | None = None

    @property
    def writable(self) -> bool:
        """Whether the seat runs in its own detached worktree."""
        return self.execution_mode == "writable-worktree"

    @property
    def read_only_copy(self) -> bool:
        """Whether a read-only seat runs in a fresh read-only copy (a detached worktree of
        its case's built commit) rather than in the shared checkout."""
        return not self.writable and self.head is not None


@dataclass(frozen=True)
class SeatRun:
    """What running a seat produced: run.json's document and what goes beside it."""

    run_doc: dict[str, Any]
    final_text: str
    timed_out: bool
    transport: str | None
    seat: str
    # what the agent did, when the adapter reads it from the CLI's output
    transcript: tuple[Entry, ...] | None = None


def seat_job(
    cell: Cell,
    attempt: int,
    head: str | None = None,
    sandbox_mode: SandboxMode | None = None,
    hidden: Sequence[str] = (),
) -> SeatJob:
    """The job that runs a cell's seat for one attempt (`sandbox_mode` overrides the seat's;
    `hidden`: paths its sandbox hides besides the roster's, the tests it is graded by)."""
    seat = cell.seat
    if sandbox_mode is not None and sandbox_mode != seat.sandbox.mode:
        seat = dataclasses.replace(
            seat, sandbox=dataclasses.replace(seat.sandbox, mode=sandbox_mode)
        )
    if hidden:
        box = seat.sandbox
        seat = dataclasses.replace(
            seat, sandbox=dataclasses.replace(box, hidden=(*box.hidden, *hidden))
        )
    return SeatJob(
        cell_id=cell.cell_id,
        coordinate=cell.coordinate,
        attempt=attempt,
        seat=seat,
        prompt=cell.prompt,
        execution_mode=cell.execution_mode,
        head=head,
    )


def execute_seat(
    job: SeatJob,
    workspace: Path,
    rdir: Path,
    sdir: Path,
    *,
    should_stop: Callable[[], bool] | None = None,
    out: Path | None = None,
) -> SeatRun:
    """Run a seat in `workspace`: logs (and a writable run's changes) go to `rdir`, the
    seat's own files (its BRIGADE_RUN_DIR, the usage file) to `sdir`.

    Shared by both executors: the local one passes the attempt's run folder
    (and the output directory, hidden from the seat), a Dask worker a scratch
    folder whose files it sends back. Writes no record. The seat runs in the
    filesystem sandbox when its mode wants it and the sandbox works here: `sdir`
    writable, `rdir` hidden, so what brigade writes after the seat ended is out of
    its reach. Without the sandbox a seat can still reach `rdir`: what it planted
    there is removed before brigade writes, and makes the run the seat's failure
    (`tampered`).
    """
    tree: worktree.Worktree | None = None
    try:
        try:
            os.close(fs.folder_in(sdir.parent, [sdir.name]))
        except OSError as exc:
            return unlaunched_run(job, rdir, workspace, f"seat folder: {exc}", "launch_failed")
        if job.writable or job.read_only_copy:
            try:
                tree = worktree.create(worktree_repo(workspace, job.head), out)
                if job.read_only_copy:
                    # what an earlier attempt did never reaches this one, and without the
                    # sandbox writing is refused too (as far as file modes go)
                    worktree.write_protect(tree.root)
            except (OSError, EnvironmentProblem) as exc:
                if tree is not None:
                    worktree.remove(tree)
                    tree = None
                return unlaunched_run(job, rdir, workspace, f"worktree: {exc}", "worktree_failed")
        cwd = tree.cwd if tree else workspace
        request = SeatRequest(
            seat=job.seat,
            prompt=job.prompt,
            cwd=cwd,
            run_dir=sdir,
            writable=job.writable,
            cell_id=job.cell_id,
            coordinate=job.coordinate,
        )
        adapter = adapter_for(job.seat.cli)
        invocation = adapter.invocation(request)
        env = seat_environment(request, dict(invocation.env))
        decision = sandbox.decide(
            job.seat.sandbox.mode, invocation.read_only_enforcement, job.seat.network
        )
        if decision.mode == "required" and decision.applied != "sandbox":
            refusal = f"sandbox: required, but it cannot run here: {decision.unavailable}"
            return unlaunched_run(job, rdir, cwd, refusal, "launch_failed")
        with contextlib.ExitStack() as scope:
            confine: proc.Confinement | None = None
            git: sandbox.WorktreeGit | None = None
            user_home = env.get("HOME") or os.path.expanduser("~")
            isolated: home.IsolatedHome | None = None
            if job.seat.home == "isolated":
                try:
                    isolated = scope.enter_context(
                        home.isolated_home(adapter.auth_files, user_home)
                    )
                except OSError as exc:
                    return unlaunched_run(job, rdir, cwd, f"home: {exc}", "launch_failed")
                env = isolated.environment(env, job.seat.env)
            if decision.applied == "sandbox":
                try:
                    # a read-only copy stays read-only, its git metadata too (the sandbox
                    # holds it so whatever modes the seat gives it back): only a writable
                    # run's worktree is the seat's to write
                    if tree is not None and job.writable:
                        git = scope.enter_context(sandbox.worktree_git(tree.root, tree.git_dir))
                    view = sandbox.seat_view(
                        job.seat,
                        cwd=cwd,
                        run_dir=sdir,
                        env=env,
                        state_paths=adapter.state_paths,
                        out=out,
                        workspace=workspace,
                        git=git,
                        executable=proc.resolve_executable(invocation.argv[0], cwd, env),
                        argv=invocation.argv,
                        user_home=user_home,
                        home=isolated,
                    )
                    confine = sandbox.confinement(view, sandbox.availability())
                except (OSError, sandbox.SandboxError) as exc:
                    return unlaunched_run(job, rdir, cwd, f"sandbox: {exc}", "launch_failed")
            result = proc.run(
                invocation.argv,
                cwd=cwd,
                env=env,
                stdin_text=invocation.stdin_text,
                timeout=job.seat.timeout_seconds,
                stdout_path=rdir / STDOUT,
                stderr_path=rdir / STDERR,
                should_stop=should_stop,
                driver=invocation.driver,
                # every process the seat starts carries its run folder: all end with the seat
                tag=(RUN_DIR_VARIABLE, str(sdir)),
                confine=confine,
            )
            # the seat and all it started have ended: nothing writes in rdir but brigade now
            planted = clear_planted(rdir)
            stdout = read_text(rdir / STDOUT, LOG_READ_LIMIT)
            stderr = read_text(rdir / STDERR, LOG_READ_LIMIT)
            if result.launched and not result.timed_out:
                # files the adapter asked for (an exec program's usage file), when written
                # (bounded: what the seat wrote is read as far as a JSON reader would)
                files = {
                    name: read_text(sdir / name, jsontext.MAX_BYTES)
                    for name in invocation.output_files
                    if (sdir / name).is_file()
                }
                reading = adapter.read(
                    exit_code=result.exit_code, stdout=stdout, stderr=stderr, files=files
                )
                reading = _explain_refusal(adapter, job.seat, result.executable, reading)
            else:
                reading = Reading(
                    final_text=stdout if result.launched else "",
                    transcript=_partial_transcript(adapter, stdout, stderr)
                    if result.timed_out
                    else None,
                )
            ended = _run_status(result, reading, job.seat.timeout_seconds)
            run_doc = run_document(
                job,
                cwd,
                status=ended.status,
                started_at=result.started_at,
                finished_at=result.finished_at,
                failure_kind=ended.kind,
                failure_detail=ended.detail,
                fault=ended.fault,
                own_failure=ended.own_failure,
                adapter=adapter.name,
                exit_code=result.exit_code,
                signal=result.signal,
                duration_seconds=result.duration_seconds,
                argv=invocation.argv,
                executable=result.executable,
                executable_version=executable_version(adapter, job.seat, result.executable),
                read_only_enforcement=invocation.read_only_enforcement,
                settings_not_applied=invocation.settings_not_applied,
                enforcement=decision.record(),
                stdout_bytes=len(stdout.encode("utf-8")),
                stderr_bytes=len(stderr.encode("utf-8")),
                usage=reading.usage,
                notes=reading.notes,
                home=isolated.record() if isolated is not None else None,
            )
            if planted:
                _tampered(run_doc, planted)
            if tree is not None and job.writable:
                try:
                    with worktree.inspect(tree) as seen:
                        changed, deleted = seen.changes()
                        not_copied = worktree.snapshot(tree, changed, rdir)
                        # what command graders re-apply to a fresh worktree, now and on every
                        # regrade
                        seen.write_patch(rdir / worktree.PATCH)
                except OSError as exc:
                    with contextlib.suppress(OSError):  # only a patch brigade wrote in full counts
                        (rdir / worktree.PATCH).unlink()
                    # what the seat left cannot be read: a fault of the apparatus, this cell's
                    detail = f"worktree: {exc}"
                    run_doc.update(
                        status="apparatus_fault",
                        failure_kind="worktree_failed",
                        failure_detail=detail,
                        fault={"kind": "worktree_failed", "message": detail},
                        own_failure=None,
                    )
                else:
                    run_doc["changed_files"] = changed
                    run_doc["workspace_snapshot"] = {
                        "head": tree.repo.head,
                        "prefix": tree.repo.prefix,
                        "deleted": deleted,
                        "not_copied": not_copied,
                    }
        return SeatRun(
            run_doc,
            reading.final_text,
            result.timed_out,
            invocation.transport,
            job.seat.name,
            reading.transcript,
        )
    finally:
        if tree is not None:
            worktree.remove(tree)


def clear_planted(rdir: Path) -> list[str]:
    """Remove what a process put where brigade writes the files of a run (see RUN_FILES):
    a folder, a link, a FIFO at one of their names, anything at `changes`; a run folder
    that is no longer a folder is made again. Returns what it found (names in `rdir`)."""
    found: list[str] = []
    if os.path.islink(rdir) or not os.path.isdir(rdir):
        fs.remove(rdir)
        rdir.mkdir()
        found.append(".")
    for name in RUN_FILES:
        try:
            regular = stat.S_ISREG(os.lstat(rdir / name).st_mode)
        except FileNotFoundError:
            continue
        if not regular:
            fs.remove(rdir / name)
            found.append(name)
    if fs.remove(rdir / worktree.CHANGES_DIR):
        found.append(worktree.CHANGES_DIR)
    return found


def _tampered(run_doc: dict[str, Any], planted: Sequence[str]) -> None:
    """Make a run whose seat planted files where brigade writes its own the seat's failure:
    what it did, one line."""
    names = ", ".join(f"run/{name}" if name != "." else "run/ itself" for name in planted)
    detail = (
        f"the seat wrote where brigade keeps the run's own files ({names}): removed, "
        "nothing followed; the run is not graded"
    )
    run_doc.update(
        status="failed",
        failure_kind="tampered",
        failure_detail=detail,
        fault=None,
        own_failure={"kind": "tampered", "message": detail},
    )


# what cures a base commit missing here, for a seat run (an adapter_error, worktree_failed)
RETRY_SEAT = "fetch it there, then re-run with --retry-transient"


def worktree_repo(workspace: Path, head: str | None, then: str = RETRY_SEAT) -> worktree.Repo:
    """The repository to branch a writable run from, at `head` when one is given (`then`:
    what to do when that commit is not there, said in the error)."""
    repo = worktree.find_repo(workspace)
    if head is None or head == repo.head:
        return repo
    if not worktree.has_commit(repo, head):
        raise EnvironmentProblem(
            f"commit {head} is not in the git checkout at {repo.toplevel} here ({then})"
        )
    return dataclasses.replace(repo, head=head)


def _explain_refusal(
    adapter: Adapter, seat: SeatSpec, executable: str | None, reading: Reading
) -> Reading:
    """A CLI that refused brigade's command line: its refusal, the version that refused which
    flag and what to do, on one line (the fault's message)."""
    found = reading.fault
    if found is None or found.kind != "cli_incompatible" or adapter.version_argv(seat) is None:
        return reading  # a program with no version to name (exec) says what it says
    version = executable_version(adapter, seat, executable)
    detail = incompatible_detail(adapter.name, adapter.min_version, version, found.detail)
    return dataclasses.replace(reading, fault=dataclasses.replace(found, detail=detail))


@dataclass(frozen=True)
class _Ended:
    """How a seat run ended, as run.json records it."""

    status: str
    kind: str | None = None  # failure_kind: a fault's kind, the seat's own reason, nonzero_exit
    detail: str | None = None
    fault: dict[str, Any] | None = None  # {kind, message, retry_after_seconds?}
    own_failure: dict[str, Any] | None = None  # {kind, message}: the seat stopped itself


def _run_status(result: proc.ProcResult, reading: Reading, limit: float) -> _Ended:
    if not result.launched:
        kind = result.launch_fault or "launch_failed"
        detail = result.launch_error or "the seat command could not be launched"
        return _Ended("not_launched", kind, detail, {"kind": kind, "message": detail})
    if result.timed_out:
        detail = f"no exit within the seat's time limit ({limit:g} s); process group killed"
        return _Ended("timed_out", "timeout", detail, {"kind": "timeout", "message": detail})
    if reading.fault is not None:
        found = reading.fault
        return _Ended("apparatus_fault", found.kind, found.detail, found.document())
    if reading.own_failure is not None:
        own = reading.own_failure
        document = {"kind": own.kind, "message": own.detail}
        return _Ended("failed", own.kind, own.detail, own_failure=document)
    if result.exit_code != 0:
        return _Ended("failed", "nonzero_exit", f"exited with status {result.exit_code}")
    return _Ended("completed")


def unlaunched_run(
    job: SeatJob,
    rdir: Path,
    cwd: Path,
    detail: str,
    kind: str,
    status: str = "not_launched",
    log: bytes = b"",
) -> SeatRun:
    """A run whose seat never ran (or whose result was lost): empty logs but for the detail
    (and `log`, the end of what failed before it, such as its case's setup)."""
    now = utc_now()
    store.atomic_write_bytes(rdir / STDOUT, b"")
    store.atomic_write_bytes(rdir / STDERR, f"brigade: {detail}\n".encode() + log)
    run_doc = run_document(
        job,
        cwd,
        status=status,
        started_at=now,
        finished_at=now,
        failure_kind=kind,
        failure_detail=detail,
        fault={"kind": kind, "message": detail},
        adapter=adapter_for(job.seat.cli).name,
    )
    return SeatRun(run_doc, "", False, job.seat.transport, job.seat.name)


def run_document(
    job: SeatJob,
    cwd: Path,
    *,
    status: str,
    started_at: str,
    finished_at: str,
    failure_kind: str | None,
    failure_detail: str | None,
    adapter: str,
    fault: dict[str, Any] | None = None,
    own_failure: dict[str, Any] | None = None,
    exit_code: int | None = None,
    signal: int | None = None,
    duration_seconds: float = 0.0,
    argv: Sequence[str] = (),
    executable: str | None = None,
    executable_version: str | None = None,
    read_only_enforcement: str = "not-applicable",
    settings_not_applied: Sequence[str] = (),
    enforcement: Mapping[str, object] | None = None,
    stdout_bytes: int = 0,
    stderr_bytes: int = 0,
    usage: Usage | None = None,
    notes: Sequence[str] = (),
    home: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """run.json's document (brigade.run.v1): the one place its keys are written out.

    The defaults are those of a seat that never ran; a writable run's changed
    files and snapshot are filled in once its worktree has been read;
    `enforcement` (how the seat was confined) is null for a seat that never ran.
    """
    return {
        "schema": RUN_SCHEMA,
        "cell_id": job.cell_id,
        "attempt": job.attempt,
        "status": status,
        "exit_code": exit_code,
        "signal": signal,
        "duration_seconds": duration_seconds,
        "cwd": str(cwd),
        "started_at": started_at,
        "finished_at": finished_at,
        "failure_kind": failure_kind,
        "failure_detail": failure_detail,
        "fault": fault,
        "own_failure": own_failure,
        "adapter": adapter,
        "argv": list(argv),
        "executable": executable,
        "executable_version": executable_version,
        "timeout_seconds": job.seat.timeout_seconds,
        "execution_mode": job.execution_mode,
        "workspace_access": (
            "detached-worktree"
            if job.writable
            else "read-only-copy"
            if job.read_only_copy
            else "shared-checkout"
        ),
        "read_only_enforcement": "not-applicable" if job.writable else read_only_enforcement,
        "settings_not_applied": list(settings_not_applied),
        "changed_files": None,
        "workspace_snapshot": None,
        "stdout_bytes": stdout_bytes,
        "stderr_bytes": stderr_bytes,
        "usage": usage_document(usage) if usage is not None else None,
        "notes": list(notes),
        "enforcement": dict(enforcement) if enforcement is not None else None,
        "home": dict(home) if home is not None else None,
    }


def _partial_transcript(adapter: Adapter, stdout: str, stderr: str) -> tuple[Entry, ...] | None:
    """What a seat stopped at its time limit did until then, as far as its adapter can tell
    from the output so far (the stream may end mid-line)."""
    try:
        reading = adapter.read(exit_code=None, stdout=stdout, stderr=stderr)
    except Exception:  # an adapter is not made for cut output: no transcript, not a crash
        return None
    return reading.transcript


def record_run(rdir: Path, run: SeatRun) -> dict[str, Any]:
    """Write final.txt, transcript.json (when the adapter read one), run.json and
    worker-results.json for a seat run; returns run.json's doc.

    The one place a seat run is recorded, wherever it ran.
    """
    store.atomic_write_bytes(rdir / FINAL, run.final_text.encode("utf-8"), sync_dir=False)
    if run.transcript is not None:
        document = transcript_document(run.transcript)
        store.write_json(rdir / TRANSCRIPT, document, TRANSCRIPT_SCHEMA, sync_dir=False)
        # a seat can leave a transcript.json of its own in its run folder: only the one
        # brigade wrote, with this digest, is read as the transcript
        run.run_doc["transcript_digest"] = digest(store.dumps(document))
    _write_run_records(rdir, run.run_doc, run.timed_out, run.transport, run.seat)
    return run.run_doc


def _write_run_records(
    rdir: Path, run_doc: dict[str, Any], timed_out: bool, transport: str | None, seat: str
) -> None:
    store.write_json(rdir / RUN_RECORD, run_doc, RUN_SCHEMA, sync_dir=False)
    ok = run_doc["status"] in ("completed", "failed", "timed_out")
    store.write_json(
        rdir / WORKER_RESULTS,
        {
            "schema": "brigade.worker_results.v1",
            "results": [
                {
                    "worker": seat,
                    "ok": ok,
                    "exit_code": run_doc["exit_code"],
                    "timed_out": timed_out,
                    "failure_kind": run_doc["failure_kind"],
                    "detail": run_doc["failure_detail"],
                    "transport": transport,
                }
            ],
        },
        "brigade.worker_results.v1",
        sync_dir=False,
    )


def read_text(path: Path, limit: int | None = None) -> str:
    """A file's text (undecodable bytes replaced; at most `limit` bytes and one more),
    empty when it cannot be read."""
    try:
        return store.read_regular(path, limit).decode("utf-8", "replace")
    except OSError:
        return ""
