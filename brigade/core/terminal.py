"""Text for the user's terminal: control characters shown, never obeyed (pure).

Much of what brigade prints carries text an agent wrote (a fault line, an
answer in `brigade show`, a CLI's version line). An escape sequence in it
(`ESC ] 0;title BEL`, `ESC [ 2 J`, OSC 52, which writes the clipboard) would
be obeyed by the terminal. Every line brigade prints goes through `printable`:
newlines and tabs are kept, every other control character (C0, DEL, C1, and
the Unicode controls that reorder how a line reads) is shown as its escape
(`\\x1b`, `\\u202e`), so a sequence becomes harmless text.
"""

from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1 (a lone 0x9b is CSI, 0x9d OSC), and the bidirectional
# controls (marks, embeddings, overrides, isolates) that make a line read other than it is
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(text: str, *, json: bool = False) -> str:
    """`text` safe to print on a terminal: control characters but newline and tab escaped.

    `json`: the text is a JSON document (`json.dumps` escapes C0 controls, not DEL, C1
    or the Unicode ones): those are written as `\\u` escapes, so the document reads
    the same and stays valid.
    """
    return _CONTROL.sub(_json_escape if json else _shown, text)
