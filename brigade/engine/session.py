"""A session: manifest + roster + output directory, planned and scanned once at load time
(the scan itself is outdir/scan's).

Both front doors (`doit` via dodo.py and the `brigade` CLI) open a session and
hand it to `tasks`, so they run the same tasks through the same code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brigade.core.plan import Cell, Counts, Plan
from brigade.core.specs import (
    ExecutorSpec,
    Manifest,
    Roster,
)
from brigade.core.terminal import printable
from brigade.engine.options import Options, check_value
from brigade.errors import InputError
from brigade.inputs import loading
from brigade.outdir import lock, store
from brigade.outdir.adaptive import trial_counts
from brigade.outdir.planfile import PlanOnDisk, plan_against_disk, write_plan
from brigade.outdir.scan import Scan, scan
from brigade.run.ahead import Ahead
from brigade.run.context import RunContext, battery_unseen
from brigade.run.specchecks import spec_checks

if TYPE_CHECKING:
    from brigade.core.receipts import Receipt
    from brigade.run.budget import Budget
    from brigade.run.cluster import DaskExecutor
    from brigade.run.schedule import Scheduler


@dataclass(frozen=True)
class Inputs:
    """What a run was asked for and read: its options, the manifest and roster loaded, the
    folders it works in and writes to, the executor, the graders' problems found."""

    options: Options
    manifest: Manifest
    roster: Roster
    roster_label: str
    workspace: Path
    out: Path
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Session:
    """Everything known at load time about bringing a plan up to date, frozen: the inputs,
    the plan (against the plan.json on disk), the scan of the output directory, and the
    context every cell's run gets. What a run accumulates is its engine's (engine/engine);
    an adaptive round makes a new session (`next_round`)."""

    inputs: Inputs
    planned: PlanOnDisk
    scan: Scan  # what the output directory says about every cell (outdir/scan)
    ctx: RunContext
    # adaptive trials: the trials each adaptive case's seat has in the plan (None: none)
    counts: Counts | None = None
    # the helper digesting a copied directory's files (closed when the run finishes)
    ahead: Ahead | None = None


@contextlib.contextmanager
def _long_lived() -> Iterator[None]:
    """Build what lives for the whole run without the garbage collector.

    Loading a big plan allocates hundreds of thousands of small containers,
    none of them garbage; each collection on the way would traverse them all
    again. They are then frozen: later collections skip them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@_long_lived()
def load_inputs(
    manifest_path: Path, explicit_roster: Path | None, workspace: Path | None = None
) -> tuple[Manifest, Roster, str]:
    """Load and validate the manifest and its roster (built to last the whole run); the
    cases' own workspaces resolved (their commits, folder and setup digests)."""
    manifest, roster, label = loading.load_inputs(manifest_path, explicit_roster, workspace)
    if any(case.workspace is not None for case in manifest.cases):
        from brigade.run import workspaces

        manifest = workspaces.resolve(manifest)
    return manifest, roster, label


def grader_warnings(manifest: Manifest, roster: Roster | None = None) -> list[str]:
    """One line per grader spec that will record grader_error when it runs (with the
    roster: also a judge grader naming a seat it does not have)."""
    # each graders tuple (cases often share one) keyed once: its specs' canonical JSON
    keys: dict[int, list[str]] = {}
    specs: dict[str, dict[str, Any]] = {}
    for case in manifest.cases:
        if id(case.graders) not in keys:
            keys[id(case.graders)] = [json.dumps(spec, sort_keys=True) for spec in case.graders]
            specs.update(zip(keys[id(case.graders)], case.graders, strict=True))
    checks = spec_checks(specs)  # each distinct spec checked once
    lines: list[str] = []
    clean: set[int] = set()  # graders tuples (shared by cases) found without a problem
    for index, case in enumerate(manifest.cases):
        if id(case.graders) in clean:
            continue
        before = len(lines)
        for position, (spec, key) in enumerate(
            zip(case.graders, keys[id(case.graders)], strict=True)
        ):
            problem, warnings = checks[key]
            problem = problem or _judge_problem(spec, roster)
            where = f"{manifest.path}: cases[{index}] ({case.id}) graders[{position}]"
            if problem:
                lines.append(
                    f"{where}: {problem} — this grader will record grader_error until fixed"
                )
            else:
                lines.extend(f"{where}: {warning}" for warning in warnings)
        if len(lines) == before:
            clean.add(id(case.graders))
    return lines


# grader kinds that take settings from the roster (a judge's seat, a command's time limit)
_ROSTER_GRADERS = frozenset({"command", "judge"})


def regrade_context(out: Path, plan: Plan, workspace: Path) -> RunContext:
    """The run context of `brigade regrade` on an output directory: its plan's workspace and
    manifest folder, and, when a grader runs a command or a judge, the roster the plan was
    made with (its context names it). A roster that is gone leaves the defaults: a judge
    keeps the identity its spec records; one that no longer loads is refused (exit 2)."""
    context = plan.context or {}
    manifest_dir = Path(context["manifest"]).parent if "manifest" in context else Path.cwd()
    ctx = RunContext(
        out=out,
        workspace=workspace,
        manifest_dir=manifest_dir,
        manifest_digest=plan.manifest_digest,
        prices=plan.prices,
        secret_env=plan.secret_env,
        manifest=Path(context["manifest"]) if "manifest" in context else None,
    )
    wanted = any(
        isinstance(spec, dict) and spec.get("type") in _ROSTER_GRADERS
        for graders_ in {id(cell.graders): cell.graders for cell in plan.cells}.values()
        for spec in graders_
    )
    roster_file = Path(context["roster"]) if "roster" in context else None
    if not wanted or roster_file is None:
        return ctx
    if not roster_file.is_file():
        return dataclasses.replace(ctx, roster_dir=str(roster_file.parent))
    from brigade.inputs.roster import load_roster

    roster = load_roster(roster_file)
    return dataclasses.replace(
        ctx,
        seats=roster.seats,
        roster_dir=str(roster_file.resolve().parent),
        command_timeout=roster.command_timeout_seconds,
    )


def _judge_problem(spec: dict[str, object], roster: Roster | None) -> str | None:
    """Why a judge grader's seat cannot judge (not in the roster), or None."""
    if roster is None or spec.get("type") != "judge":
        return None
    name = spec.get("seat")
    if not isinstance(name, str) or name in roster.seats:
        return None
    if name in roster.unusable:
        return f"judge seat {name!r}: {roster.unusable[name]}"
    defined = ", ".join(sorted(roster.seats))
    return f"judge seat {name!r} is not a seat of the roster (it defines: {defined})"


def default_out(workspace: Path, name: str) -> Path:
    """`<workspace>/.brigade/evals/<name>/`."""
    return workspace / ".brigade" / "evals" / name


def output_dir(options: Options, manifest: Manifest) -> Path:
    """The output directory a session of these options uses (absolute); the workspace
    must be a folder (nothing is created for one that is not)."""
    workspace = resolve_workspace(options)  # refused before anything is created
    return (options.out or default_out(workspace, manifest.name)).absolute()


def checked_output(options: Options, manifest: Manifest) -> Path:
    """The output directory of these options, refused (nothing created or written for it)
    when the path is not a folder or a folder whose layout is broken."""
    out = output_dir(options, manifest)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: output path exists and is not a folder")
    store.check_layout(out)
    return out


def lock_output(options: Options, manifest: Manifest) -> Path:
    """Take the output directory's lock before anything reads it (`checked_output` first)."""
    out = checked_output(options, manifest)
    lock.acquire(out, wait=options.wait)
    return out


def plan_only(options: Options) -> tuple[Plan, Path]:
    """Load inputs and build the plan against the previous plan.json; writes nothing."""
    manifest, roster, label = load_inputs(options.manifest, options.roster, options.workspace)
    workspace = resolve_workspace(options)
    out = (options.out or default_out(workspace, manifest.name)).absolute()
    context = _context(options, label, workspace)
    counts = trial_counts(out, manifest, roster, label, retry_transient=options.retry_transient)
    return (
        plan_against_disk(
            manifest, roster, label, out, context, compare=False, counts=counts, keep_index=False
        ).plan,
        out,
    )


def resolve_executor(options: Options, roster: Roster) -> ExecutorSpec:
    """--executor/--scheduler (doit: executor=, scheduler=) over the roster's `executor`; local."""
    base = roster.executor or ExecutorSpec()
    kind = options.executor or base.kind
    if kind == "local":
        if options.scheduler:
            raise InputError(
                f"--scheduler {options.scheduler}: only the dask executor uses a scheduler; "
                "add --executor dask (doit: executor=dask)"
            )
        return ExecutorSpec()
    scheduler = options.scheduler or base.scheduler
    if not scheduler:
        raise InputError(
            "the dask executor needs a scheduler address: --scheduler tcp://HOST:8786 "
            "(doit: scheduler=tcp://HOST:8786) or the roster's executor.scheduler"
        )
    if not _SCHEDULER_ADDRESS.match(scheduler):
        raise InputError(f"scheduler {scheduler!r}: not a scheduler address; use tcp://HOST:PORT")
    return ExecutorSpec(kind="dask", scheduler=scheduler)


# as in schemas/roster.v1.json (executor.scheduler)
_SCHEDULER_ADDRESS = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$")


@_long_lived()
def open_session(
    options: Options,
    inputs: tuple[Manifest, Roster, str] | None = None,
    *,
    finishing: bool = False,
) -> Session:
    """Load (unless `inputs` are given), plan, scan the output directory; decide every cell.

    `finishing`: a run that holds the output directory's lock and ends in
    `Engine.finish`, which closes the helper that digests a copied directory's outputs
    beside the scan (run/ahead; a listing starts none)."""
    manifest, roster, label = inputs or load_inputs(
        options.manifest, options.roster, options.workspace
    )
    executor = resolve_executor(options, roster)
    workspace = resolve_workspace(options)
    if manifest.execution_mode == "writable-worktree" and any(
        case.workspace is None for case in manifest.cases
    ):
        from brigade.run import worktree

        worktree.find_repo(workspace)
    out = output_dir(options, manifest)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: output path exists and is not a folder")
    store.check_layout(out)
    if lock.held(out):
        remove_worktree_leftovers(out)
    counts = trial_counts(out, manifest, roster, label, retry_transient=options.retry_transient)
    on_disk = plan_against_disk(
        manifest, roster, label, out, _context(options, label, workspace), counts=counts
    )
    plan = on_disk.plan
    # a copied directory's outputs are digested beside the scan (run/ahead)
    ahead = Ahead(out, plan) if finishing else None
    try:
        scanned = scan(
            out,
            plan,
            retry_transient=options.retry_transient,
            ahead=ahead.start if ahead is not None else None,
        )
        ctx = RunContext(
            out=out,
            workspace=workspace,
            manifest_dir=manifest.directory,
            manifest_digest=manifest.digest,
            retry_transient=options.retry_transient,
            seats=roster.seats,
            roster_dir=str(roster.path.resolve().parent),
            command_timeout=roster.command_timeout_seconds,
            prices=plan.prices,
            sandbox=options.sandbox,
            budget=spending_cap(options.max_cost, manifest, roster),
            secret_env=plan.secret_env,
            manifest=manifest.path,
            unseen=battery_unseen(
                {id(case.graders): case.graders for case in manifest.cases}.values(),
                manifest.directory,
                manifest.path,
            ),
        )
        inputs_ = Inputs(
            options=options,
            manifest=manifest,
            roster=roster,
            roster_label=label,
            workspace=workspace,
            out=out,
            executor=executor,
            warnings=tuple(grader_warnings(manifest, roster)),
        )
    except BaseException:
        if ahead is not None:
            ahead.close()
        raise
    return Session(
        inputs=inputs_, planned=on_disk, scan=scanned, ctx=ctx, counts=counts, ahead=ahead
    )


def remove_worktree_leftovers(out: Path) -> None:
    """Remove the worktrees a killed run of `out` left in their repositories (under the
    output directory's lock), saying how many."""
    if not os.path.isdir(out / store.WORKTREE_LEDGER):
        return  # no run left worktrees: the no-op path's one look
    from brigade.run import worktree

    removed = worktree.remove_leftovers(out)
    if removed:
        sys.stderr.write(
            printable(f"brigade: removed {removed} worktree(s) left by a run that was killed\n")
        )


def next_round(session: Session) -> tuple[Session, list[Cell]]:
    """Adaptive trials, after a round of a run: the trials the rules ask for now, read from
    the receipts on disk; when the plan grows, plan.json is written again. Returns the
    session of the plan as it is now and the cells the new plan adds (none: every case
    stopped)."""
    if session.counts is None:
        return session, []
    options, manifest = session.inputs.options, session.inputs.manifest
    counts = trial_counts(
        session.inputs.out,
        manifest,
        session.inputs.roster,
        session.inputs.roster_label,
        retry_transient=options.retry_transient,
    )
    if counts is None or counts == session.counts:
        return session, []
    context = _context(options, session.inputs.roster_label, session.inputs.workspace)
    on_disk = plan_against_disk(
        manifest,
        session.inputs.roster,
        session.inputs.roster_label,
        session.inputs.out,
        context,
        counts=counts,
    )
    before = {cell.cell_id for cell in session.planned.plan.cells}
    added = [cell for cell in on_disk.plan.cells if cell.cell_id not in before]
    write_plan(session.inputs.out, on_disk.plan, on_disk.key, on_disk.inputs)
    written = dataclasses.replace(on_disk, current=True, indexed=True)
    grown = dataclasses.replace(session, planned=written, counts=counts)
    return grown, added


def check_max_cost(value: float | None) -> None:
    """Refuse a --max-cost that is not a number of dollars above 0 (exit 2; the check of
    engine/options' table)."""
    check_value("max_cost", value)


def regrade_budget(given: float | None, plan: Plan, ctx: RunContext) -> RunContext:
    """`brigade regrade`'s context with its budget: --max-cost, else the `max_cost` of the
    manifest and then of the roster the plan was made with (when they are still there; one
    that no longer loads is refused, exit 2)."""
    check_max_cost(given)
    manifest = roster = None
    context = plan.context or {}
    if given is None and "manifest" in context and Path(context["manifest"]).is_file():
        from brigade.inputs.manifest import load_manifest

        manifest = load_manifest(Path(context["manifest"]))
    if given is None and "roster" in context and Path(context["roster"]).is_file():
        from brigade.inputs.roster import load_roster

        roster = load_roster(Path(context["roster"]))
    budget = spending_cap(given, manifest, roster)
    return dataclasses.replace(ctx, budget=budget) if budget is not None else ctx


def spending_cap(
    given: float | None, manifest: Manifest | None, roster: Roster | None
) -> Budget | None:
    """The run's budget: the command line's cap, else the manifest's (this battery), else
    the roster's; None without one."""
    caps = (given, manifest.max_cost if manifest else None, roster.max_cost if roster else None)
    cap = next((value for value in caps if value is not None), None)
    if cap is None:
        return None
    from brigade.run.budget import Budget

    return Budget(cap)


def build_scheduler(session: Session, cluster: DaskExecutor | None = None) -> Scheduler:
    """The scheduler of a run whose cells must run: caps from the roster and -n, seat runs
    in threads here, or submitted to the Dask cluster (with no overall cap: the workers'
    resources are the cap there)."""
    from brigade.run.runner import finish, run_cell, start_attempt
    from brigade.run.schedule import Done, Executor, Job, Scheduler, Threads, limits_for

    ctx = session.ctx
    seats = [session.inputs.roster.seats[name] for name in session.inputs.manifest.seats]
    policies = {seat.name: session.inputs.options.retry_policy(seat) for seat in seats}
    executor: Executor
    if cluster is None:
        limits = limits_for(seats, session.inputs.roster.limits, session.inputs.options.jobs)
        executor = Threads(lambda job: run_cell(ctx, job.cell, job.tries))
    else:
        limits = limits_for(seats, session.inputs.roster.limits, None)

        class OnCluster:
            """The Dask executor: the `running` receipt written here, the seat run on a
            worker, its recording (graders included) on this coordinator."""

            def submit(self, job: Job, done: Done) -> None:
                """Open the attempt and submit its seat run to the cluster."""
                attempt, started_at = start_attempt(ctx, job.cell, read=True)

                def record(run_doc: dict[str, Any]) -> Receipt:
                    return finish(
                        ctx, job.cell, attempt, started_at, run_doc, None, tries=job.tries
                    )

                assert cluster is not None
                cluster.submit(job.cell, attempt, record, done)

        executor = OnCluster()
    scheduler = Scheduler(limits, policies, executor)
    if ctx.budget is not None:
        ctx.budget.attach(scheduler)  # seat runs start only when the budget admits them
    return scheduler


def _context(options: Options, roster_label: str, workspace: Path) -> dict[str, str]:
    return {
        "manifest": str(options.manifest.absolute()),
        "roster": str(Path(roster_label).absolute()),
        "workspace": str(workspace),
    }


def resolve_workspace(options: Options) -> Path:
    """The workspace (absolute); InputError when it is not an existing folder."""
    workspace = (options.workspace or Path.cwd()).absolute()
    if not workspace.is_dir():
        raise InputError(f"{workspace}: workspace is not a folder (--workspace / workspace=DIR)")
    return workspace
