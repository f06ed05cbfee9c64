"""JSON paths as messages show them: `cases[2].graders[0].pattern`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any


def format_path(parts: Iterable[Any]) -> str:
    """Render a JSON path as `cases[2].graders[0].pattern`; `(top level)` when empty."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_\-]+", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{quoted(part)}]"
    return out or "(top level)"


# characters str.splitlines() breaks at that JSON leaves as they are (it escapes the others)
_BREAKS = re.compile("[\x85\u2028\u2029]")


def quoted(value: Any) -> str:
    """`value` as JSON, non-ASCII kept readable, on one line whatever it holds."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
