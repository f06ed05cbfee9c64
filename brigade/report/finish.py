"""Finishing a run: summary.json, the export, the report, their leak checks and the summary key.

The one way an output directory is finished, whoever changed it: the final doit
task, `brigade regrade`, and `brigade export` / `brigade report` when they write
into the output directory. The caller holds the output directory's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.plan import Plan, plan_key
from brigade.core.projection import Leak
from brigade.core.receipts import ReceiptView
from brigade.outdir import store
from brigade.outdir.digests import Answers
from brigade.outdir.export import ExportResult, secrets_for
from brigade.outdir.export import export as export_to
from brigade.outdir.results import (
    current_views,
    remember_summary,
    summarize,
    summary_current,
    write_summary,
)
from brigade.report.build import untouched as report_untouched
from brigade.report.build import write_report


@dataclass(frozen=True)
class Finished:
    """What finishing wrote and found."""

    # the summary written, or computed for the report when summary.json is left alone;
    # None when neither was needed
    summary: dict[str, Any] | None
    export: ExportResult | None  # None when the export was not asked for
    leaks: tuple[Leak, ...]  # in the export and the report: the run must not pass


def finish_run(
    out: Path,
    plan: Plan,
    workspace: Path,
    *,
    known: Mapping[str, ReceiptView | None] | None = None,
    key: str | None = None,
    untouched: bool = False,
    summary: bool = True,
    export: bool = True,
    report: bool = True,
    ahead: Callable[[], Answers] | None = None,
) -> Finished:
    """Write summary.json, the export and the reports; check both for leaks; record the key.

    `known` holds the views of receipts read under this lock and unchanged
    since; the others are read again. `key` is the plan's key (computed from
    the plan when not given). `untouched`: no cell ran and no receipt changed
    since the last finish, so a summary.json written for this plan still
    holds; only the leak checks run, and files changed since they were checked.
    `summary`, `export`, `report`: which parts to write (`brigade export` and
    `brigade report` write only their own and leave summary.json alone). `ahead`: the
    wait for a helper's digests of the exported cell files (run/ahead).
    """
    # every other writer of this run is done: temp files left in the top folder by an
    # interrupted earlier run (summary, indexes, plan) are nobody's now
    store.remove_stale_temps(out)
    views = current_views(out, plan, known)
    key = key if key is not None else plan_key(plan)
    same = summary and untouched and summary_current(out, key)
    written: dict[str, Any] | None = None
    if summary and not same:
        written = write_summary(out, plan, views)
        remember_summary(out, key, written)
    # one set of secrets (and one matcher over them) for the export and the report
    secrets = secrets_for(out.absolute(), plan, workspace)
    exported = None
    leaks: list[Leak] = []
    if export:
        exported = export_to(
            out,
            plan,
            workspace=workspace,
            views=views,
            summary_unchanged=same,
            secrets=secrets,
            ahead=ahead,
        )
        leaks += exported.leaks
    # report/junit.xml and report/index.html leave the output directory too: same check
    if report and not (same and report_untouched(out, plan, workspace, secrets)):
        if written is None and summary:  # the summary.json on disk still holds
            on_disk = store.read_own_json(out / store.SUMMARY_FILE)
            written = on_disk if isinstance(on_disk, dict) else write_summary(out, plan, views)
        elif written is None:  # summary.json is left alone: the report's is computed
            written = summarize(out, plan, views)
        shown = write_report(out, plan, views, written, workspace=workspace, secrets=secrets)
        leaks += shown.leaks
    return Finished(summary=written, export=exported, leaks=tuple(leaks))


def leak_lines(leaks: tuple[Leak, ...], limit: int = 5) -> str:
    """The first leaks on one line, and how many more there are."""
    listed = "; ".join(str(leak) for leak in leaks[:limit])
    more = f" (and {len(leaks) - limit} more)" if len(leaks) > limit else ""
    return f"{listed}{more}"
