"""The plan: every (case, seat, trial) cell of a manifest with its content-hashed id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from brigade.core.identity import (
    CELL_SCHEMA,
    SEAT_KEYS,
    TrialHasher,
    canonical_json,
    identity_payload,
    run_key,
    text_digest,
)
from brigade.core.sequential import Rule, rule_from_document
from brigade.core.specs import (
    Manifest,
    Roster,
    SeatSpec,
    SetupSpec,
    WorkspaceSpec,
    world_of,
)
from brigade.core.usage import Price, price_document, price_from_document
from brigade.errors import InputError

PLAN_SCHEMA = "brigade.eval_plan.v1"


class Cell(NamedTuple):
    """One cell of the plan (a named tuple: a plan of 100,000 cells builds fast)."""

    cell_id: str
    coordinate: str
    case_id: str
    prompt: str
    seat: SeatSpec
    trial: int
    graders: tuple[dict[str, Any], ...]
    execution_mode: str
    run_key: str
    # the case's own workspace and setup (None: the run's workspace)
    workspace: WorkspaceSpec | None = None
    setup: SetupSpec | None = None

    def document(self) -> dict[str, Any]:
        """The cell as it appears in plan.json (and at the head of its receipt)."""
        doc = {
            "cell_id": self.cell_id,
            "coordinate": self.coordinate,
            "case_id": self.case_id,
            "case": {"id": self.case_id, "prompt": self.prompt},
            "prompt": self.prompt,
            "seat": self.seat.identity(),
            "trial": self.trial,
            "graders": list(self.graders),
            "execution_mode": self.execution_mode,
        }
        world = self.world_document()
        if world is not None:
            doc["workspace"] = world
        return doc

    def world_document(self) -> dict[str, Any] | None:
        """The case's workspace as plan.json records it (path, commit or digest, setup)."""
        return world_of(self.workspace, self.setup, recorded=True)

    def world(self) -> dict[str, Any] | None:
        """The workspace's part of the identity payload (None: no workspace of its own)."""
        return world_of(self.workspace, self.setup)


@dataclass(frozen=True)
class Plan:
    """All cells of one manifest generation, plus the cells it made stale."""

    name: str
    manifest_digest: str
    cells: tuple[Cell, ...]
    stale_cells: tuple[dict[str, str], ...]
    context: dict[str, str] | None = None  # manifest, roster, workspace (absolute paths)
    # the roster's price table (model id -> price): what costs are priced with, not identity
    prices: Mapping[str, Price] = field(default_factory=dict)
    # the roster's `secrets.env`: variables whose values the export and report scrub too
    secret_env: tuple[str, ...] = ()
    # adaptive trials: case id -> its rule (the cells hold the trials the rule asked for so far)
    rules: Mapping[str, Rule] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """plan.json content."""
        doc: dict[str, Any] = {
            "schema": PLAN_SCHEMA,
            "name": self.name,
            "manifest_digest": self.manifest_digest,
            "cells": [cell.document() for cell in self.cells],
            "stale_cells": list(self.stale_cells),
        }
        if self.context is not None:
            doc["context"] = dict(self.context)
        if self.prices:
            doc["prices"] = prices_document(self.prices)
        if self.secret_env:
            doc["secrets"] = {"env": list(self.secret_env)}
        if self.rules:
            doc["adaptive"] = rules_document(self.rules)
        return doc


# (case id, seat) -> how many trials an adaptive case's seat has in the plan
Counts = Mapping[tuple[str, str], int]


def rules_of(manifest: Manifest) -> dict[str, Rule]:
    """The adaptive cases of a manifest: case id -> its rule."""
    return {case.id: case.rule for case in manifest.cases if case.rule is not None}


def rules_document(rules: Mapping[str, Rule]) -> list[dict[str, Any]]:
    """plan.json's `adaptive`: each rule once, with the cases that have it (manifest order)."""
    grouped: dict[Rule, list[str]] = {}
    for case_id, rule in rules.items():
        grouped.setdefault(rule, []).append(case_id)
    return [{"rule": rule.document(), "cases": cases} for rule, cases in grouped.items()]


def rules_from_document(doc: Any) -> dict[str, Rule]:
    """plan.json's `adaptive` read back (case id -> rule); {} when absent."""
    rules: dict[str, Rule] = {}
    for entry in doc or ():
        rule = rule_from_document(entry["rule"])
        rules.update((case_id, rule) for case_id in entry["cases"])
    return rules


def prices_document(prices: Mapping[str, Price]) -> dict[str, dict[str, float]]:
    """A price table as rosters and plan.json write it."""
    return {model: price_document(price) for model, price in prices.items()}


def coordinate(case_id: str, seat: str, trial: int) -> str:
    """`<case_id>:<seat>:<trial>`: the human-stable axis (not part of the identity)."""
    return f"{case_id}:{seat}:{trial}"


def expand(
    manifest: Manifest,
    roster: Roster,
    roster_label: str,
    known: list[list[str]] | None = None,
    counts: Counts | None = None,
) -> list[Cell]:
    """Every cell of the manifest, case-major then seat then trial.

    `known`: the [cell_id, run_key] of every cell in that order, from an
    earlier expansion of the very same inputs (see `expansion_key`); hashing
    is skipped then. `counts`: the trials of an adaptive case's seat (its
    `min` when absent).
    """
    seats: list[SeatSpec] = []
    for index, name in enumerate(manifest.seats):
        if name in roster.unusable:
            raise InputError(f"{manifest.path}: seats[{index}]: {roster.unusable[name]}")
        if name not in roster.seats:
            defined = ", ".join(sorted(roster.seats))
            raise InputError(
                f"{manifest.path}: seats[{index}]: seat {name!r} is not defined in "
                f"{roster_label} (it defines: {defined})"
            )
        seats.append(roster.seats[name])
    cells: list[Cell] = []
    hashers = [TrialHasher(seat.identity(), manifest.execution_mode) for seat in seats]
    graders_json: dict[int, str] = {}  # cases often share one graders tuple
    resolved: dict[int, tuple[dict[str, Any], ...]] = {}
    for case in manifest.cases:
        key = id(case.graders)
        if key not in graders_json:
            resolved[key] = resolve_judges(case.graders, roster.seats)
            graders_json[key] = canonical_json(list(resolved[key]))
        case_graders = graders_json[key]
        case_resolved = resolved[key]
        for seat, hasher in zip(seats, hashers, strict=True):
            trials = _trials(case.id, seat.name, case.trials, counts)
            digests: list[tuple[int, str, str]]
            if known is not None:
                start = len(cells) - 1
                digests = [
                    (trial, str(known[start + trial][0]), str(known[start + trial][1]))
                    for trial in range(1, trials + 1)
                ]
            else:
                digests = hasher.digests(case.id, case.prompt, case_graders, trials, case.world())
            for trial, cell_id, trial_run_key in digests:
                cells.append(
                    Cell(
                        cell_id=cell_id,
                        coordinate=coordinate(case.id, seat.name, trial),
                        case_id=case.id,
                        prompt=case.prompt,
                        seat=seat,
                        trial=trial,
                        graders=case_resolved,
                        execution_mode=manifest.execution_mode,
                        run_key=trial_run_key,
                        workspace=case.workspace,
                        setup=case.setup,
                    )
                )
    return cells


def _trials(case_id: str, seat: str, default: int, counts: Counts | None) -> int:
    if counts is None:
        return default
    return counts.get((case_id, seat), default)


def expansion_key(
    manifest: Manifest,
    roster: Roster,
    context: dict[str, str] | None,
    counts: Counts | None = None,
) -> str | None:
    """A digest of everything an expansion depends on; None when a seat is missing."""
    if any(name not in roster.seats for name in manifest.seats):
        return None
    judges = judge_seat_names(manifest)
    material = {
        "schema": CELL_SCHEMA,
        "manifest": manifest.content_digest,
        "cells": len_cells(manifest, counts),
        "seats": [roster.seats[name].identity() for name in manifest.seats],
        "context": context,
    }
    if counts:  # the trials adaptive cases have so far
        material["counts"] = sorted([case, seat, n] for (case, seat), n in counts.items())
    if judges:  # a judge's identity is part of its grader's spec, so of the cell ids
        material["judges"] = [
            roster.seats[name].identity() if name in roster.seats else name for name in judges
        ]
    return text_digest(canonical_json(material))


JUDGE = "judge"


def _is_judge(spec: Any) -> bool:
    return isinstance(spec, dict) and spec.get("type") == JUDGE


def resolve_judges(
    graders: tuple[dict[str, Any], ...], seats: Mapping[str, SeatSpec]
) -> tuple[dict[str, Any], ...]:
    """The graders with each judge grader's seat identity written into its spec, as
    `judge_seat` (None when the roster has no such seat): so the judge's cli, model and
    the rest are part of the cell's identity, and a new judge model re-grades only."""
    if not any(_is_judge(spec) for spec in graders):
        return graders
    resolved = []
    for spec in graders:
        if _is_judge(spec):
            name = spec.get("seat")
            seat = seats.get(name) if isinstance(name, str) else None
            spec = {**spec, "judge_seat": seat.identity() if seat is not None else None}
        resolved.append(spec)
    return tuple(resolved)


def judge_seat_names(manifest: Manifest) -> list[str]:
    """The roster seats the manifest's judge graders name, sorted."""
    names: set[str] = set()
    seen: set[int] = set()
    for case in manifest.cases:
        if id(case.graders) in seen:
            continue
        seen.add(id(case.graders))
        names.update(
            spec["seat"]
            for spec in case.graders
            if _is_judge(spec) and isinstance(spec.get("seat"), str)
        )
    return sorted(names)


def judges_of(cells: Iterable[Cell]) -> list[str]:
    """The roster seats the judge graders of `cells` name, sorted."""
    names: set[str] = set()
    seen: set[int] = set()  # cells share their graders tuple
    for cell in cells:
        if id(cell.graders) in seen:
            continue
        seen.add(id(cell.graders))
        names.update(
            spec["seat"]
            for spec in cell.graders
            if _is_judge(spec) and isinstance(spec.get("seat"), str)
        )
    return sorted(names)


def judge_env_values(graders: tuple[dict[str, Any], ...]) -> list[str]:
    """The env values of the judge seats in resolved grader specs (secrets, as a seat's)."""
    values: list[str] = []
    for spec in graders:
        if _is_judge(spec) and isinstance(spec.get("judge_seat"), dict):
            env = spec["judge_seat"].get("env")
            if isinstance(env, dict):
                values.extend(v for v in env.values() if isinstance(v, str))
    return values


def len_cells(manifest: Manifest, counts: Counts | None = None) -> int:
    """How many cells the manifest expands to (adaptive cases: as many as `counts` say)."""
    if not counts:
        return sum(case.trials for case in manifest.cases) * len(manifest.seats)
    return sum(
        _trials(case.id, seat, case.trials, counts)
        for case in manifest.cases
        for seat in manifest.seats
    )


def stale_cells(cells: list[Cell], previous: dict[str, Any] | None) -> list[dict[str, str]]:
    """Cells whose coordinate had another cell_id in the previous plan generation.

    Re-running the same plan keeps the stale list of its generation, so a no-op
    resume does not forget what the last manifest edit made stale.
    """
    if not previous:
        return []
    try:
        previous_ids = {c["coordinate"]: c["cell_id"] for c in previous["cells"]}
        carried = [dict(entry) for entry in previous.get("stale_cells", [])]
    except (KeyError, TypeError):
        return []
    current = {cell.coordinate: cell.cell_id for cell in cells}
    if previous_ids == current:
        return carried
    return [
        {"coordinate": coord, "previous_cell_id": previous_ids[coord], "cell_id": cid}
        for coord, cid in current.items()
        if coord in previous_ids and previous_ids[coord] != cid
    ]


def cells_key(
    name: str,
    manifest_digest: str,
    cells: list[Cell],
    context: dict[str, str] | None,
    prices: Mapping[str, Price] | None = None,
    secret_env: tuple[str, ...] = (),
    rules: Mapping[str, Rule] | None = None,
) -> str:
    """A digest that changes whenever plan.json would (stale cells aside): a changed price
    changes it too, so the summary and the report made for the plan are made again."""
    document: dict[str, Any] = {
        "name": name,
        "manifest_digest": manifest_digest,
        "context": context,
        "cells": [cell.cell_id for cell in cells],
        "prices": prices_document(prices or {}),
    }
    if secret_env:  # (names only: the values are never in a key of the plan)
        document["secret_env"] = list(secret_env)
    if rules:
        document["adaptive"] = rules_document(rules)
    return text_digest(canonical_json(document))


def plan_key(plan: Plan) -> str:
    """The key of a plan (as cells_key): what summary.json's sidecar records."""
    return cells_key(
        plan.name,
        plan.manifest_digest,
        list(plan.cells),
        plan.context,
        plan.prices,
        plan.secret_env,
        plan.rules,
    )


def build_plan(
    manifest: Manifest,
    roster: Roster,
    roster_label: str,
    previous: dict[str, Any] | None,
    context: dict[str, str] | None = None,
    counts: Counts | None = None,
) -> Plan:
    """Expand the manifest and compute stale cells against the previous plan.json."""
    cells = expand(manifest, roster, roster_label, counts=counts)
    return Plan(
        name=manifest.name,
        manifest_digest=manifest.digest,
        cells=tuple(cells),
        stale_cells=tuple(stale_cells(cells, previous)),
        context=context,
        prices=roster.prices,
        secret_env=roster.secret_env,
        rules=rules_of(manifest),
    )


class PlanShapeError(ValueError):
    """plan.json is not a plan: `path` is where (a JSON path), `cause` what went wrong."""

    def __init__(self, path: list[str | int], cause: BaseException) -> None:
        self.path = path
        self.cause = cause
        super().__init__(path, cause)

    @property
    def problem(self) -> str:
        """What is wrong there, in words."""
        if isinstance(self.cause, KeyError):
            return "is required but missing"
        return f"not a valid plan cell ({type(self.cause).__name__}: {self.cause})"


def _missing(raw: Any, exc: BaseException) -> list[str | int]:
    """Where in a plan cell a KeyError was: a key of the cell, or of its seat."""
    if not isinstance(exc, KeyError) or not isinstance(raw, dict):
        return []
    key = exc.args[0] if exc.args else None
    if not isinstance(key, str):
        return []
    seat = raw.get("seat")
    if isinstance(seat, dict) and key in _SEAT_FIELDS and key not in seat:
        return ["seat", key]
    return [key] if key not in raw else []


# the keys of a plan cell's seat that plan_from_document reads
_SEAT_FIELDS = frozenset(SEAT_KEYS)


def _cell_from(raw: dict[str, Any], seats: dict[Any, SeatSpec] | None = None) -> Cell:
    """One cell of plan.json (ours, or the original tool's: a seat named only). `seats`:
    the specs made so far, shared by the cells of one seat (a spec is immutable, and
    100,000 copies of one would weigh hundreds of MB)."""
    seat_doc = raw["seat"]
    if isinstance(seat_doc, str):
        return Cell(
            cell_id=raw["cell_id"],
            coordinate=raw["coordinate"],
            case_id=raw["case_id"],
            prompt=raw["prompt"],
            seat=SeatSpec(name=seat_doc, cli=""),
            trial=raw["trial"],
            graders=tuple(raw["graders"]),
            execution_mode=raw["execution_mode"],
            run_key="",
        )
    fields = (
        seat_doc["seat"],
        seat_doc["cli"],
        seat_doc["model"],
        seat_doc["reasoning"],
        seat_doc["transport"],
        seat_doc["transport_version"],
        seat_doc["env"] or {},
        seat_doc["codex_transport"],
    )
    key: Any = None
    try:
        key = (*fields[:6], tuple(sorted(fields[6].items())), fields[7])
        hash(key)
    except (TypeError, AttributeError):  # (a value that is no key: a spec of its own)
        key = None
    seat = seats.get(key) if seats is not None and key is not None else None
    if seat is None:
        seat = SeatSpec(
            name=fields[0],
            cli=fields[1],
            model=fields[2],
            reasoning=fields[3],
            transport=fields[4],
            transport_version=fields[5],
            env=dict(fields[6]),
            codex_transport=fields[7],
        )
        if seats is not None and key is not None:
            seats[key] = seat
    workspace, setup = _world_from(raw.get("workspace"))
    payload = identity_payload(
        case_id=raw["case_id"],
        prompt=raw["prompt"],
        seat=seat_doc,
        trial=raw["trial"],
        graders=raw["graders"],
        execution_mode=raw["execution_mode"],
        workspace=None
        if workspace is None
        else {
            **workspace.identity(),
            **({"setup": setup.digest} if setup is not None else {}),
        },
    )
    return Cell(
        cell_id=raw["cell_id"],
        coordinate=raw["coordinate"],
        case_id=raw["case_id"],
        prompt=raw["prompt"],
        seat=seat,
        trial=raw["trial"],
        graders=tuple(raw["graders"]),
        execution_mode=raw["execution_mode"],
        run_key=run_key(payload),
        workspace=workspace,
        setup=setup,
    )


def _world_from(raw: Any) -> tuple[WorkspaceSpec | None, SetupSpec | None]:
    """A plan cell's `workspace` as specs (the setup known by its digest only)."""
    if raw is None:
        return None, None
    if "repo" in raw:
        workspace = WorkspaceSpec(kind="repo", path=raw["repo"], commit=raw["commit"])
    else:
        workspace = WorkspaceSpec(kind="dir", path=raw["dir"], digest=raw["digest"])
    setup = SetupSpec(commands=(), digest=raw["setup"]) if "setup" in raw else None
    return workspace, setup


def plan_from_document(doc: dict[str, Any]) -> Plan:
    """Rebuild a Plan from plan.json (for commands that only get an output directory).

    The original tool's plan.json names each cell's seat only: such a seat's
    spec is unknown (empty `cli`) and its cells have no run_key (never reused).
    """
    cells = []
    seats: dict[Any, SeatSpec] = {}
    for index, raw in enumerate(doc["cells"]):
        try:
            cells.append(_cell_from(raw, seats))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise PlanShapeError(["cells", index, *_missing(raw, exc)], exc) from None
    return Plan(
        name=doc["name"],
        manifest_digest=doc["manifest_digest"],
        cells=tuple(cells),
        stale_cells=tuple(doc.get("stale_cells", [])),
        context=doc.get("context"),
        prices={model: price_from_document(raw) for model, raw in doc.get("prices", {}).items()},
        secret_env=tuple((doc.get("secrets") or {}).get("env") or ()),
        rules=rules_from_document(doc.get("adaptive")),
    )
