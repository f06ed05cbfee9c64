"""What each agent CLI prints, in its real output format: success, an empty final
message, a rate limit, a provider 5xx and a plain failure of the agent itself.

Shared by the adapter unit tests (which read these samples directly) and the
fake CLIs in fake_cli.py (which print them from real processes).
"""

from __future__ import annotations

import json


def jsonl(*events: object) -> str:
    return "\n".join(json.dumps(event) for event in events) + "\n"


def claude_result(result: str, *, is_error: bool = False, subtype: str = "success") -> str:
    return json.dumps(
        {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": 1200,
            "num_turns": 2,
            "result": result,
            "session_id": "abc",
        }
    )


def codex_events(text: str | None, *, failure: str | None = None) -> str:
    events: list[object] = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"}]
    if text is not None:
        events.append(
            {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": text}}
        )
    if failure is None:
        events.append({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
    else:
        events.append({"type": "error", "message": failure})
        events.append({"type": "turn.failed", "error": {"message": failure}})
    return jsonl(*events)


def opencode_events(*texts: str, error: dict[str, object] | None = None) -> str:
    events: list[object] = []
    for text in texts:
        events.append({"type": "step_start", "part": {"type": "step-start"}})
        events.append({"type": "text", "part": {"type": "text", "text": text}})
        events.append({"type": "step_finish", "part": {"type": "step-finish", "reason": "stop"}})
    if error is not None:
        events.append({"type": "error", "error": error})
    return jsonl(*events)


def goose_output(text: str) -> str:
    return json.dumps(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "question"}]},
                {"role": "assistant", "content": [{"type": "text", "text": text}]},
            ],
            "metadata": {"total_tokens": 10, "status": "completed"},
        }
    )


def qwen_output(result: str, *, error: str | None = None) -> str:
    final: dict[str, object] = {
        "type": "result",
        "subtype": "success" if error is None else "error_during_execution",
        "is_error": error is not None,
        "result": result,
    }
    if error is not None:
        final["error"] = {"type": "api_error", "message": error}
    return json.dumps(
        [
            {"type": "system", "subtype": "session_start", "session_id": "x"},
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": result}]},
            },
            final,
        ]
    )


# Per adapter: (exit, stdout, stderr) for success, empty message, rate limit, 5xx and
# a plain failure of the agent itself. Success samples read back as "All good."
SAMPLES: dict[str, dict[str, tuple[int, str, str]]] = {
    "claude": {
        "success": (0, claude_result("All good."), ""),
        "empty": (0, claude_result(""), ""),
        "rate": (1, claude_result("API Error: 429 rate_limit_error", is_error=True), ""),
        "5xx": (1, claude_result("API Error: 529 Overloaded. Try again.", is_error=True), ""),
        "plain": (1, claude_result("", is_error=True, subtype="error_max_turns"), ""),
    },
    "cursor": {
        "success": (0, claude_result("All good."), ""),
        "empty": (0, claude_result(""), ""),
        "rate": (1, "", "Error: You've hit your usage limit for this model\n"),
        "5xx": (1, "", "Error: 503 Service Unavailable\n"),
        "plain": (1, "", "Error: the agent stopped\n"),
    },
    "codex": {
        "success": (0, codex_events("All good."), "progress...\n"),
        "empty": (0, codex_events(""), ""),
        "rate": (
            1,
            codex_events(None, failure="exceeded retry limit, last status: 429 Too Many Requests"),
            "",
        ),
        "5xx": (1, codex_events(None, failure="unexpected status 500 Internal Server Error"), ""),
        "plain": (1, "", "Error: no such option --bogus\n"),
    },
    "gemini": {
        "success": (0, json.dumps({"response": "All good.", "stats": {}}), ""),
        "empty": (0, json.dumps({"response": "", "stats": {}}), ""),
        "rate": (
            1,
            "",
            json.dumps({"error": {"type": "ApiError", "message": "Quota exceeded", "code": 429}}),
        ),
        "5xx": (
            1,
            json.dumps({"response": "", "error": {"message": "The model is overloaded"}}),
            "",
        ),
        "plain": (53, "", "Reached max session turns\n"),
    },
    "qwen": {
        "success": (0, qwen_output("All good."), ""),
        "empty": (0, qwen_output(""), ""),
        "rate": (1, qwen_output("", error="429 Throttling: rate limit exceeded"), ""),
        "5xx": (1, qwen_output("", error="500 Internal Server Error"), ""),
        "plain": (1, "", "Tool execution failed\n"),
    },
    "opencode": {
        "success": (0, opencode_events("Looking.", "All good."), ""),
        "empty": (0, opencode_events(), ""),
        "rate": (
            1,
            opencode_events(
                error={"name": "APIError", "data": {"message": "Too many", "statusCode": 429}}
            ),
            "",
        ),
        "5xx": (
            1,
            opencode_events(
                error={"name": "APIError", "data": {"message": "Overloaded", "statusCode": 529}}
            ),
            "",
        ),
        "plain": (1, "", "Error: Session not found\n"),
    },
    "aider": {
        "success": (0, "All good.\n", ""),
        "empty": (0, "\n", ""),
        "rate": (
            0,
            "litellm.RateLimitError: AnthropicException\n"
            "The API provider has rate limited you. Try again later or check your quotas.\n",
            "",
        ),
        "5xx": (0, "litellm.InternalServerError: AnthropicException - Overloaded\n", ""),
        "plain": (1, "", "aider: error: unrecognized arguments: --bogus\n"),
    },
    "goose": {
        "success": (0, goose_output("All good."), ""),
        "empty": (0, goose_output(""), ""),
        "rate": (1, "", "Error: Rate limit exceeded: 429 Too Many Requests\n"),
        "5xx": (1, "", "Error: Server error: 502 Bad Gateway\n"),
        "plain": (1, "", "Error: extension developer failed to start\n"),
    },
    "copilot": {
        "success": (0, "All good.\n", ""),
        "empty": (0, "", ""),
        "rate": (1, "", "Error: Sorry, you have been rate-limited. Please wait.\n"),
        "5xx": (1, "", "Error: 500 Internal Server Error\n"),
        "plain": (1, "", "Error: model not available\n"),
    },
    "ollama": {
        "success": (0, "All good.\n", ""),
        "empty": (0, "", ""),
        "rate": (1, "", "Error: 429 Too Many Requests\n"),
        "5xx": (1, "", "Error: 500 Internal Server Error: llama runner process has terminated\n"),
        "plain": (1, "", "Error: pull model manifest: file does not exist\n"),
    },
}
