"""Two recorded batteries, or two seats of one, read for a comparison (core/compare).

`compare_dirs` is the library function every front door uses (`brigade compare`, and pages
that show a comparison): it reads each output directory's plan and receipts as they are
(never writing there, taking no lock) and returns the `brigade.compare.v1` document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.compare import (
    COMPARE_SCHEMA,
    DEFAULTS,
    Outcome,
    Settings,
    Side,
    compare_sides,
    comparison_document,
)
from brigade.core.identity import canonical_json, text_digest
from brigade.core.plan import Plan
from brigade.core.selection import did_you_mean
from brigade.core.taxonomy import fault_kind_of
from brigade.core.trials import trial_kind
from brigade.errors import InputError
from brigade.inputs import schemas
from brigade.outdir import legacy, store
from brigade.outdir.results import Views, current_views, load_plan, read_plan_document, summarize


@dataclass(frozen=True)
class Battery:
    """One output directory as recorded: its plan, its receipts' views, its summary."""

    out: Path
    plan: Plan
    views: Views
    summary: dict[str, Any]
    original: bool  # written by the original `brigade model trial`

    @property
    def seats(self) -> list[str]:
        """Its seats, in plan order."""
        return list(dict.fromkeys(cell.seat.name for cell in self.plan.cells))

    def document(self) -> dict[str, Any]:
        """What the comparison says of the battery (no path of this machine)."""
        return {
            "name": self.plan.name,
            "manifest_digest": self.plan.manifest_digest,
            "seats": self.seats,
            "cells": len(self.plan.cells),
            "original": self.original,
        }


def read_battery(out: Path) -> Battery:
    """An output directory's plan, receipts and summary; InputError when it is none."""
    if not out.is_dir():
        raise InputError(f"{out}: no such output directory")
    store.check_layout(out)
    doc = read_plan_document(out)
    plan = load_plan(out, doc)
    views = current_views(out, plan)
    original = doc.get("schema") == legacy.ORIGINAL_PLAN_SCHEMA
    return Battery(out, plan, views, summarize(out, plan, views), original)


def side_of(battery: Battery, seat: str) -> Side:
    """What one seat of a battery recorded, cell by cell."""
    outcomes = []
    fingerprints: dict[str, str] = {}
    for cell in battery.plan.cells:
        if cell.seat.name != seat:
            continue
        view = battery.views.get(cell.cell_id)
        kind = trial_kind(view)
        fault = None
        if view is not None and kind in ("adapter_error", "timeout"):
            fault = fault_kind_of(view.state, view.failure_reason, view.fault_kind)
        outcomes.append(
            Outcome(cell.case_id, cell.trial, cell.coordinate, cell.cell_id, kind, fault)
        )
        if cell.case_id not in fingerprints:
            fingerprints[cell.case_id] = text_digest(
                canonical_json([cell.prompt, list(cell.graders), cell.execution_mode])
            )
    usage = battery.summary.get("by_seat", {}).get(seat, {}).get("usage_all_attempts")
    return Side(
        name=battery.plan.name,
        manifest_digest=battery.plan.manifest_digest,
        seat=seat,
        outcomes=tuple(outcomes),
        fingerprints=fingerprints,
        usage=usage,
        original=battery.original,
    )


def _seat_in(battery: Battery, seat: str, label: str) -> str:
    if seat not in battery.seats:
        raise InputError(
            f"{battery.out}: {label} has no seat {seat!r}{did_you_mean(seat, battery.seats)} "
            f"(its seats: {', '.join(battery.seats) or 'none'})"
        )
    return seat


def seat_pairs(
    base: Battery, new: Battery, seats: Sequence[str] | None, same: bool
) -> list[tuple[str, str]]:
    """Which seat of BASE is compared with which seat of NEW: the two named; else the seats
    both have (by name); else the only seat of each."""
    if seats is not None:
        return [(_seat_in(base, seats[0], "BASE"), _seat_in(new, seats[1], "NEW"))]
    if same:
        raise InputError(
            f"{base.out}: compare one output directory's seats with --seats A B "
            f"(its seats: {', '.join(base.seats)}), or give a second output directory"
        )
    shared = [seat for seat in base.seats if seat in new.seats]
    if shared:
        return [(seat, seat) for seat in shared]
    if len(base.seats) == 1 and len(new.seats) == 1:
        return [(base.seats[0], new.seats[0])]
    raise InputError(
        f"BASE ({', '.join(base.seats)}) and NEW ({', '.join(new.seats)}) share no seat name; "
        "name the two seats with --seats BASE_SEAT NEW_SEAT"
    )


def compare_batteries(
    base: Battery,
    new: Battery,
    seats: Sequence[str] | None = None,
    settings: Settings = DEFAULTS,
    same: bool = False,
) -> dict[str, Any]:
    """The comparison document of two read batteries (the same one twice for two seats)."""
    comparisons = []
    for base_seat, new_seat in seat_pairs(base, new, seats, same):
        first, second = side_of(base, base_seat), side_of(new, new_seat)
        cases = {outcome.case_id for outcome in first.outcomes}
        if not cases & {outcome.case_id for outcome in second.outcomes}:
            raise InputError(
                f"BASE ({base.out}, seat {base_seat}) and NEW ({new.out}, seat {new_seat}) "
                "share no case: nothing to compare"
            )
        comparisons.append(compare_sides(first, second, settings))
    doc = comparison_document(base.document(), new.document(), comparisons, settings)
    schemas.check_output(doc, COMPARE_SCHEMA)
    return doc


def compare_dirs(
    base_dir: Path,
    new_dir: Path | None = None,
    seats: Sequence[str] | None = None,
    settings: Settings = DEFAULTS,
) -> dict[str, Any]:
    """Compare two output directories (or two seats of `base_dir` when `new_dir` is None)."""
    base = read_battery(base_dir)
    if new_dir is None or new_dir.absolute() == base_dir.absolute():
        return compare_batteries(base, base, seats, settings, same=True)
    return compare_batteries(base, read_battery(new_dir), seats, settings)
