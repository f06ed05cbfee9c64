"""A session: manifest + roster + output directory, planned and scanned once at load time.

Both front doors (`doit` via dodo.py and the `brigade` CLI) open a session and
hand it to `tasks`, so they run the same tasks through the same code.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brigade.core.identity import cell_id as hash_cell
from brigade.core.identity import identity_payload, run_key
from brigade.core.plan import Cell, Plan, cells_key, expand, expansion_key, len_cells, stale_cells
from brigade.core.specs import ExecutorKind, ExecutorSpec, Manifest, Roster
from brigade.core.taxonomy import Action, decide, reusable_source
from brigade.errors import InputError
from brigade.inputs import loading
from brigade.outdir import store
from brigade.run import graders
from brigade.run.doctor import read_only_warnings
from brigade.run.runner import RunContext

if TYPE_CHECKING:
    from brigade.run.cluster import DaskExecutor


@dataclass(frozen=True)
class Options:
    """What the user asked for (CLI flags or doit command-line variables)."""

    manifest: Path
    roster: Path | None = None
    out: Path | None = None
    workspace: Path | None = None
    retry_transient: bool = False
    wait: bool = False
    always: bool = False
    executor: ExecutorKind | None = None  # None: the roster's `executor`, else local
    scheduler: str | None = None  # the dask scheduler's address (overrides the roster's)


@dataclass
class Session:
    """Everything known at load time about bringing a plan up to date."""

    options: Options
    manifest: Manifest
    roster: Roster
    roster_label: str
    plan: Plan
    out: Path
    workspace: Path
    ctx: RunContext
    recorded: dict[str, store.Seen] = field(default_factory=dict)
    actions: dict[str, Action] = field(default_factory=dict)
    reuse: dict[str, str] = field(default_factory=dict)
    plan_key: str = ""
    plan_inputs: str | None = None  # the expansion key recorded with the plan index
    plan_is_current: bool = False  # plan.json and its index on disk already hold this plan
    resumed: bool = False  # the output directory held a plan before
    warnings: list[str] = field(default_factory=list)
    output_index: dict[str, Any] | None = None  # cell_id -> final.txt stat when verified
    output_index_changed: bool = False
    receipt_index: dict[str, Any] = field(default_factory=dict)  # cell_id -> [stat, slim, attempt]
    receipt_index_changed: bool = False
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    cluster: DaskExecutor | None = None  # the dask executor, when seats run on a cluster


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
    """Load and validate the manifest and its roster (built to last the whole run)."""
    return loading.load_inputs(manifest_path, explicit_roster, workspace)


def grader_warnings(manifest: Manifest) -> list[str]:
    """One line per grader spec that will record grader_error when it runs."""
    lines: list[str] = []
    checked: dict[str, str | None] = {}  # cases often share their graders: check each once
    clean: set[int] = set()  # graders tuples (shared by cases) found without a problem
    for index, case in enumerate(manifest.cases):
        if id(case.graders) in clean:
            continue
        before = len(lines)
        for position, spec in enumerate(case.graders):
            key = json.dumps(spec, sort_keys=True)
            if key not in checked:
                checked[key] = graders.spec_problem(spec)
            problem = checked[key]
            if problem:
                lines.append(
                    f"{manifest.path}: cases[{index}] ({case.id}) graders[{position}]: {problem} "
                    "— this grader will record grader_error until fixed"
                )
            else:
                lines.extend(
                    f"{manifest.path}: cases[{index}] ({case.id}) graders[{position}]: {warning}"
                    for warning in graders.pattern_warnings(spec)
                )
        if len(lines) == before:
            clean.add(id(case.graders))
    return lines


def default_out(workspace: Path, name: str) -> Path:
    """`<workspace>/.brigade/evals/<name>/`."""
    return workspace / ".brigade" / "evals" / name


@dataclass(frozen=True)
class PlanOnDisk:
    """The current plan, and how it relates to the plan.json already on disk."""

    plan: Plan
    key: str
    current: bool  # plan.json already holds exactly this plan
    resumed: bool  # there was a plan.json (this output directory was used before)
    indexed: bool = False  # plan.json's index is valid too
    inputs: str | None = None  # expansion_key of the inputs, recorded in the plan index


def plan_against_disk(
    manifest: Manifest,
    roster: Roster,
    label: str,
    out: Path,
    context: dict[str, str],
    *,
    compare: bool = True,
) -> PlanOnDisk:
    """Expand the manifest; stale cells and currency from the previous plan.json.

    plan.json is only parsed when its index (its stat and the key of the plan
    it holds) does not show it already holds this plan.
    """
    index = store.read_json(out / store.PLAN_INDEX)
    inputs = expansion_key(manifest, roster, context)
    cells, key = _expand_cached(manifest, roster, label, context, inputs, index)
    plan_path = out / store.PLAN_FILE
    stat = store.stat_key(plan_path)
    if (
        isinstance(index, dict)
        and index.get("key") == key
        and stat is not None
        and index.get("stat") == stat
        and index.get("inputs") == inputs
        and isinstance(index.get("stale_cells"), list)
    ):
        stale = [dict(entry) for entry in index["stale_cells"]]
        plan = Plan(manifest.name, manifest.digest, tuple(cells), tuple(stale), context)
        return PlanOnDisk(plan, key, current=True, resumed=True, indexed=True, inputs=inputs)
    previous = store.read_json(plan_path)
    previous = previous if isinstance(previous, dict) else None
    stale = stale_cells(cells, previous)
    if stale:  # only cells kept on disk are stale (not those of a copied or unrun plan)
        present = store.existing_cells(out)
        stale = [entry for entry in stale if entry["previous_cell_id"] in present]
    plan = Plan(
        name=manifest.name,
        manifest_digest=manifest.digest,
        cells=tuple(cells),
        stale_cells=tuple(stale),
        context=context,
    )
    current = compare and previous is not None and previous == plan.document()
    return PlanOnDisk(plan, key, current=current, resumed=stat is not None, inputs=inputs)


def _expand_cached(
    manifest: Manifest,
    roster: Roster,
    label: str,
    context: dict[str, str],
    inputs: str | None,
    index: Any,
) -> tuple[list[Cell], str]:
    """The cells and their key; hashing skipped when the plan index holds the cell ids of
    an expansion of these very inputs and they still add up to its recorded key."""
    if (
        inputs is not None
        and isinstance(index, dict)
        and index.get("inputs") == inputs
        and isinstance(index.get("ids"), list)
        and len(index["ids"]) == len_cells(manifest)
        and all(isinstance(pair, list) and len(pair) == 2 for pair in index["ids"])
    ):
        cells = expand(manifest, roster, label, known=index["ids"])
        key = cells_key(manifest.name, manifest.digest, cells, context)
        if key == index.get("key"):
            return cells, key
    cells = expand(manifest, roster, label)
    return cells, cells_key(manifest.name, manifest.digest, cells, context)


def plan_only(options: Options) -> tuple[Plan, Path]:
    """Load inputs and build the plan against the previous plan.json; writes nothing."""
    manifest, roster, label = load_inputs(options.manifest, options.roster, options.workspace)
    workspace = resolve_workspace(options)
    out = (options.out or default_out(workspace, manifest.name)).absolute()
    context = _context(options, label, workspace)
    return plan_against_disk(manifest, roster, label, out, context, compare=False).plan, out


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
def open_session(options: Options, inputs: tuple[Manifest, Roster, str] | None = None) -> Session:
    """Load (unless `inputs` are given), plan, scan the output directory; decide every cell."""
    manifest, roster, label = inputs or load_inputs(
        options.manifest, options.roster, options.workspace
    )
    executor = resolve_executor(options, roster)
    workspace = resolve_workspace(options)
    if manifest.execution_mode == "writable-worktree":
        from brigade.run import worktree

        worktree.find_repo(workspace)
    out = (options.out or default_out(workspace, manifest.name)).absolute()
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: output path exists and is not a folder")
    store.check_layout(out)
    on_disk = plan_against_disk(manifest, roster, label, out, _context(options, label, workspace))
    plan = on_disk.plan
    ctx = RunContext(
        out=out,
        workspace=workspace,
        manifest_dir=manifest.directory,
        manifest_digest=manifest.digest,
        retry_transient=options.retry_transient,
    )
    session = Session(
        options=options,
        manifest=manifest,
        roster=roster,
        roster_label=label,
        plan=plan,
        out=out,
        workspace=workspace,
        ctx=ctx,
        plan_key=on_disk.key,
        plan_inputs=on_disk.inputs,
        plan_is_current=on_disk.current and on_disk.indexed,
        resumed=on_disk.resumed,
        warnings=grader_warnings(manifest),
        executor=executor,
    )
    if manifest.execution_mode == "read-only":
        seats = [roster.seats[name] for name in manifest.seats]
        session.warnings.extend(read_only_warnings(seats, workspace))
    scan(session)
    if executor.kind == "dask" and executor.scheduler:
        from brigade.run.cluster import DaskExecutor

        to_run = {
            cell.seat.name: cell.seat
            for cell in plan.cells
            if options.always or session.actions[cell.cell_id] == "run"
        }
        session.cluster = DaskExecutor(
            executor.scheduler, ctx, to_run, manifest.execution_mode == "writable-worktree"
        )
    return session


def scan(session: Session) -> None:
    """Read every current cell's receipt and decide what bringing it up to date needs.

    Runs over every cell on every resume: a finished cell costs one stat of its
    cell.json and one of its final.txt (see output_intact), nothing more.
    """
    out, retry = session.out, session.options.retry_transient
    needs_run = []
    present = store.existing_cells(out)
    loaded = store.read_json(out / store.RECEIPT_INDEX) if present else None
    index = loaded if isinstance(loaded, dict) else {}
    recorded, actions = session.recorded, session.actions
    rebuilt_any = False
    with store.opened_folder(store.cells_root(out)) as cells_fd:
        for cell in session.plan.cells:
            cell_id = cell.cell_id
            if cell_id in present:
                seen, rebuilt = store.read_receipt_indexed(out, cell_id, index, cells_fd)
                rebuilt_any |= rebuilt
            else:
                seen = store.UNSEEN
            recorded[cell_id] = seen
            action = decide(seen.receipt, retry_transient=retry, reusable=False)
            if action == "skip" and not output_intact(session, cell_id, seen.receipt, cells_fd):
                action = "regrade"  # its grade task verifies the output and refuses it
            actions[cell_id] = action
            if action == "run":
                needs_run.append(cell)
    session.receipt_index = index
    session.receipt_index_changed |= rebuilt_any
    if not needs_run:
        return
    sources = reuse_index(out, {c.cell_id for c in session.plan.cells}, retry)
    for cell in needs_run:
        source = sources.get(cell.run_key)
        if (
            source is not None
            and decide(session.recorded[cell.cell_id].receipt, retry_transient=retry, reusable=True)
            == "reuse"
        ):
            session.reuse[cell.cell_id] = source
            session.actions[cell.cell_id] = "reuse"


GRADED = frozenset({"accepted", "rejected", "unscored"})


def output_intact(
    session: Session,
    cell_id: str,
    receipt: Mapping[str, Any] | None,
    cells_fd: int | None = None,
) -> bool:
    """Whether a graded cell's run/final.txt still has the recorded output_digest.

    A file's digest is computed once; afterwards an unchanged stat (size,
    mtime) vouches for it, so a no-op resume costs one stat per cell (relative
    to `cells_fd`, the cells folder, when given).
    """
    if receipt is None or receipt.get("state") not in GRADED:
        return True
    expected, attempt = receipt.get("output_digest"), receipt.get("attempt")
    if not expected:
        return True
    if type(attempt) is not int:
        return False
    if session.output_index is None:
        loaded = store.read_json(session.out / store.OUTPUT_INDEX)
        session.output_index = loaded if isinstance(loaded, dict) else {}
    # string paths: building 10,000 Paths costs more than the stats themselves
    relative = (
        f"{cell_id}/{store.ATTEMPTS_DIR}/{store.attempt_name(attempt)}/{store.RUN_DIR}/final.txt"
    )
    final = f"{session.out}/{store.CELLS_DIR}/{relative}"
    try:
        info = os.stat(final) if cells_fd is None else os.stat(relative, dir_fd=cells_fd)
    except OSError:
        info = None
    if info is not None and store.stat_matches(session.output_index.get(cell_id), info):
        return True
    if store.file_digest(final) != expected:
        return False
    if info is not None:
        session.output_index[cell_id] = [info.st_size, info.st_mtime_ns]
        session.output_index_changed = True
    return True


def save_indexes(session: Session) -> None:
    """Keep the receipt and output indexes for the next run (caches; safe to lose)."""
    if session.output_index_changed and session.output_index is not None:
        store.atomic_write_bytes(
            session.out / store.OUTPUT_INDEX,
            json.dumps(session.output_index).encode(),
            durable=False,
        )
        session.output_index_changed = False
    if session.receipt_index_changed:
        store.atomic_write_bytes(
            session.out / store.RECEIPT_INDEX,
            json.dumps(
                session.receipt_index, separators=(",", ":"), default=store.SlimReceipt.to_json
            ).encode(),
            durable=False,
        )
        session.receipt_index_changed = False


def reuse_index(out: Path, current: set[str], retry_transient: bool) -> dict[str, str]:
    """run_key -> cell_id of finished cells outside the plan whose seat run can be reused.

    Only receipts whose identity fields hash to their own cell_id are trusted.
    """
    index: dict[str, tuple[str, str]] = {}
    root = store.cells_root(out)
    try:
        names = [p.name for p in root.iterdir() if p.name not in current]
    except OSError:
        return {}
    for name in names:
        receipt = store.read_receipt(out, name).receipt
        if not reusable_source(receipt, retry_transient=retry_transient) or receipt is None:
            continue
        try:
            payload = identity_payload(
                case_id=receipt["case"]["id"],
                prompt=receipt["case"]["prompt"],
                seat=receipt["seat"],
                trial=receipt["trial"],
                graders=receipt["grader_specs"],
                execution_mode=receipt["execution_mode"],
            )
        except (KeyError, TypeError):
            continue
        if hash_cell(payload) != name:
            continue
        key = run_key(payload)
        finished = str(receipt.get("finished_at", ""))
        if key not in index or finished > index[key][1]:
            index[key] = (name, finished)
    return {key: value[0] for key, value in index.items()}


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
