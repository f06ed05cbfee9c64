"""The one clock receipts are stamped with."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """Current UTC time as an ISO 8601 string with a Z suffix."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
