"""JSON that brigade did not write (a seat's usage file, a CLI's output, any file a seat,
a judge or code under test can reach): parsed with one error contract.

`parse` refuses, as one `BadJSON` (a ValueError whose text is one line naming the
problem), bytes that are not UTF-8, text that is not JSON, NaN and Infinity, a document
longer than its size cap and one nested deeper than its depth cap (also the
RecursionError the parser itself raises on `[[[[...`), so no caller ever sees a
traceback or walks a document deep enough to exhaust the stack.
"""

from __future__ import annotations

import json
from typing import Any

# what a document brigade reads may weigh and how deeply it may nest; a usage file, a
# receipt or a CLI's line of output are far below both
MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 200


class BadJSON(ValueError):
    """A document that is not JSON brigade reads: its text is the one-line problem, its
    `kind` which (`size`, `encoding`, `syntax`, `depth`)."""

    def __init__(self, problem: str, kind: str = "syntax") -> None:
        super().__init__(problem)
        self.kind = kind


def _no_constant(name: str) -> Any:
    raise BadJSON(f"not JSON ({name} is no JSON number)")


# every byte but the quote and the brackets; braces read as brackets (in JSON a pair is
# a pair: only how deep they nest matters)
_OTHERS = bytes(set(range(256)) - set(b'"[]{}'))
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


def too_deep(raw: bytes, max_depth: int) -> bool:
    """Whether JSON bytes nest deeper than `max_depth`, at the speed of bytes functions:
    escapes, then all but quotes and brackets dropped, then the strings; then one level
    of empty pairs removed a pass."""
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_AS_BRACKETS, _OTHERS)
    brackets = b"".join(kept.split(b'"')[0::2])  # what lies between strings
    for _ in range(max_depth):
        if not brackets:
            return False
        fewer = brackets.replace(b"[]", b"")
        if fewer == brackets:
            return False  # not balanced: not JSON, the parser says so
        brackets = fewer
    return bool(brackets)


def parse(
    data: bytes | str, *, limit: int | None = MAX_BYTES, max_depth: int | None = MAX_DEPTH
) -> Any:
    """The JSON value of `data`; BadJSON when it is not one brigade reads (see the module).

    `limit=None`: no size cap (a stream already bounded); `max_depth=None`: only the
    parser's own recursion limit (brigade's caches, whose entries are looked up by name,
    never walked, and are too big to scan on every no-op run).
    """
    if limit is not None and len(data) > limit:
        return _refuse(f"larger than {limit} bytes", "size")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _refuse(f"not UTF-8 (byte {exc.start})", "encoding")
    else:
        text = data
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return _refuse(f"nested deeper than {max_depth or 'the parser allows'} levels", "depth")
    except BadJSON:
        raise
    except ValueError as exc:  # JSONDecodeError, and an integer too long to convert
        return _refuse(f"not JSON ({exc})")
    # fewer brackets than the cap cannot nest deeper than it: nothing more to look at
    if (
        max_depth is not None
        and text.count("[") + text.count("{") > max_depth
        and too_deep(data if isinstance(data, bytes) else text.encode("utf-8"), max_depth)
    ):
        return _refuse(f"nested deeper than {max_depth} levels", "depth")
    return value


def _refuse(problem: str, kind: str = "syntax") -> Any:
    raise BadJSON(problem, kind)
