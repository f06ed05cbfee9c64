"""Adaptive trials: when a case has had trials enough, with error rates that hold however often
the rule looks.

A case (or the whole manifest) with `trials: {min, max, until}` starts `min` trials per seat and
gets one more trial per seat, round after round, while its rule is not met, up to `max`. The
rule looks after every round, so a fixed-sample interval or test would be wrong far more often
than it says (looking 19 times at a 95% interval misses about a third of the time). Both rules
use statistics that are valid at any stopping time (Ville's inequality: a nonnegative
martingale that starts at 1 exceeds 1/alpha, ever, with probability at most alpha):

- `until: {ci_width: W}`: each seat of the case gets trials until its confidence sequence for
  the accepted rate is at most W wide. The sequence is the set of rates p whose likelihood
  ratio against the Jeffreys mixture, B(S + 1/2, F + 1/2) / (B(1/2, 1/2) p^S (1-p)^F) after S
  accepted and F failed trials, stays below 1/alpha: it holds the true rate at every round at
  once with probability 1 - alpha (the beta-binomial mixture martingale, Robbins 1970).
- `until: {decided: [A, B]}`: seats A and B are compared over every case that shares the rule.
  The evidence is the discordant pairs: trial k of a case where one of A and B was accepted and
  the other failed. If A and B are the same seat on every case, each discordant pair is a fair
  coin, whichever cases the run chose to go on with; brigade bets on it from both sides (a
  uniform mixture over the chance that A wins, on each side of 1/2, alpha/2 each) and the
  battery is decided (A better, or B better) as soon as one side's wealth reaches 2/alpha. So
  the chance of deciding when A and B do not differ is at most alpha, and the chance of naming
  the worse one when one is at least as good on every case at most alpha/2. Once decided, every
  case stops. Before that, a case stops when, after `min` rounds, every trial of A and B has
  had one outcome (all accepted, or all failed: no discordant pair, and more trials are
  unlikely to tell them apart), or at `max`.

Pure: counts and outcomes in, intervals, evidence and stop decisions out. Measurement failures
and unfinished cells are never evidence: they count as trials run (toward `min` and `max`) but
not as accepted or failed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from brigade.core.stats import stable_round
from brigade.core.trials import CONFIDENCE, regularized_beta

Reason = Literal["min", "open", "ci_width", "max", "decided", "unanimous"]
Side = Literal["first", "second"]
# the prior of the rate's mixture: Jeffreys' Beta(1/2, 1/2), tight near 0 and 1 (easy and
# hopeless cases stop soonest)
PRIOR = 0.5
EVIDENCE = ("accepted", "failed")


@dataclass(frozen=True)
class Rule:
    """How many trials a case gets: `min` to start, then a round at a time up to `max` until
    its `ci_width` or `decided` rule is met."""

    min: int
    max: int
    ci_width: float | None = None
    decided: tuple[str, str] | None = None
    confidence: float = CONFIDENCE

    def document(self) -> dict[str, Any]:
        """The rule as a manifest writes it."""
        until: dict[str, Any] = (
            {"ci_width": self.ci_width}
            if self.ci_width is not None
            else {"decided": list(self.decided or ())}
        )
        if self.confidence != CONFIDENCE:
            until["confidence"] = self.confidence
        return {"min": self.min, "max": self.max, "until": until}


def rule_from_document(doc: Mapping[str, Any]) -> Rule:
    """A rule as `Rule.document` (and a manifest) writes it."""
    until = doc["until"]
    decided = until.get("decided")
    return Rule(
        min=int(doc["min"]),
        max=int(doc["max"]),
        ci_width=float(until["ci_width"]) if "ci_width" in until else None,
        decided=(str(decided[0]), str(decided[1])) if decided is not None else None,
        confidence=float(until.get("confidence", CONFIDENCE)),
    )


# -- the confidence sequence of a rate ----------------------------------------------------------


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@lru_cache(maxsize=65536)
def rate_sequence(
    accepted: int, scored: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The always-valid interval of a rate after `accepted` of `scored` trials (see the
    module); (0, 1) before any trial."""
    if not 0 <= accepted <= scored:
        raise ValueError(f"need 0 <= accepted <= scored, got {accepted}, {scored}")
    if scored == 0:
        return 0.0, 1.0
    failed = scored - accepted
    level = math.log(1 / (1 - confidence))
    mixture = _log_beta(accepted + PRIOR, failed + PRIOR) - _log_beta(PRIOR, PRIOR)

    def outside(p: float) -> bool:
        # log of the likelihood ratio of the mixture against the rate p reaches 1/alpha
        against = (accepted * math.log(p) if accepted else 0.0) + (
            failed * math.log1p(-p) if failed else 0.0
        )
        return mixture - against >= level

    estimate = accepted / scored
    low = 0.0 if accepted == 0 else _edge(outside, 0.0, estimate)
    high = 1.0 if failed == 0 else 1.0 - _edge(lambda q: outside(1.0 - q), 0.0, 1.0 - estimate)
    return low, high


def _edge(outside: Any, far: float, near: float) -> float:
    """The boundary between `far` (outside) and `near` (inside), by bisection."""
    for _ in range(100):
        middle = (far + near) / 2
        if middle in (far, near):
            break
        if middle <= 0.0 or outside(middle):
            far = middle
        else:
            near = middle
    return near


# -- the evidence between two seats -------------------------------------------------------------


def sign_evidence(wins: int, losses: int) -> tuple[float, float]:
    """log of the wealth bet on the first seat being better, and on the second, after `wins`
    discordant pairs the first won and `losses` it lost (0, 0 before any)."""
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must not be negative, got {wins}, {losses}")
    n = wins + losses
    if n == 0:
        return 0.0, 0.0
    # 2^n times the mixture over a chance theta on one side of 1/2 (a uniform prior, mass 1/2):
    # 2^(n+1) B(W+1, L+1) P(theta > 1/2 | W, L), P from the incomplete beta function
    base = (n + 1) * math.log(2) + _log_beta(wins + 1, losses + 1)
    above = regularized_beta(0.5, losses + 1, wins + 1)
    below = regularized_beta(0.5, wins + 1, losses + 1)
    return (
        base + math.log(above) if above > 0 else -math.inf,
        base + math.log(below) if below > 0 else -math.inf,
    )


def decision(wins: int, losses: int, confidence: float = CONFIDENCE) -> Side | None:
    """Which seat the evidence has decided is better (`first` or `second`), if any yet."""
    first, second = sign_evidence(wins, losses)
    level = math.log(2 / (1 - confidence))
    if first >= level:
        return "first"
    if second >= level:
        return "second"
    return None


# -- stopping ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stop:
    """Where one seat of one case stands: the trials it should have now, and why."""

    case: str
    seat: str
    trials: int  # the trials it has, or one more when it goes on (its first `min` before any)
    open: bool  # it gets another round
    reason: Reason
    detail: str
    interval: tuple[float, float] | None = None  # a ci_width rule's sequence at this round

    def document(self) -> dict[str, Any]:
        """The record summary.json keeps of it."""
        return {
            "case": self.case,
            "seat": self.seat,
            "trials": self.trials,
            "open": self.open,
            "reason": self.reason,
            "detail": self.detail,
            "interval": (
                [stable_round(self.interval[0]), stable_round(self.interval[1])]
                if self.interval is not None
                else None
            ),
        }


# case id -> seat -> the kind of each trial it has run, trial 1 first (trials.trial_kind)
Results = Mapping[str, Mapping[str, Sequence[str]]]


@dataclass(frozen=True)
class Pairs:
    """The discordant pairs of two seats over the cases of a `decided` rule."""

    wins: int  # the first seat accepted, the second failed
    losses: int  # the other way round
    decided: Side | None

    def document(self, rule: Rule) -> dict[str, Any]:
        """What summary.json says of the comparison."""
        first, second = sign_evidence(self.wins, self.losses)
        seats = rule.decided or ("", "")
        better = None if self.decided is None else seats[0 if self.decided == "first" else 1]
        return {
            "seats": list(seats),
            "discordant": {"first_better": self.wins, "second_better": self.losses},
            "evidence": [stable_round(math.exp(first)), stable_round(math.exp(second))],
            "threshold": stable_round(2 / (1 - rule.confidence)),
            "decided": self.decided is not None,
            "better": better,
        }


def discordant(rule: Rule, results: Results) -> Pairs:
    """Count the discordant pairs of a `decided` rule's seats over its cases."""
    first, second = rule.decided or ("", "")
    wins = losses = 0
    for seats in results.values():
        for a, b in zip(seats.get(first, ()), seats.get(second, ()), strict=False):
            if a in EVIDENCE and b in EVIDENCE and a != b:
                wins += a == "accepted"
                losses += b == "accepted"
    return Pairs(wins, losses, decision(wins, losses, rule.confidence))


def stops(rule: Rule, results: Results, seats: Sequence[str]) -> list[Stop]:
    """Where every seat of every case under `rule` stands after the trials recorded (`results`
    may lack cases and seats that have none yet)."""
    if rule.decided is not None:
        return _decided_stops(rule, results, seats)
    found = []
    width = rule.ci_width if rule.ci_width is not None else 1.0
    for case, by_seat in results.items():
        for seat in seats:
            kinds = by_seat.get(seat, ())
            run = len(kinds)
            if run < rule.min:
                found.append(
                    Stop(case, seat, rule.min, True, "min", f"{run} of the first {rule.min}")
                )
                continue
            accepted = sum(kind == "accepted" for kind in kinds)
            scored = accepted + sum(kind == "failed" for kind in kinds)
            low, high = rate_sequence(accepted, scored, rule.confidence)
            shown = f"[{low:.3f}, {high:.3f}], {high - low:.3f} wide"
            if high - low <= width:
                detail = f"{accepted}/{scored} accepted: the interval {shown}, at most {width:g}"
                found.append(Stop(case, seat, run, False, "ci_width", detail, (low, high)))
            elif run >= rule.max:
                detail = f"max {rule.max} reached: the interval {shown}, wider than {width:g}"
                found.append(Stop(case, seat, run, False, "max", detail, (low, high)))
            else:
                detail = f"the interval {shown}, wider than {width:g}"
                found.append(Stop(case, seat, run + 1, True, "open", detail, (low, high)))
    return found


def _decided_stops(rule: Rule, results: Results, seats: Sequence[str]) -> list[Stop]:
    first, second = rule.decided or ("", "")
    pairs = discordant(rule, results)
    found: list[Stop] = []
    for case, by_seat in results.items():
        run = max((len(by_seat.get(seat, ())) for seat in seats), default=0)
        stop: tuple[int, bool, Reason, str]
        if run < rule.min:
            stop = (rule.min, True, "min", f"{run} of the first {rule.min}")
        elif _unanimous(by_seat.get(first, ()), by_seat.get(second, ())):
            # (before `decided`: a case of one outcome throughout stopped at its min, before
            # any decision; the decision stops the cases still open)
            kind = next(k for k in by_seat.get(first, ()) if k in EVIDENCE)
            stop = (
                run,
                False,
                "unanimous",
                f"{first} and {second} were {kind} in every trial: no discordant pair",
            )
        elif pairs.decided is not None:
            better, worse = (first, second) if pairs.decided == "first" else (second, first)
            stop = (
                run,
                False,
                "decided",
                f"decided: {better} is better than {worse} ({pairs.wins}:{pairs.losses} "
                "discordant pairs over the cases)",
            )
        elif run >= rule.max:
            stop = (run, False, "max", f"max {rule.max} reached, not decided")
        else:
            stop = (run + 1, True, "open", "not decided")
        trials, going, reason, detail = stop
        found.extend(Stop(case, seat, trials, going, reason, detail) for seat in seats)
    return found


def _unanimous(first: Sequence[str], second: Sequence[str]) -> bool:
    kinds = {kind for kind in (*first, *second) if kind in EVIDENCE}
    measured = all(kind in EVIDENCE for kind in (*first, *second))
    return len(kinds) == 1 and measured and bool(first) and bool(second)


def planned(
    rules: Mapping[str, Rule],
    seats: Sequence[str],
    results: Results,
    recorded: Mapping[tuple[str, str], int] | None = None,
) -> tuple[dict[tuple[str, str], int], list[Stop]]:
    """How many trials each seat of each adaptive case gets now, and where each stands.

    `rules`: case id -> its rule (cases sharing one rule are decided together);
    `results`: the kinds of each case's seat's finished trials from trial 1 on, up to the first
    that is not finished; `recorded`: the highest trial (at most the rule's `max`) that has a
    receipt at all, which the plan keeps whatever the rule says (a finished cell is never
    dropped, an unfinished one runs again)."""
    groups: dict[Rule, list[str]] = {}
    for case_id, rule in rules.items():
        groups.setdefault(rule, []).append(case_id)
    counts: dict[tuple[str, str], int] = {}
    found: list[Stop] = []
    for rule, cases in groups.items():
        for stop in stops(rule, {case: results.get(case, {}) for case in cases}, seats):
            kept = min((recorded or {}).get((stop.case, stop.seat), 0), rule.max)
            counts[(stop.case, stop.seat)] = max(stop.trials, kept)
            found.append(stop)
    return counts, found
