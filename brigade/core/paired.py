"""Paired statistics of two batteries over their shared cases: the cluster bootstrap interval of
the difference in accepted rate, the exact McNemar test, the sign-flip test, and the smallest
difference a battery can detect.

Pure: values in, values out. Every random draw comes from a `random.Random` seeded with a
fixed seed, through its `random()` only (the one method whose sequence Python keeps from
version to version), so every figure is reproducible byte for byte.

A *case pair* is (accepted_base, scored_base, accepted_new, scored_new) of one case, with
scored >= 1 on both sides; its difference is accepted_new/scored_new - accepted_base/scored_base
(exact, as a fraction). A case is a cluster: its trials are resampled with it, never apart.

- Interval: percentile bootstrap of the mean per-case difference, resampling cases with
  replacement (RESAMPLES times). Means over a resample depend only on how often each distinct
  difference was drawn, so a resample is one multinomial draw over the distinct differences
  (a binomial per distinct value): a battery of 10,000 cases costs what one of ten does.
- Test: under "NEW behaves as BASE" the two sides of a case are exchangeable, so each case's
  difference is as likely to have either sign. The sign-flip test's p-value is the share of the
  2^m sign assignments whose sum is at least as far from zero as the observed one: exact (a
  convolution over the distinct magnitudes) while that stays small, else estimated from
  RESAMPLES random assignments, (1 + hits) / (1 + RESAMPLES). For a battery of single trials
  the differences are -1, 0 and 1, and the test is exactly McNemar's exact test on the
  discordant cases (`mcnemar_exact`).
- Detectable effect: the difference this battery would detect with 80% power,
  (z(1 - alpha/2) + z(0.8)) * s / sqrt(m) with s the sample standard deviation of the per-case
  differences, and never less than the least difference the test can call at all: k cases
  moving one way by one trial each while the others stay (p = 2^(1-k), so k = 6 at alpha 0.05),
  k / (m * T) with T the most scored trials of a side of a case. None when the battery has fewer
  than k cases: no outcome of it could be called a difference.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist, stdev

from brigade.core.trials import CONFIDENCE, regularized_beta, z_value

# the seed of every random draw (any fixed number; a change changes every interval's last digits)
SEED = 31
RESAMPLES = 10_000
POWER = 0.8
# the exact sign-flip distribution is computed while its convolution costs fewer steps than this
EXACT_WORK = 2_000_000
# above this many discordant cases McNemar's tail is computed with the incomplete beta function
# rather than with exact integers (whose size grows with the count)
EXACT_MCNEMAR = 3_000

# a binomial of a smaller mean is drawn by inversion (its steps cost less than BTRS's setup)
INVERSION_MEAN = 10

CasePair = tuple[int, int, int, int]


def difference(pair: CasePair) -> Fraction:
    """accepted_new/scored_new - accepted_base/scored_base of one case, exactly."""
    accepted_base, scored_base, accepted_new, scored_new = pair
    if scored_base < 1 or scored_new < 1:
        raise ValueError(f"a case pair needs scored trials on both sides, got {pair}")
    return Fraction(accepted_new, scored_new) - Fraction(accepted_base, scored_base)


def mean_difference(pairs: Sequence[CasePair]) -> float | None:
    """The mean per-case difference in accepted rate (NEW - BASE); None without cases."""
    if not pairs:
        return None
    return float(sum((difference(pair) for pair in pairs), Fraction(0)) / len(pairs))


# -- drawing -----------------------------------------------------------------------------------


def binomial(rng: random.Random, n: int, p: float) -> int:
    """A draw from Binomial(n, p), from `rng.random()` only: inversion for small means, else
    Hörmann's transformed rejection with squeeze (BTRS, 1993)."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < INVERSION_MEAN:
        return _inversion(rng, n, p)
    return _btrs(rng, n, p)


def _inversion(rng: random.Random, n: int, p: float) -> int:
    # walk up the distribution from 0: about n*p + 1 steps
    ratio = p / (1.0 - p)
    probability = (1.0 - p) ** n
    u = rng.random()
    k = 0
    while u > probability and k < n:
        u -= probability
        k += 1
        probability *= ratio * (n - k + 1) / k
        if probability <= 0.0:
            break  # what is left of u is rounding
    return k


@lru_cache(maxsize=4096)
def _btrs_setup(n: int, p: float) -> tuple[float, ...]:
    # a bootstrap asks for the same (n, p) in many resamples
    q = 1.0 - p
    spq = math.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / q)
    mode = math.floor((n + 1) * p)
    h = math.lgamma(mode + 1) + math.lgamma(n - mode + 1)
    return a, b, c, v_r, alpha, lpq, mode, h


def _btrs(rng: random.Random, n: int, p: float) -> int:
    a, b, c, v_r, alpha, lpq, mode_, h = _btrs_setup(n, p)
    mode = int(mode_)
    while True:
        u = rng.random() - 0.5
        v = rng.random()
        us = 0.5 - abs(u)
        if us <= 0.0:
            continue
        k = math.floor((2 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = math.log(v * alpha / (a / (us * us) + b))
        if v <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - mode) * lpq:
            return k


def multinomial(rng: random.Random, total: int, weights: Sequence[int]) -> list[int]:
    """How many of `total` draws fall in each group, a group's chance being its weight over
    the sum of weights (a binomial per group, on what the groups before it left)."""
    left, mass = total, sum(weights)
    drawn = []
    for weight in weights[:-1]:
        count = binomial(rng, left, weight / mass) if left and mass > 0 else 0
        drawn.append(count)
        left -= count
        mass -= weight
    drawn.append(left)
    return drawn


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q quantile of sorted values, interpolated linearly between order statistics."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


# -- the interval ------------------------------------------------------------------------------


def bootstrap_interval(
    pairs: Sequence[CasePair],
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """The percentile interval of the mean per-case difference over case resamples; None
    without cases."""
    if not pairs:
        return None
    groups = Counter(difference(pair) for pair in pairs)
    if len(groups) == 1:
        (only,) = groups
        return float(only), float(only)
    # the largest groups first: the later ones are often left nothing to draw
    ordered = sorted(groups.items(), key=lambda item: (-item[1], item[0]))
    values = [float(value) for value, _ in ordered]
    weights = [count for _, count in ordered]
    m = len(pairs)
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        counts = multinomial(rng, m, weights)
        means.append(sum(count * value for count, value in zip(counts, values, strict=True)) / m)
    means.sort()
    tail = (1 - confidence) / 2
    return quantile(means, tail), quantile(means, 1 - tail)


# -- the tests ---------------------------------------------------------------------------------


def mcnemar_exact(worse: int, better: int) -> float:
    """McNemar's exact two-sided p-value from the discordant cases (pass->fail, fail->pass):
    twice the smaller binomial(n, 1/2) tail, at most 1."""
    if worse < 0 or better < 0:
        raise ValueError(f"discordant counts must not be negative, got {worse}, {better}")
    n = worse + better
    if n == 0:
        return 1.0
    k = min(worse, better)
    if 2 * k >= n:
        return 1.0
    if n > EXACT_MCNEMAR:
        return min(1.0, 2 * regularized_beta(0.5, n - k, k + 1))
    term, tail = 1, 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, (2 * tail) / (1 << n))


@dataclass(frozen=True)
class SignFlip:
    """The sign-flip test's two-sided p-value, and whether it is exact (else estimated)."""

    p_value: float
    exact: bool


def sign_flip_test(
    pairs: Sequence[CasePair], resamples: int = RESAMPLES, seed: int = SEED
) -> SignFlip:
    """P(|sum of the differences with random signs| >= |the observed sum|) (see the module)."""
    differences = [d for d in map(difference, pairs) if d]
    if not differences:
        return SignFlip(1.0, True)
    scale = math.lcm(*(d.denominator for d in differences))
    observed = abs(sum(int(d * scale) for d in differences))
    groups = sorted(Counter(abs(int(d * scale)) for d in differences).items())
    if _exact_work(groups) <= EXACT_WORK:
        return SignFlip(_exact_tail(groups, observed), True)
    rng = random.Random(seed)
    hits = 0
    for _ in range(resamples):
        total = sum(size * (2 * binomial(rng, count, 0.5) - count) for size, count in groups)
        hits += abs(total) >= observed
    return SignFlip((1 + hits) / (1 + resamples), False)


def _exact_work(groups: Sequence[tuple[int, int]]) -> int:
    work, span = 0, 0
    for size, count in groups:
        work += (2 * span + 1) * (count + 1)
        span += size * count
    return work


def _exact_tail(groups: Sequence[tuple[int, int]], observed: int) -> float:
    # distribution[i] = P(sum = i - span): every group adds size * (2X - count), X ~ Bin(count, 1/2)
    distribution, span = [1.0], 0
    for size, count in groups:
        weights = _half_binomial(count)
        wider = span + size * count
        spread = [0.0] * (2 * wider + 1)
        for index, mass in enumerate(distribution):
            if mass:
                base = index - span + wider - size * count
                for x, weight in enumerate(weights):
                    spread[base + 2 * size * x] += mass * weight
        distribution, span = spread, wider
    tail = sum(mass for index, mass in enumerate(distribution) if abs(index - span) >= observed)
    return min(1.0, tail)


def _half_binomial(n: int) -> list[float]:
    """P(X = x) for X ~ Binomial(n, 1/2), x = 0..n (exact integers, one rounding each)."""
    whole = 1 << n
    weights, term = [], 1
    for x in range(n + 1):
        weights.append(term / whole)
        term = term * (n - x) // (x + 1)
    return weights


# -- what a battery can detect -----------------------------------------------------------------


def moving_cases(confidence: float = CONFIDENCE) -> int:
    """The fewest cases the sign-flip test can call a difference on: 2^(1-k) < 1 - confidence."""
    alpha = 1 - confidence
    k = 1
    while 2.0 ** (1 - k) >= alpha:
        k += 1
    return k


def detectable_effect(
    pairs: Sequence[CasePair], confidence: float = CONFIDENCE, power: float = POWER
) -> float | None:
    """The least difference in accepted rate this battery detects (see the module); None when
    it has too few cases to call any."""
    m = len(pairs)
    least = moving_cases(confidence)
    if m < least:
        return None
    finest = max(max(pair[1], pair[3]) for pair in pairs)
    floor = least / (m * finest)
    spread = stdev(float(difference(pair)) for pair in pairs) if m >= 2 else 0.0
    powered = (z_value(confidence) + NormalDist().inv_cdf(power)) * spread / math.sqrt(m)
    return min(1.0, max(floor, powered))
