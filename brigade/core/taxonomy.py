"""The frozen taxonomy: cell states, what a run and its grades mean, the resume table, exit codes.

Frozen by docs/contracts/outcome-taxonomy.md and docs/contracts/cell-identity-and-resume.md.
Deterministic states are real statements about the seat; environmental ones
are faults of the measurement apparatus and must never be read as seat
performance. Every set of states the package uses is defined here, from `State`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

State = Literal[
    "accepted",
    "rejected",
    "unscored",
    "execution_error",
    "adapter_error",
    "grader_error",
    "running",
]
FailureReason = Literal["timeout", "transport_drop", "provider_5xx"]
# What went wrong with the apparatus, precisely (a closed set: extend it only when
# a real new kind appears). Adapters read it from the CLI's structured output,
# proc and the runner from what happened around the seat.
FaultKind = Literal[
    "rate_limited",
    "overloaded",
    "provider_5xx",
    "auth",
    "quota",
    "binary_missing",
    "transport_drop",
    "timeout",
    "workspace_untrusted",
    "empty_output",
    "worktree_failed",
    "cluster_lost",
    "launch_failed",
    # the CLI refused brigade's command line (an option its version does not have)
    "cli_incompatible",
    # the model does not exist, or the account may not use it
    "model_unavailable",
    # the CLI reported a failed request without saying why
    "unknown",
    # a case's setup commands failed: none of its cells' seats ran (run/setup.py)
    "setup_failed",
]
# what bringing a cell up to date needs (the resume table)
Action = Literal["skip", "regrade", "run", "reuse"]

STATES: tuple[str, ...] = get_args(State)
TERMINAL: frozenset[str] = frozenset(STATES) - {"running"}
# the seat exited 0 and graders ran (or there were none): the output was graded
GRADED: frozenset[str] = frozenset({"accepted", "rejected", "unscored"})
# graded, or grading broke: a stored output graders can run on again
GRADEABLE: frozenset[str] = GRADED | {"grader_error"}
# terminal states whose receipt stands on a resume: nothing runs
UP_TO_DATE: frozenset[str] = TERMINAL - {"grader_error"}
# the seat (execution_error) or the apparatus around it (adapter_error) failed: its
# stderr tells why
SEAT_FAILED: frozenset[str] = frozenset({"execution_error", "adapter_error"})
# summary count keys: every state plus cells with no receipt yet
COUNT_KEYS: tuple[str, ...] = STATES + ("missing",)
# how measurement failures are told apart (summary.json, trial statistics)
MeasurementKind = Literal["adapter_error", "grader_error", "timeout"]
MEASUREMENT_KINDS: tuple[str, ...] = get_args(MeasurementKind)
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
# faults that waiting does not cure: every cell of the seat would meet them again (a CLI
# that refuses brigade's command line, a model the account cannot use, refuse them all)
PERSISTENT_FAULTS: frozenset[str] = frozenset(
    {"auth", "quota", "binary_missing", "cli_incompatible", "model_unavailable"}
)
# faults a later attempt may not meet (`timeout` is retried only when asked)
TRANSIENT_FAULTS: frozenset[str] = frozenset(
    {"rate_limited", "overloaded", "provider_5xx", "transport_drop"}
)
# The seed's canonical `failure_reason` of each fault kind; the receipt has none for
# the other kinds (its `fault` object names every kind). 529 and 503 are 5xx statuses;
# a lost cluster worker dropped the seat's transport.
FAILURE_REASONS: Mapping[str, FailureReason] = {
    "timeout": "timeout",
    "provider_5xx": "provider_5xx",
    "overloaded": "provider_5xx",
    "transport_drop": "transport_drop",
    "cluster_lost": "transport_drop",
}

EXIT_CLEAN = 0
EXIT_REJECTED = 1
EXIT_UNUSABLE = 2
EXIT_MEASUREMENT = 3


@dataclass(frozen=True)
class Verdict:
    """A cell's state and, when they apply, why: the canonical reason, a one-line detail and
    the kind of the apparatus fault (`timeout` for a seat that hit its time limit)."""

    state: State
    failure_reason: FailureReason | None = None
    detail: str | None = None
    fault_kind: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """What happened to the seat process, as seen by proc, the adapter and the executor.

    `fault_kind`/`fault_detail`: an apparatus fault (a launch failure among them);
    `own_failure`: the seat's own reason for failing (a turn or budget limit), one line.
    """

    launched: bool
    timed_out: bool
    exit_code: int | None
    fault_kind: str | None = None
    fault_detail: str | None = None
    own_failure: str | None = None


def classify_run(facts: RunFacts) -> Verdict | None:
    """The state decided by the run alone, or None when the output goes to the graders.

    Every apparatus fault is an adapter_error (auth and quota too: an expired login
    is never the seat's failure), its reason mapped from its kind, never read from
    its text; a seat that stopped itself is an execution_error with its reason.
    """
    if not facts.launched:
        kind = facts.fault_kind or "launch_failed"
        detail = facts.fault_detail or "the seat command could not be launched"
        return Verdict("adapter_error", FAILURE_REASONS.get(kind), detail, kind)
    if facts.timed_out:
        return Verdict("execution_error", "timeout", "the seat hit its time limit", "timeout")
    if facts.fault_kind is not None:
        detail = facts.fault_detail or facts.fault_kind
        return Verdict(
            "adapter_error", FAILURE_REASONS.get(facts.fault_kind), detail, facts.fault_kind
        )
    if facts.own_failure is not None:
        return Verdict("execution_error", None, facts.own_failure)
    if facts.exit_code != 0:
        return Verdict("execution_error", None, f"the seat exited with status {facts.exit_code}")
    return None


def classify_grades(results: Sequence[dict[str, Any]]) -> Verdict:
    """accepted / rejected / unscored / grader_error from grader_result.v1 documents."""
    if not results:
        return Verdict("unscored")
    errors = [r for r in results if r["status"] == "grader_error"]
    if errors:
        first = errors[0]
        return Verdict("grader_error", None, f"{first['grader_id']}: {first['detail']}")
    if all(grader_passed(r) for r in results):
        return Verdict("accepted")
    return Verdict("rejected")


def grader_passed(result: Mapping[str, Any]) -> bool:
    """A scored grader passes when its score reaches score_max and none of its component
    checks failed (a JUnit-scored command whose tests all passed but which exited with
    another status than expected fails its `exit status` check: not a pass)."""
    checks = result.get("component_checks")
    failed = isinstance(checks, list) and any(
        isinstance(check, dict) and check.get("passed") is False for check in checks
    )
    return bool(result["score"] >= result["score_max"]) and not failed


def cell_score(results: Sequence[dict[str, Any]]) -> float | None:
    """Mean grader score when every grader scored; None otherwise (no graders or an error)."""
    if not results or any(r["status"] != "scored" for r in results):
        return None
    return sum(float(r["score"]) for r in results) / len(results)


def is_measurement_failure(state: str | None, failure_reason: str | None) -> bool:
    """adapter_error, grader_error and timed-out execution_error are apparatus faults."""
    return state in ("adapter_error", "grader_error") or (
        state == "execution_error" and failure_reason == "timeout"
    )


def measurement_kind(state: str | None, failure_reason: str | None) -> MeasurementKind | None:
    """Which measurement failure a cell is (timeout for a timed-out execution_error), if any."""
    if not is_measurement_failure(state, failure_reason):
        return None
    if state == "adapter_error":
        return "adapter_error"
    if state == "grader_error":
        return "grader_error"
    return "timeout"


def fault_kind_of(state: str | None, failure_reason: str | None, kind: str | None) -> str | None:
    """The apparatus fault a finished cell met (an adapter_error, a timed-out seat): the kind
    its receipt records, else (receipts written before kinds were) its failure_reason."""
    if state == "adapter_error":
        return kind or failure_reason or "unknown"
    if state == "execution_error" and failure_reason == "timeout":
        return "timeout"
    return None


def is_real_failure(state: str | None, failure_reason: str | None) -> bool:
    """rejected and non-timeout execution_error are real statements about the seat."""
    return state == "rejected" or (state == "execution_error" and failure_reason != "timeout")


class Outcome(Protocol):
    """What the resume table reads of a receipt: a `core/receipts.ReceiptView` or `Receipt`."""

    @property
    def state(self) -> str:
        """The receipt's state."""
        ...

    @property
    def failure_reason(self) -> str | None:
        """Its failure reason (`timeout`, ...), None when it records none."""
        ...


def is_transient(receipt: Outcome) -> bool:
    """What --retry-transient re-runs: the measurement failures a new attempt may cure
    (adapter_error and timed-out execution_error; grader_error is re-graded instead)."""
    state = receipt.state
    return state != "grader_error" and is_measurement_failure(state, receipt.failure_reason)


def exit_bucket(cells: Iterable[tuple[str | None, str | None]]) -> int:
    """0 clean, 1 a real failure, 3 a measurement failure or unfinished cells (dominates 1)."""
    bucket = EXIT_CLEAN
    for state, reason in cells:
        if state not in TERMINAL or is_measurement_failure(state, reason):
            return EXIT_MEASUREMENT
        if is_real_failure(state, reason):
            bucket = EXIT_REJECTED
    return bucket


def outcome_name(bucket: int, incomplete: bool) -> str:
    """The summary's word for an exit bucket."""
    if incomplete:
        return "incomplete"
    return {EXIT_CLEAN: "clean", EXIT_REJECTED: "rejected"}.get(bucket, "measurement_failure")


def decide(receipt: Outcome | None, *, retry_transient: bool, reusable: bool) -> Action:
    """One row of the resume table (docs/contracts/cell-identity-and-resume.md).

    - accepted / rejected / unscored / execution_error / adapter_error: skip,
      except adapter_error and timed-out execution_error under --retry-transient
    - grader_error: regrade from the stored output, no seat run
    - running (crashed or in flight), missing, corrupt, any other state: a new
      attempt, which reuses the seat run of a cell differing only in graders
      when there is one (`reusable`)
    """
    state = receipt.state if receipt is not None else None
    if receipt is not None and state in UP_TO_DATE:
        if retry_transient and is_transient(receipt):
            return "run"
        return "skip"
    if state == "grader_error":
        return "regrade"
    return "reuse" if reusable else "run"


def reusable_source(receipt: Outcome | None, *, retry_transient: bool) -> bool:
    """Whether a receipt's seat run may be graded for a cell differing only in graders."""
    if receipt is None or receipt.state not in TERMINAL:
        return False
    if retry_transient and is_transient(receipt):
        return False  # the user asked for transient faults to be run again
    return True
