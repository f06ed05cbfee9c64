"""core.accounting and the summary's usage keys: every attempt counted, priced now, unknown kept
unknown."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from test_summary import NOW, ids, make_plan

from brigade.core.accounting import Spending, attempts_of, cell_usage, grader_spending
from brigade.core.receipts import ReceiptView, views_of
from brigade.core.summary import build_summary
from brigade.core.usage import Price, Usage
from brigade.inputs import schemas

PRICES = {"m-1": Price(input_per_mtok=2.0, output_per_mtok=10.0, cached_input_per_mtok=0.5)}


def doc(**fields: Any) -> dict[str, Any]:
    return fields


def test_repricing_keeps_reported_costs_and_prices_the_rest_now() -> None:
    reported = doc(input_tokens=1000, output_tokens=100, cost_usd=0.5, cost_source="reported")
    # priced when recorded, at another price: priced again with the table as it is now
    earlier = doc(input_tokens=1000, cached_input_tokens=400, output_tokens=100)
    earlier.update(cost_usd=9.0, cost_source="priced", model="m-1")
    unpriced = doc(input_tokens=10, output_tokens=1, model="other")
    usages = attempts_of([reported, earlier, unpriced, None], PRICES, None)
    assert usages is not None
    assert [(u.cost_usd, u.cost_source) if u else None for u in usages] == [
        (0.5, "reported"),
        ((600 * 2.0 + 400 * 0.5 + 100 * 10.0) / 1e6, "priced"),
        (None, "unknown"),
        None,
    ]
    # without a model of its own, a run is priced as the seat's configured model
    [seat_model] = attempts_of([doc(input_tokens=10, output_tokens=1)], PRICES, "m-1") or ()
    assert seat_model is not None and seat_model.cost_source == "priced"
    assert attempts_of(None, PRICES, "m-1") is None
    # a record that is not a usage document is unknown, never a crash
    assert attempts_of([{"input_tokens": -1}], PRICES, "m-1") == (None,)


def test_spending_counts_every_attempt_and_says_what_it_leaves_out() -> None:
    spending = Spending()
    a = Usage(input_tokens=100, output_tokens=10, turns=2, cost_usd=0.1, cost_source="reported")
    b = Usage(input_tokens=50, output_tokens=5, turns=1, model="m-1", models=())
    spending.add((a, a), accepted=True)  # a retried cell: both attempts cost
    spending.add((b,), accepted=True)  # tokens known, cost unknown
    spending.add((a, None))  # a crashed attempt: unknown
    spending.add(None)  # a receipt written before usage was recorded
    spending.add(())  # the seat never launched: it spent nothing
    assert spending.document() == {
        "cells": 5,
        "attempts": 5,
        "cells_tokens_unknown": 2,
        "cells_cost_unknown": 3,
        "partial": True,
        "input_tokens": 350,
        "cached_input_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": 35,
        "reasoning_tokens": None,
        "turns": 7,
        "total_tokens": 385,
        "cost_usd": 0.3,
        "cost_sources": {"reported": 3, "priced": 0, "unknown": 2},
        # over the cells known in full: (220 + 55 + 0) / 3, (0.2 + 0) / 2, (4 + 1 + 0) / 3
        "mean_tokens_per_cell": pytest.approx(275 / 3),
        "mean_cost_usd_per_cell": 0.1,
        "turns_per_cell": pytest.approx(5 / 3),
        "accepted": 2,
        "tokens_per_accepted": 192.5,
        "cost_usd_per_accepted": 0.15,
        "models": ["m-1"],
    }


def test_nothing_known_is_null_never_zero() -> None:
    spending = Spending()
    spending.add((None,), accepted=True)
    document = spending.document()
    assert {k: v for k, v in document.items() if v is None} == {
        k: None
        for k in (
            "input_tokens",
            "cached_input_tokens",
            "cache_write_tokens",
            "output_tokens",
            "reasoning_tokens",
            "turns",
            "total_tokens",
            "cost_usd",
            "mean_tokens_per_cell",
            "mean_cost_usd_per_cell",
            "turns_per_cell",
            "tokens_per_accepted",
            "cost_usd_per_accepted",
        )
    }
    assert (document["cells_tokens_unknown"], document["partial"]) == (1, True)


def test_one_cell_s_usage() -> None:
    usage = cell_usage([doc(input_tokens=10, output_tokens=2, model="m-1")], PRICES, None)
    assert usage["cost_usd"] == (10 * 2.0 + 2 * 10.0) / 1e6
    assert usage["cost_sources"] == {"reported": 0, "priced": 1, "unknown": 0}


def test_grader_usage_is_kept_apart() -> None:
    judge = Usage(input_tokens=300, output_tokens=20, cost_usd=0.002, cost_source="reported")
    assert grader_spending([judge, Usage(input_tokens=1, output_tokens=1)]) == {
        "results": 2,
        "results_cost_unknown": 1,
        "input_tokens": 301,
        "cached_input_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": 21,
        "reasoning_tokens": None,
        "turns": None,
        "cost_usd": 0.002,
    }


def receipt(state: str, attempts: list[Any] | None, **extra: Any) -> dict[str, Any]:
    made: dict[str, Any] = {
        "state": state,
        "duration_seconds": 1.0,
        "graders": [],
        "started_at": "2026-01-02T03:04:05Z",
        "finished_at": "2026-01-02T03:05:05Z",
        **extra,
    }
    if attempts is not None:
        made["attempts_usage"] = [
            {"attempt": n, "usage": usage} for n, usage in enumerate(attempts, 1)
        ]
    return made


def test_summary_usage_per_seat_priced_with_the_plan_s_prices(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, ["c1", "c2"])
    cell = ids(plan)
    tokens = doc(input_tokens=1000, output_tokens=100, model="m-1")
    receipts: dict[str, Any] = {
        cell["c1:alpha:1"]: receipt("accepted", [tokens], cli_version="1.0"),
        cell["c2:alpha:1"]: receipt("rejected", [None, tokens], cli_version="1.1"),
        cell["c1:beta:1"]: receipt("accepted", None),  # recorded before usage was
        cell["c2:beta:1"]: {"state": "running"},
    }
    unpriced = build_summary(plan, views_of(receipts), {}, NOW)
    priced = build_summary(dataclasses.replace(plan, prices=PRICES), views_of(receipts), {}, NOW)
    for summary in (unpriced, priced):
        assert schemas.problems(summary, "brigade.eval_summary.v1") == []
    alpha = priced["by_seat"]["alpha"]
    assert alpha["agent"] == {
        "cli": "exec:{python} -c pass",
        "model": None,
        "models_used": ["m-1"],
        "cli_versions": ["1.0", "1.1"],
        "first_started_at": "2026-01-02T03:04:05Z",
        "last_finished_at": "2026-01-02T03:05:05Z",
    }
    cost = (1000 * 2.0 + 100 * 10.0) / 1e6
    usage = alpha["usage_all_attempts"]
    assert (usage["cells"], usage["attempts"], usage["cost_usd"]) == (2, 3, 2 * cost)
    assert (usage["cells_cost_unknown"], usage["partial"]) == (1, True)
    assert usage["cost_usd_per_accepted"] == 2 * cost
    assert usage["mean_cost_usd_per_cell"] == cost  # over the one cell known in full
    # no price: the tokens are known, the cost is not (null, not 0)
    assert unpriced["by_seat"]["alpha"]["usage_all_attempts"]["cost_usd"] is None
    assert unpriced["by_seat"]["alpha"]["usage_all_attempts"]["total_tokens"] == 2200
    beta = priced["by_seat"]["beta"]["usage_all_attempts"]
    assert (beta["cells"], beta["cells_tokens_unknown"], beta["cost_usd"]) == (1, 1, None)
    assert priced["usage_all_attempts"]["cells"] == 3
    # the original keys are untouched by usage
    assert {k: priced[k] for k in ("counts", "scores", "durations")} == {
        k: unpriced[k] for k in ("counts", "scores", "durations")
    }


def test_view_keeps_a_compact_usage_and_round_trips_through_the_index() -> None:
    full = receipt(
        "accepted",
        [doc(input_tokens=5, output_tokens=1, cost_usd=None, session_id="s", models={}), None],
        cell_id="a" * 64,
        attempt=2,
        cli_version="2.0",
        graders=[{"status": "scored", "score": 1.0, "usage": doc(output_tokens=3)}],
    )
    view = ReceiptView.of(full)
    assert view.usage == ({"input_tokens": 5, "output_tokens": 1}, None)
    assert view.grader_usage == ({"output_tokens": 3},)
    assert view.cli_version == "2.0"
    import json

    assert ReceiptView.from_json(json.loads(json.dumps(view))) == view
    assert ReceiptView.of({**full, "attempts_usage": "bad"}).usage is None
