"""core.usage: the normalised usage value, its sums, its document form and pricing."""

from __future__ import annotations

import json

import pytest

from brigade.core.usage import (
    ModelUsage,
    Price,
    Usage,
    UsageError,
    add,
    from_models,
    priced,
    reported_cost,
    total,
    usage_document,
    usage_from_document,
)

RUN = Usage(
    input_tokens=20839,
    cached_input_tokens=0,
    cache_write_tokens=20333,
    output_tokens=15,
    turns=2,
    cost_usd=0.122623,
    cost_source="reported",
    model="claude-sonnet-4-6",
    models=(
        ModelUsage(model="claude-haiku-4-5", input_tokens=504, output_tokens=11, cost_usd=0.000559),
        ModelUsage(
            model="claude-sonnet-4-6",
            input_tokens=20335,
            cached_input_tokens=0,
            cache_write_tokens=20333,
            output_tokens=4,
            cost_usd=0.122064,
        ),
    ),
    session_id="s-1",
    api_duration_seconds=3.091,
)


def test_unknown_is_none_never_zero() -> None:
    empty = Usage()
    assert empty.known is False
    assert usage_document(empty) == {
        "input_tokens": None,
        "cached_input_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": None,
        "reasoning_tokens": None,
        "turns": None,
        "cost_usd": None,
        "cost_source": "unknown",
        "model": None,
        "models": {},
        "session_id": None,
        "api_duration_seconds": None,
    }
    assert Usage(output_tokens=0).known is True


def test_a_cost_and_its_source_go_together() -> None:
    with pytest.raises(ValueError):
        Usage(cost_usd=1.0)
    with pytest.raises(ValueError):
        Usage(cost_source="reported")


def test_document_round_trip() -> None:
    doc = usage_document(RUN)
    assert doc["models"] == {
        "claude-haiku-4-5": {
            "input_tokens": 504,
            "cached_input_tokens": None,
            "cache_write_tokens": None,
            "output_tokens": 11,
            "reasoning_tokens": None,
            "cost_usd": 0.000559,
        },
        "claude-sonnet-4-6": {
            "input_tokens": 20335,
            "cached_input_tokens": 0,
            "cache_write_tokens": 20333,
            "output_tokens": 4,
            "reasoning_tokens": None,
            "cost_usd": 0.122064,
        },
    }
    assert usage_from_document(json.loads(json.dumps(doc))) == RUN


def test_a_partial_document_leaves_the_rest_unknown() -> None:
    assert usage_from_document({"output_tokens": 7, "cost_usd": 0.5}) == Usage(
        output_tokens=7, cost_usd=0.5, cost_source="reported"
    )


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ([], "usage: must be an object"),
        ({"input_tokens": 1.5}, "usage.input_tokens: must be a whole number of 0 or more, or null"),
        ({"turns": True}, "usage.turns: must be a whole number of 0 or more, or null"),
        ({"cost_usd": -1}, "usage.cost_usd: must be a number of 0 or more, or null"),
        ({"cost_usd": float("nan")}, "usage.cost_usd: must be a number of 0 or more, or null"),
        ({"cost_source": "guessed"}, "usage.cost_source: must be one of reported, priced, unknown"),
        ({"cost_source": "priced"}, "usage.cost_source: 'priced' does not fit cost_usd None"),
        ({"model": ""}, "usage.model: must be a non-empty string or null"),
        ({"models": []}, "usage.models: must be an object keyed by model id"),
        (
            {"models": {"m": {"tokens": 1}}},
            "usage.models.m: unknown key 'tokens' (known: "
            "input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, "
            "reasoning_tokens, cost_usd)",
        ),
        (
            {"models": {"m": {"output_tokens": -2}}},
            "usage.models.m.output_tokens: must be a whole number of 0 or more, or null",
        ),
    ],
)
def test_bad_documents_are_refused_on_one_line(doc: object, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        usage_from_document(doc)
    assert str(info.value) == problem


def test_adding_keeps_unknown_only_where_both_are_unknown() -> None:
    a = Usage(input_tokens=10, output_tokens=2, turns=1, session_id="s")
    b = Usage(input_tokens=5, reasoning_tokens=3, cost_usd=0.25, cost_source="reported")
    assert add(a, b) == Usage(
        input_tokens=15,
        output_tokens=2,
        reasoning_tokens=3,
        turns=1,
        cost_usd=0.25,
        cost_source="reported",
        session_id="s",
    )
    assert total([]) == Usage()
    assert total([a, a, a]).input_tokens == 30


def test_adding_merges_models_by_id_and_mixes_cost_sources() -> None:
    reported = Usage(
        cost_usd=1.0,
        cost_source="reported",
        models=(ModelUsage(model="m", output_tokens=1),),
    )
    computed = Usage(
        cost_usd=2.0,
        cost_source="priced",
        models=(ModelUsage(model="m", output_tokens=4), ModelUsage(model="n", output_tokens=1)),
    )
    both = add(reported, computed)
    assert (both.cost_usd, both.cost_source) == (3.0, "priced")
    assert both.models == (
        ModelUsage(model="m", output_tokens=5),
        ModelUsage(model="n", output_tokens=1),
    )


def test_totals_from_models() -> None:
    usage = from_models(
        (
            ModelUsage(model="a", input_tokens=100, output_tokens=10, cost_usd=0.5),
            ModelUsage(model="b", input_tokens=20, output_tokens=None, cost_usd=0.25),
        ),
        turns=3,
    )
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd, usage.turns) == (
        120,
        10,
        0.75,
        3,
    )
    assert usage.cost_source == "reported"
    assert from_models((ModelUsage(model="a"),)).cost_source == "unknown"


@pytest.mark.parametrize(
    ("cost", "spent", "expected"),
    [
        (0.5, True, (0.5, "reported")),
        (0, False, (0.0, "reported")),
        (0, True, (None, "unknown")),  # a CLI with no price for the model prints 0
        (None, True, (None, "unknown")),
        (-1, True, (None, "unknown")),
        ("1", True, (None, "unknown")),
    ],
)
def test_reported_cost(cost: object, spent: bool, expected: tuple[object, str]) -> None:
    found = reported_cost(cost, tokens_spent=spent)
    assert (found["cost_usd"], found["cost_source"]) == expected


def test_pricing_fills_an_unknown_cost_only() -> None:
    prices = {"gpt-x": Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)}
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000)
    found = priced(usage, prices, model="gpt-x")
    # 600k fresh at 2, 400k cached at 0.5, 100k out at 8
    assert (found.cost_usd, found.cost_source) == (1.2 + 0.2 + 0.8, "priced")
    assert priced(RUN, prices) is RUN  # reported costs stand
    assert priced(usage, prices, model="other") == usage  # no price: still unknown
    assert priced(Usage(output_tokens=5), prices, model="gpt-x") == Usage(output_tokens=5)


def test_pricing_per_model_share() -> None:
    usage = Usage(
        input_tokens=3_000_000,
        output_tokens=2_000_000,
        models=(
            ModelUsage(model="big", input_tokens=2_000_000, output_tokens=1_000_000),
            ModelUsage(model="small", input_tokens=1_000_000, output_tokens=1_000_000),
        ),
    )
    prices = {"big": Price(3.0, 15.0), "small": Price(1.0, 5.0)}
    assert priced(usage, prices).cost_usd == 6.0 + 15.0 + 1.0 + 5.0
    assert priced(usage, {"big": Price(3.0, 15.0)}) == usage  # one model without a price
