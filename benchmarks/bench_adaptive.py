"""Adaptive trials against a fixed 20-trial battery: agent runs launched, and the decisions.

Simulated seats of known per-case pass rates (no process runs: a run is one seeded draw), over
a battery where most cases are easy (both seats pass nearly always) or hopeless (both fail
nearly always) and a few are close (the seats differ there). Each battery is decided twice on
the same draws (trial k of a case and seat is the same draw both ways):

- fixed: 20 trials per case and seat, decided as `brigade compare DIR --seats new old` decides
  (core/compare: the bootstrap interval and the sign-flip test must agree);
- adaptive: `trials: {min: 2, max: 20, until: {decided: [new, old]}}`, round after round as a
  run plans them (core/sequential.planned over the trials recorded so far).

It prints the agent runs of each, the saving, how often the two reach the same decision, and the
error rates: over batteries where the seats differ, how often each names the worse seat; over
batteries where they do not (each case's rate the same for both), how often each decides at all.

    .venv/bin/python benchmarks/bench_adaptive.py [--batteries 1000] [--fixed 200]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from brigade.core.compare import Outcome, Side, compare_sides  # noqa: E402
from brigade.core.sequential import Rule, discordant, planned  # noqa: E402

SEATS = ("new", "old")
RULE = Rule(min=2, max=20, decided=SEATS)
FIXED = 20


def battery(rng: random.Random, differ: bool) -> dict[str, dict[str, float]]:
    """case -> seat -> pass rate: 30 easy, 12 hopeless, 6 close cases."""
    rates: dict[str, dict[str, float]] = {}
    for i in range(30):
        rate = rng.uniform(0.97, 1.0)
        rates[f"easy{i:02d}"] = {"new": rate, "old": rate}
    for i in range(12):
        rate = rng.uniform(0.0, 0.03)
        rates[f"hopeless{i:02d}"] = {"new": rate, "old": rate}
    for i in range(6):
        low = rng.uniform(0.2, 0.4)
        high = rng.uniform(0.7, 0.9) if differ else low
        rates[f"close{i}"] = {"new": high, "old": low}
    return rates


Outcomes = dict[str, dict[str, list[str]]]  # case -> seat -> the kind of each trial


def draws(rng: random.Random, rates: dict[str, dict[str, float]]) -> Outcomes:
    """The outcome of every trial up to 20 (what a seat would answer if launched)."""
    return {
        case: {
            seat: ["accepted" if rng.random() < rate else "failed" for _ in range(FIXED)]
            for seat, rate in by_seat.items()
        }
        for case, by_seat in rates.items()
    }


def adaptive(outcomes: Outcomes) -> tuple[int, str | None]:
    """Runs launched and the seat found better (None: not decided by max)."""
    rules = {case: RULE for case in outcomes}
    results: Outcomes = {case: {seat: [] for seat in SEATS} for case in outcomes}
    while True:
        counts, _ = planned(rules, SEATS, results)
        grew = False
        for (case, seat), wanted in counts.items():
            have = results[case][seat]
            if wanted > len(have):
                have.extend(outcomes[case][seat][len(have) : wanted])
                grew = True
        if not grew:
            break
    runs = sum(len(kinds) for by_seat in results.values() for kinds in by_seat.values())
    decided = discordant(RULE, results).decided
    return runs, None if decided is None else SEATS[0 if decided == "first" else 1]


def fixed(outcomes: Outcomes) -> str | None:
    """The seat `brigade compare` finds better over 20 trials a case (None: no difference)."""

    def side(seat: str) -> Side:
        cells = tuple(
            Outcome(case, t + 1, f"{case}:{seat}:{t + 1}", f"{case}{seat}{t}", kind, None)  # type: ignore[arg-type]
            for case, by_seat in outcomes.items()
            for t, kind in enumerate(by_seat[seat])
        )
        return Side("battery", "0" * 64, seat, cells)

    verdict = compare_sides(side("old"), side("new"))["verdict"]
    return {"better": "new", "worse": "old"}.get(verdict)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batteries", type=int, default=1000, help="simulated batteries each way")
    parser.add_argument("--fixed", type=int, default=200, help="of them, also decided fixed")
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = random.Random(args.seed)
    found: dict[str, Any] = {}
    for differ in (True, False):
        runs = wrong = decided = agree = fixed_wrong = fixed_decided = 0
        for index in range(args.batteries):
            outcomes = draws(rng, battery(rng, differ))
            used, better = adaptive(outcomes)
            runs += used
            decided += better is not None
            wrong += better == "old" if differ else better is not None
            if index < args.fixed:
                other = fixed(outcomes)
                fixed_decided += other is not None
                fixed_wrong += other == "old" if differ else other is not None
                agree += other is not None and other == better
        cases = len(outcomes)
        found[differ] = (runs, decided, wrong, agree, fixed_decided, fixed_wrong, cases)
    fixed_runs = found[True][6] * len(SEATS) * FIXED
    for differ, (runs, decided, wrong, agree, f_decided, f_wrong, _) in found.items():
        what = "the seats differ on the close cases" if differ else "the seats do not differ"
        mean = runs / args.batteries
        print(f"{what}: {args.batteries} batteries of 48 cases x 2 seats")
        print(
            f"  agent runs: fixed {fixed_runs}, adaptive {mean:.1f} on average "
            f"({1 - mean / fixed_runs:.0%} fewer)"
        )
        print(
            f"  adaptive decided {decided / args.batteries:.1%}, "
            + (f"named the worse seat {wrong / args.batteries:.2%}" if differ else
               f"a false decision {wrong / args.batteries:.2%} (stated at most 5%)")
        )  # fmt: skip
        print(
            f"  fixed (first {args.fixed}) decided {f_decided / args.fixed:.1%}, "
            + (f"named the worse seat {f_wrong / args.fixed:.2%}" if differ else
               f"a false decision {f_wrong / args.fixed:.2%}")
            + (f"; adaptive reached the same decision in {agree} of those {f_decided}"
               if f_decided else "")
        )  # fmt: skip
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
