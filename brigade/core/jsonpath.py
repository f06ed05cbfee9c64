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
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out or "(top level)"
