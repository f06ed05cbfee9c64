"""What brigade prints to a terminal: control characters are shown, never obeyed
(core/terminal.printable), and every line brigade writes to the terminal goes through it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from brigade.core.terminal import printable

PACKAGE = Path(__file__).resolve().parent.parent / "brigade"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, newline\nand\ttab", "plain text, newline\nand\ttab"),
        ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),  # OSC: the window title
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # CSI: clear the screen
        ("\x1b]52;c;aGk=\x1b\\", "\\x1b]52;c;aGk=\\x1b\\"),  # OSC 52: the clipboard
        ("\x9b2J\x9d0;t\x9c", "\\x9b2J\\x9d0;t\\x9c"),  # C1 CSI, OSC, ST
        ("over\rwrite\x08\x7f\x00", "over\\x0dwrite\\x08\\x7f\\x00"),
        ("abc\u202edef\u2066x\u2069", "abc\\u202edef\\u2066x\\u2069"),  # bidi overrides
        ("café — ünïcode ✓ 日本", "café — ünïcode ✓ 日本"),
    ],
)
def test_control_characters_are_shown_not_obeyed(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_a_json_document_stays_valid_and_reads_the_same() -> None:
    value = {"answer": "a\x1b[31mred\x9b\u202e\x7f\n", "k\x9d": 1}
    text = printable(json.dumps(value, ensure_ascii=False), json=True)
    assert json.loads(text) == value
    assert not any(0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in text)


# -- every line to the terminal goes through printable ---------------------------------

# the streams brigade writes its lines to (the user's terminal)
TERMINAL_STREAMS = {"sys.stderr", "sys.stdout", "self.err", "self.stream", "self.outstream"}
# the layers whose code runs in brigade's own process (adapters run inside seats)
PRINTING_LAYERS = ("front", "engine", "report", "outdir", "run")
# the helpers that are printable's callers themselves
HELPERS = {("front/cli.py", "say"), ("front/cli.py", "say_json")}


def _safe(node: ast.expr) -> bool:
    """Whether what is written is printable's output, a constant, or a constant's name."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id.isupper()  # ERASE
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id == "printable"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _safe(node.left) and _safe(node.right)
    if isinstance(node, ast.IfExp):
        return _safe(node.body) and _safe(node.orelse)
    return False


def _terminal_writes() -> list[str]:
    unsafe = []
    for layer in PRINTING_LAYERS:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            relative = path.relative_to(PACKAGE).as_posix()
            tree = ast.parse(path.read_text("utf-8"))
            helpers = {
                node
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and (relative, node.name) in HELPERS
            }
            inside = {id(n) for helper in helpers for n in ast.walk(helper)}
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or id(node) in inside:
                    continue
                func = node.func
                printing = isinstance(func, ast.Name) and func.id == "print"
                writing = (
                    isinstance(func, ast.Attribute)
                    and func.attr == "write"
                    and ast.unparse(func.value) in TERMINAL_STREAMS
                )
                if (printing or writing) and not all(_safe(arg) for arg in node.args):
                    unsafe.append(f"{relative}:{node.lineno}: {ast.unparse(node)[:80]}")
                if isinstance(func, ast.Attribute) and func.attr == "dump":
                    if any(ast.unparse(arg) in TERMINAL_STREAMS for arg in node.args):
                        unsafe.append(f"{relative}:{node.lineno}: json.dump to a terminal")
    return unsafe


def test_every_line_brigade_prints_goes_through_printable() -> None:
    assert _terminal_writes() == []
