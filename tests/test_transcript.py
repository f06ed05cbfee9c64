"""core.transcript: entries and the run/transcript.json document."""

from __future__ import annotations

from brigade.core.transcript import Entry, as_text, transcript_document


def test_document_keeps_only_the_fields_that_apply() -> None:
    entries = (
        Entry(kind="message", role="assistant", text="Looking."),
        Entry(kind="tool_call", name="bash", input={"command": "ls"}, call_id="c1"),
        Entry(kind="tool_result", name="bash", output="", is_error=False, call_id="c1"),
        Entry(kind="error", text="API Error: 529 Overloaded"),
    )
    assert transcript_document(entries) == {
        "schema": "brigade.transcript.v1",
        "entries": [
            {"kind": "message", "role": "assistant", "text": "Looking."},
            {"kind": "tool_call", "name": "bash", "input": {"command": "ls"}, "call_id": "c1"},
            {
                "kind": "tool_result",
                "name": "bash",
                "output": "",
                "is_error": False,
                "call_id": "c1",
            },
            {"kind": "error", "text": "API Error: 529 Overloaded"},
        ],
    }


def test_tool_output_as_text() -> None:
    assert as_text("plain") == "plain"
    assert as_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert as_text([{"type": "image", "data": "x"}]) == '[{"data": "x", "type": "image"}]'
    assert as_text({"stdout": "ok", "exit": 0}) == '{"exit": 0, "stdout": "ok"}'
