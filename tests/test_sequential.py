"""Adaptive trials' rules (core/sequential): the confidence sequence and the sign test against
scipy, the stop reasons, and by simulation the error rates they state despite looking after
every round (1,000 simulated batteries of known rates each, from fixed seeds)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from scipy import integrate
from scipy.optimize import brentq
from scipy.special import betainc, betaln, xlog1py, xlogy

from brigade.core import sequential
from brigade.core.sequential import Rule, rate_sequence, sign_evidence, stops

BATTERIES = 1000


def scipy_sequence(accepted: int, scored: int, confidence: float) -> tuple[float, float]:
    failed = scored - accepted
    level = math.log(1 / (1 - confidence))
    mixture = betaln(accepted + 0.5, failed + 0.5) - betaln(0.5, 0.5)

    def excess(p: float) -> float:
        return mixture - xlogy(accepted, p) - xlog1py(failed, -p) - level

    estimate = accepted / scored
    low = 0.0 if accepted == 0 else brentq(excess, 1e-300, estimate, xtol=1e-15)
    high = 1.0 if failed == 0 else brentq(excess, estimate, 1 - 1e-16, xtol=1e-15)
    return low, high


def test_rate_sequence_matches_scipy() -> None:
    rng = random.Random(2)
    points = [(0, 1), (1, 1), (0, 20), (20, 20), (10, 20), (3, 7), (99, 100), (1, 400)]
    points += [
        (a, n) for n in (rng.randint(1, 300) for _ in range(80)) for a in [rng.randint(0, n)]
    ]
    for confidence in (0.9, 0.95, 0.99):
        for accepted, scored in points:
            got = rate_sequence(accepted, scored, confidence)
            expected = scipy_sequence(accepted, scored, confidence)
            assert got == pytest.approx(expected, abs=1e-9), (accepted, scored, confidence)


def test_rate_sequence_holds_its_estimate_and_narrows() -> None:
    assert rate_sequence(0, 0) == (0.0, 1.0)
    widths = []
    for n in range(3, 90, 3):  # a third accepted at every size
        low, high = rate_sequence(n // 3, n)
        assert low <= 1 / 3 <= high
        widths.append(high - low)
    assert widths == sorted(widths, reverse=True)
    # tight at the ends: 20 of 20 accepted already rules out a rate below 0.78
    assert rate_sequence(20, 20)[0] == pytest.approx(0.7757, abs=1e-3)
    with pytest.raises(ValueError):
        rate_sequence(3, 2)


def test_sign_evidence_is_the_mixture_scipy_integrates() -> None:
    for wins, losses in [(0, 0), (1, 0), (8, 0), (0, 8), (5, 3), (20, 9), (40, 41), (130, 100)]:
        first, second = sign_evidence(wins, losses)
        n = wins + losses
        if n == 0:
            assert (first, second) == (0.0, 0.0)
            continue

        # 2^n * (the uniform density on one side of 1/2, which is 2 there) * the likelihood
        def side(theta: float, n: int = n, wins: int = wins, losses: int = losses) -> float:
            return math.exp(
                n * math.log(2) + math.log(2) + xlogy(wins, theta) + xlog1py(losses, -theta)
            )

        above = integrate.quad(side, 0.5, 1, epsabs=0, epsrel=1e-11)[0]
        below = integrate.quad(side, 0, 0.5, epsabs=0, epsrel=1e-11)[0]
        assert math.exp(first) == pytest.approx(above, rel=1e-8)
        assert math.exp(second) == pytest.approx(below, rel=1e-8)
        closed = n * math.log(2) + math.log(2) + betaln(wins + 1, losses + 1)
        assert first == pytest.approx(closed + math.log(betainc(losses + 1, wins + 1, 0.5)))


def test_decision_needs_eight_pairs_all_one_way() -> None:
    # (2^(n+1) - 1) / (n + 1) >= 40 first at n = 8
    assert sequential.decision(7, 0) is None
    assert sequential.decision(8, 0) == "first"
    assert sequential.decision(0, 8) == "second"
    assert sequential.decision(30, 30) is None


# -- stopping ----------------------------------------------------------------------------------


def test_a_width_rule_stops_each_seat_on_its_own() -> None:
    rule = Rule(min=2, max=30, ci_width=0.4)
    results = {
        "easy": {"a": ["accepted"] * 11, "b": ["accepted"] * 3},
        "new": {},
        "close": {"a": ["accepted", "failed"] * 15},
    }
    found = {(s.case, s.seat): s for s in stops(rule, results, ["a", "b"])}
    assert found["easy", "a"].reason == "ci_width" and not found["easy", "a"].open
    assert found["easy", "a"].trials == 11
    assert found["easy", "a"].interval == pytest.approx(rate_sequence(11, 11))
    assert (found["easy", "b"].reason, found["easy", "b"].trials) == ("open", 4)
    assert (found["new", "a"].reason, found["new", "a"].trials) == ("min", 2)
    assert (found["close", "a"].reason, found["close", "a"].open) == ("max", False)
    assert found["close", "b"].reason == "min"


def test_measurement_failures_count_as_trials_never_as_evidence() -> None:
    rule = Rule(min=2, max=6, ci_width=0.4)
    kinds = ["adapter_error", "accepted", "timeout", "accepted", "grader_error", "accepted"]
    (stop,) = stops(rule, {"c": {"a": kinds}}, ["a"])
    assert (stop.reason, stop.trials) == ("max", 6)
    assert stop.interval == pytest.approx(rate_sequence(3, 3))


def test_a_decided_rule_stops_unanimous_cases_and_then_every_case() -> None:
    rule = Rule(min=2, max=20, decided=("a", "b"))
    results: dict[str, Any] = {
        "easy": {"a": ["accepted"] * 2, "b": ["accepted"] * 2, "c": ["failed"] * 2},
        "hopeless": {"a": ["failed"] * 2, "b": ["failed"] * 2},
        "close": {"a": ["accepted", "failed"], "b": ["failed", "failed"]},
        "faulty": {"a": ["accepted", "accepted"], "b": ["adapter_error", "accepted"]},
    }
    found = {(s.case, s.seat): s for s in stops(rule, results, ["a", "b", "c"])}
    assert found["easy", "a"].reason == "unanimous"
    assert found["easy", "c"].reason == "unanimous"  # every seat of a case follows it
    assert found["hopeless", "b"].detail == "a and b were failed in every trial: no discordant pair"
    assert (found["close", "a"].reason, found["close", "a"].trials) == ("open", 3)
    assert found["faulty", "a"].reason == "open"  # a fault is no evidence of agreement
    results["close"] = {"a": ["accepted"] * 8, "b": ["failed"] * 8}
    found = {(s.case, s.seat): s for s in stops(rule, results, ["a", "b"])}
    # the decision stops the cases still open; those of one outcome throughout stopped at min
    assert {case: s.reason for (case, _), s in found.items()} == {
        "easy": "unanimous",
        "hopeless": "unanimous",
        "close": "decided",
        "faulty": "decided",
    }
    assert found["close", "a"].detail == (
        "decided: a is better than b (8:0 discordant pairs over the cases)"
    )
    pairs = sequential.discordant(rule, results)
    assert pairs.document(rule)["better"] == "a"


# -- by simulation -----------------------------------------------------------------------------


def simulate(
    rule: Rule, rates: dict[str, dict[str, float]], rng: random.Random
) -> tuple[dict[str, dict[str, list[str]]], list[sequential.Stop], int]:
    """Run the rule on seats of known per-case rates until nothing is open: the results, the
    last stops and the trials launched."""
    seats = sorted({seat for by_seat in rates.values() for seat in by_seat})
    results: dict[str, dict[str, list[str]]] = {case: {s: [] for s in seats} for case in rates}
    launched = 0
    while True:
        found = stops(rule, results, seats)
        grew = False
        for stop in found:
            kinds = results[stop.case][stop.seat]
            while len(kinds) < stop.trials:
                passed = rng.random() < rates[stop.case][stop.seat]
                kinds.append("accepted" if passed else "failed")
                launched += 1
                grew = True
        if not grew:
            return results, found, launched


def mixed_rates(rng: random.Random, cases: int) -> list[float]:
    """Mostly easy and hopeless cases, a few close ones."""
    return [
        rng.choice((rng.uniform(0.95, 1.0), rng.uniform(0.0, 0.05), rng.uniform(0.2, 0.8)))
        for _ in range(cases)
    ]


def test_deciding_between_equal_seats_errs_within_the_stated_level() -> None:
    rng = random.Random(31)
    rule = Rule(min=2, max=20, decided=("a", "b"))
    decided = 0
    for _ in range(BATTERIES):
        rates = {f"k{i}": {"a": r, "b": r} for i, r in enumerate(mixed_rates(rng, 12))}
        results, _, _ = simulate(rule, rates, rng)
        decided += sequential.discordant(rule, results).decided is not None
    # a decision between seats that do not differ is a false one: at most alpha = 5%
    assert decided / BATTERIES <= 0.05


def test_naming_the_worse_seat_errs_within_half_the_level_and_a_real_gap_is_found() -> None:
    rng = random.Random(32)
    rule = Rule(min=2, max=20, decided=("a", "b"))
    wrong = right = 0
    for _ in range(BATTERIES):
        rates = {}
        for i, rate in enumerate(mixed_rates(rng, 12)):
            # a is at least as good as b on every case; better by 0.3 on the close ones
            gap = 0.3 if 0.2 <= rate <= 0.8 else 0.0
            rates[f"k{i}"] = {"a": min(1.0, rate + gap / 2), "b": max(0.0, rate - gap / 2)}
        results, _, _ = simulate(rule, rates, rng)
        decided = sequential.discordant(rule, results).decided
        wrong += decided == "second"
        right += decided == "first"
    assert wrong / BATTERIES <= 0.025
    assert right / BATTERIES >= 0.5  # and the rule does decide


def test_width_rule_intervals_cover_the_true_rate_within_the_stated_level() -> None:
    rng = random.Random(33)
    rule = Rule(min=2, max=60, ci_width=0.3)
    missed = intervals = 0
    for _ in range(BATTERIES):
        rates = {f"k{i}": {"a": r} for i, r in enumerate(mixed_rates(rng, 6))}
        _, found, _ = simulate(rule, rates, rng)
        for stop in found:
            assert stop.interval is not None
            low, high = stop.interval
            missed += not low <= rates[stop.case][stop.seat] <= high
            intervals += 1
    assert missed / intervals <= 0.05
