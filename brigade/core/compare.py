"""Comparing two batteries, or two seats of one: cells matched by case and trial, the flips, the
difference in accepted rate with its interval and test, the verdict, and the CI gate.

Pure: what each side recorded in, the comparison document (`brigade.compare.v1`) out.

- Cells are matched by case id (never by cell id: two batteries of other seats share no cell
  ids) and, within a case, by trial number. A case only one side has is listed, never dropped.
  A case whose prompt or graders differ between the sides is compared by its id and listed as
  edited.
- A cell is evidence when it is accepted or failed (trials.trial_kind). Measurement failures
  (adapter_error, grader_error, timed-out execution_error) and unfinished cells are
  *unmeasured*: never a flip, never evidence, listed with their kinds. Unscored cells (no
  graders) are counted apart.
- A *flip* is a trial both sides measured with another outcome: pass -> fail or fail -> pass.
- A case is compared when both sides have a measured trial of it; its change is the sign of
  its difference in accepted rate. The statistics (core/paired) run over the compared cases:
  the mean per-case difference NEW - BASE, its cluster-bootstrap interval, the p-value of exact
  McNemar when every compared case has one trial a side (else of the sign-flip test), and the
  detectable effect.
- Verdict: `better` / `worse` when the p-value is below 1 - confidence *and* the interval lies
  on that side of zero; otherwise `no detectable difference` (`unmeasured` when no case could
  be compared).
- Gate (`--fail-on-regression`): exit 3 when a pair compared no case or more than
  `max_unmeasured` percent of its shared cases' cells were unmeasured; else 1 when a pair is
  `worse` with its whole interval below -margin points; else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from brigade.core import paired
from brigade.core.stats import stable_round
from brigade.core.trials import CONFIDENCE, TrialKind, wilson_interval

COMPARE_SCHEMA = "brigade.compare.v1"
Verdict = Literal["better", "worse", "no detectable difference", "unmeasured"]
Change = Literal["worse", "better", "same", "unmeasured", "unscored", "only_base", "only_new"]
EVIDENCE: frozenset[str] = frozenset({"accepted", "failed"})
# the kind an unfinished (running or missing) cell is listed with among the unmeasured
UNFINISHED = "unfinished"
MAX_UNMEASURED = 10.0  # percent of the shared cases' cells, by default
SIDES = ("base", "new")


class Outcome(NamedTuple):
    """One cell as a comparison sees it."""

    case_id: str
    trial: int
    coordinate: str
    cell_id: str
    kind: TrialKind
    fault: str | None  # the precise kind of a measurement failure (rate_limited, ...)

    @property
    def unmeasured_kind(self) -> str | None:
        """What it is listed as among the unmeasured; None when it is evidence or unscored."""
        if self.kind in EVIDENCE or self.kind == "unscored":
            return None
        if self.kind == "unfinished":
            return UNFINISHED
        return self.fault or self.kind


@dataclass(frozen=True)
class Side:
    """What one seat of one output directory recorded."""

    name: str  # the plan's name
    manifest_digest: str
    seat: str
    outcomes: tuple[Outcome, ...]
    # case id -> a digest of what the case asks (prompt and graders): an edited case is named
    fingerprints: Mapping[str, str] = field(default_factory=dict)
    usage: Mapping[str, Any] | None = None  # the seat's usage_all_attempts (summary.json)
    original: bool = False  # written by the original `brigade model trial`


@dataclass(frozen=True)
class Settings:
    """How sure a verdict must be, and what fails the gate."""

    confidence: float = CONFIDENCE
    margin: float = 0.0  # points: a regression smaller than this passes the gate
    max_unmeasured: float = MAX_UNMEASURED  # percent
    fail_on_regression: bool = False


DEFAULTS = Settings()


@dataclass
class _Tally:
    accepted: int = 0
    failed: int = 0
    unscored: int = 0
    unmeasured: list[Outcome] = field(default_factory=list)
    unfinished: int = 0
    trials: dict[int, Outcome] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        self.trials[outcome.trial] = outcome
        if outcome.kind == "accepted":
            self.accepted += 1
        elif outcome.kind == "failed":
            self.failed += 1
        elif outcome.kind == "unscored":
            self.unscored += 1
        else:
            self.unmeasured.append(outcome)
            self.unfinished += outcome.kind == "unfinished"

    @property
    def scored(self) -> int:
        return self.accepted + self.failed

    def document(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "scored": self.scored,
            "unmeasured": len(self.unmeasured),
            "unscored": self.unscored,
        }


def _tallies(outcomes: Iterable[Outcome]) -> dict[str, _Tally]:
    tallies: dict[str, _Tally] = {}
    for outcome in outcomes:
        tallies.setdefault(outcome.case_id, _Tally()).add(outcome)
    return tallies


def _cell(outcome: Outcome) -> dict[str, Any]:
    return {"coordinate": outcome.coordinate, "cell_id": outcome.cell_id}


def _maybe(value: float | None) -> float | None:
    return stable_round(value) if value is not None else None


def _rate(accepted: int, scored: int, confidence: float) -> dict[str, Any]:
    interval = wilson_interval(accepted, scored, confidence)
    return {
        "accepted": accepted,
        "scored": scored,
        "rate": stable_round(accepted / scored) if scored else None,
        "interval": [stable_round(interval[0]), stable_round(interval[1])] if interval else None,
    }


def points(value: float) -> str:
    """A difference in accepted rate in percentage points, signed: `+12.5`."""
    shown = f"{value * 100:+.1f}"
    return "+0.0" if shown == "-0.0" else shown


def p_text(value: float) -> str:
    """A p-value in two significant digits (`0.0039`), `< 0.0001` below that."""
    if value < 0.0001:
        return "< 0.0001"
    return f"{value:.2g}" if value < 0.1 else f"{value:.2f}"


TEST_NAMES = {
    "mcnemar_exact": "exact McNemar",
    "sign_flip_exact": "exact sign-flip test",
    "sign_flip_sampled": "sign-flip test, sampled",
}


def compare_sides(base: Side, new: Side, settings: Settings = DEFAULTS) -> dict[str, Any]:
    """The comparison of one pair of seats (one item of the document's `comparisons`)."""
    before, after = _tallies(base.outcomes), _tallies(new.outcomes)
    order = list(before) + [case for case in after if case not in before]
    shared = [case for case in order if case in before and case in after]
    pairs: list[paired.CasePair] = []
    by_case: list[dict[str, Any]] = []
    flips: list[dict[str, Any]] = []
    unmeasured: list[dict[str, Any]] = []
    kinds: dict[str, int] = {}
    counts = {"pass_to_fail": 0, "fail_to_pass": 0, "unchanged": 0}
    measured = missing = unscored = 0
    single = True
    for case in order:
        first, second = before.get(case), after.get(case)
        row: dict[str, Any] = {"case": case}
        if first is None or second is None:
            row["change"] = "only_new" if first is None else "only_base"
            for side, tally in zip(SIDES, (first, second), strict=True):
                row[side] = tally.document() if tally is not None else None
            row["difference"] = None
            row["edited"] = False
            by_case.append(row)
            continue
        for side, tally in zip(SIDES, (first, second), strict=True):
            measured += tally.scored
            unscored += tally.unscored
            for outcome in tally.unmeasured:
                kind = outcome.unmeasured_kind or UNFINISHED
                kinds[kind] = kinds.get(kind, 0) + 1
                missing += 1
                unmeasured.append({"side": side, **_cell(outcome), "kind": kind})
        for trial in sorted(set(first.trials) & set(second.trials)):
            was, now = first.trials[trial], second.trials[trial]
            if was.kind not in EVIDENCE or now.kind not in EVIDENCE:
                continue
            if was.kind == now.kind:
                counts["unchanged"] += 1
                continue
            direction = "pass_to_fail" if was.kind == "accepted" else "fail_to_pass"
            counts[direction] += 1
            flips.append(
                {
                    "case": case,
                    "trial": trial,
                    "direction": direction,
                    "base": _cell(was),
                    "new": _cell(now),
                }
            )
        row["base"], row["new"] = first.document(), second.document()
        row["edited"] = base.fingerprints.get(case) != new.fingerprints.get(case)
        if first.scored and second.scored:
            pair = (first.accepted, first.scored, second.accepted, second.scored)
            pairs.append(pair)
            single = single and first.scored == 1 and second.scored == 1
            delta = float(paired.difference(pair))
            row["difference"] = stable_round(delta)
            row["change"] = "worse" if delta < 0 else "better" if delta > 0 else "same"
        else:
            row["difference"] = None
            # a side without graders says nothing either way; a fault or an unfinished cell
            # is something the apparatus owes
            faulty = first.unmeasured if not first.scored else []
            faulty = faulty + (second.unmeasured if not second.scored else [])
            row["change"] = "unmeasured" if faulty else "unscored"
        by_case.append(row)
    statistics = _statistics(pairs, single, settings)
    cells = measured + missing
    percent = 100.0 * missing / cells if cells else 100.0
    pooled = [sum(pair[i] for pair in pairs) for i in range(4)]
    document = {
        "base": _side_document(base),
        "new": _side_document(new),
        "cases": {
            "shared": len(shared),
            "compared": len(pairs),
            "only_base": [case for case in order if case not in after],
            "only_new": [case for case in order if case not in before],
            "edited": [row["case"] for row in by_case if row["edited"]],
            "unmeasured": [row["case"] for row in by_case if row["change"] == "unmeasured"],
            "unscored": [row["case"] for row in by_case if row["change"] == "unscored"],
        },
        "trials": {"single": bool(pairs) and single, **counts},
        "accepted_rate": {
            "base": _rate(pooled[0], pooled[1], settings.confidence),
            "new": _rate(pooled[2], pooled[3], settings.confidence),
        },
        **statistics,
        "unmeasured": {
            "cells": missing,
            "of": cells,
            "percent": stable_round(percent),
            "kinds": dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0]))),
            "list": unmeasured,
        },
        "unscored": unscored,
        "flips": flips,
        "by_case": by_case,
        "costs": {"base": cost_document(base.usage), "new": cost_document(new.usage)},
    }
    document["gate"] = _pair_gate(document, settings)
    return document


def _side_document(side: Side) -> dict[str, Any]:
    return {
        "name": side.name,
        "seat": side.seat,
        "manifest_digest": side.manifest_digest,
        "original": side.original,
    }


def _statistics(
    pairs: Sequence[paired.CasePair], single: bool, settings: Settings
) -> dict[str, Any]:
    if not pairs:
        return {
            "difference": None,
            "interval": None,
            "p_value": None,
            "test": None,
            "detectable": None,
            "verdict": "unmeasured",
            "verdict_text": "nothing to compare: no shared case has measured trials on both sides",
        }
    difference = paired.mean_difference(pairs)
    assert difference is not None
    interval = paired.bootstrap_interval(pairs, settings.confidence)
    assert interval is not None
    if single:
        test = "mcnemar_exact"
        worse = sum(1 for pair in pairs if pair[0] > pair[2])
        p_value = paired.mcnemar_exact(worse, sum(1 for pair in pairs if pair[0] < pair[2]))
    else:
        flipped = paired.sign_flip_test(pairs)
        test = "sign_flip_exact" if flipped.exact else "sign_flip_sampled"
        p_value = flipped.p_value
    detectable = paired.detectable_effect(pairs, settings.confidence)
    alpha = 1 - settings.confidence
    verdict: Verdict = "no detectable difference"
    if p_value < alpha and interval[1] < 0:
        verdict = "worse"
    elif p_value < alpha and interval[0] > 0:
        verdict = "better"
    low, high = stable_round(interval[0]), stable_round(interval[1])
    discordant = sum(1 for pair in pairs if pair[0] != pair[2])
    on = f" on {discordant} discordant case(s)" if single else f" over {len(pairs)} case(s)"
    how = f"p = {p_text(p_value)}, {TEST_NAMES[test]}{on}"
    level = f"{settings.confidence * 100:g}%"
    if verdict == "no detectable difference":
        can = (
            f"this battery detects differences of about {detectable * 100:.1f} points"
            if detectable is not None
            else f"this battery has too few cases to detect any difference (the test needs "
            f"{paired.moving_cases(settings.confidence)} that move one way)"
        )
        text = (
            f"no detectable difference (the interval is [{points(low)}, {points(high)}] "
            f"points; {how}); {can}"
        )
    else:
        amount = f"{abs(difference) * 100:.1f}"
        text = (
            f"{verdict}: NEW accepts {amount} points {'more' if verdict == 'better' else 'less'} "
            f"than BASE ({level} interval [{points(low)}, {points(high)}] points; {how})"
        )
    return {
        "difference": stable_round(difference),
        "interval": [low, high],
        "p_value": stable_round(p_value),
        "test": test,
        "detectable": _maybe(detectable),
        "verdict": verdict,
        "verdict_text": text,
    }


def cost_document(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A side's costs from its seat's usage_all_attempts: in all, per cell, per accepted."""
    if usage is None:
        return None
    return {
        "cells": usage.get("cells"),
        "accepted": usage.get("accepted"),
        "cost_usd": usage.get("cost_usd"),
        "cost_usd_per_cell": usage.get("mean_cost_usd_per_cell"),
        "cost_usd_per_accepted": usage.get("cost_usd_per_accepted"),
        "total_tokens": usage.get("total_tokens"),
        "tokens_per_accepted": usage.get("tokens_per_accepted"),
        "cells_cost_unknown": usage.get("cells_cost_unknown"),
    }


def _pair_gate(document: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    unmeasured = document["unmeasured"]
    too_many = document["cases"]["compared"] == 0 or unmeasured["percent"] > settings.max_unmeasured
    interval = document["interval"]
    regression = (
        document["verdict"] == "worse"
        and interval is not None
        and interval[1] < -settings.margin / 100
    )
    result = "unmeasured" if too_many else "regression" if regression else "pass"
    return {"result": result}


def pair_name(pair: Mapping[str, Any]) -> str:
    """`agent` when both sides' seats have one name, else `old -> new`."""
    base, new = pair["base"]["seat"], pair["new"]["seat"]
    return base if base == new else f"{base} -> {new}"


def gate(comparisons: Sequence[Mapping[str, Any]], settings: Settings) -> dict[str, Any]:
    """The gate over every pair: its result, the reason in one line, the exit code."""
    results = [c["gate"]["result"] for c in comparisons]
    names = [f"seat {pair_name(c)}" for c in comparisons]
    if "unmeasured" in results:
        result, exit_code = "unmeasured", 3
        reasons = []
        for name, c in zip(names, comparisons, strict=True):
            if c["gate"]["result"] != "unmeasured":
                continue
            u = c["unmeasured"]
            if c["cases"]["compared"] == 0:
                reasons.append(f"{name}: no shared case has measured trials on both sides")
            else:
                kinds = ", ".join(f"{k} {n}" for k, n in u["kinds"].items())
                reasons.append(
                    f"{name}: {u['cells']} of {u['of']} cells unmeasured "
                    f"({u['percent']:.1f}% > {settings.max_unmeasured:g}%: {kinds})"
                )
        reason = "too many unmeasured cells to tell: " + "; ".join(reasons)
    elif "regression" in results:
        result, exit_code = "regression", 1
        worse = [
            f"{name}: {points(c['difference'])} points, interval [{points(c['interval'][0])}, "
            f"{points(c['interval'][1])}]"
            for name, c in zip(names, comparisons, strict=True)
            if c["gate"]["result"] == "regression"
        ]
        beyond = f" by more than {settings.margin:g} points" if settings.margin else ""
        reason = f"regression: NEW is worse{beyond}: " + "; ".join(worse)
    else:
        result, exit_code = "pass", 0
        worse_within = [c for c in comparisons if c["verdict"] == "worse"]
        reason = (
            f"no regression beyond the margin of {settings.margin:g} points"
            if worse_within
            else "no regression"
        )
    return {
        "enabled": settings.fail_on_regression,
        "margin_points": settings.margin,
        "max_unmeasured_percent": settings.max_unmeasured,
        "result": result,
        "reason": reason,
        "exit_code": exit_code if settings.fail_on_regression else 0,
    }


def comparison_document(
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    comparisons: Sequence[Mapping[str, Any]],
    settings: Settings,
) -> dict[str, Any]:
    """The whole `brigade.compare.v1` document: both batteries, every pair, the gate."""
    return {
        "schema": COMPARE_SCHEMA,
        "confidence": settings.confidence,
        "method": {
            "interval": "percentile cluster bootstrap over cases",
            "resamples": paired.RESAMPLES,
            "seed": paired.SEED,
            "power": paired.POWER,
        },
        "base": dict(base),
        "new": dict(new),
        "comparisons": list(comparisons),
        "gate": gate(comparisons, settings),
    }
