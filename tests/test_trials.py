"""Trial statistics: Wilson intervals, pass@k / pass^k, Student t, paired comparisons, grouping."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brigade.core.plan import build_plan
from brigade.core.receipts import ReceiptView, view_of, views_of
from brigade.core.summary import build_summary
from brigade.core.trials import (
    paired_difference,
    pass_at_k,
    pass_hat_k,
    regularized_beta,
    t_cdf,
    t_quantile,
    trial_kind,
    trial_stats,
    wilson_interval,
    z_value,
)
from brigade.inputs import schemas
from brigade.inputs.manifest import manifest_from_document
from brigade.inputs.roster import roster_from_document

# --- Wilson score interval ------------------------------------------------------


def test_wilson_interval_of_8_out_of_10() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4901625, abs=1e-6)
    assert high == pytest.approx(0.9433178, abs=1e-6)


@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    [
        (0, 10, (0.0, 0.2775328)),
        (10, 10, (0.7224672, 1.0)),
        (5, 10, (0.2365931, 0.7634069)),
        (1, 1, (0.2065493, 1.0)),
        (50, 100, (0.4038315, 0.5961685)),
    ],
)
def test_wilson_interval_known_values(successes, n, expected) -> None:
    assert wilson_interval(successes, n) == pytest.approx(expected, abs=1e-6)


def test_wilson_interval_without_trials_is_none_and_bad_counts_raise() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_wilson_interval_other_confidence() -> None:
    assert z_value() == pytest.approx(1.959964, abs=1e-6)
    assert z_value(0.9) == pytest.approx(1.644854, abs=1e-6)
    low, high = wilson_interval(8, 10, 0.9)
    assert (low, high) == pytest.approx((0.5407928, 0.9314420), abs=1e-6)


# --- pass@k and pass^k ----------------------------------------------------------


def test_pass_at_k_and_pass_hat_k_for_n5_c2() -> None:
    assert [pass_at_k(5, 2, k) for k in range(1, 6)] == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0])
    assert [pass_hat_k(5, 2, k) for k in range(1, 6)] == pytest.approx([0.4, 0.1, 0, 0, 0])


def test_estimators_are_none_beyond_n_and_reject_bad_input() -> None:
    assert pass_at_k(3, 1, 4) is None
    assert pass_hat_k(3, 1, 4) is None
    for bad in ((3, 4, 1), (3, 1, 0), (3, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


@pytest.mark.parametrize(("n", "c"), [(n, c) for n in range(1, 7) for c in range(n + 1)])
def test_estimators_equal_the_average_over_every_k_subset(n: int, c: int) -> None:
    """Unbiased: the mean, over all k-subsets of the n trials, of any/all passing."""
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(outcomes, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
        assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_pass_at_1_is_the_accepted_rate() -> None:
    assert pass_at_k(7, 3, 1) == pytest.approx(3 / 7)
    assert pass_hat_k(7, 3, 1) == pytest.approx(3 / 7)


# --- Student t ------------------------------------------------------------------


def test_regularized_beta_closed_forms() -> None:
    for x in (0.0, 0.1, 0.37, 0.5, 0.9, 1.0):
        assert regularized_beta(x, 1, 1) == pytest.approx(x)
        assert regularized_beta(x, 3, 1) == pytest.approx(x**3)
        assert regularized_beta(x, 1, 2) == pytest.approx(1 - (1 - x) ** 2)


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.7062047), (2, 4.3026527), (3, 3.1824463), (4, 2.7764451), (10, 2.2281389),
     (30, 2.0422725), (100, 1.9839715)],
)  # fmt: skip
def test_t_quantile_matches_the_table(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-6)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-6)


def test_t_cdf_is_symmetric_and_tends_to_normal() -> None:
    assert t_cdf(0.0, 5) == pytest.approx(0.5)
    assert t_cdf(1.3, 7) + t_cdf(-1.3, 7) == pytest.approx(1.0)
    assert t_cdf(1.959964, 10_000) == pytest.approx(0.975, abs=1e-4)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


# --- paired differences ---------------------------------------------------------


def test_paired_difference_uses_a_t_interval() -> None:
    result = paired_difference([0.2, 0.4, 0.0, 0.6])
    assert result.pairs == 4
    assert result.mean == pytest.approx(0.3)
    half = 3.1824463 * math.sqrt(0.2 / 3) / 2  # t(0.975, 3) * sd / sqrt(4)
    assert result.interval == pytest.approx((0.3 - half, 0.3 + half), abs=1e-6)


def test_paired_difference_clips_and_needs_two_pairs() -> None:
    assert paired_difference([]).mean is None
    one = paired_difference([0.5])
    assert (one.pairs, one.mean, one.interval) == (1, 0.5, None)
    wide = paired_difference([1.0, -1.0, 1.0])
    assert wide.interval == (-1.0, 1.0)
    same = paired_difference([0.25, 0.25])
    assert same.interval == (0.25, 0.25)  # no spread between cases: a point


# --- trial kinds and grouping -----------------------------------------------------


@pytest.mark.parametrize(
    ("receipt", "kind"),
    [
        ({"state": "accepted"}, "accepted"),
        ({"state": "rejected"}, "failed"),
        ({"state": "execution_error"}, "failed"),
        ({"state": "execution_error", "failure_reason": "timeout"}, "timeout"),
        ({"state": "adapter_error", "failure_reason": "transport_drop"}, "adapter_error"),
        ({"state": "adapter_error", "failure_reason": "provider_5xx"}, "adapter_error"),
        ({"state": "grader_error"}, "grader_error"),
        ({"state": "unscored"}, "unscored"),
        ({"state": "running"}, "unfinished"),
        (None, "unfinished"),
    ],
)
def test_trial_kind(receipt, kind) -> None:
    assert trial_kind(view_of(receipt)) == kind


def r(state: str, score: float | None = None, reason: str | None = None) -> ReceiptView:
    receipt: dict[str, Any] = {"state": state, "score": score}
    if reason:
        receipt["failure_reason"] = reason
    return ReceiptView.of(receipt)


def test_trial_stats_per_seat_and_case() -> None:
    cells = [
        # alpha / hard: 2 accepted of 3 scored, one timeout (excluded from the rate)
        ("alpha", "hard", r("accepted", 1.0)),
        ("alpha", "hard", r("accepted", 1.0)),
        ("alpha", "hard", r("rejected", 0.5)),
        ("alpha", "hard", r("execution_error", reason="timeout")),
        # alpha / free: one unscored trial, one cell not run yet
        ("alpha", "free", r("unscored")),
        ("alpha", "free", None),
        # beta / hard: 1 accepted, 1 crash (a failure), 1 adapter fault, 1 grader fault
        ("beta", "hard", r("accepted", 1.0)),
        ("beta", "hard", r("execution_error")),
        ("beta", "hard", r("adapter_error", reason="provider_5xx")),
        ("beta", "hard", r("grader_error")),
        ("beta", "free", r("unscored")),
        ("beta", "free", r("running")),
    ]
    stats = trial_stats(cells)
    assert stats["confidence"] == 0.95
    low, high = wilson_interval(2, 3)
    # k = 1..trials (4); k = 4 is beyond the 3 scored trials
    assert [(row["seat"], row["case"]) for row in stats["by_seat_case"]] == [
        ("alpha", "hard"),
        ("alpha", "free"),
        ("beta", "hard"),
        ("beta", "free"),
    ]
    assert stats["by_seat_case"][0] == {
        "seat": "alpha",
        "case": "hard",
        "trials": 4,
        "scored": 3,
        "accepted": 2,
        "unscored": 0,
        "measurement_failures": 1,
        "unfinished": 0,
        "accepted_rate": pytest.approx(2 / 3),
        "interval": pytest.approx([low, high]),
        "mean_score": pytest.approx(2.5 / 3),
        "pass_at_k": pytest.approx([2 / 3, 1.0, 1.0, None]),
        "pass_hat_k": pytest.approx([2 / 3, 1 / 3, 0.0, None]),
    }
    assert stats["by_seat_case"][1] == {
        "seat": "alpha",
        "case": "free",
        "trials": 1,
        "scored": 0,
        "accepted": 0,
        "unscored": 1,
        "measurement_failures": 0,
        "unfinished": 1,
        "accepted_rate": None,
        "interval": None,
        "mean_score": None,
        "pass_at_k": [None],
        "pass_hat_k": [None],
    }
    beta_hard = stats["by_seat_case"][2]
    assert (beta_hard["scored"], beta_hard["accepted"], beta_hard["measurement_failures"]) == (
        2,
        1,
        2,
    )
    assert beta_hard["accepted_rate"] == 0.5

    assert stats["by_seat"]["alpha"] == {
        "trials": 5,
        "scored": 3,
        "accepted": 2,
        "unscored": 1,
        "measurement_failures": 1,
        "measurement_failure_kinds": {"adapter_error": 0, "grader_error": 0, "timeout": 1},
        "unfinished": 1,
        "accepted_rate": pytest.approx(2 / 3),
        "interval": pytest.approx([low, high]),
        "mean_score": pytest.approx(2.5 / 3),
        "cases": 2,
        "scored_cases": 1,
        # the seat's pass@k averages its scored cases (only "hard": 3 scored trials)
        "pass_at_k": pytest.approx([2 / 3, 1.0, 1.0, None]),
        "pass_hat_k": pytest.approx([2 / 3, 1 / 3, 0.0, None]),
    }
    beta = stats["by_seat"]["beta"]
    assert beta["measurement_failure_kinds"] == {
        "adapter_error": 1,
        "grader_error": 1,
        "timeout": 0,
    }
    assert (beta["trials"], beta["unfinished"], beta["measurement_failures"]) == (5, 1, 2)
    # the only shared scored case is "hard" (2/3 - 1/2): a difference, no interval
    assert stats["comparisons"] == [
        {
            "seats": ["alpha", "beta"],
            "cases": 1,
            "difference": pytest.approx(1 / 6),
            "interval": None,
        }
    ]


def test_seat_pass_at_k_averages_over_cases() -> None:
    cells = [("s", "a", r("accepted"))] * 2 + [("s", "b", r("accepted")), ("s", "b", r("rejected"))]
    seat = trial_stats(cells)["by_seat"]["s"]
    # case a: pass@1 1, pass@2 1; case b: pass@1 1/2, pass@2 1
    assert seat["pass_at_k"] == pytest.approx([0.75, 1.0])
    assert seat["pass_hat_k"] == pytest.approx([0.75, 0.5])
    assert seat["scored_cases"] == 2
    assert seat["accepted_rate"] == pytest.approx(0.75)  # pooled: 3 of 4


def test_seat_pass_at_k_stops_at_the_fewest_scored_trials() -> None:
    """Averaging pass^2 over case a only would give 1.0 > pass^1 = 0.5: not an estimate."""
    cells = [("s", "a", r("accepted")), ("s", "a", r("accepted")), ("s", "b", r("rejected"))]
    cells.append(("s", "b", r("adapter_error", reason="transport_drop")))
    seat = trial_stats(cells)["by_seat"]["s"]
    assert seat["pass_at_k"] == [0.5, None]
    assert seat["pass_hat_k"] == [0.5, None]
    assert seat["accepted_rate"] == pytest.approx(2 / 3)  # the fault is left out


def test_paired_comparison_of_three_seats() -> None:
    rates = {"x": [1, 1, 0], "y": [1, 0, 0], "z": [0, 0, 0]}
    cells = [
        (seat, f"case{i}", r("accepted" if passed else "rejected"))
        for seat, outcomes in rates.items()
        for i, passed in enumerate(outcomes)
    ]
    comparisons = trial_stats(cells)["comparisons"]
    assert [c["seats"] for c in comparisons] == [["x", "y"], ["x", "z"], ["y", "z"]]
    x_y = comparisons[0]
    assert (x_y["cases"], x_y["difference"]) == (3, pytest.approx(1 / 3))
    half = 4.3026527 * math.sqrt(1 / 3) / math.sqrt(3)  # diffs 0, 1, 0: sd sqrt(1/3)
    assert x_y["interval"] == pytest.approx([max(-1, 1 / 3 - half), min(1, 1 / 3 + half)])


def test_unscored_cells_never_count_as_a_pass() -> None:
    stats = trial_stats([("s", "c", r("unscored")), ("s", "c", r("rejected"))])
    (group,) = stats["by_seat_case"]
    assert (group["trials"], group["scored"], group["accepted_rate"]) == (2, 1, 0.0)


# --- in summary.json ------------------------------------------------------------


def test_summary_carries_trial_stats_and_the_schema_stays_closed(tmp_path: Path) -> None:
    roster = roster_from_document(
        {
            "schema": "brigade.roster.v1",
            "seats": {"a": {"cli": "exec:true"}, "b": {"cli": "exec:true"}},
        },
        tmp_path / "roster.yaml",
        "roster.yaml",
    )
    manifest = manifest_from_document(
        {
            "schema": "brigade.eval_manifest.v1",
            "name": "t",
            "trials": 2,
            "seats": ["a", "b"],
            "cases": [{"id": "one", "prompt": "p1"}, {"id": "two", "prompt": "p2"}],
        },
        tmp_path / "manifest.yaml",
        "manifest.yaml",
    )
    plan = build_plan(manifest, roster, "roster.yaml", None)
    states = ["accepted", "rejected", "grader_error", None] * 2
    receipts = {
        cell.cell_id: (
            None if state is None else {"state": state, "score": 1.0, "graders": [],
                                        "duration_seconds": 1.0}
        )
        for cell, state in zip(plan.cells, states, strict=True)
    }  # fmt: skip
    summary = build_summary(plan, views_of(receipts), {}, "2025-01-02T03:04:05.678Z")
    assert schemas.problems(summary, "brigade.eval_summary.v1") == []
    assert set(summary["trial_stats"]["by_seat"]) == {"a", "b"}
    assert summary["trial_stats"]["comparisons"][0]["seats"] == ["a", "b"]

    bad = dict(summary)
    bad["trial_stats"] = {**summary["trial_stats"], "extra": 1}
    assert schemas.problems(bad, "brigade.eval_summary.v1")
    seat = {**summary["trial_stats"]["by_seat"]["a"], "extra": 1}
    bad["trial_stats"] = {**summary["trial_stats"], "by_seat": {"a": seat}}
    assert schemas.problems(bad, "brigade.eval_summary.v1")
    group = {**summary["trial_stats"]["by_seat_case"][0], "scored_cases": 0}
    bad["trial_stats"] = {**summary["trial_stats"], "by_seat_case": [group]}
    assert schemas.problems(bad, "brigade.eval_summary.v1")
    group = {k: v for k, v in summary["trial_stats"]["by_seat_case"][0].items() if k != "case"}
    bad["trial_stats"] = {**summary["trial_stats"], "by_seat_case": [group]}
    assert schemas.problems(bad, "brigade.eval_summary.v1")


def test_repeated_tallies_share_one_computation_but_not_one_record() -> None:
    cells = [("s", f"case{i}", r("accepted", 1.0)) for i in range(3)]
    rows = trial_stats(cells)["by_seat_case"]
    assert [row.pop("case") for row in rows] == ["case0", "case1", "case2"]
    assert rows[0] == rows[1] == rows[2]
    assert rows[0] is not rows[1]


STATES = st.sampled_from(
    [
        r("accepted", 1.0),
        r("rejected", 0.0),
        r("rejected", 0.5),
        r("execution_error"),
        r("execution_error", reason="timeout"),
        r("adapter_error", reason="transport_drop"),
        r("grader_error"),
        r("unscored"),
        r("running"),
        None,
    ]
)


@given(
    st.lists(
        st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.sampled_from(["a", "b", "c"]), STATES),
        max_size=60,
    )
)
def test_trial_stats_invariants(cells) -> None:
    """What the schema leaves to the code: ranges, orders and lengths of every estimate."""
    stats = trial_stats(cells)
    groups = list(stats["by_seat"].values()) + [*stats["by_seat_case"]]
    for group in groups:
        assert (
            group["scored"] + group["unscored"] + group["measurement_failures"] == group["trials"]
        )
        rate, interval = group["accepted_rate"], group["interval"]
        assert (rate is None) == (group["scored"] == 0) == (interval is None)
        if rate is not None:
            assert 0 <= interval[0] <= rate <= interval[1] <= 1
        at, hat = group["pass_at_k"], group["pass_hat_k"]
        assert len(at) == len(hat)
        known_at = [v for v in at if v is not None]
        known_hat = [v for v in hat if v is not None]
        assert all(0 <= v <= 1 for v in known_at + known_hat)
        assert known_at == sorted(known_at)  # more tries: more chance one passes
        assert known_hat == sorted(known_hat, reverse=True)  # ...and less that all do
    for group in stats["by_seat_case"]:
        assert len(group["pass_at_k"]) == group["trials"]
        if group["scored"]:
            assert group["pass_at_k"][0] == pytest.approx(group["accepted_rate"])
            assert group["pass_hat_k"][0] == pytest.approx(group["accepted_rate"])
    keys = [(row["seat"], row["case"]) for row in stats["by_seat_case"]]
    assert len(keys) == len(set(keys)) == len({(seat, case) for seat, case, _ in cells})
    for seat, group in stats["by_seat"].items():
        rows = [row for row in stats["by_seat_case"] if row["seat"] == seat]
        assert group["cases"] == len(rows)
        for key in ("trials", "scored", "accepted", "unscored", "measurement_failures"):
            assert group[key] == sum(row[key] for row in rows), key
    for pair in stats["comparisons"]:
        if pair["interval"] is not None:
            low, high = pair["interval"]
            assert -1 <= low <= pair["difference"] <= high <= 1


# --- against independent implementations (scipy, statsmodels) -------------------


def test_wilson_interval_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    rng = random.Random(4)
    cases = [(0, 1), (1, 1), (0, 20), (20, 20), (7, 13), (1, 1000)]
    cases += [(c, n) for n in (rng.randint(1, 400) for _ in range(60)) for c in [rng.randint(0, n)]]
    for confidence in (0.8, 0.95, 0.99):
        for successes, n in cases:
            low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
            got = wilson_interval(successes, n, confidence)
            assert got == pytest.approx((low, high), abs=1e-12), (successes, n, confidence)


def test_pass_at_k_and_pass_hat_k_match_scipy_hypergeometric() -> None:
    from scipy.stats import hypergeom

    for n in range(1, 25):
        for c in range(n + 1):
            for k in range(1, n + 1):
                # k trials drawn without replacement from n of which c passed
                none = hypergeom.pmf(0, n, c, k)
                every = hypergeom.pmf(k, n, c, k)
                assert pass_at_k(n, c, k) == pytest.approx(1 - none, abs=1e-12)
                assert pass_hat_k(n, c, k) == pytest.approx(every, abs=1e-12)


def test_t_distribution_and_paired_interval_match_scipy() -> None:
    from scipy import stats

    for df in (1, 2, 3, 5, 10, 30, 120):
        for p in (0.6, 0.9, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9)
        for t in (-4.0, -1.0, 0.3, 2.5):
            assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), rel=1e-9, abs=1e-14)
    rng = random.Random(9)
    for _ in range(20):
        values = [rng.uniform(-0.3, 0.3) for _ in range(rng.randint(2, 40))]
        low, high = stats.t.interval(
            0.95, len(values) - 1, loc=statistics.fmean(values), scale=stats.sem(values)
        )
        got = paired_difference(values).interval
        assert got == pytest.approx((max(-1, low), min(1, high)), abs=1e-9)
