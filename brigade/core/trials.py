"""Trial statistics: accepted rates with Wilson intervals, pass@k, pass^k, paired seat comparisons.

Pure: values in, values out. Definitions (also in docs/results.md):

- A cell's *trial kind*: `accepted` (a pass); `failed` (rejected, or an
  execution_error that is not a timeout: a real failure of the seat);
  `unscored` (no graders: counted as a trial, never a pass, never a failure);
  a *measurement failure* (adapter_error, grader_error, timed-out
  execution_error: a fault of the apparatus, counted apart, never a failure
  of the seat); `unfinished` (running or missing).
- trials = finished cells (every kind but unfinished); scored n = accepted +
  failed; accepted rate = accepted / n, null when n = 0. Unscored cells and
  measurement failures are left out of n.
- The rate's interval is the 95% Wilson score interval of accepted out of n.
- pass@k = 1 - C(n-c, k)/C(n, k) and pass^k = C(c, k)/C(n, k) (unbiased
  estimators, n scored trials, c accepted), per seat x case for k = 1..trials
  (lists: item k-1 is k); null where k > n. A seat's pass@k / pass^k is the
  mean over its cases with n >= 1 (`scored_cases`), for k up to the smallest
  such n (null beyond: every k averages the same cases).
- Paired comparison of seats A and B: over the cases where both have n >= 1,
  the mean of the per-case differences rate_A - rate_B, with a Student t
  interval (mean +- t(0.975, m-1) * sd / sqrt(m), sample sd, m shared cases),
  clipped to [-1, 1]; null interval when m < 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from statistics import NormalDist, fmean, stdev
from typing import Any, Literal

from brigade.core.receipts import ReceiptView
from brigade.core.stats import stable_round
from brigade.core.taxonomy import MEASUREMENT_KINDS, is_real_failure, measurement_kind

CONFIDENCE = 0.95
TrialKind = Literal[
    "accepted", "failed", "unscored", "adapter_error", "grader_error", "timeout", "unfinished"
]


@cache
def z_value(confidence: float = CONFIDENCE) -> float:
    """The two-sided standard normal quantile (1.959964... for 95%)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(
    successes: int, n: int, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial proportion; None when n is 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..{n}, got {successes}")
    z = z_value(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def _check(n: int, c: int, k: int) -> None:
    if k < 1 or not 0 <= c <= n:
        raise ValueError(f"need k >= 1 and 0 <= c <= n, got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k, 1 - C(n-c, k)/C(n, k): P(at least one of k trials passes); None if k > n."""
    _check(n, c, k)
    if k > n:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k, C(c, k)/C(n, k): P(all of k trials pass); None if k > n."""
    _check(n, c, k)
    if k > n:
        return None
    return math.comb(c, k) / math.comb(n, k)


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1.0 - front * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300

    def guard(value: float) -> float:
        return tiny if abs(value) < tiny else value

    c = 1.0
    d = 1.0 / guard(1.0 - (a + b) * x / (a + 1))
    result = d
    for m in range(1, 500):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 / guard(1.0 + even * d)
        c = guard(1.0 + even / c)
        result *= d * c
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 / guard(1.0 + odd * d)
        c = guard(1.0 + odd / c)
        step = d * c
        result *= step
        if abs(step - 1.0) < 1e-15:
            break
    return result


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t distribution with df degrees of freedom."""
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2, 0.5)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The p quantile of Student's t with df degrees of freedom (bisection on t_cdf)."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-12:
            break
    return (low + high) / 2


@dataclass(frozen=True)
class PairedDifference:
    """Mean of paired differences with its t interval (None when fewer than two pairs)."""

    pairs: int
    mean: float | None
    interval: tuple[float, float] | None


def paired_difference(
    differences: Sequence[float], confidence: float = CONFIDENCE, bound: float = 1.0
) -> PairedDifference:
    """mean +- t(df = m-1) * sd / sqrt(m) over m paired differences, clipped to [-bound, bound]."""
    m = len(differences)
    if m == 0:
        return PairedDifference(0, None, None)
    mean = fmean(differences)
    if m < 2:
        return PairedDifference(1, mean, None)
    half = t_quantile(0.5 + confidence / 2, m - 1) * stdev(differences) / math.sqrt(m)
    return PairedDifference(m, mean, (max(-bound, mean - half), min(bound, mean + half)))


def trial_kind(receipt: ReceiptView | None) -> TrialKind:
    """What a cell counts as in trial statistics (see the module docstring)."""
    state = receipt.state if receipt is not None else None
    reason = receipt.failure_reason if receipt is not None else None
    if state == "accepted":
        return "accepted"
    if state == "unscored":
        return "unscored"
    if is_real_failure(state, reason):
        return "failed"
    return measurement_kind(state, reason) or "unfinished"


@dataclass
class Tally:
    """Counts of trial kinds and scores for one seat or one seat x case."""

    kinds: dict[str, int] = field(default_factory=dict)
    scores: list[float] = field(default_factory=list)

    def add(self, receipt: ReceiptView | None) -> None:
        """Count one cell."""
        kind = trial_kind(receipt)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        score = receipt.score if receipt is not None else None
        if kind in ("accepted", "failed") and isinstance(score, (int, float)):
            self.scores.append(float(score))

    def count(self, kind: str) -> int:
        """How many cells of a kind."""
        return self.kinds.get(kind, 0)

    @property
    def scored(self) -> int:
        """n: trials that say something about the seat (accepted + failed)."""
        return self.count("accepted") + self.count("failed")

    @property
    def trials(self) -> int:
        """Finished cells."""
        return sum(self.kinds.values()) - self.count("unfinished")

    @property
    def rate(self) -> float | None:
        """accepted / scored, None when nothing was scored."""
        return self.count("accepted") / self.scored if self.scored else None


def _interval(pair: tuple[float, float] | None) -> list[float] | None:
    return [stable_round(pair[0]), stable_round(pair[1])] if pair is not None else None


def _maybe(value: float | None) -> float | None:
    return stable_round(value) if value is not None else None


def _base(tally: Tally) -> dict[str, Any]:
    return {
        "trials": tally.trials,
        "scored": tally.scored,
        "accepted": tally.count("accepted"),
        "unscored": tally.count("unscored"),
        "measurement_failures": sum(tally.count(kind) for kind in MEASUREMENT_KINDS),
        "unfinished": tally.count("unfinished"),
        "accepted_rate": _maybe(tally.rate),
        "interval": _interval(wilson_interval(tally.count("accepted"), tally.scored)),
        "mean_score": stable_round(fmean(tally.scores)) if tally.scores else None,
    }


def case_stats(tally: Tally) -> dict[str, Any]:
    """One seat x case: counts, rate, Wilson interval, pass@k and pass^k (index k-1)."""
    n, c = tally.scored, tally.count("accepted")
    ks = range(1, tally.trials + 1)
    return {
        **_base(tally),
        "pass_at_k": [_maybe(pass_at_k(n, c, k)) for k in ks],
        "pass_hat_k": [_maybe(pass_hat_k(n, c, k)) for k in ks],
    }


def _mean_estimate(
    scored: list[tuple[int, int]], k: int, estimator: Callable[[int, int, int], float | None]
) -> float | None:
    values = [estimator(n, c, k) for n, c in scored]
    if not values or None in values:
        return None
    return stable_round(fmean(v for v in values if v is not None))


def seat_stats(tally: Tally, cases: Mapping[str, Tally]) -> dict[str, Any]:
    """One seat: pooled counts and rate; pass@k / pass^k averaged over its scored cases."""
    # every k averages the same cases (those with scored trials), so a k beyond the
    # fewest scored trials among them is null: a mean over a shrinking set of cases
    # could make pass^k rise with k
    scored = [(t.scored, t.count("accepted")) for t in cases.values() if t.scored]
    ks = range(1, max((t.trials for t in cases.values()), default=0) + 1)
    return {
        **_base(tally),
        "measurement_failure_kinds": {kind: tally.count(kind) for kind in MEASUREMENT_KINDS},
        "cases": len(cases),
        "scored_cases": len(scored),
        "pass_at_k": [_mean_estimate(scored, k, pass_at_k) for k in ks],
        "pass_hat_k": [_mean_estimate(scored, k, pass_hat_k) for k in ks],
    }


def compare(first: Mapping[str, Tally], second: Mapping[str, Tally]) -> dict[str, Any]:
    """Paired comparison of two seats' per-case accepted rates over their shared scored cases."""
    differences = [
        rate - other
        for case, tally in first.items()
        if case in second
        and (rate := tally.rate) is not None
        and (other := second[case].rate) is not None
    ]
    result = paired_difference(differences)
    return {
        "cases": result.pairs,
        "difference": _maybe(result.mean),
        "interval": _interval(result.interval),
    }


def _case_stats_cached(tally: Tally, seen: dict[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any]:
    # a big battery repeats a few tallies (1 of 1 accepted...) thousands of times
    key = (tuple(sorted(tally.kinds.items())), tuple(tally.scores))
    if key not in seen:
        seen[key] = case_stats(tally)
    return seen[key]


def trial_stats(cells: Iterable[tuple[str, str, ReceiptView | None]]) -> dict[str, Any]:
    """summary.json's `trial_stats` from (seat, case_id, receipt or None) of every planned cell.

    `by_seat_case` is a list of records (seat, case, statistics), seats in plan
    order and each seat's cases in plan order: one row per seat x case.
    """
    seats: dict[str, Tally] = {}
    by_case: dict[str, dict[str, Tally]] = {}
    for seat, case_id, receipt in cells:
        seats.setdefault(seat, Tally()).add(receipt)
        by_case.setdefault(seat, {}).setdefault(case_id, Tally()).add(receipt)
    names = list(seats)
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    return {
        "confidence": CONFIDENCE,
        "by_seat": {name: seat_stats(seats[name], by_case[name]) for name in names},
        "by_seat_case": [
            {"seat": name, "case": case, **_case_stats_cached(tally, seen)}
            for name in names
            for case, tally in by_case[name].items()
        ],
        "comparisons": [
            {"seats": [a, b], **compare(by_case[a], by_case[b])}
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        ],
    }
