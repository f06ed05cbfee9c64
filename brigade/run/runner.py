"""The cell lifecycle: bring one cell up to date (run its seat through run/seat, or reuse
a run), grade, write its receipts; regrade a stored run."""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brigade import fs
from brigade.core.accounting import model_runs
from brigade.core.clock import utc_now
from brigade.core.identity import CELL_SCHEMA, digest
from brigade.core.plan import Cell, judge_env_values
from brigade.core.projection import Secrets, credential_values, make_secrets, scrub_text
from brigade.core.receipts import Receipt
from brigade.core.taxonomy import (
    GRADEABLE,
    RunFacts,
    Verdict,
    cell_score,
    classify_grades,
    classify_run,
    decide,
    grader_passed,
)
from brigade.core.terminal import printable
from brigade.core.usage import Price, Usage, UsageError, priced, usage_document, usage_from_document
from brigade.errors import EnvironmentProblem, InputError, TamperedOutput
from brigade.inputs import schemas
from brigade.outdir import store
from brigade.outdir.export import machine_paths
from brigade.run import graders, proc, reuse, workspaces, worktree
from brigade.run.context import RunContext, unseen_paths
from brigade.run.seat import (
    FINAL,
    RUN_DIR_VARIABLE,
    RUN_RECORD,
    RUN_SCHEMA,
    TRANSCRIPT,
    WORKER_RESULTS,
    SeatJob,
    SeatRun,
    execute_seat,
    record_run,
    seat_job,
    unlaunched_run,
)

if TYPE_CHECKING:
    pass

# receipt fields that describe the cell itself (identity and coordinate)
PLAN_FIELDS = (
    "cell_id",
    "coordinate",
    "case_id",
    "case",
    "prompt",
    "seat",
    "trial",
    "execution_mode",
    "workspace",
)


# takes over a cell whose seat must run (the scheduler): it runs it when a slot is free
Hand = Callable[[Cell], None]


def bring_up_to_date(
    ctx: RunContext,
    cell: Cell,
    reuse_from: str | None = None,
    always: bool = False,
    hand: Hand | None = None,
) -> str:
    """Run (or reuse) the seat for a cell that needs it; returns what was done.

    The decision is taken again from disk here, so a cell finished by another
    run since the plan was loaded is left alone. `always` runs a new attempt
    whatever the receipt says (like `make -B`). With `hand` (the scheduler) a
    cell whose seat must run is handed over before anything is written
    ("queued"): `run_cell` runs it when its turn comes. A reused run is copied
    and graded here: it launches nothing.
    """
    receipt, recorded_attempt = store.read_cell_json(ctx.out, cell.cell_id)
    source = _usable_source(ctx, reuse_from, cell) if reuse_from and not always else None
    action = (
        "run"
        if always
        else decide(receipt, retry_transient=ctx.retry_transient, reusable=source is not None)
    )
    if action in ("skip", "regrade"):
        return action
    if not always and source is None and resume_finished(ctx, cell, receipt, recorded_attempt):
        return "regrade"
    if source is None and hand is not None:
        hand(cell)
        return "queued"
    # a reused run costs only its judges; the seat runs here when no scheduler does
    if ctx.budget is not None and not ctx.budget.admit(cell, seat=source is None):
        return "kept"
    attempt, started_at = start_attempt(ctx, cell, receipt, recorded_attempt)
    if source is not None:
        run_doc, reused = _copy_run(ctx, source, cell, attempt)
        finish(ctx, cell, attempt, started_at, run_doc, reused, source)
    else:
        finish(ctx, cell, attempt, started_at, run_seat(ctx, cell, attempt), None)
    return action


# <attempt>/run/seat_run.json: the seat run of the attempt was recorded, its graders may run
SEAT_RUN = "seat_run.json"
SEAT_RUN_SCHEMA = "brigade.seat_run.v1"
# the files of a recorded seat run that grading and the receipt read (and the snapshot)
_RECORDED = (FINAL, RUN_RECORD, WORKER_RESULTS, TRANSCRIPT, worktree.PATCH)
_SNAPSHOT = worktree.CHANGES_DIR + "/"


def _recorded_files(rdir: Path) -> dict[str, str | None]:
    files = {name: store.file_digest(rdir / name) for name in _RECORDED}
    files[_SNAPSHOT] = worktree.snapshot_digest(rdir)
    return files


def write_finished_run(rdir: Path, cell: Cell, attempt: int) -> None:
    """Record that the attempt's seat run is recorded in full (`seat_run.json`: the digest
    of every file of it graders and the receipt read), before its graders run."""
    doc = {
        "schema": SEAT_RUN_SCHEMA,
        "cell_id": cell.cell_id,
        "attempt": attempt,
        "files": _recorded_files(rdir),
    }
    schemas.check_output(doc, SEAT_RUN_SCHEMA)
    # not fsynced: it only saves a seat run; one a power loss cut is not read (the seat
    # runs again), and one that outlived its files is refused by their digests
    store.atomic_write_bytes(rdir / SEAT_RUN, store.dumps(doc), durable=False)


def _slow_grading(cell: Cell) -> bool:
    """Whether a grader of the cell runs a process (a command, a judge): grading that
    takes long enough for a kill to land in it."""
    for spec in cell.graders:
        kind = graders.GRADERS.get(str(spec.get("type")))
        if kind is not None and kind.process:
            return True
    return False


def finished_run(out: Path, cell: Cell, attempt: int) -> dict[str, Any] | None:
    """The run.json of an attempt whose seat run was recorded in full and is as recorded
    (its `seat_run.json` is brigade's, for this cell and attempt, and every file it names
    has its digest); None otherwise: the seat runs again."""
    rdir = store.run_dir(out, cell.cell_id, attempt)
    # every folder on the way is the output directory's own (no link to elsewhere)
    folder = store.cell_dir(out, cell.cell_id)
    for part in ("", store.ATTEMPTS_DIR, store.attempt_name(attempt), store.RUN_DIR):
        folder = folder / part if part else folder
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return None
        except OSError:
            return None
    record = fs.load_json(rdir / SEAT_RUN)
    if (
        not isinstance(record, dict)
        or schemas.problems(record, SEAT_RUN_SCHEMA)
        or record["cell_id"] != cell.cell_id
        or record["attempt"] != attempt
        or record["files"] != _recorded_files(rdir)
    ):
        return None
    run_doc = store.read_json(rdir / RUN_RECORD)
    if not isinstance(run_doc, dict) or schemas.problems(run_doc, RUN_SCHEMA):
        return None
    return run_doc


def resume_finished(
    ctx: RunContext,
    cell: Cell,
    receipt: Receipt | None,
    recorded_attempt: int | None,
) -> bool:
    """A cell whose last run was killed after its seat run was recorded (while grading):
    it runs again as a new attempt, as every `running` cell does (the resume contract),
    but that attempt reuses the recorded seat run instead of launching the seat again
    (`reused_run` names the killed attempt); its graders whose inputs are unchanged reuse
    what the killed attempt's own receipt holds, when it got that far. False when the
    receipt is not such a crashed attempt's, or its seat run is not as recorded."""
    if receipt is None or receipt.state != "running" or recorded_attempt is None:
        return False
    if receipt.attempt != recorded_attempt:
        return False
    _end_crashed_seat(ctx.out, cell, recorded_attempt)  # before the files are checked
    run_doc = finished_run(ctx.out, cell, recorded_attempt)
    if run_doc is None:
        return False
    if ctx.budget is not None and not ctx.budget.admit(cell, seat=False):
        return False
    rdir = store.run_dir(ctx.out, cell.cell_id, recorded_attempt)
    source: dict[str, Any] = {
        "cell_id": cell.cell_id,
        "coordinate": cell.coordinate,
        "attempt": recorded_attempt,
        "output_digest": store.file_digest(rdir / FINAL),
        "changes_digest": changes_digest(rdir, run_doc),
    }
    copy = store.attempt_dir(ctx.out, cell.cell_id, recorded_attempt) / store.RECEIPT_FILE
    if os.path.lexists(copy):
        # killed between the attempt's receipt and cell.json: its grades may be reused
        done = store.attempt_receipt(ctx.out, cell.cell_id, recorded_attempt)
        if (
            done is not None
            and done.attempt == recorded_attempt
            and done.output_digest == source["output_digest"]
            and done.changes_digest == source["changes_digest"]
            and not schemas.problems(done.document, CELL_SCHEMA)
        ):
            # the source a reused run is copied and graded from: a document, as the
            # source a run of another cell gives (its receipt's)
            source = {**done.document, "coordinate": cell.coordinate}
    attempt, started_at = start_attempt(ctx, cell, receipt, recorded_attempt)
    copied, reused = _copy_run(ctx, source, cell, attempt)
    finish(ctx, cell, attempt, started_at, copied, reused, source)
    return True


def start_attempt(
    ctx: RunContext,
    cell: Cell,
    receipt: Receipt | None = None,
    recorded_attempt: int | None = None,
    *,
    read: bool = False,
) -> tuple[int, str]:
    """Open a new attempt of a cell: end what a crashed attempt left running, make the
    attempt's folder and write the `running` receipt; its number and `started_at`.

    `read`: read cell.json here (else `receipt` and `recorded_attempt` are what it says).
    """
    if read:
        receipt, recorded_attempt = store.read_cell_json(ctx.out, cell.cell_id)
    crashed = receipt is not None and receipt.state == "running"
    if crashed:
        _end_crashed_seat(ctx.out, cell, recorded_attempt)
        _remove_crash_leftovers(ctx.out, cell.cell_id, recorded_attempt)
    started_at = receipt.started_at if receipt is not None and crashed else None
    started_at = started_at or utc_now()
    attempt = store.new_attempt(ctx.out, cell.cell_id, recorded_attempt)
    store.write_receipt(ctx.out, running_receipt(ctx, cell, attempt, started_at))
    return attempt, started_at


def run_cell(ctx: RunContext, cell: Cell, tries: int = 1) -> Receipt:
    """A new attempt of a cell whose seat must run, here: run, grade, write its receipt.

    `tries`: the attempts this run has made for the cell, this one included (a retry's).
    """
    attempt, started_at = start_attempt(ctx, cell, read=True)
    run_doc = run_seat(ctx, cell, attempt)
    return finish(ctx, cell, attempt, started_at, run_doc, None, tries=tries)


def running_receipt(ctx: RunContext, cell: Cell, attempt: int, started_at: str) -> dict[str, Any]:
    """The receipt written before the seat starts."""
    return {
        "schema": CELL_SCHEMA,
        **{key: value for key, value in cell.document().items() if key in PLAN_FIELDS},
        "grader_specs": list(cell.graders),
        "state": "running",
        "attempt": attempt,
        "started_at": started_at,
        "manifest_digest": ctx.manifest_digest,
    }


def run_seat(ctx: RunContext, cell: Cell, attempt: int) -> dict[str, Any]:
    """Run the seat here once for an attempt; write final.txt, logs, run.json, worker-results.

    A case with its own workspace starts from it as built (once per case: its setup task,
    or here when no task built it); a setup that failed is the apparatus's fault, the
    seat never runs.
    """
    rdir = store.run_dir(ctx.out, cell.cell_id, attempt)
    job = seat_start(ctx, cell, attempt)
    if isinstance(job, SeatRun):
        return record_run(rdir, job)
    sdir = store.seat_dir(ctx.out, cell.cell_id, attempt)
    return record_run(rdir, execute_seat(job, workspace_of(ctx, cell), rdir, sdir, out=ctx.out))


def seat_start(ctx: RunContext, cell: Cell, attempt: int) -> SeatJob | SeatRun:
    """The job that runs a cell's seat for an attempt (its case's own workspace built first,
    once per case), or, when that case's setup failed, the run that never launched (its
    logs written in the attempt's run folder, recorded nowhere yet). Both executors start
    here: a Dask worker gets the job and the built commit it names."""
    head = None
    if cell.workspace is not None:
        built = ensure_workspace(ctx, cell)
        if not built.ok:
            rdir = store.run_dir(ctx.out, cell.cell_id, attempt)
            job = seat_job(cell, attempt, sandbox_mode=ctx.sandbox)
            detail = f"setup: {built.detail}"
            log = _setup_log(ctx, cell)
            return unlaunched_run(job, rdir, ctx.out, detail, "setup_failed", log=log)
        head = built.head
    hidden = (*unseen_paths(cell.graders, ctx.manifest_dir, ctx.manifest), *ctx.unseen)
    if cell.workspace is not None:
        # the case's source (its later history, a newer checkout): the seat has its copy
        hidden = (*hidden, *workspaces.source_paths(cell.workspace))
    return seat_job(cell, attempt, head=head, sandbox_mode=ctx.sandbox, hidden=hidden)


def _setup_log(ctx: RunContext, cell: Cell) -> bytes:
    """The end of a failed setup's log, for the stderr.log of each cell of its case."""
    world = cell.world()
    tail = workspaces.log_tail(ctx.out, world) if world is not None else b""
    if not tail:
        return b""
    return b"brigade: the setup's log ends:\n" + tail + (b"" if tail.endswith(b"\n") else b"\n")


def workspace_of(ctx: RunContext, cell: Cell) -> Path:
    """Where a cell's seat runs from: its case's built workspace, else the run's."""
    world = cell.world()
    if world is None:
        return ctx.workspace
    return workspaces.tree(ctx.out, world)


def built_for_grading(ctx: RunContext, cell: Cell) -> None:
    """Make sure the built tree a cell's graders start from is there: a tree removed since
    the run (derived data, like a cache) is built again exactly as it was, else the regrade
    is refused (EnvironmentProblem, exit 2) rather than graded against something else."""
    world = cell.world()
    if world is None or cell.workspace is None or workspaces.state(ctx.out, world) is not None:
        return
    where = os.path.relpath(workspaces.folder(ctx.out, world), ctx.out)
    try:
        setup = workspaces.rebuild_setup(cell.workspace, cell.setup, ctx.manifest, cell.case_id)
    except (InputError, OSError) as exc:
        raise EnvironmentProblem(
            f"{cell.coordinate}: its case's built workspace ({where}) is gone and cannot be "
            f"built again as it was: {exc}"
        ) from None
    built, _ = workspaces.ensure(ctx.out, cell.workspace, setup, world, sandbox_mode=ctx.sandbox)
    if not built.ok:
        raise EnvironmentProblem(
            f"{cell.coordinate}: its case's built workspace ({where}) was gone and could not "
            f"be built again: {built.detail}"
        )


def ensure_workspace(ctx: RunContext, cell: Cell) -> workspaces.Built:
    """The cell's case's workspace, built first when it is not (its setup run once)."""
    return build_workspace(ctx, cell)[0]


def build_workspace(ctx: RunContext, cell: Cell) -> tuple[workspaces.Built, bool]:
    """The cell's case's workspace, and whether this call built it (ran its setup)."""
    world = cell.world()
    assert world is not None and cell.workspace is not None
    return workspaces.ensure(
        ctx.out,
        cell.workspace,
        cell.setup,
        world,
        retry_failed=ctx.retry_transient,
        sandbox_mode=ctx.sandbox,
    )


def _end_crashed_seat(out: Path, cell: Cell, attempt: int | None) -> None:
    """Kill what a crashed run's seat left running for this cell (found by its
    BRIGADE_RUN_DIR). The run holds the output directory's lock, so no live run
    owns these processes."""
    ended = proc.end_stragglers(RUN_DIR_VARIABLE, f"{store.cell_dir(out, cell.cell_id)}/")
    if ended:
        which = f"attempt {attempt}" if attempt is not None else "an earlier attempt"
        pids = ", ".join(map(str, sorted(ended)))
        sys.stderr.write(
            printable(
                f"brigade: {cell.coordinate}: ended {len(ended)} process(es) left running by "
                f"{which} of a run that was killed (pids {pids})\n"
            )
        )


def _remove_crash_leftovers(out: Path, cell_id: str, attempt: int | None) -> None:
    """Temp files of writes the crash interrupted: in the cell's folder and its last attempt's."""
    base = store.cell_dir(out, cell_id)
    store.remove_stale_temps(base)
    if attempt is not None:
        folder = base / store.ATTEMPTS_DIR / store.attempt_name(attempt)
        store.remove_stale_temps(folder)
        store.remove_stale_temps(folder / store.RUN_DIR)


# how a receipt's detail says why a seat stopped itself (run.json `own_failure.kind`)
OWN_FAILURES = {
    "turn_limit": "the seat hit its turn limit",
    "budget_limit": "the seat hit its budget limit",
    "agent_error": "the agent reported an error",
    # a seat (unsandboxed) that put files where brigade writes the run's own
    "tampered": "the seat tampered with brigade's record",
}
# failure kinds older run.json documents recorded, as fault kinds
_OLDER_KINDS = {
    "tempfail": "transport_drop",
    "provider_error": "provider_5xx",
    "transport_error": "cluster_lost",
}


def facts_from_run(run_doc: dict[str, Any]) -> RunFacts:
    """The classification inputs recorded in run.json: its `fault` and `own_failure` (from
    `failure_kind` for documents written before those keys were)."""
    status = run_doc["status"]
    fault = run_doc.get("fault")
    kind: str | None = None
    detail: str | None = None
    if isinstance(fault, dict):
        kind, detail = fault.get("kind"), fault.get("message")
    elif status in ("not_launched", "apparatus_fault"):
        recorded = str(run_doc.get("failure_kind") or "transport_drop")
        if status == "not_launched":
            kind = "launch_failed"
        else:
            kind = _OLDER_KINDS.get(recorded, recorded)
        detail = run_doc.get("failure_detail") or status
    own = run_doc.get("own_failure")
    own_text = None
    if isinstance(own, dict):
        reason = OWN_FAILURES.get(str(own.get("kind")), "the seat failed")
        own_text = f"{reason}: {own['message']}" if own.get("message") else reason
    return RunFacts(
        launched=status != "not_launched",
        timed_out=status == "timed_out",
        exit_code=run_doc["exit_code"],
        fault_kind=kind,
        fault_detail=detail,
        own_failure=own_text,
    )


def grade_context(
    ctx: RunContext,
    cell: Cell,
    rdir: Path,
    run_doc: dict[str, Any],
    changes_digest: str | None = None,
) -> graders.GradeContext:
    """What the graders see for a stored run (`changes_digest`: what its changes.patch hashes
    to, as its receipt records it)."""
    final_path = rdir / FINAL
    try:  # one read: the text graders see is the text its digest names
        final: bytes | None = store.read_regular(final_path)
    except OSError:
        final = None
    snapshot = run_doc.get("workspace_snapshot")
    workspace = workspace_of(ctx, cell)
    view: graders.WorkspaceView
    if snapshot:
        view = worktree.SnapshotWorkspace(
            rdir, {**snapshot, "changed_files": run_doc.get("changed_files")}, workspace
        )
    else:
        view = graders.LiveWorkspace(workspace)
    changed = run_doc.get("changed_files")
    setting = graders.Setting(
        out=ctx.out,
        workspace=workspace,
        run_dir=rdir,
        graders_dir=rdir.parent / GRADERS_DIR,
        coordinate=cell.coordinate,
        attempt=_attempt_of(rdir),
        prompt=cell.prompt,
        execution_mode=cell.execution_mode,
        seat=cell.seat.name,
        snapshot=snapshot if isinstance(snapshot, dict) else None,
        changes_digest=changes_digest,
        seats=ctx.seats,
        roster_dir=ctx.roster_dir,
        command_timeout=ctx.command_timeout,
        sandbox=ctx.sandbox,
        own_head=_own_head(ctx, cell),
        unseen=workspaces.source_paths(cell.workspace) if cell.workspace is not None else (),
    )
    return graders.GradeContext(
        cell_id=cell.cell_id,
        final_text=(final or b"").decode("utf-8", "replace"),
        output_digest=digest(final) if final is not None else None,
        output_ref=os.path.relpath(final_path, ctx.out),
        exit_code=run_doc["exit_code"],
        manifest_dir=ctx.manifest_dir,
        workspace=view,
        changed_files=tuple(changed) if changed is not None else None,
        redact=_redactor(ctx, cell),
        setting=setting,
    )


def _own_head(ctx: RunContext, cell: Cell) -> str | None:
    """A read-only cell's case's built commit (None: a writable run, or a case without a
    workspace of its own, or one not built)."""
    world = cell.world()
    if world is None or cell.execution_mode == "writable-worktree":
        return None
    built = workspaces.state(ctx.out, world)
    return built.head if built is not None and built.ok else None


# <attempt>/graders/<type>-<index>/: what graders that run a process leave
GRADERS_DIR = reuse.GRADERS_DIR
_ATTEMPT = re.compile(r"attempt-([0-9]+)")


def _attempt_of(rdir: Path) -> int:
    """The attempt number of a run folder (`.../attempt-NNN/run`)."""
    match = _ATTEMPT.fullmatch(rdir.parent.name)
    return int(match.group(1)) if match else 1


def needs_patch(cell: Cell) -> bool:
    """Whether grading the cell re-applies its run's changes.patch (a writable run graded
    by a command)."""
    return cell.execution_mode == "writable-worktree" and any(
        spec.get("type") == "command" for spec in cell.graders
    )


def changes_digest(rdir: Path, run_doc: Mapping[str, Any]) -> str | None:
    """The digest of a writable run's changes.patch (None: not a writable run, or none stored)."""
    if run_doc.get("execution_mode") != "writable-worktree":
        return None
    return store.file_digest(rdir / worktree.PATCH)


def _redactor(ctx: RunContext, cell: Cell) -> Callable[[str], str]:
    """Replaces the cell's prompt, env values and this machine's paths in what a grader's
    detail quotes (built when first used: most details quote nothing)."""
    built: list[Secrets] = []

    def redact(text: str) -> str:
        if not built:
            homes, roots = machine_paths()
            built.append(
                make_secrets(
                    prompts=[cell.prompt],
                    paths=[
                        (str(ctx.out.absolute()), "."),
                        (str(ctx.workspace.absolute()), "<workspace>"),
                        (str(ctx.manifest_dir.absolute()), "<manifest-dir>"),
                    ],
                    env_values=[
                        *cell.seat.env.values(),
                        *judge_env_values(cell.graders),
                        *credential_values(os.environ, ctx.secret_env),
                    ],
                    homes=homes,
                    roots=roots,
                )
            )
        return scrub_text(text, built[0])

    return redact


def finish(
    ctx: RunContext,
    cell: Cell,
    attempt: int,
    started_at: str,
    run_doc: dict[str, Any],
    reused: dict[str, Any] | None,
    source: dict[str, Any] | None = None,
    *,
    tries: int = 1,
) -> Receipt:
    """Classify the run, grade when it exited 0, write the terminal receipt (`tries`: the
    attempts this run made for the cell, this one included, its `attempts_in_run`).

    A reused run (`source`: the receipt it came from) keeps the source's recorded
    changes_digest: its copied changes.patch is held to what the seat wrote.
    """
    rdir = store.run_dir(ctx.out, cell.cell_id, attempt)
    if source is not None:
        changes = source.get("changes_digest")
    else:
        changes = changes_digest(rdir, run_doc)
    verdict = classify_run(facts_from_run(run_doc))
    grading: graders.Grading | None = None
    if verdict is None and _slow_grading(cell):
        # a command or a judge may take long: a run killed while they run resumes here
        write_finished_run(rdir, cell, attempt)
    if verdict is None:
        # a reused run's graders whose inputs are unchanged reuse its source's results
        earlier = reuse.earlier_of(ctx.out, Receipt.of(source)) if source is not None else None
        context = grade_context(ctx, cell, rdir, run_doc, changes)
        grading = graders.grade_all(cell.graders, context, earlier)
        verdict = classify_grades(grading.results)
    results = grading.results if grading is not None else []
    receipt = running_receipt(ctx, cell, attempt, started_at)
    receipt.update(_seat_run_fields(run_doc, rdir, store.file_digest(rdir / FINAL)))
    receipt = graded_receipt(receipt, verdict, grading)
    if changes is not None:
        receipt["changes_digest"] = changes
    if verdict.fault_kind is not None:
        receipt["fault"] = _fault_document(verdict, run_doc)
    receipt["attempts_in_run"] = tries
    receipt.update(_usage_fields(ctx, cell, attempt, run_doc))
    if reused is not None:
        receipt["reused_run"] = reused
        receipt["finished_at"] = receipt["graded_at"]  # this attempt ended now, not the source's
    store.write_receipt(ctx.out, receipt)
    if ctx.budget is not None:
        seat = None
        if reused is None and run_doc.get("status") != "not_launched":
            usage = run_usage(run_doc, ctx.prices, cell.seat.model)
            seat = (cell.seat.name, usage.cost_usd if usage is not None else None)
        skip = grading.reused_indexes if grading is not None else set()
        judges = model_runs(cell.graders, results, ctx.prices, skip)
        ctx.budget.record(cell.cell_id, seat, judges)
    return _written(receipt)


def _grading_fields(grading: graders.Grading) -> dict[str, Any]:
    """The receipt's record of a grading: each grader's key (none without graders), and the
    results it reused."""
    fields: dict[str, Any] = {"grader_keys": list(grading.keys)} if grading.keys else {}
    if grading.reused:
        fields["reused_grades"] = list(grading.reused)
    return fields


def record_seat_run(
    ctx: RunContext, cell: Cell, attempt: int, started_at: str, run_doc: dict[str, Any]
) -> Receipt:
    """Record a seat run made by another executor (its run folder already holds its files)."""
    return finish(ctx, cell, attempt, started_at, run_doc, None)


def graded_receipt(
    base: Mapping[str, Any], verdict: Verdict, grading: graders.Grading | None
) -> dict[str, Any]:
    """`base` (a receipt, or the one being assembled) with `verdict` and `grading` written
    over it: the one place a receipt gets its verdict, grader results, grader keys and
    reused results, whether a seat's run is recorded (`finish`) or its output graded again
    (`regrade`). What only an earlier verdict said is dropped (`_DROPPED_BY_REGRADE`);
    `grading` None: no grader ran (a seat run that failed)."""
    receipt = {k: v for k, v in base.items() if k not in _DROPPED_BY_REGRADE}
    receipt.update(verdict_fields(verdict, grading.results if grading is not None else []))
    if grading is not None:
        receipt.update(_grading_fields(grading))
    return receipt


def verdict_fields(verdict: Verdict, results: list[dict[str, Any]]) -> dict[str, Any]:
    """What a receipt says of its verdict and grader results (through `graded_receipt`)."""
    fields: dict[str, Any] = {
        "state": verdict.state,
        "graders": results,
        "score": cell_score(results),
        "acceptance": _acceptance(verdict, results),
        "graded_at": utc_now(),
    }
    if verdict.failure_reason is not None:
        fields["failure_reason"] = verdict.failure_reason
    if verdict.detail is not None:
        fields["failure_detail"] = verdict.detail
    return fields


# what a regrade drops of a receipt before writing the new verdict's fields over it (they
# keep their places): what only an earlier verdict said (its grading's keys and reused
# results too), and the seat run's fault
_DROPPED_BY_REGRADE = ("failure_reason", "failure_detail", "fault", "grader_keys", "reused_grades")


def _seat_run_fields(
    run_doc: dict[str, Any], rdir: Path, output_digest: str | None
) -> dict[str, Any]:
    """What a terminal receipt says of its seat run (its verdict comes from `graded_receipt`)."""
    fields: dict[str, Any] = {
        "finished_at": run_doc["finished_at"],
        "exit_code": run_doc["exit_code"],
        "duration_seconds": run_doc["duration_seconds"],
        "run_dir": str(rdir),
        "output_digest": output_digest,
    }
    enforcement = run_doc.get("enforcement")
    if enforcement is not None:
        fields["enforcement"] = {
            "applied": enforcement["applied"],
            "network": enforcement["network"],
        }
    return fields


def _fault_document(verdict: Verdict, run_doc: dict[str, Any]) -> dict[str, Any]:
    """The receipt's `fault`: run.json's when it records the same kind, else the verdict's."""
    recorded = run_doc.get("fault")
    if isinstance(recorded, dict) and recorded.get("kind") == verdict.fault_kind:
        return dict(recorded)
    return {"kind": verdict.fault_kind, "message": verdict.detail or verdict.fault_kind}


def run_usage(
    run_doc: Mapping[str, Any], prices: Mapping[str, Price], model: str | None
) -> Usage | None:
    """The usage a run.json records, its cost priced from `prices` when the CLI reported none;
    None when unknown (nothing recorded, or a record that is not a usage document)."""
    doc = run_doc.get("usage")
    if doc is None:
        return None
    try:
        usage = usage_from_document(doc, "run.json usage")
    except UsageError:
        return None
    return priced(usage, prices, model)


def _usage_fields(
    ctx: RunContext, cell: Cell, attempt: int, run_doc: Mapping[str, Any]
) -> dict[str, Any]:
    """The receipt's usage of this attempt, of every attempt of the cell, and the notes.

    Every earlier attempt whose seat ran counts (a failed or retried attempt costs
    too): its run.json's usage, or unknown (null) when it recorded none or never
    finished (a killed run); attempts whose seat never launched spent nothing.
    """
    model = cell.seat.model
    usage = run_usage(run_doc, ctx.prices, model)
    base = store.cell_dir(ctx.out, cell.cell_id)
    attempts: list[dict[str, Any]] = []
    for number in sorted(n for n in store.attempt_numbers(base) if n < attempt):
        earlier = store.read_json(store.run_dir(ctx.out, cell.cell_id, number) / RUN_RECORD)
        if isinstance(earlier, dict) and earlier.get("status") == "not_launched":
            continue
        spent = run_usage(earlier, ctx.prices, model) if isinstance(earlier, dict) else None
        attempts.append(
            {"attempt": number, "usage": usage_document(spent) if spent is not None else None}
        )
    if run_doc.get("status") != "not_launched":
        attempts.append(
            {"attempt": attempt, "usage": usage_document(usage) if usage is not None else None}
        )
    fields: dict[str, Any] = {
        "attempts_usage": attempts,
        "cli_version": run_doc.get("executable_version"),
    }
    if usage is not None:
        fields["usage"] = usage_document(usage)
    if run_doc.get("notes"):
        fields["notes"] = list(run_doc["notes"])
    return fields


def _acceptance(verdict: Verdict, results: list[dict[str, Any]]) -> dict[str, Any] | None:
    if verdict.state not in GRADEABLE:
        return None
    return {
        "accepted": verdict.state == "accepted",
        "graders_total": len(results),
        "graders_passed": sum(1 for r in results if r["status"] == "scored" and grader_passed(r)),
        "graders_errored": sum(1 for r in results if r["status"] == "grader_error"),
    }


def verify_output(ctx: RunContext, receipt: Receipt, patch: bool = False) -> Path:
    """The run folder of a receipt after checking final.txt against output_digest (and, with
    `patch`, run/changes.patch against changes_digest, when the receipt records one)."""
    if receipt.attempt is None:
        raise TamperedOutput(
            f"{receipt.coordinate}: its cell.json records no attempt number; delete the cell "
            "folder to run it again"
        )
    rdir = store.run_dir(ctx.out, receipt.cell_id, receipt.attempt)
    if patch and receipt.changes_digest is not None:
        actual = store.file_digest(rdir / worktree.PATCH)
        if actual != receipt.changes_digest:
            found = actual or "missing"
            raise TamperedOutput(
                f"{receipt.coordinate}: changes digest mismatch: {rdir / worktree.PATCH} is "
                f"{found}, the receipt records {receipt.changes_digest}; the stored changes "
                "changed since the seat made them (restore them, or delete the cell folder to "
                "run it again)"
            )
    if "output_digest" not in receipt.document:
        # the original tool kept the digest in grader results only (the store's view
        # brings it up): a cell it graded with no grader recorded none to verify against
        return rdir
    actual = store.file_digest(rdir / FINAL)
    if actual != receipt.output_digest:
        found = actual or "missing"
        raise TamperedOutput(
            f"{receipt.coordinate}: output digest mismatch: {rdir / FINAL} is {found}, "
            f"the receipt records {receipt.output_digest}; the stored output changed "
            "since the seat wrote it (restore it, or delete the cell folder to run it again)"
        )
    return rdir


def _verdicts(results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # what a grader said (and, for one that ran a process, its exit, logs and usage),
    # without how long it took
    return [{k: v for k, v in r.items() if k != "duration_seconds"} for r in results]


def regrade(
    ctx: RunContext,
    cell: Cell,
    receipt: Receipt,
    *,
    durable: bool = True,
    verified: bool = False,
    reuse_results: bool = False,
) -> Receipt | None:
    """Re-run the graders on a cell's stored output (verified first); never starts a seat.

    The receipt is rewritten only when the graders now say something else, so
    `graded_at` is when the recorded verdicts were produced. `durable=False`
    leaves the fsync to the caller (one sync for a whole batch); `verified` says
    the caller already checked the output digest. `reuse_results`: graders whose key is
    unchanged keep their recorded result (the regrade of a grader_error cell in a run;
    `brigade regrade` runs every grader again). None: the budget kept back the judges it
    would run (the receipt stays as it is).
    """
    if verified and receipt.attempt is not None:
        rdir = store.run_dir(ctx.out, receipt.cell_id, receipt.attempt)
    else:
        rdir = verify_output(ctx, receipt, needs_patch(cell))
    run_doc = store.read_json(rdir / RUN_RECORD)
    if not isinstance(run_doc, dict):
        raise TamperedOutput(f"{cell.coordinate}: {rdir / RUN_RECORD} is missing or corrupt")
    if "exit_code" not in run_doc:  # the original tool's run.json: the receipt has it
        run_doc = {**run_doc, "exit_code": receipt.exit_code}
    if ctx.budget is not None and not ctx.budget.admit(cell, seat=False, kept="regrade"):
        return None
    built_for_grading(ctx, cell)
    context = grade_context(ctx, cell, rdir, run_doc, receipt.changes_digest)
    earlier = reuse.earlier_of(ctx.out, receipt) if reuse_results else None
    grading = graders.grade_all(cell.graders, context, earlier)
    results = grading.results
    if ctx.budget is not None:
        judges = model_runs(cell.graders, results, ctx.prices, grading.reused_indexes)
        ctx.budget.record(cell.cell_id, None, judges)
    verdict = classify_grades(results)
    # the same verdicts keep the receipt as it is (its graded_at, keys and reused results
    # describe the grading that produced them): a regrade of unchanged cells writes nothing
    if verdict.state == receipt.state and _verdicts(results) == _verdicts(receipt.graders):
        return receipt
    # the receipt written is the one read with its new verdict: its document, as read
    base = dict(receipt.document)
    if receipt.seat_name is not None:  # the original tool's: its seat is a name
        base.update(_current_fields(cell, receipt, rdir))
    updated = graded_receipt(base, verdict, grading)
    store.write_receipt(ctx.out, updated, durable=durable)
    return _written(updated)


def _written(receipt: dict[str, Any]) -> Receipt:
    """A receipt this process just wrote, parsed as a reader of its file would have it."""
    written = Receipt.of(receipt)
    assert written is not None  # write_receipt checked it against the receipt schema
    return written


def _current_fields(cell: Cell, receipt: Receipt, rdir: Path) -> dict[str, Any]:
    """What a receipt of the original tool lacks in the current format (for its regrade)."""
    prompt = receipt.prompt if "prompt" in receipt.document else cell.prompt
    fields: dict[str, Any] = {
        "case": {"id": receipt.case_id, "prompt": prompt},
        "grader_specs": list(cell.graders),
        "output_digest": store.file_digest(rdir / FINAL),
        "run_dir": str(rdir),
    }
    if cell.seat.cli:  # known from a roster (a plan.json of the original names seats only)
        fields["seat"] = cell.seat.identity()
    return fields


def regrade_if_needed(ctx: RunContext, cell: Cell) -> str:
    """The grade task: verify a graded cell's stored output; re-grade a grader_error cell.

    A stored output whose digest no longer matches its receipt is refused
    (TamperedOutput, exit 2) whatever the cell's state.
    """
    receipt = store.read_receipt(ctx.out, cell.cell_id)
    if receipt is None or receipt.state not in GRADEABLE:
        return "skip"
    verify_output(ctx, receipt, receipt.state == "grader_error" and needs_patch(cell))
    if receipt.state != "grader_error":
        return "verified"
    if regrade(ctx, cell, receipt, verified=True, reuse_results=True) is None:
        return "kept"
    return "regrade"


def _usable_source(ctx: RunContext, source_id: str, cell: Cell) -> dict[str, Any] | None:
    receipt = store.read_receipt(ctx.out, source_id)
    if receipt is None or receipt.state == "running":
        return None
    try:
        verify_output(ctx, receipt, needs_patch(cell))
    except TamperedOutput as exc:
        print(printable(f"brigade: not reusing a seat run: {exc}"), file=sys.stderr)
        return None
    # the source a reused run is copied and graded from (`_copy_run`, `finish`): the
    # receipt as read, as a source made of a crashed attempt's files is
    return dict(receipt.document)


def _copy_run(
    ctx: RunContext, source: dict[str, Any], cell: Cell, attempt: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copy another cell's verified run into this attempt (the cells differ only in graders)."""
    source_dir = store.run_dir(ctx.out, source["cell_id"], source["attempt"])
    target = store.run_dir(ctx.out, cell.cell_id, attempt)
    store.copy_folder(source_dir, target)
    run_doc = store.read_json(source_dir / RUN_RECORD)
    if not isinstance(run_doc, dict):
        raise TamperedOutput(
            f"{source['coordinate']}: {source_dir / RUN_RECORD} is missing or corrupt"
        )
    run_doc = {
        **run_doc,
        "cell_id": cell.cell_id,
        "attempt": attempt,
        "reused_from": {"cell_id": source["cell_id"], "attempt": source["attempt"]},
    }
    store.write_json(target / RUN_RECORD, run_doc, "brigade.run.v1")
    started = run_doc.get("started_at")
    reused = {
        "cell_id": source["cell_id"],
        "attempt": source["attempt"],
        "output_digest": source.get("output_digest"),
        # when the seat run was made (the receipt's started_at is when this attempt began)
        "started_at": started if isinstance(started, str) else None,
    }
    return run_doc, reused
