"""The resume table: what bringing a cell up to date means for each recorded state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Action = Literal["skip", "regrade", "run", "reuse"]

# terminal states whose receipt stands: nothing runs
UP_TO_DATE = frozenset({"accepted", "rejected", "unscored", "execution_error", "adapter_error"})


def decide(receipt: Mapping[str, Any] | None, *, retry_transient: bool, reusable: bool) -> Action:
    """One row of the resume table (seeds/cell-identity-and-resume.md).

    - accepted / rejected / unscored / execution_error / adapter_error: skip,
      except adapter_error and timed-out execution_error under --retry-transient
    - grader_error: regrade from the stored output, no seat run
    - running (crashed or in flight), missing, corrupt, any other state: a new
      attempt, which reuses the seat run of a cell differing only in graders
      when there is one (`reusable`)
    """
    state = receipt.get("state") if receipt is not None else None
    state = state if isinstance(state, str) else None
    if receipt is not None and state in UP_TO_DATE:
        if retry_transient and is_transient(receipt):
            return "run"
        return "skip"
    if state == "grader_error":
        return "regrade"
    return "reuse" if reusable else "run"


def reusable_source(receipt: Mapping[str, Any] | None, *, retry_transient: bool) -> bool:
    """Whether a receipt's seat run may be graded for a cell differing only in graders."""
    if receipt is None or receipt.get("state") not in UP_TO_DATE | {"grader_error"}:
        return False
    if retry_transient and is_transient(receipt):
        return False  # the user asked for transient faults to be run again
    return True


def is_transient(receipt: Mapping[str, Any]) -> bool:
    """adapter_error and timed-out execution_error: what --retry-transient re-runs."""
    state = receipt.get("state")
    return state == "adapter_error" or (
        state == "execution_error" and receipt.get("failure_reason") == "timeout"
    )
