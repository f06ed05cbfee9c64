"""The `brigade` command: parse, call one library function, map errors to exit 2.

Each command imports what only it needs, so `brigade run` starts as fast as `doit`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from brigade import __version__
from brigade.core.plan import Plan, expand
from brigade.core.receipts import views_of
from brigade.core.taxonomy import COUNT_KEYS, EXIT_MEASUREMENT, EXIT_REJECTED, GRADEABLE
from brigade.core.terminal import printable
from brigade.engine.options import OPTIONS, Options, add_arguments, from_arguments
from brigade.engine.session import grader_warnings, load_inputs, plan_only
from brigade.errors import BrigadeError, EnvironmentProblem, InputError
from brigade.outdir import lock, store
from brigade.outdir.results import current_receipts, load_plan, summarize
from brigade.run import proc

Handler = Callable[[argparse.Namespace], int]
# `brigade run`'s options (engine/options declares them; --roster comes with the manifest)
RUN_OPTIONS = tuple(
    option.field
    for option in OPTIONS
    if option.flag is not None and option.field not in ("manifest", "roster")
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag on one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def say(text: str = "", file: IO[str] | None = None) -> None:
    """Print a line: what an agent wrote in it (a fault, an answer) is shown, never obeyed
    by the terminal."""
    print(printable(text), file=file)


def say_json(document: Any, **options: Any) -> None:
    """Print a JSON document (`json.dumps` options), its control characters escaped."""
    print(printable(json.dumps(document, **options), json=True))


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="manifest file (YAML or JSON)")
    parser.add_argument(
        "--roster",
        type=Path,
        help="roster file (default: the manifest's `roster` key, else roster.yaml beside it, "
        "else .brigade/roster.toml in the workspace)",
    )


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a manifest and its roster; exit 0 when they are valid, 2 when not.

    Every problem of a document is listed, one line each. Warnings do not stop
    a run (one line each on stderr): graders that would record grader_error (an
    unknown type or field, a bad pattern), patterns that can take exponential
    time, seats whose read-only run or `network: false` nothing enforces. With --strict
    a warning exits 1, so CI can gate on them.
    """
    manifest, roster, label = load_inputs(args.manifest, args.roster)
    cells = expand(manifest, roster, label)
    warnings = grader_warnings(manifest, roster)
    from brigade.run.doctor import confinement_notes

    seats = [roster.seats[name] for name in manifest.seats]
    try:
        warnings += confinement_notes(
            seats, Path.cwd(), read_only=manifest.execution_mode == "read-only"
        )
    except EnvironmentProblem as refused:  # a run here would be refused: say so, as a warning
        warnings.append(str(refused))
    for warning in warnings:
        say(f"warning: {warning}", file=sys.stderr)
    say(
        f"{args.manifest}: ok: {len(manifest.cases)} case(s) x {len(manifest.seats)} seat(s) "
        f"= {len(cells)} cell(s), roster {label}"
    )
    return EXIT_REJECTED if args.strict and warnings else 0


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan (every cell with its id) as JSON on stdout; writes nothing.

    Stale cells are computed against the plan.json already in the output directory.
    """
    plan, _ = plan_only(
        Options(manifest=args.manifest, roster=args.roster, out=args.out, workspace=args.workspace)
    )
    # indented on a terminal; compact (and fast for big plans) into a pipe or file
    indent = 2 if sys.stdout.isatty() else None
    separators = None if indent else (",", ":")
    say_json(plan.document(), indent=indent, separators=separators, ensure_ascii=False)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Bring every cell up to date: the same steps `doit` runs, without doit.

    Finished cells are skipped, crashed ones re-run as new attempts, grader
    faults are re-graded from stored output. Exit 0: only accepted/unscored;
    1: a real failure of a seat; 3: a measurement failure; 2: could not start.
    --case/--seat/--trial (repeatable; glob patterns) run a subset: the exit
    code covers it, summary.json, the export and the report the whole plan.
    With --executor dask the seats run on a Dask cluster's workers (docs/scale-out.md).
    """
    options = from_arguments(args, manifest=args.manifest)
    from brigade.engine.engine import run

    return run(options)


def cmd_init(args: argparse.Namespace) -> int:
    """Set up brigade in a project: dodo.py, an example battery in evals/, brigade.mk.

    Writes a three-line dodo.py (`doit` then brings the battery up to date),
    evals/manifest.yaml and evals/roster.yaml (one case, one seat that runs
    offline), and brigade.mk (`make eval`), with a Makefile including it when
    the project has none (else it says the line to add). It never overwrites:
    when any of these files exists, it writes none and names it (exit 2).
    """
    from brigade.front.init import init_project

    written = init_project((args.dir or Path.cwd()).absolute())
    for path in written.files:
        print(printable(f"wrote {path}"))
    if written.include_line is not None:
        print(printable(f"add this line to your Makefile for `make eval`: {written.include_line}"))
    print("next: doit (or make eval); brigade show .brigade/evals/example")
    return 0


def cmd_doit(args: argparse.Namespace) -> int:
    """doit's command line over brigade's tasks: brigade doit [DOIT ARGS...] [NAME=VALUE...].

    The same tasks, variables and exit codes as `doit` over brigade's dodo,
    with what a dodo cannot learn from doit: `-n N` caps the seat runs in
    flight, `-a` runs the selected cells again as new attempts, `-r NAME`
    reports through that reporter and keeps brigade's exit code, a pattern
    (`'cell:greet:*'`) selects every matching cell, a task name or option that
    names nothing exits 2, `forget cell:...` runs those cells again as new
    attempts, and `list`/`info` take no lock. Relative paths resolve against
    the current folder. `brigade doit help` is doit's own help.
    """
    from brigade.front.doitcmd import run_doit

    return run_doit(args.args)


def cmd_rerun(args: argparse.Namespace) -> int:
    """Run chosen cells again as new attempts (their earlier attempts stay on disk).

    CELL is a coordinate (case:seat:trial) or a glob pattern over coordinates
    (`greet:*:1`). The output directory's plan.json names the manifest, roster
    and workspace it was run with; the cells are those of that manifest as it
    is now. The exit code covers the cells run again; summary.json, the
    export and the report the whole plan.
    """
    out = _output_dir(args.dir)
    plan = _load_plan(out)
    context = plan.context or {}
    if "manifest" not in context:
        raise InputError(
            f"{out / store.PLAN_FILE}: does not say which manifest it was run with; "
            "run `doit rerun=CASE:SEAT:TRIAL manifest=...` or `brigade run MANIFEST` instead"
        )
    roster = context.get("roster")
    options = from_arguments(
        args,
        manifest=Path(context["manifest"]),
        roster=Path(roster) if roster else None,
        out=out,
        workspace=Path(context["workspace"]) if "workspace" in context else None,
        rerun=tuple(args.cells),
    )
    from brigade.engine.engine import run

    return run(options)


def _output_dir(value: Path | None) -> Path:
    """An output directory argument, or the only one under ./.brigade/evals."""
    if value is not None:
        return value.absolute()
    here = Path.cwd()
    if (here / store.PLAN_FILE).exists():
        return here
    found = sorted((here / ".brigade" / "evals").glob(f"*/{store.PLAN_FILE}"))
    if len(found) == 1:
        return found[0].parent
    if not found:
        raise InputError("no output directory given and none found under ./.brigade/evals")
    names = ", ".join(p.parent.name for p in found)
    raise InputError(f"several output directories under ./.brigade/evals ({names}); name one")


def _load_plan(out: Path) -> Plan:
    return load_plan(out)


def cmd_regrade(args: argparse.Namespace) -> int:
    """Re-run graders on every current cell's stored output; never starts a seat.

    Each stored final.txt is checked against the receipt's output_digest first
    (and a writable run's changes.patch against its changes_digest, when a
    command grader re-applies it); on any mismatch nothing is regraded and the
    command exits 2. Every grader runs again, commands and judges too (a judge seat
    too), none reusing its stored result. --max-cost (else the manifest's or the
    roster's max_cost) keeps back the judges that would take the spending past it
    (exit 3). Then the output directory is finished as a run's last step finishes it:
    summary.json, the export and the report, checked for leaks (a leak is listed and
    the command exits 3).
    """
    from brigade.core.plan import judges_of
    from brigade.engine.session import (
        check_max_cost,
        regrade_budget,
        regrade_context,
        remove_worktree_leftovers,
    )
    from brigade.report.finish import finish_run
    from brigade.run.doctor import refuse_required
    from brigade.run.runner import built_for_grading, needs_patch, regrade, verify_output

    check_max_cost(args.max_cost)
    out = _output_dir(args.dir)
    store.check_layout(out)
    lock.acquire(out, wait=args.wait)
    remove_worktree_leftovers(out)
    plan = _load_plan(out)
    workspace = _plan_workspace(plan)
    ctx = regrade_budget(args.max_cost, plan, regrade_context(out, plan, workspace))
    gradeable = []
    for cell in plan.cells:
        receipt = store.read_receipt(out, cell.cell_id)
        if receipt is not None and receipt.state in GRADEABLE:
            verify_output(ctx, receipt, needs_patch(cell))
            built_for_grading(ctx, cell)  # before any cell is regraded: all or nothing
            gradeable.append((cell, receipt))
    # judges run again: one whose sandbox is required and cannot run here refuses it all
    judges = judges_of(cell for cell, _ in gradeable)
    refuse_required((ctx.seats[name] for name in judges if name in ctx.seats), what="judge seat")
    changed = regraded = 0
    for cell, receipt in gradeable:
        # one sync for the batch below instead of an fsync per receipt
        updated = regrade(ctx, cell, receipt, durable=False, verified=True)
        if updated is not None:  # (None: the budget kept its judges back)
            regraded += 1
            changed += updated.state != receipt.state
    os.sync()
    finished = finish_run(out, plan, workspace)
    if _leaked(finished.leaks):
        return EXIT_MEASUREMENT
    summary = finished.summary
    assert summary is not None  # never `untouched`: always written
    say(
        f"regraded {regraded} cell(s) from stored output ({changed} changed state); "
        f"{_counts_line(summary['counts'])}"
    )
    kept = ctx.budget.lines() if ctx.budget is not None else []
    for line in kept:
        say(f"brigade: {line}", sys.stderr)
    return EXIT_MEASUREMENT if kept else int(summary["exit_code"])


def cmd_prune(args: argparse.Namespace) -> int:
    """List the stale cells of an output directory; with --yes, remove them.

    Stale cells are the folders of cells the current plan does not hold: those
    a manifest edit replaced (plan.json stale_cells) and those of earlier
    generations or of cases and seats since removed. --yes removes their
    folders, clears plan.json's stale list and finishes the directory again
    (summary.json, the export and the report), so all three stay consistent.
    """
    from brigade.outdir import prune
    from brigade.report.finish import finish_run

    out = _output_dir(args.dir)
    store.check_layout(out)
    lock.acquire(out, wait=args.wait)
    plan = _load_plan(out)
    stale = prune.stale_cells(out, plan)
    built = prune.stale_workspaces(out, plan)
    if not stale and not built:
        say("no stale cells")
        return 0
    for cell in stale:
        why = "stale" if cell.listed else "not in the plan"
        say(f"{cell.coordinate or '?'}  {cell.state}  {why}  {store.CELLS_DIR}/{cell.cell_id}")
    for name in built:
        say(f"workspace  not in the plan  {prune.WORKSPACES_DIR}/{name}")
    counted = f"{len(stale)} stale cell(s)"
    if built:
        counted += f", {len(built)} built workspace(s)"
    if not args.yes:
        say(f"{counted}; brigade prune {args.dir} --yes removes them")
        return 0
    prune.remove_workspaces(out, built)
    if not stale:
        say(f"removed {len(built)} built workspace(s)")
        return 0
    pruned = prune.remove(out, stale)
    finished = finish_run(out, pruned or plan, _plan_workspace(plan))
    if _leaked(finished.leaks):
        return EXIT_MEASUREMENT
    say(f"removed {counted}; summary.json, the export and the report rewritten")
    return 0


def _leaked(leaks: Sequence[Any]) -> bool:
    """List each leak on stderr; whether there was any."""
    for leak in leaks:
        say(f"brigade: leak: {leak}", file=sys.stderr)
    return bool(leaks)


def _counts_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in counts.items() if value) or "no cells"


def cmd_summary(args: argparse.Namespace) -> int:
    """Print the results of an output directory's current plan (exit code = its bucket)."""
    out = _output_dir(args.dir)
    summary = summarize(out, _load_plan(out))
    if args.json:
        say_json(summary, indent=2)
    else:
        kinds = summary["measurement_failure_kinds"]
        say(f"{summary['name']}: {summary['total_cells']} cells")
        say(f"  {_counts_line(summary['counts'])}")
        say(
            f"  measurement failures: {summary['measurement_failures']} (adapter_error "
            f"{kinds['adapter_error']}, grader_error {kinds['grader_error']}, "
            f"timeout {kinds['timeout']})"
        )
        stale = sum(summary["stale_counts"].values())
        if stale:
            say(f"  stale cells (not counted): {_counts_line(summary['stale_counts'])}")
        mean = summary["scores"]["mean"]
        if mean is not None:
            say(f"  mean score: {mean:.3f} over {summary['scores']['count']} graded cell(s)")
        say(f"  outcome: {summary['outcome']} (exit {summary['exit_code']})")
    return int(summary["exit_code"])


def show_table(summary: dict[str, Any]) -> str:
    """A seat x state table of a summary, as text."""
    keys = [k for k in COUNT_KEYS if any(s["counts"][k] for s in summary["by_seat"].values())]
    keys = keys or ["accepted"]
    # "total" is a row label too: with only short seat names it sets the width
    width = max([len("total"), *(len(seat) for seat in summary["by_seat"])])
    lines = ["seat".ljust(width) + "".join(f"  {k:>{max(len(k), 3)}}" for k in keys)]
    for seat, data in summary["by_seat"].items():
        lines.append(
            seat.ljust(width) + "".join(f"  {data['counts'][k]:>{max(len(k), 3)}}" for k in keys)
        )
    lines.append(
        "total".ljust(width) + "".join(f"  {summary['counts'][k]:>{max(len(k), 3)}}" for k in keys)
    )
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    """Show results: the seat x case matrix, one cell in full, or the list of cells.

    brigade show DIR                  counts per state for each seat, the seat x case
                                      matrix and cost per seat (--json: the summary)
    brigade show DIR CELL [--full]    one cell (a coordinate case:seat:trial, or the start
                                      of its id): state and why, attempts, graders, usage,
                                      the answer (--full: all of it), the stderr tail of a
                                      fault, changed files, its folders (--json: as JSON)
    brigade show DIR --cells          every cell on one line: coordinate, state, reason,
                                      attempt, duration, cost (--state/--seat/--case
                                      filter, each repeatable; --json: a JSON list)
    """
    out = _output_dir(args.dir)
    plan = _load_plan(out)
    if args.cell is not None and args.cells:
        raise InputError("show: give a CELL or --cells, not both")
    if args.cell is None and not args.cells and (args.state or args.seat or args.case):
        raise InputError("show: --state, --seat and --case filter --cells")
    if args.cell is not None:
        return _show_cell(out, plan, args.cell, full=args.full, as_json=args.json)
    if args.cells:
        from brigade.report.show import cell_rows, rows_text

        rows = cell_rows(
            plan,
            current_receipts(out, plan),
            states=args.state or (),
            seats=args.seat or (),
            cases=args.case or (),
        )
        if args.json:
            say_json([row.document() for row in rows], indent=2, ensure_ascii=False)
        else:
            say(rows_text(rows))
        return 0
    from brigade.report.render import text_costs, text_matrix

    summary = summarize(out, plan)
    if args.json:
        say_json(summary, indent=2)
        return 0
    say(f"{summary['name']}: {summary['total_cells']} cells, outcome {summary['outcome']}")
    say(show_table(summary))
    say()
    say(text_matrix(summary))
    say()
    say(text_costs(summary))
    return 0


def _show_cell(out: Path, plan: Plan, key: str, *, full: bool, as_json: bool) -> int:
    from brigade.report.detail import read_record, record_document
    from brigade.report.model import state_reason
    from brigade.report.show import cell_text, find_cell

    cell = find_cell(plan, key)
    record = read_record(
        out, cell, workspace=_plan_workspace(plan), answer_limit=None if full else 1 << 20
    )
    if as_json:
        reason = state_reason(record.state, record.receipt)
        say_json(record_document(record, reason), indent=2, ensure_ascii=False)
    else:
        say(cell_text(record, full=full))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write JUnit XML and a self-contained HTML report of an output directory's results.

    Without --junit/--html/--json: writes DIR/report/junit.xml, DIR/report/index.html and
    its detail pages in DIR/report/index_files/ as the last step of a run does (through the
    same code: only what changed is rendered). --html FILE writes its detail pages in
    <stem>_files/ beside FILE. --json prints the report's data on stdout. Reports are
    projected like the export (no prompts, no absolute paths, no env values) and checked
    for leaks: a leak is listed and the command exits 3. Otherwise the exit code is the
    results' bucket, as for `brigade summary`.
    """
    from brigade.report.build import (
        HTML_FILE,
        JUNIT_FILE,
        REPORT_DIR,
        build_report,
        report_document,
        write_files,
    )

    out = _output_dir(args.dir)
    store.check_layout(out)
    junit, html_file = args.junit, args.html
    if junit is None and html_file is None and not args.json:
        from brigade.report.finish import finish_run

        lock.acquire(out, wait=args.wait)
        plan = _load_plan(out)
        # the final task's report, through the same code; summary.json is left as it is
        finished = finish_run(out, plan, _plan_workspace(plan), summary=False, export=False)
        if _leaked(finished.leaks):
            return EXIT_MEASUREMENT
        for name in (JUNIT_FILE, HTML_FILE):
            say(f"wrote {out / REPORT_DIR / name}")
        assert finished.summary is not None  # computed for the report
        return int(finished.summary["exit_code"])
    if junit is not None or html_file is not None:
        lock.acquire(out, wait=args.wait)  # the report's cache in the output directory
    plan = _load_plan(out)
    receipts = current_receipts(out, plan)
    summary = summarize(out, plan, views_of(receipts))
    report = build_report(out, plan, receipts, summary, workspace=_plan_workspace(plan))
    if args.json:
        say_json(report_document(report), indent=2, ensure_ascii=False)
    result = write_files(out, report, junit=junit, html_file=html_file)
    if _leaked(result.leaks):
        return EXIT_MEASUREMENT
    for path in result.files:
        say(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    return int(summary["exit_code"])


def cmd_export(args: argparse.Namespace) -> int:
    """Write projected receipts, plan and summary (no prompts, no absolute paths, no env values).

    Without --to: writes DIR/export as the last step of a run does (through the same
    code). The export is checked for leaks; any leak is listed and the command
    exits 3.
    """
    from brigade.outdir.export import export
    from brigade.report.finish import finish_run

    out = _output_dir(args.dir)
    store.check_layout(out)
    lock.acquire(out, wait=args.wait)  # the export's state is kept in the output directory
    plan = _load_plan(out)
    # the run's own workspace, as doit's export uses: the same export state serves both
    workspace = _plan_workspace(plan)
    if args.to is None:
        # the final task's export, through the same code; summary.json is left as it is
        finished = finish_run(out, plan, workspace, summary=False, report=False)
        assert finished.export is not None
        result, leaks = finished.export, finished.leaks
    else:
        result = export(out, plan, dest=args.to, workspace=workspace)
        leaks = result.leaks
    if _leaked(leaks):
        return EXIT_MEASUREMENT
    say(f"exported {result.files} file(s) to {result.dest}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare two output directories (BASE NEW), or two seats of one (DIR --seats A B).

    Cells are matched by case and trial: per case the flips (pass -> fail, fail -> pass),
    cases only one side has, measurement failures listed as unmeasured (never flips, never
    evidence); overall the difference in accepted rate (NEW - BASE) with a cluster-bootstrap
    interval over cases, the p-value (exact McNemar for single trials, else the sign-flip
    test), the least difference the battery can detect, costs side by side, and a verdict:
    better, worse or no detectable difference. Prints text, --json (brigade.compare.v1) or
    --markdown (a pull-request comment); --html FILE writes a page in the report's style.

    Exit 0, or with --fail-on-regression: 1 when NEW is worse at the chosen confidence (and,
    with --margin, by more than that many points at that confidence), 3 when more than
    --max-unmeasured percent of the shared cases' cells were unmeasured or no case could be
    compared (this dominates 1); 2 on bad input.
    """
    from brigade.core.compare import Settings
    from brigade.outdir.comparison import compare_batteries, read_battery

    if args.json and args.markdown:
        raise InputError("compare: give --json or --markdown, not both")
    if args.margin < 0:
        raise InputError(f"--margin: must not be negative, got {args.margin:g}")
    if not 0 <= args.max_unmeasured <= 100:
        raise InputError(
            f"--max-unmeasured: a percentage from 0 to 100, got {args.max_unmeasured:g}"
        )
    if not 0.5 <= args.confidence < 1:
        raise InputError(f"--confidence: from 0.5 up to (not including) 1, got {args.confidence:g}")
    settings = Settings(
        confidence=args.confidence,
        margin=args.margin,
        max_unmeasured=args.max_unmeasured,
        fail_on_regression=args.fail_on_regression,
    )
    base = read_battery(args.base.absolute())
    same = args.new is None or args.new.absolute() == args.base.absolute()
    new = base if same else read_battery(args.new.absolute())
    doc = compare_batteries(base, new, args.seats, settings, same=same)
    if args.html is not None:
        from brigade.report.compare import write_page

        written = write_page(doc, base, new, args.html)
        if _leaked(written.leaks):
            return EXIT_MEASUREMENT
        say(f"wrote {written.path}", file=sys.stderr)
    if args.json:
        say_json(doc, indent=2, ensure_ascii=False)
    elif args.markdown:
        from brigade.report.compare import markdown

        say(markdown(doc).rstrip("\n"))
    else:
        from brigade.report.compare import text

        say(text(doc))
    return int(doc["gate"]["exit_code"])


def cmd_view(args: argparse.Namespace) -> int:
    """Serve output directories to a web browser, live while a run writes to them.

    A local server (127.0.0.1, a free port unless --port) prints the URL to open; the URL
    holds a random token, and a request without it is refused. Pages: each directory's
    index (the seat x case matrix, statistics, the cost chart, and the cell list,
    filtered by state, seat, case, text and cost range and paged by the server), every
    cell (answer, graders, attempts with their usage, transcript, diff), every case (the
    seats' answers side by side) and a comparison (`brigade compare`'s, of two
    directories or two seats). While `brigade run` or `doit` writes to a directory, its
    pages show cells starting and finishing within two seconds, and an ETA.

    What the pages show is projected like the report (prompts replaced by their digest,
    env values redacted, paths relative); --show-prompts shows the prompts too. --host
    other than loopback lets other machines connect (a warning says so). Ends on Ctrl-C.
    """
    from brigade.report.serve import LOOPBACK, open_viewer, serve

    if not 0 <= args.port <= 65535:
        raise InputError(f"--port: a port from 0 to 65535, got {args.port}")
    viewer = open_viewer([d.absolute() for d in args.dirs], show_prompts=args.show_prompts)
    if args.host not in LOOPBACK:
        say(
            f"brigade: warning: --host {args.host}: other machines can reach the viewer "
            "(anyone with its URL reads these results)",
            file=sys.stderr,
        )

    def opened(url: str) -> None:
        if args.open and not proc.open_url(url):
            say("brigade: no web browser could be started; open the URL above", file=sys.stderr)

    try:
        serve(viewer, args.host, args.port, lambda line: say(line), opened)
    except OSError as exc:
        if store.storage_problem(exc) is not None:
            raise
        raise EnvironmentProblem(f"--host {args.host} --port {args.port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        say("brigade view: stopped", file=sys.stderr)
    return 0


def _plan_workspace(plan: Plan) -> Path:
    """The workspace the plan was run in (its context), else the current folder."""
    return Path((plan.context or {}).get("workspace", str(Path.cwd())))


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check each seat can launch here: its program on PATH, its version, its confinement.

    With a manifest, checks the manifest's seats and the seats its judge graders
    name; with only --roster, every seat of the roster. One line per seat, then
    whether the filesystem sandbox works here (and why not); exit 1 when a seat
    cannot launch (its program is missing or older than its adapter drives, or it
    requires the sandbox and the sandbox cannot run).
    """
    from brigade.adapters.versions import supported
    from brigade.core.plan import judge_seat_names
    from brigade.inputs.roster import load_roster
    from brigade.run.doctor import check_seat

    if args.manifest is not None:
        manifest, roster, _ = load_inputs(args.manifest, args.roster)
        wanted = dict.fromkeys([*manifest.seats, *judge_seat_names(manifest)])
        names = [n for n in wanted if n in roster.seats]
    elif args.roster is not None:
        roster = load_roster(args.roster)
        names = list(roster.seats)
    else:
        raise InputError("doctor: give a MANIFEST or --roster ROSTER")
    workspace = Path.cwd()
    checks = [check_seat(roster.seats[name], workspace) for name in names]
    width = max(len(c.seat) for c in checks)
    for check in checks:
        if check.executable is None:
            say(f"{check.seat:<{width}}  MISSING  {check.program}: not found (cli {check.cli})")
            continue
        version = check.version or "version unknown"
        confined = "sandbox" if check.sandboxed else check.read_only_enforcement
        network = (
            ""
            if check.network
            else "; network: " + ("isolated" if check.sandboxed else "NOT isolated")
        )
        status = "REFUSED" if check.refused else "OLD    " if check.outdated else "ok     "
        if check.outdated:
            support = (
                f"the {check.adapter} adapter needs {supported(check.min_version)}: upgrade it; "
            )
        elif check.adapter != "exec":  # any program runs as an exec seat
            support = f"supported: {supported(check.min_version)}; "
        else:
            support = ""
        say(
            f"{check.seat:<{width}}  {status}  {check.executable}  ({version}; {support}"
            f"read-only: {confined}; sandbox: {check.sandbox_mode}{network})"
        )
    say(sandbox_line())
    return 0 if all(c.ok for c in checks) else 1


def sandbox_line() -> str:
    """`brigade doctor`'s line on the filesystem sandbox: what runs it, or why it cannot."""
    from brigade.run import sandbox

    found = sandbox.availability()
    if found.ok:
        return f"sandbox: ok, {found.detail}"
    raw = f" [{found.raw}]" if found.raw and found.raw not in found.detail else ""
    return f"sandbox: UNAVAILABLE, {found.detail}{raw}; seats run with only their CLI's own limits"


def cmd_import(args: argparse.Namespace) -> int:
    """Write a manifest from SWE-bench-style instances.

    Each instance of FILE (JSONL: instance_id, repo, base_commit, problem_statement,
    test_patch, FAIL_TO_PASS, PASS_TO_PASS; optional environment_setup_commit, setup)
    becomes a case: its repository's clone under --repos at base_commit, the problem
    statement as the prompt, a command grader applying test_patch (written beside the
    manifest, under swebench/, hidden from the seats) and running exactly the named tests,
    every one required (resolved = all pass). No network is used; no file is overwritten.
    """
    from brigade.front.importer import import_swebench

    seats = [seat.strip() for seat in args.seats.split(",") if seat.strip()]
    if not seats:
        raise InputError("--seats: name at least one roster seat")
    ids = import_swebench(args.file, args.repos, args.to, seats, args.roster, args.name)
    say(f"brigade: wrote {args.to}: {len(ids)} case(s) from {args.file}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (their docstrings are the help)."""
    parser = _Parser(
        prog="brigade",
        description="Run a battery of cases against agent CLIs as an incremental doit build.",
    )
    parser.add_argument("--version", action="version", version=f"brigade {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, handler: Handler) -> argparse.ArgumentParser:
        doc = handler.__doc__ or ""
        sub = commands.add_parser(
            name,
            help=doc.splitlines()[0],
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(handler=handler)
        return sub

    sub = command("validate", cmd_validate)
    _add_inputs(sub)
    sub.add_argument(
        "--strict", action="store_true", help="exit 1 when there are warnings (for CI gates)"
    )

    sub = command("plan", cmd_plan)
    _add_inputs(sub)
    sub.add_argument("--out", type=Path, help="output directory (for stale cells)")
    sub.add_argument("--workspace", type=Path, help="workspace (default: current directory)")

    sub = command("run", cmd_run)
    _add_inputs(sub)
    add_arguments(sub, RUN_OPTIONS)

    sub = command("init", cmd_init)
    sub.add_argument("dir", nargs="?", type=Path, help="the project's folder (default: here)")

    sub = command("doit", cmd_doit)
    sub.add_argument("args", nargs=argparse.REMAINDER, help="doit's arguments and variables")

    sub = command("rerun", cmd_rerun)
    sub.add_argument("dir", type=Path, help="output directory")
    sub.add_argument("cells", nargs="+", metavar="CELL", help="case:seat:trial, or a pattern")
    add_arguments(sub, ("jobs", "wait", "quiet"))

    sub = command("regrade", cmd_regrade)
    sub.add_argument(
        "dir",
        nargs="?",
        type=Path,
        help="output directory (default: this folder if it is one, else the only one under "
        "./.brigade/evals)",
    )
    sub.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="run no judge once what this regrade's judges cost would pass USD (exit 3; "
        "default: the manifest's `max_cost`, else the roster's, else no cap)",
    )
    sub.add_argument("--wait", action="store_true", help="wait for a run holding the directory")

    sub = command("summary", cmd_summary)
    sub.add_argument("dir", type=Path, help="output directory")
    sub.add_argument("--json", action="store_true", help="print summary JSON")

    sub = command("show", cmd_show)
    sub.add_argument("dir", type=Path, help="output directory")
    sub.add_argument(
        "cell", nargs="?", help="a cell: its coordinate (case:seat:trial) or the start of its id"
    )
    sub.add_argument("--cells", action="store_true", help="list the cells, one per line")
    sub.add_argument("--state", action="append", help="--cells: only cells in this state")
    sub.add_argument("--seat", action="append", help="--cells: only cells of this seat")
    sub.add_argument("--case", action="append", help="--cells: only cells of this case")
    sub.add_argument("--full", action="store_true", help="a cell: show the whole answer")
    sub.add_argument(
        "--json", action="store_true", help="print JSON (the summary, the cell, or the list)"
    )

    sub = command("report", cmd_report)
    sub.add_argument("dir", type=Path, help="output directory")
    sub.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML to FILE")
    sub.add_argument("--html", type=Path, metavar="FILE", help="write the HTML report to FILE")
    sub.add_argument("--json", action="store_true", help="print the report's data as JSON")
    sub.add_argument("--wait", action="store_true", help="wait for a run holding the directory")

    sub = command("compare", cmd_compare)
    sub.add_argument(
        "base", type=Path, metavar="BASE", help="the output directory compared against"
    )
    sub.add_argument(
        "new",
        nargs="?",
        type=Path,
        metavar="NEW",
        help="the output directory compared (default: BASE, with --seats)",
    )
    sub.add_argument(
        "--seats",
        nargs=2,
        metavar=("A", "B"),
        help="compare seat A of BASE with seat B of NEW (of BASE when NEW is not given); "
        "default: each seat both have, else the only seat of each",
    )
    sub.add_argument("--json", action="store_true", help="print the comparison as JSON")
    sub.add_argument("--markdown", action="store_true", help="print a markdown summary")
    sub.add_argument("--html", type=Path, metavar="FILE", help="write the comparison page to FILE")
    sub.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when NEW is worse, 3 when too much was unmeasured to tell",
    )
    sub.add_argument(
        "--margin",
        type=float,
        default=0.0,
        metavar="POINTS",
        help="with --fail-on-regression: fail only when NEW is worse by more than POINTS "
        "percentage points at the chosen confidence (default 0)",
    )
    sub.add_argument(
        "--max-unmeasured",
        type=float,
        default=10.0,
        metavar="PERCENT",
        help="with --fail-on-regression: exit 3 when more than PERCENT of the shared cases' "
        "cells were unmeasured (default 10)",
    )
    sub.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="confidence of the interval and the verdict (default 0.95)",
    )

    sub = command("view", cmd_view)
    sub.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="output directory")
    sub.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    sub.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; another lets other machines connect)",
    )
    sub.add_argument("--open", action="store_true", help="open the URL in a web browser")
    sub.add_argument(
        "--show-prompts", action="store_true", help="show the cases' prompts (hidden by default)"
    )

    sub = command("doctor", cmd_doctor)
    sub.add_argument("manifest", nargs="?", type=Path, help="manifest whose seats to check")
    sub.add_argument("--roster", type=Path, help="roster file")

    sub = command("prune", cmd_prune)
    sub.add_argument("dir", type=Path, help="output directory")
    sub.add_argument(
        "--yes", action="store_true", help="remove the stale cells and built workspaces listed"
    )
    sub.add_argument("--wait", action="store_true", help="wait for a run holding the directory")

    sub = command("import", cmd_import)
    sub.add_argument("format", choices=["swebench"], help="the format of FILE")
    sub.add_argument("file", type=Path, metavar="FILE", help="instances (SWE-bench's JSONL)")
    sub.add_argument(
        "--repos", type=Path, required=True, help="folder holding a local clone of each repo"
    )
    sub.add_argument(
        "--to",
        type=Path,
        default=Path("swebench.yaml"),
        help="manifest to write, a new file (default: swebench.yaml here)",
    )
    sub.add_argument("--seats", required=True, help="the roster seats to run, comma-separated")
    sub.add_argument("--roster", type=Path, help="the roster the manifest names")
    sub.add_argument("--name", help="the battery's name (default: the manifest's file name)")

    sub = command("export", cmd_export)
    sub.add_argument("dir", type=Path, help="output directory")
    sub.add_argument("--to", type=Path, help="destination (default: <dir>/export)")
    sub.add_argument("--wait", action="store_true", help="wait for a run holding the directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `brigade` console script."""
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["doit"] and given[1:2] not in (["-h"], ["--help"]):
        # everything after it is doit's (its options too; `brigade doit help` is doit's help)
        args = argparse.Namespace(handler=cmd_doit, args=given[1:])
    else:
        args = parser.parse_args(given)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except BrigadeError as exc:
        for line in str(exc).splitlines():  # several problems of a document: a line each
            say(f"brigade: {line}", file=sys.stderr)
        lock.discard_refused()
        return exc.exit_code
    except BrokenPipeError:
        # output piped into `head` and the like: stop quietly, like cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # the output directory's storage failing (a full disk, a read-only folder, a file
        # where a folder goes): one line; what was written before stays whole
        problem = store.storage_problem(exc)
        if problem is None:
            raise
        say(f"brigade: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        say("brigade: interrupted", file=sys.stderr)
        return 130


def console() -> NoReturn:
    """The `brigade` console script: `main`, then the process ends at once (proc.end_process)."""
    proc.end_process(main())


if __name__ == "__main__":  # pragma: no cover
    console()
