"""The paired statistics (core/paired) against independent implementations: statsmodels'
exact McNemar and power, scipy's permutation test, bootstrap and binomial distribution.

Inputs are fixed or drawn from seeded generators, so every run checks the same numbers.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import NormalIndPower

from brigade.core import paired
from brigade.core.paired import CasePair


def random_battery(rng: random.Random, cases: int, trials: int) -> list[CasePair]:
    """Cases whose two sides pass at rates drawn per case (close, easy and hopeless ones)."""
    pairs = []
    for _ in range(cases):
        rate = rng.choice((0.0, 1.0, rng.random()))
        shift = rng.choice((0.0, 0.0, rng.uniform(-0.3, 0.3)))
        new_rate = min(1.0, max(0.0, rate + shift))
        base = sum(rng.random() < rate for _ in range(trials))
        new = sum(rng.random() < new_rate for _ in range(trials))
        pairs.append((base, trials, new, trials))
    return pairs


def differences(pairs: list[CasePair]) -> np.ndarray:
    return np.array([float(paired.difference(pair)) for pair in pairs])


# -- McNemar -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("worse", "better"),
    [(0, 0), (1, 0), (3, 0), (6, 0), (4, 1), (10, 3), (7, 7), (0, 9), (40, 25), (120, 90)],
)
def test_mcnemar_exact_matches_statsmodels(worse: int, better: int) -> None:
    table = [[11, worse], [better, 13]]  # the concordant cells never matter
    expected = mcnemar(table, exact=True).pvalue
    assert paired.mcnemar_exact(worse, better) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_mcnemar_exact_matches_statsmodels_on_random_and_large_counts() -> None:
    rng = random.Random(7)
    counts = [(rng.randint(0, 60), rng.randint(0, 60)) for _ in range(200)]
    # past EXACT_MCNEMAR discordant cases the tail comes from the incomplete beta function
    counts += [(2000, 1900), (1700, 1600), (5000, 4800), (4000, 4000), (3100, 2950)]
    for worse, better in counts:
        expected = mcnemar([[0, worse], [better, 0]], exact=True).pvalue
        got = paired.mcnemar_exact(worse, better)
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-300), (worse, better)


def test_mcnemar_refuses_negative_counts() -> None:
    with pytest.raises(ValueError):
        paired.mcnemar_exact(-1, 2)


# -- the sign-flip test ------------------------------------------------------------------------


def scipy_sign_flip(pairs: list[CasePair]) -> float:
    result = stats.permutation_test(
        (differences(pairs),),
        np.sum,
        permutation_type="samples",
        n_resamples=np.inf,
        alternative="two-sided",
    )
    return float(result.pvalue)


@pytest.mark.parametrize("seed", range(12))
def test_exact_sign_flip_matches_scipy(seed: int) -> None:
    rng = random.Random(seed)
    pairs = random_battery(rng, rng.randint(2, 14), rng.choice((2, 3, 5)))
    if not any(paired.difference(pair) for pair in pairs):
        pairs.append((0, 3, 2, 3))
    flipped = paired.sign_flip_test(pairs)
    assert flipped.exact
    assert flipped.p_value == pytest.approx(scipy_sign_flip(pairs), rel=1e-9)


def test_sign_flip_of_single_trials_is_mcnemar() -> None:
    pairs = [(1, 1, 0, 1)] * 9 + [(0, 1, 1, 1)] * 2 + [(1, 1, 1, 1)] * 20
    assert paired.sign_flip_test(pairs).p_value == pytest.approx(paired.mcnemar_exact(9, 2))


def test_sign_flip_with_unequal_trial_counts_matches_scipy() -> None:
    pairs = [(1, 2, 3, 5), (0, 3, 1, 1), (2, 4, 0, 2), (5, 5, 1, 3), (1, 3, 1, 3), (0, 1, 2, 4)]
    flipped = paired.sign_flip_test(pairs)
    assert flipped.exact
    assert flipped.p_value == pytest.approx(scipy_sign_flip(pairs), rel=1e-9)


def test_sampled_sign_flip_is_close_to_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    pairs = random_battery(rng, 40, 4)
    exact = paired.sign_flip_test(pairs)
    monkeypatch.setattr(paired, "EXACT_WORK", 0)
    sampled = paired.sign_flip_test(pairs)
    assert exact.exact and not sampled.exact
    # a Monte Carlo p over 10,000 draws is within 4 standard errors of the exact one
    error = math.sqrt(exact.p_value * (1 - exact.p_value) / paired.RESAMPLES)
    assert abs(sampled.p_value - exact.p_value) <= 4 * error + 1 / paired.RESAMPLES
    assert paired.sign_flip_test(pairs) == sampled  # seeded: the same every time


def test_sign_flip_without_any_difference_is_one() -> None:
    assert paired.sign_flip_test([(2, 3, 2, 3), (1, 1, 1, 1)]) == paired.SignFlip(1.0, True)


# -- the bootstrap -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_bootstrap_interval_matches_scipy(seed: int) -> None:
    rng = random.Random(100 + seed)
    trials = rng.choice((1, 3, 10))
    pairs = random_battery(rng, rng.randint(15, 80), trials)
    low, high = paired.bootstrap_interval(pairs) or (0.0, 0.0)
    result = stats.bootstrap(
        (differences(pairs),),
        np.mean,
        method="percentile",
        n_resamples=40_000,
        random_state=np.random.default_rng(seed),
    )
    expected = result.confidence_interval
    # both are Monte Carlo estimates of the same quantiles of a distribution on a lattice
    # (resample means are multiples of 1 / (cases * trials)): the tolerance is a step of it
    # plus what a percentile of 10,000 resamples moves by (a few percent of a standard error)
    spread = float(np.std(differences(pairs))) / math.sqrt(len(pairs))
    tolerance = 0.1 * spread + 1 / (len(pairs) * trials) + 1e-9
    assert low == pytest.approx(expected.low, abs=tolerance)
    assert high == pytest.approx(expected.high, abs=tolerance)


def test_bootstrap_interval_of_a_tiny_battery_matches_every_resample() -> None:
    # four cases: all 4^4 resamples, each as likely, give the exact bootstrap distribution
    pairs: list[CasePair] = [(1, 1, 0, 1), (0, 1, 0, 1), (1, 2, 2, 2), (0, 3, 3, 3)]
    values = [float(paired.difference(pair)) for pair in pairs]
    means = sorted(sum(pick) / 4 for pick in itertools.product(values, repeat=4))
    exact = (np.quantile(means, 0.025), np.quantile(means, 0.975))
    low, high = paired.bootstrap_interval(pairs) or (0.0, 0.0)
    step = 0.25 / 4  # the distance between neighbouring resample means
    assert abs(low - exact[0]) <= step and abs(high - exact[1]) <= step


def test_bootstrap_interval_is_reproducible_and_ignores_case_order() -> None:
    rng = random.Random(11)
    pairs = random_battery(rng, 60, 5)
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    assert paired.bootstrap_interval(pairs) == paired.bootstrap_interval(shuffled)
    assert paired.bootstrap_interval(pairs) == paired.bootstrap_interval(pairs)


def test_bootstrap_interval_edges() -> None:
    assert paired.bootstrap_interval([]) is None
    assert paired.bootstrap_interval([(1, 1, 1, 1)] * 5) == (0.0, 0.0)
    assert paired.bootstrap_interval([(0, 2, 2, 2)]) == (1.0, 1.0)
    low, high = paired.bootstrap_interval([(1, 1, 0, 1)] * 3 + [(1, 1, 1, 1)] * 7) or (0, 0)
    assert -1 <= low <= high <= 0


def test_difference_is_exact_and_needs_scored_trials() -> None:
    assert paired.difference((1, 3, 2, 3)) == Fraction(1, 3)
    with pytest.raises(ValueError):
        paired.difference((0, 0, 1, 1))


# -- drawing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "p"), [(1, 0.5), (7, 0.3), (40, 0.1), (60, 0.5), (500, 0.02), (1000, 0.37), (5000, 0.9)]
)
def test_binomial_draws_follow_scipy_binomial(n: int, p: float) -> None:
    rng = random.Random(n)
    draws = [paired.binomial(rng, n, p) for _ in range(20_000)]
    assert all(0 <= x <= n for x in draws)
    # chi-square goodness of fit over bins of expected count >= 20 (tails pooled)
    support = np.arange(n + 1)
    expected = stats.binom.pmf(support, n, p) * len(draws)
    observed = np.bincount(draws, minlength=n + 1).astype(float)
    bins_e, bins_o, acc_e, acc_o = [], [], 0.0, 0.0
    for e, o in zip(expected, observed, strict=True):
        acc_e, acc_o = acc_e + e, acc_o + o
        if acc_e >= 20:
            bins_e.append(acc_e)
            bins_o.append(acc_o)
            acc_e = acc_o = 0.0
    if bins_e:
        bins_e[-1] += acc_e
        bins_o[-1] += acc_o
    if len(bins_e) > 1:
        assert stats.chisquare(bins_o, bins_e).pvalue > 1e-4
    assert np.mean(draws) == pytest.approx(n * p, abs=5 * math.sqrt(n * p * (1 - p) / 20_000))


def test_binomial_edges_and_multinomial_totals() -> None:
    rng = random.Random(0)
    assert paired.binomial(rng, 0, 0.5) == 0
    assert paired.binomial(rng, 9, 0.0) == 0
    assert paired.binomial(rng, 9, 1.0) == 9
    for _ in range(200):
        counts = paired.multinomial(rng, 50, [5, 1, 30, 14])
        assert sum(counts) == 50 and all(c >= 0 for c in counts)


def test_draws_use_random_only() -> None:
    # only random() keeps its sequence across Python versions: a generator with nothing else
    # serves every draw
    class OnlyRandom:
        def __init__(self) -> None:
            self.source = random.Random(5)

        def random(self) -> float:
            return self.source.random()

    rng = OnlyRandom()
    for n, p in ((3, 0.2), (800, 0.4), (50, 0.7)):
        assert 0 <= paired.binomial(rng, n, p) <= n  # type: ignore[arg-type]
    assert sum(paired.multinomial(rng, 30, [3, 2, 1])) == 30  # type: ignore[arg-type]


# -- the detectable effect ---------------------------------------------------------------------


def test_detectable_effect_matches_statsmodels_power() -> None:
    rng = random.Random(21)
    pairs = random_battery(rng, 200, 10)
    spread = float(np.std(differences(pairs), ddof=1))
    effect = NormalIndPower().solve_power(
        effect_size=None, nobs1=len(pairs), alpha=0.05, power=0.8, ratio=0, alternative="two-sided"
    )
    expected = effect * spread
    assert paired.detectable_effect(pairs) == pytest.approx(expected, rel=1e-3)


def test_detectable_effect_floor_and_too_small_batteries() -> None:
    assert paired.moving_cases(0.95) == 6
    assert paired.moving_cases(0.99) == 8
    # identical batteries: no spread, so the floor: 6 cases moving by one trial
    assert paired.detectable_effect([(1, 1, 1, 1)] * 30) == pytest.approx(6 / 30)
    assert paired.detectable_effect([(4, 4, 4, 4)] * 60) == pytest.approx(6 / (60 * 4))
    assert paired.detectable_effect([(1, 1, 0, 1)] * 5) is None
    # the least p the test can reach with k cases all moving one way is 2^(1-k)
    assert paired.mcnemar_exact(6, 0) < 0.05 <= paired.mcnemar_exact(5, 0)
