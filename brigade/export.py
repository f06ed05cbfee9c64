"""Export projected receipts, plan and summary; check that nothing secret leaked."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from brigade import schemas, store
from brigade.identity import CELL_SCHEMA
from brigade.plan import PLAN_SCHEMA, Plan
from brigade.projection import (
    Leak,
    Secrets,
    find_leaks_in_json,
    find_leaks_in_text,
    make_secrets,
    project_plan,
    project_receipt,
    project_summary,
)
from brigade.results import current_receipts
from brigade.summary import SUMMARY_SCHEMA


@dataclass(frozen=True)
class ExportResult:
    """Where the export went and what the leak check found."""

    dest: Path
    files: int
    leaks: tuple[Leak, ...]


def secrets_for(out: Path, plan: Plan, workspace: Path | None = None) -> Secrets:
    """Prompts, absolute paths of this machine and seat env values of a plan."""
    context = plan.context or {}
    paths = [(str(out.absolute()), ".")]
    if workspace is not None:
        paths.append((str(workspace.absolute()), "<workspace>"))
    for key, stand_in in (
        ("workspace", "<workspace>"),
        ("manifest", "<manifest-dir>"),
        ("roster", "<roster-dir>"),
    ):
        if key in context:
            value = context[key] if key == "workspace" else os.path.dirname(context[key])
            paths.append((value, stand_in))
    return make_secrets(
        prompts={cell.prompt for cell in plan.cells},
        paths=paths,
        env_values={value for cell in plan.cells for value in cell.seat.env.values()},
    )


def _write_if_changed(path: Path, doc: dict[str, object], schema_tag: str) -> None:
    schemas.check_output(doc, schema_tag)
    data = store.dumps(doc)
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    # a derived file: atomic, but not worth an fsync per cell
    store.atomic_write_bytes(path, data, durable=False)


def export(
    out: Path, plan: Plan, dest: Path | None = None, workspace: Path | None = None
) -> ExportResult:
    """Write the projection of the current plan's results to `dest` and check it for leaks."""
    dest = (dest or out / store.EXPORT_DIR).absolute()
    secrets = secrets_for(out, plan, workspace)
    out_text = str(out.absolute())
    plan_doc = store.read_json(out / store.PLAN_FILE)
    if not isinstance(plan_doc, dict):
        plan_doc = plan.document()
    _write_if_changed(dest / store.PLAN_FILE, project_plan(plan_doc, secrets), PLAN_SCHEMA)
    summary = store.read_json(out / store.SUMMARY_FILE)
    if isinstance(summary, dict):
        _write_if_changed(
            dest / store.SUMMARY_FILE, project_summary(summary, secrets), SUMMARY_SCHEMA
        )
    cells_dest = dest / store.CELLS_DIR
    written = set()
    for cell_id, receipt in current_receipts(out, plan).items():
        if receipt is None:
            continue
        name = f"{cell_id}.json"
        _write_if_changed(
            cells_dest / name, project_receipt(receipt, out_text, secrets), CELL_SCHEMA
        )
        written.add(name)
    # the export mirrors the current plan: projected receipts of other cells go
    if cells_dest.is_dir():
        for entry in cells_dest.iterdir():
            if entry.suffix == ".json" and entry.name not in written and entry.is_file():
                entry.unlink()
    leaks = check(dest, secrets)
    return ExportResult(dest=dest, files=len(written) + 2, leaks=tuple(leaks))


def check(dest: Path, secrets: Secrets) -> list[Leak]:
    """Every leak in every file under `dest`."""
    leaks: list[Leak] = []
    for root, _, names in os.walk(dest):
        for name in sorted(names):
            path = Path(root) / name
            label = str(path.relative_to(dest.parent)) if dest.parent in path.parents else str(path)
            try:
                text = path.read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            try:
                doc = json.loads(text)
            except ValueError:
                leaks.extend(find_leaks_in_text(label, text, secrets))
                continue
            leaks.extend(find_leaks_in_json(label, doc, secrets))
    return leaks
