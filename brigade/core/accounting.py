"""What cells and seats spent: every attempt's usage, priced now, added up (pure).

A receipt records the usage of every attempt of its cell whose seat ran
(`attempts_usage`): failed, crashed and retried attempts cost too, so all of
them count. A cost the CLI did not report is priced here with the price table
given (the plan's, from the roster), so a changed price changes the totals
without running anything. Unknown stays unknown: a total adds up what is
known, says how many cells it leaves out, and is null when nothing is known.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from brigade.core.stats import stable_round
from brigade.core.usage import (
    COST_SOURCES,
    TOKEN_FIELDS,
    Price,
    Usage,
    UsageError,
    repriced,
    usage_from_document,
)

# what a total adds up besides the cost
SUMMED = (*TOKEN_FIELDS, "turns")


def parse(doc: Any) -> Usage | None:
    """A usage from its (possibly compact) document; None when unknown or not one."""
    if doc is None:
        return None
    try:
        return usage_from_document(doc)
    except UsageError:
        return None  # a receipt edited by hand: unknown, never a crash


def attempts_of(
    docs: Iterable[Any] | None, prices: Mapping[str, Price], model: str | None
) -> tuple[Usage | None, ...] | None:
    """Each attempt's usage priced with `prices` (None: unknown); None for no record."""
    if docs is None:
        return None
    return tuple(
        repriced(usage, prices, model) if (usage := parse(doc)) is not None else None
        for doc in docs
    )


def cell_usage(
    docs: Iterable[Any] | None, prices: Mapping[str, Price], model: str | None
) -> dict[str, Any]:
    """One cell's usage over all its attempts, as `Spending.document` gives it."""
    spending = Spending()
    spending.add(attempts_of(docs, prices, model))
    return spending.document()


def _plus(total: Any, value: Any) -> Any:
    return value if total is None else total + value


def _ratio(total: float | None, count: int) -> float | None:
    return stable_round(total / count) if total is not None and count else None


def _tokens(usage: Usage) -> int | None:
    if usage.input_tokens is None or usage.output_tokens is None:
        return None
    return usage.input_tokens + usage.output_tokens


class Spending:
    """What a group of cells spent over every attempt (a seat's, or a whole plan's)."""

    def __init__(self) -> None:
        self.cells = 0
        self.attempts = 0
        self.accepted = 0
        self.sums: dict[str, Any] = dict.fromkeys(SUMMED)
        self.total_tokens: int | None = None
        self.cost: float | None = None
        self.sources = dict.fromkeys(COST_SOURCES, 0)
        self.models: dict[str, None] = {}
        # cells whose every attempt's tokens / cost / turns are known, and their sums
        self.known = {"tokens": 0, "cost": 0, "turns": 0}
        self.known_sums: dict[str, Any] = dict.fromkeys(self.known)

    def add(self, attempts: tuple[Usage | None, ...] | None, *, accepted: bool = False) -> None:
        """Count one finished cell: its attempts' usage (None: the receipt records none)."""
        self.cells += 1
        self.accepted += accepted
        if attempts is None:
            return  # unknown: counted among the cells left out of every total
        self.attempts += len(attempts)
        cell: dict[str, Any] = dict.fromkeys(self.known, 0)
        for usage in attempts:
            if usage is None:
                self.sources["unknown"] += 1
                cell = dict.fromkeys(cell)  # nothing of this cell is known in full
                continue
            self.sources[usage.cost_source] += 1
            for name in SUMMED:
                value = getattr(usage, name)
                if value is not None:
                    self.sums[name] = _plus(self.sums[name], value)
            tokens = _tokens(usage)
            if tokens is not None:
                self.total_tokens = _plus(self.total_tokens, tokens)
            if usage.cost_usd is not None:
                self.cost = _plus(self.cost, usage.cost_usd)
            for name, value in (
                ("tokens", tokens),
                ("cost", usage.cost_usd),
                ("turns", usage.turns),
            ):
                cell[name] = None if value is None or cell[name] is None else cell[name] + value
            for model in (usage.model, *(share.model for share in usage.models)):
                if model is not None:
                    self.models[model] = None
        for name, value in cell.items():
            if value is not None:
                self.known[name] += 1
                self.known_sums[name] = _plus(self.known_sums[name], value)

    def document(self) -> dict[str, Any]:
        """summary.json's `usage_all_attempts` object (docs/output-directory.md, summary.json)."""
        cost = stable_round(self.cost) if self.cost is not None else None
        tokens_unknown = self.cells - self.known["tokens"]
        cost_unknown = self.cells - self.known["cost"]
        return {
            "cells": self.cells,
            "attempts": self.attempts,
            "cells_tokens_unknown": tokens_unknown,
            "cells_cost_unknown": cost_unknown,
            "partial": bool(tokens_unknown or cost_unknown),
            **self.sums,
            "total_tokens": self.total_tokens,
            "cost_usd": cost,
            "cost_sources": self.sources,
            "mean_tokens_per_cell": _ratio(self.known_sums["tokens"], self.known["tokens"]),
            "mean_cost_usd_per_cell": _ratio(self.known_sums["cost"], self.known["cost"]),
            "turns_per_cell": _ratio(self.known_sums["turns"], self.known["turns"]),
            "accepted": self.accepted,
            "tokens_per_accepted": _ratio(self.total_tokens, self.accepted),
            "cost_usd_per_accepted": _ratio(self.cost, self.accepted),
            "models": sorted(self.models),
        }


def grader_spending(usages: Iterable[Usage | None]) -> dict[str, Any]:
    """summary.json's `grader_usage`: what graders that call a model (judges) spent, kept
    apart from the seats' own usage."""
    results = 0
    sums: dict[str, Any] = dict.fromkeys(SUMMED)
    cost: float | None = None
    unknown = 0
    for usage in usages:
        results += 1
        if usage is None or usage.cost_usd is None:
            unknown += 1
        if usage is None:
            continue
        for name in SUMMED:
            value = getattr(usage, name)
            if value is not None:
                sums[name] = _plus(sums[name], value)
        if usage.cost_usd is not None:
            cost = _plus(cost, usage.cost_usd)
    return {
        "results": results,
        "results_cost_unknown": unknown,
        **sums,
        "cost_usd": stable_round(cost) if cost is not None else None,
    }


# grader kinds that call a model: a result of theirs whose process started spent money
MODEL_GRADERS = frozenset({"judge"})


def model_run(result: Mapping[str, Any]) -> tuple[bool, Any]:
    """Whether a grader result records a run of a model, and the usage document it records
    (None: unknown). A judge whose seat started (its exit status is known) ran one, also when
    it reported no usage; one that never started spent nothing."""
    usage = result.get("usage")
    if isinstance(usage, dict):
        return True, usage
    code = result.get("exit_code")
    started = isinstance(code, int) and not isinstance(code, bool)
    return result.get("grader_type") in MODEL_GRADERS and started, None


def judge_seats(specs: Iterable[Any]) -> list[str]:
    """The seat of each judge among grader specs (one entry per judge, in order)."""
    return [
        spec["seat"]
        for spec in specs
        if isinstance(spec, Mapping)
        and spec.get("type") in MODEL_GRADERS
        and isinstance(spec.get("seat"), str)
    ]


def judged_model(spec: Any) -> str | None:
    """The configured model of a judge spec's seat (what prices its run when its usage names
    none)."""
    seat = spec.get("judge_seat") if isinstance(spec, Mapping) else None
    model = seat.get("model") if isinstance(seat, Mapping) else None
    return model if isinstance(model, str) else None


def model_runs(
    specs: Sequence[Any],
    results: Sequence[Any],
    prices: Mapping[str, Price],
    skip: Collection[int] = (),
) -> list[tuple[str, float | None]]:
    """What each grader result that ran a model cost (priced with `prices`, as the judge's
    configured model when its usage names none): `(seat, USD)`, None when unknown; the
    results at the indexes in `skip` (reused from an earlier grading) ran nothing here."""
    costs: list[tuple[str, float | None]] = []
    for index, result in enumerate(results):
        if index in skip or not isinstance(result, Mapping):
            continue
        ran, doc = model_run(result)
        if not ran:
            continue
        spec = specs[index] if index < len(specs) else None
        seat = spec.get("seat") if isinstance(spec, Mapping) else None
        usage = parse(doc)
        if usage is not None:
            usage = repriced(usage, prices, judged_model(spec))
        cost = usage.cost_usd if usage is not None else None
        costs.append((str(seat) if isinstance(seat, str) else "?", cost))
    return costs
