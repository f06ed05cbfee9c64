"""What each agent CLI prints, in its real output format, per scenario.

Shared by the adapter unit tests (which read these samples directly) and the
fake CLIs in fake_cli.py (which print them from real processes). Shapes, key
names, messages and exit codes follow the CLIs' sources and outputs recorded
from real runs (see /work/notes/cli-formats-*.md for the references); where a
CLI's wording of a case was never captured, the sample says so.

Scenarios (not every CLI has every one):

- success: the answer "All good." with usage (several model calls where the CLI
  reports them; claude's names two models)
- auth / quota / rate / overloaded / 5xx / drop: the apparatus faults
- model: a model that does not exist or the account may not use (model_unavailable)
- args: the CLI's argument parser refused brigade's command line (cli_incompatible)
- extra / unknown (claude): an error result labelled `success`, as older builds print
  it: a plan limit with its reset time; a failure whose text names nothing
- maxturns: the seat hit its own turn limit
- echo: a normal answer that talks about 429, 401 and rate limits
- empty: exit 0 without an answer
- plain: a failure of the agent itself (not the apparatus)
"""

from __future__ import annotations

import json
from typing import Any

ANSWER = "All good."
ECHO_ANSWER = (
    "HTTP 429 means the rate limit was hit and 401 means the API key was refused; "
    "retry after the rate limit resets."
)
# a prompt that talks about faults and must still be answered normally
ECHO_PROMPT = "SCENARIO:echo Explain HTTP 429, 401 and rate limit errors."
# the clock the unit tests read reset times against (2026-10-07T10:00:00Z)
NOW = 1791367200.0

Sample = tuple[int, str, str]


def jsonl(*events: object) -> str:
    return "".join(json.dumps(event, ensure_ascii=False) + "\n" for event in events)


# -- Claude Code (`claude -p --output-format stream-json --verbose`) -------------------

CLAUDE_SESSION = "c33cee68-7fa0-4926-b32e-c1ad457673ea"


def claude_init(model: str = "claude-sonnet-4-6") -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "init",
        "cwd": "/work",
        "session_id": CLAUDE_SESSION,
        "tools": ["Read", "Grep", "Glob"],
        "mcp_servers": [],
        "model": model,
        "permissionMode": "default",
        "apiKeySource": "none",
        "claude_code_version": "2.1.290",
        "uuid": "007d2ee8-ab4c-44a2-8c96-f66019e67d42",
    }


def claude_assistant(content: list[dict[str, Any]], model: str = "claude-sonnet-4-6") -> dict:
    return {
        "type": "assistant",
        "message": {
            "model": model,
            "id": "msg_011Cf5q1KwkiETGUwp97qQ2n",
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": None,
            "usage": {
                "input_tokens": 1,
                "cache_creation_input_tokens": 10166,
                "cache_read_input_tokens": 0,
                "output_tokens": 2,
            },
        },
        "parent_tool_use_id": None,
        "session_id": CLAUDE_SESSION,
        "uuid": "13a12ab0-5d3c-4a63-9d0e-54d7a3f1c2b1",
    }


def claude_api_error(text: str, label: str) -> dict[str, Any]:
    """The synthetic assistant message Claude Code writes for a failed API call."""
    return {
        "type": "assistant",
        "message": {
            "id": "5ed98bd8-dd4f-45cd-a7c5-ee48a0133660",
            "model": "<synthetic>",
            "role": "assistant",
            "stop_reason": "stop_sequence",
            "stop_sequence": "",
            "type": "message",
            "content": [{"type": "text", "text": text}],
        },
        "parent_tool_use_id": None,
        "session_id": CLAUDE_SESSION,
        "error": label,
        "is_api_error_message": True,
    }


def claude_result(result: str | None, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "api_error_status": None,
        "duration_ms": 2118,
        "duration_api_ms": 3091,
        "num_turns": 1,
        "stop_reason": "end_turn",
        "session_id": CLAUDE_SESSION,
        "total_cost_usd": 0,
        "permission_denials": [],
        "terminal_reason": "completed",
        "uuid": "cf354c70-9f45-4d4c-9192-c87b5149b7bd",
    }
    if result is not None:
        doc["result"] = result
    doc.update(fields)
    return doc


# The run's figures, from a real result line (claude 2.1.195): the main model and
# the background model Claude Code uses for titles.
CLAUDE_MODEL_USAGE = {
    "claude-haiku-4-5-20251001": {
        "inputTokens": 504,
        "outputTokens": 11,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0,
        "webSearchRequests": 0,
        "costUSD": 0.000559,
        "contextWindow": 200000,
        "maxOutputTokens": 32000,
    },
    "claude-sonnet-4-6": {
        "inputTokens": 2,
        "outputTokens": 4,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 20333,
        "webSearchRequests": 0,
        "costUSD": 0.12206399999999999,
        "contextWindow": 200000,
        "maxOutputTokens": 32000,
    },
}
CLAUDE_USAGE = {
    "input_tokens": 2,
    "cache_creation_input_tokens": 20333,
    "cache_read_input_tokens": 0,
    "output_tokens": 4,
    "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
    "service_tier": "standard",
    "cache_creation": {"ephemeral_1h_input_tokens": 20333, "ephemeral_5m_input_tokens": 0},
}


def claude_answer(text: str) -> str:
    return jsonl(
        claude_init(),
        claude_assistant(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_01Mo",
                    "name": "Read",
                    "input": {"file_path": "/work/README.md"},
                }
            ]
        ),
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"tool_use_id": "toolu_01Mo", "type": "tool_result", "content": "1\t# demo\n"}
                ],
            },
            "parent_tool_use_id": None,
            "session_id": CLAUDE_SESSION,
            "tool_use_result": {"type": "text", "file": {"filePath": "/work/README.md"}},
        },
        claude_assistant([{"type": "text", "text": text}]),
        {
            "type": "rate_limit_event",
            "uuid": "363068be-3f6e-4c17-9e8e-0ab9a1f6c0c2",
            "session_id": CLAUDE_SESSION,
        },
        claude_result(
            text,
            num_turns=2,
            total_cost_usd=0.122623,
            usage=CLAUDE_USAGE,
            modelUsage=CLAUDE_MODEL_USAGE,
        ),
    )


def claude_failure(text: str, label: str, status: int | None, *before: dict) -> str:
    return jsonl(
        claude_init(),
        *before,
        claude_api_error(text, label),
        claude_result(
            text,
            is_error=True,
            api_error_status=status,
            terminal_reason="api_error",
            stop_reason="stop_sequence",
        ),
    )


def claude_model_text(model: str) -> str:
    return (
        f"There's an issue with the selected model ({model}). It may not exist or you may not "
        "have access to it. Use --model to pick a different model."
    )


def claude_model_refused(model: str) -> str:
    """What 2.1.38 printed for a model the API answered 404 not_found_error for."""
    text = claude_model_text(model)
    result = claude_result(text, is_error=True, stop_reason="stop_sequence")
    del result["api_error_status"], result["terminal_reason"]
    return jsonl(claude_init(), claude_api_error(text, "invalid_request"), result)


def claude_unlabelled(text: str) -> str:
    """A failed request as builds before the error labels print it (1.0.30 captured)."""
    synthetic = claude_api_error(text, "unknown")
    del synthetic["error"], synthetic["is_api_error_message"]
    result = claude_result(text, is_error=True, stop_reason="stop_sequence")
    for key in ("api_error_status", "terminal_reason", "permission_denials", "uuid"):
        del result[key]
    zero = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    result["usage"] = {**zero, "output_tokens": 0, "server_tool_use": {"web_search_requests": 0}}
    return jsonl(claude_init(), synthetic, result)


def claude_retry(status: int, error: str, attempt: int) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "api_retry",
        "attempt": attempt,
        "max_retries": 2,
        "retry_delay_ms": 2000,
        "error_status": status,
        "error": error,
        "session_id": CLAUDE_SESSION,
    }


CLAUDE_RESETS_AT = 1791377424  # 2h50m24s after NOW
CLAUDE: dict[str, Sample] = {
    "success": (0, claude_answer(ANSWER), ""),
    # recorded: claude signed out (weave-fleet not-logged-in.jsonl)
    "auth": (
        1,
        claude_failure("Not logged in · Please run /login", "authentication_failed", None),
        "",
    ),
    # recorded: a claude.ai plan limit (usage-limit.jsonl)
    "quota": (
        1,
        claude_failure(
            "You've hit your session limit · resets 3:43am (UTC)",
            "rate_limit",
            429,
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": CLAUDE_RESETS_AT,
                    "rateLimitType": "five_hour",
                    "overageStatus": "rejected",
                    "isUsingOverage": False,
                },
                "session_id": CLAUDE_SESSION,
            },
        ),
        "",
    ),
    # recorded: a plain 429 after the CLI's own retries (rate-limit.jsonl)
    "rate": (
        1,
        claude_failure(
            "API Error: Server is temporarily limiting requests (not your usage limit) · "
            "Number of request tokens has exceeded your per-minute rate limit",
            "rate_limit",
            429,
            claude_retry(429, "rate_limit", 1),
            claude_retry(429, "rate_limit", 2),
            {
                "type": "rate_limit_event",
                "rate_limit_info": {"status": "rejected", "isUsingOverage": False},
                "session_id": CLAUDE_SESSION,
            },
        ),
        "",
    ),
    # recorded: overloaded.jsonl
    "overloaded": (
        1,
        claude_failure(
            "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try "
            "again in a moment. If it persists, check your inference gateway (127.0.0.1:5421).",
            "server_error",
            529,
            claude_retry(529, "overloaded", 1),
            claude_retry(529, "overloaded", 2),
        ),
        "",
    ),
    "5xx": (1, claude_failure("API Error: 500 Internal server error", "server_error", 500), ""),
    # the final shape of a dropped connection was not captured: label unknown, no status
    "drop": (1, claude_failure("API Error: Connection error.", "unknown", None), ""),
    # recorded: max-turns.jsonl (no `result` key)
    "maxturns": (
        1,
        jsonl(
            claude_init("claude-haiku-4-5-20251001"),
            claude_assistant(
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_012v",
                        "name": "Read",
                        "input": {"file_path": "/work/note.txt"},
                    }
                ],
                "claude-haiku-4-5-20251001",
            ),
            claude_result(
                None,
                subtype="error_max_turns",
                is_error=True,
                num_turns=2,
                stop_reason="tool_use",
                terminal_reason="max_turns",
                errors=["Reached maximum number of turns (1)"],
                total_cost_usd=0.0115208,
                usage={
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 3118,
                    "cache_read_input_tokens": 16248,
                    "output_tokens": 532,
                    "output_tokens_details": {"thinking_tokens": 346},
                },
            ),
        ),
        "",
    ),
    # the shape 2.1.38 prints for a model the API does not know (404 not_found_error):
    # label invalid_request, no api_error_status (tests/data/cli_samples/claude-2.1.38-404)
    "model": (1, claude_model_refused("m-1"), ""),
    # the parser of a build older than --effort (tests/data/cli_samples/claude-1.0.30-effort)
    "args": (1, "", "error: unknown option '--effort'\n"),
    # a build that labels nothing (the 1.0.30 shape: a synthetic message without `error`,
    # a result `success` with is_error, no status, no terminal_reason), with the plan
    # limit users paste (anthropics/claude-code#42654, #22603: "resets Apr 24, 4am (zone)")
    "extra": (
        1,
        claude_unlabelled("You're out of extra usage · resets Apr 24, 4am (Asia/Tokyo)"),
        "",
    ),
    "unknown": (1, claude_unlabelled("API Error: Request was aborted."), ""),
    "echo": (0, claude_answer(ECHO_ANSWER), ""),
    "empty": (0, jsonl(claude_init(), claude_result("", num_turns=1)), ""),
    # recorded (claude 2.1.268): a run the CLI itself could not carry out
    "plain": (
        1,
        jsonl(
            claude_result(
                None,
                subtype="error_during_execution",
                is_error=True,
                num_turns=0,
                errors=["No conversation found with session ID: 4f1c9b2e"],
            )
        ),
        "No conversation found with session ID: 4f1c9b2e\n",
    ),
}


# -- Codex (`codex exec --json`) -------------------------------------------------------

CODEX_THREAD = "019dcc58-bb7f-7b03-b82d-ed433f201b22"


def codex_usage(inputs: int, cached: int, output: int, reasoning: int) -> dict[str, int]:
    return {
        "input_tokens": inputs,
        "cached_input_tokens": cached,
        "cache_write_input_tokens": 0,
        "output_tokens": output,
        "reasoning_output_tokens": reasoning,
    }


def codex_answer(text: str) -> str:
    return jsonl(
        {"type": "thread.started", "thread_id": CODEX_THREAD},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "reasoning", "text": "**Checking the repo layout**"},
        },
        {
            "type": "item.started",
            "item": {
                "id": "item_1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "README.md\nsrc\n",
                "exit_code": 0,
                "status": "completed",
            },
        },
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": text}},
        {"type": "turn.completed", "usage": codex_usage(52580, 24832, 417, 128)},
    )


def codex_turns() -> str:
    """A thread with two turns: usage is the thread's running total after each."""
    return jsonl(
        {"type": "thread.started", "thread_id": CODEX_THREAD},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "agent_message", "text": "Looking."},
        },
        {"type": "turn.completed", "usage": codex_usage(16504, 0, 210, 64)},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {"id": "item_1", "type": "agent_message", "text": ANSWER},
        },
        {"type": "turn.completed", "usage": codex_usage(85681, 16384, 530, 192)},
    )


def codex_failure(message: str, *notices: str) -> str:
    return jsonl(
        {"type": "thread.started", "thread_id": CODEX_THREAD},
        {"type": "turn.started"},
        *({"type": "error", "message": notice} for notice in notices),
        {"type": "error", "message": message},
        {"type": "turn.failed", "error": {"message": message}},
    )


CODEX_AUTH = (
    'unexpected status 401 Unauthorized: {"detail":"Unauthorized"}, url: '
    "https://chatgpt.com/backend-api/codex/responses, cf-ray: 98a1c2e3f4b5a6c7-LIS, "
    "request id: 5f1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
)
CODEX_QUOTA = (
    "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase "
    "more credits or try again at Apr 28th, 2026 10:03 PM."
)
CODEX: dict[str, Sample] = {
    "success": (0, codex_answer(ANSWER), ""),
    "turns": (0, codex_turns(), ""),
    # a 401 is retried first ("Reconnecting... n/5"), then the turn fails
    "auth": (
        1,
        codex_failure(CODEX_AUTH, *(f"Reconnecting... {n}/5 ({CODEX_AUTH})" for n in (1, 2))),
        "",
    ),
    "quota": (1, codex_failure(CODEX_QUOTA), ""),
    "rate": (
        1,
        codex_failure(
            "exceeded retry limit, last status: 429 Too Many Requests, "
            "request id: 8c2f0a7e-1b3d-4e5f-9a6b-7c8d9e0f1a2b"
        ),
        "",
    ),
    "overloaded": (
        1,
        codex_failure("Selected model is at capacity. Please try a different model."),
        "",
    ),
    "5xx": (
        1,
        codex_failure(
            "We're currently experiencing high demand, which may cause temporary errors."
        ),
        "",
    ),
    "drop": (
        1,
        codex_failure(
            "stream disconnected before completion: error sending request for url "
            "(https://chatgpt.com/backend-api/codex/responses)",
            "Reconnecting... 1/5 (stream disconnected before completion: error sending request)",
        ),
        "",
    ),
    # a model the account cannot use, wrapped in the dropped stream it failed with
    "model": (
        1,
        codex_failure(
            "stream disconnected before completion: The model `gpt-9` does not exist or you "
            "do not have access to it."
        ),
        "",
    ),
    "echo": (0, codex_answer(ECHO_ANSWER), ""),
    "empty": (0, codex_answer(""), ""),
    # the agent's own failure: its context ran out
    "plain": (
        1,
        codex_failure(
            "Codex ran out of room in the model's context window. Start a new thread or clear "
            "earlier history before retrying."
        ),
        "",
    ),
}


# -- Cursor Agent (`cursor-agent -p --output-format stream-json`) ------------------------

CURSOR_SESSION = "c6b62c6f-7ead-4fd6-9922-e952131177ff"


def cursor_answer(text: str, *before: str, deltas: bool = False) -> str:
    """A run whose last assistant message is text, after the messages `before` (the result
    joins them all with no separator, as cursor-agent prints it); with `deltas`, the last
    message also streams in pieces first (a `timestamp_ms`, no `model_call_id`), as
    partial output prints it."""
    base = {"session_id": CURSOR_SESSION}
    pieces = [
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": piece}]},
            **base,
            "timestamp_ms": 1789467005400 + n,
        }
        for n, piece in enumerate(
            (text[: len(text) // 2], text[len(text) // 2 :]) if deltas else ()
        )
    ]
    said = [
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": line}]},
            **base,
        }
        for line in before
    ]
    return jsonl(
        {
            "type": "system",
            "subtype": "init",
            "apiKeySource": "login",
            "cwd": "/work",
            "model": "Claude 4 Sonnet",
            "permissionMode": "default",
            **base,
        },
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": "(prompt)"}]},
            **base,
        },
        # its reasoning, in pieces, with or without partial output (cursor-2026.09.10-ok)
        {"type": "thinking", "subtype": "delta", "text": "Reading the ", **base, "timestamp_ms": 1},
        {"type": "thinking", "subtype": "delta", "text": "README.", **base, "timestamp_ms": 2},
        {"type": "thinking", "subtype": "completed", **base, "timestamp_ms": 3},
        {
            "type": "tool_call",
            "subtype": "started",
            "call_id": "toolu_vrtx_01NnjaR886UcE8whekg2MGJd",
            "tool_call": {"readToolCall": {"args": {"path": "README.md"}}},
            **base,
        },
        {
            "type": "tool_call",
            "subtype": "completed",
            "call_id": "toolu_vrtx_01NnjaR886UcE8whekg2MGJd",
            "tool_call": {
                "readToolCall": {
                    "args": {"path": "README.md"},
                    "result": {
                        "success": {
                            "content": "# demo\n",
                            "isEmpty": False,
                            "exceededLimit": False,
                            "totalLines": 1,
                            "totalChars": 7,
                        }
                    },
                }
            },
            **base,
        },
        *said,
        *pieces,
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            **base,
        },
        {
            "type": "result",
            "subtype": "success",
            "duration_ms": 5234,
            "duration_api_ms": 5234,
            "is_error": False,
            # json mode and the result event join every assistant text of the run
            "result": "".join((*before, text)),
            "session_id": CURSOR_SESSION,
            "request_id": "10e11780-df2f-45dc-a1ff-4540af32e9c0",
            "usage": {
                "inputTokens": 100,
                "outputTokens": 20,
                "cacheReadTokens": 80,
                "cacheWriteTokens": 5,
            },
        },
    )


CURSOR: dict[str, Sample] = {
    "success": (0, cursor_answer(ANSWER), ""),
    # several messages, as users paste the joined result ("...the fileBased on the
    # README, I'll...Done!"): the answer is the last one
    "messages": (
        0,
        cursor_answer(
            ANSWER, "I'll read the README file", "Based on the README, I'll check it.", deltas=True
        ),
        "",
    ),
    # recorded wording; cursor prints no JSON on a failure
    "auth": (
        1,
        "",
        "Error: Authentication required. Please run 'agent login' first, or set "
        "CURSOR_API_KEY environment variable.\n",
    ),
    "quota": (
        1,
        "",
        "Error: You've hit your usage limit\n"
        "  Get Cursor Pro for more Agent usage, unlimited Tab, and more.\n"
        "  fallbackModel: \n"
        "  spendLimitHit: false\n"
        "  chatMessage: *You've hit your free requests limit. Your usage limits will reset when "
        "your monthly cycle ends on 11/17/2026.*\n"
        "  spendLimits: [50,100,200]\n",
    ),
    # cursor's wording of these was not captured; the shape (an error on stderr, exit 1) is
    # documented
    "rate": (1, "", "Error: You've hit your rate limit on this model. Please try again later.\n"),
    "overloaded": (1, "", "Error: [unavailable] The model is overloaded. Please try again.\n"),
    "5xx": (1, "", "Error: [internal] Internal server error\n"),
    "drop": (1, "", "Error: ConnectError: [aborted] read ECONNRESET\n"),
    "echo": (0, cursor_answer(ECHO_ANSWER), ""),
    "empty": (0, cursor_answer(""), ""),
    # cursor-agent 2026.09.10 on a named model a free plan may not use (cursor-2026.09.10-model):
    # init and user, then the stream stops; the refusal on stderr
    "model": (
        1,
        "".join(cursor_answer(ANSWER).splitlines(keepends=True)[:2]),
        "ActionRequiredError: Named models unavailable Free plans can only use Auto. Switch to "
        "Auto or upgrade plans to continue.\n",
    ),
}


# -- Gemini CLI (`gemini --output-format stream-json`) ----------------------------------

GEMINI_SESSION = "3b2c1f0e-8a9d-4c6b-b2e1-7f0a5d3c9e84"
TS = "2026-10-07T10:00:00.000Z"


def gemini_stats(total: int, prompt: int, output: int, cached: int) -> dict[str, Any]:
    main = {
        "total_tokens": total,
        "input_tokens": prompt,
        "output_tokens": output,
        "cached": cached,
        "input": prompt - cached,
    }
    utility = {
        "total_tokens": 531,
        "input_tokens": 520,
        "output_tokens": 11,
        "cached": 0,
        "input": 520,
    }
    return {
        "total_tokens": total + 531,
        "input_tokens": prompt + 520,
        "output_tokens": output + 11,
        "cached": cached,
        "input": prompt - cached + 520,
        "duration_ms": 15234,
        "tool_calls": 1,
        "models": {"gemini-2.5-pro": main, "gemini-2.5-flash-lite": utility},
    }


def gemini_start() -> list[dict[str, Any]]:
    return [
        {"type": "init", "timestamp": TS, "session_id": GEMINI_SESSION, "model": "auto-gemini-2.5"},
        {"type": "message", "timestamp": TS, "role": "user", "content": "(prompt)"},
    ]


def gemini_answer(text: str) -> str:
    halves = [text[: len(text) // 2], text[len(text) // 2 :]] if text else []
    return jsonl(
        *gemini_start(),
        {
            "type": "message",
            "timestamp": TS,
            "role": "assistant",
            "content": "I'll look at the files.",
            "delta": True,
        },
        {
            "type": "tool_use",
            "timestamp": TS,
            "tool_name": "list_directory",
            "tool_id": "list_directory__abc123",
            "parameters": {"dir_path": "."},
        },
        {
            "type": "tool_result",
            "timestamp": TS,
            "tool_id": "list_directory__abc123",
            "status": "success",
            "output": "README.md\nsrc",
        },
        *(
            {
                "type": "message",
                "timestamp": TS,
                "role": "assistant",
                "content": half,
                "delta": True,
            }
            for half in halves
        ),
        {
            "type": "result",
            "timestamp": TS,
            "status": "success",
            "stats": gemini_stats(9450, 8800, 320, 4096),
        },
    )


def gemini_error(message: str, error_type: str = "unknown") -> str:
    zero = {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "input": 0}
    return jsonl(
        *gemini_start(),
        {
            "type": "result",
            "timestamp": TS,
            "status": "error",
            "error": {"type": error_type, "message": message},
            "stats": {**zero, "duration_ms": 0, "tool_calls": 0, "models": {}},
        },
    )


GEMINI_RATE_SUFFIX = (
    "\nPlease wait and try again later. To increase your limits, request a quota increase "
    "through AI Studio, or switch to another /auth method"
)
GEMINI: dict[str, Sample] = {
    "success": (0, gemini_answer(ANSWER), ""),
    # no auth method: a plain log line on stderr and exit 41 (stream-json prints nothing)
    "auth": (
        41,
        "",
        "Please set an Auth method in your /home/user/.gemini/settings.json or specify one of "
        "the following environment variables before running: GEMINI_API_KEY, "
        "GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA\n",
    ),
    # an API error exits with its HTTP status, truncated to a byte: 429 exits 173
    "quota": (
        173,
        gemini_error(
            "[API Error: Quota exceeded for quota metric 'Gemini 2.5 Pro Requests' and limit "
            "'Gemini 2.5 Pro Requests per day per user per tier' of service "
            "'generativelanguage.googleapis.com'.]" + GEMINI_RATE_SUFFIX
        ),
        "",
    ),
    "rate": (
        173,
        gemini_error(
            "[API Error: You exceeded your current quota, please check your plan and billing "
            "details. For more information on this error, head to: "
            "https://ai.google.dev/gemini-api/docs/rate-limits.\nSuggested retry after 34s.]"
            + GEMINI_RATE_SUFFIX
        ),
        "",
    ),
    "overloaded": (
        247,
        gemini_error("[API Error: The model is overloaded. Please try again later.]"),
        "",
    ),
    "5xx": (244, gemini_error("[API Error: Internal error encountered.]"), ""),
    # as 0.61.0 printed a 404 for the model (tests/data/cli_samples/gemini-0.61.0-404)
    "model": (
        1,
        gemini_error(
            "[API Error: models/m-1 is not found for API version v1beta, or is not supported "
            "for generateContent. Call ListModels to see the list of available models and their "
            "supported methods.]"
        ),
        "",
    ),
    "drop": (1, gemini_error("[API Error: exception TypeError: fetch failed sending request]"), ""),
    "maxturns": (
        53,
        gemini_error(
            "Reached max session turns for this session. Increase the number of turns by "
            "specifying maxSessionTurns in settings.json.",
            "FatalTurnLimitedError",
        ),
        "",
    ),
    "echo": (0, gemini_answer(ECHO_ANSWER), ""),
    "empty": (0, gemini_answer(""), ""),
    "plain": (
        42,
        gemini_error("Exiting due to an error processing the @ command.", "FatalInputError"),
        "",
    ),
}


# -- Qwen Code (`qwen --output-format json`) --------------------------------------------

QWEN_SESSION = "s1"


def qwen_messages(text: str, *, usage: bool = True) -> list[dict[str, Any]]:
    base = {"session_id": QWEN_SESSION, "parent_tool_use_id": None}
    messages: list[dict[str, Any]] = [
        {
            "type": "system",
            "subtype": "session_start",
            "uuid": "u0",
            "session_id": QWEN_SESSION,
            "cwd": "/work",
            "tools": ["run_shell_command", "read_file", "edit"],
            "model": "qwen3-coder-plus",
            "permission_mode": "default",
            "qwen_code_version": "0.25.0",
        },
    ]
    if usage:
        messages += [
            {
                "type": "assistant",
                "uuid": "u1",
                **base,
                "message": {
                    "id": "u1",
                    "type": "message",
                    "role": "assistant",
                    "model": "qwen3-coder-plus",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "call_1",
                            "name": "run_shell_command",
                            "input": {"command": "ls"},
                        }
                    ],
                    "stop_reason": "tool_use",
                    "usage": {
                        "input_tokens": 8123,
                        "output_tokens": 40,
                        "cache_read_input_tokens": 6000,
                        "total_tokens": 8163,
                    },
                },
            },
            {
                "type": "user",
                "uuid": "u2",
                **base,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_1",
                            "is_error": False,
                            "content": "README.md",
                        }
                    ],
                },
            },
        ]
    messages.append(
        {
            "type": "assistant",
            "uuid": "u3",
            **base,
            "message": {
                "id": "u3",
                "type": "message",
                "role": "assistant",
                "model": "qwen3-coder-plus",
                "content": [{"type": "text", "text": text}] if text else [],
                "stop_reason": None,
                "usage": {"input_tokens": 8200, "output_tokens": 6, "total_tokens": 8206},
            },
        }
    )
    return messages


def qwen_result(text: str, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "uuid": "u4",
        "session_id": QWEN_SESSION,
        "is_error": False,
        "duration_ms": 5400,
        "duration_api_ms": 4100,
        "num_turns": 2,
        "result": text,
        "usage": {
            "input_tokens": 16323,
            "output_tokens": 46,
            "cache_read_input_tokens": 6000,
            "total_tokens": 16369,
        },
        "permission_denials": [],
        "stats": {
            "models": {
                "qwen3-coder-plus": {
                    "api": {"totalRequests": 2, "totalErrors": 0, "totalLatencyMs": 4100},
                    "tokens": {
                        "input": 10323,
                        "prompt": 16323,
                        "candidates": 46,
                        "total": 16489,
                        "cached": 6000,
                        "thoughts": 120,
                        "tool": 0,
                    },
                }
            },
            "tools": {"totalCalls": 1, "totalSuccess": 1, "totalFail": 0},
            "files": {"totalLinesAdded": 0, "totalLinesRemoved": 0},
        },
    }
    doc.update(fields)
    return doc


def qwen_answer(text: str) -> str:
    return json.dumps([*qwen_messages(text), qwen_result(text)])


def qwen_api_error(message: str) -> str:
    """Qwen Code before its error fix: the provider error as the turn's text, exit 0."""
    text = f"[API Error: {message}]"
    zero = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    return json.dumps(
        [
            *qwen_messages(text, usage=False),
            qwen_result(text, num_turns=1, usage=zero, stats={"models": {}}),
        ]
    )


QWEN: dict[str, Sample] = {
    "success": (0, qwen_answer(ANSWER), ""),
    "auth": (0, qwen_api_error("401 Incorrect API key provided: sk-abc***xyz."), ""),
    "quota": (
        0,
        qwen_api_error(
            "429 You exceeded your current quota, please check your plan and billing details."
        ),
        "",
    ),
    "rate": (0, qwen_api_error("429 Rate limit reached for requests. Please retry in 20s."), ""),
    "overloaded": (
        0,
        qwen_api_error("503 The engine is currently overloaded, please try again later"),
        "",
    ),
    "5xx": (0, qwen_api_error("500 The server had an error while processing your request."), ""),
    "drop": (0, qwen_api_error("Connection error."), ""),
    # as 0.7.1 printed it (tests/data/cli_samples/qwen-0.7.1-404)
    "model": (
        0,
        qwen_api_error("404 The model `m-1` does not exist or you do not have access to it."),
        "",
    ),
    # the turn limit exits 53 from inside the loop: no array is printed
    "maxturns": (
        53,
        "",
        json.dumps(
            {
                "error": {
                    "type": "FatalTurnLimitedError",
                    "message": "Reached max session turns for this session. Increase the number "
                    "of turns by specifying maxSessionTurns in settings.json.",
                    "code": 53,
                }
            },
            indent=2,
        )
        + "\n",
    ),
    "echo": (0, qwen_answer(ECHO_ANSWER), ""),
    "empty": (0, qwen_answer(""), ""),
    "plain": (
        1,
        json.dumps(
            [
                *qwen_messages("", usage=False),
                qwen_result(
                    "",
                    subtype="error_during_execution",
                    is_error=True,
                    error={"message": "Tool execution failed: run_shell_command was denied"},
                ),
            ]
        ),
        "",
    ),
}


# -- opencode (`opencode run --format json`) --------------------------------------------

OC_SESSION = "ses_fe64248c1ffeT4xyThvSemc697"


def oc(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "timestamp": 1787138268642, "sessionID": OC_SESSION, **data}


def oc_step_finish(reason: str, tokens: dict[str, Any], cost: float) -> dict[str, Any]:
    part = {
        "id": "prt_019bddf49001",
        "reason": reason,
        "messageID": "msg_019bdb8fc001",
        "sessionID": OC_SESSION,
        "type": "step-finish",
        "tokens": tokens,
        "cost": cost,
    }
    return oc("step_finish", part=part)


def oc_text(text: str) -> dict[str, Any]:
    return oc(
        "text",
        part={
            "id": "prt_2",
            "sessionID": OC_SESSION,
            "messageID": "msg_2",
            "type": "text",
            "text": text,
        },
    )


def opencode_answer(text: str) -> str:
    return jsonl(
        oc("step_start", part={"id": "prt_0", "sessionID": OC_SESSION, "type": "step-start"}),
        *([oc_text("Looking.")] if text else []),
        oc(
            "tool_use",
            part={
                "type": "tool",
                "tool": "bash",
                "callID": "tool-a04824fda33d",
                "state": {
                    "status": "completed",
                    "input": {"command": "ls -la"},
                    "output": "total 15\nREADME.md\n",
                    "title": "ls -la",
                },
                "id": "prt_019bddd03001",
                "sessionID": OC_SESSION,
                "messageID": "msg_019bdb8fc001",
            },
        ),
        oc_step_finish(
            "tool-calls",
            {
                "total": 8279,
                "input": 237,
                "output": 39,
                "reasoning": 67,
                "cache": {"write": 0, "read": 7936},
            },
            0.0031,
        ),
        oc("step_start", part={"id": "prt_3", "sessionID": OC_SESSION, "type": "step-start"}),
        *([oc_text(text)] if text else []),
        oc_step_finish(
            "stop",
            {
                "total": 8400,
                "input": 120,
                "output": 9,
                "reasoning": 0,
                "cache": {"write": 128, "read": 8143},
            },
            0.0012,
        ),
    )


def opencode_error(error: dict[str, Any]) -> str:
    return jsonl(
        oc("step_start", part={"id": "prt_0", "sessionID": OC_SESSION, "type": "step-start"}),
        oc("error", error=error),
    )


def oc_api_error(message: str, status: int, retryable: bool, **headers: str) -> dict[str, Any]:
    data: dict[str, Any] = {"message": message, "statusCode": status, "isRetryable": retryable}
    if headers:
        data["responseHeaders"] = headers
    return {"name": "APIError", "data": data}


OPENCODE: dict[str, Sample] = {
    "success": (0, opencode_answer(ANSWER), ""),
    "auth": (
        1,
        opencode_error(
            {
                "name": "ProviderAuthError",
                "data": {"providerID": "anthropic", "message": "invalid x-api-key"},
            }
        ),
        "",
    ),
    "quota": (1, opencode_error(oc_api_error("Monthly usage limit reached", 429, False)), ""),
    "rate": (
        1,
        opencode_error(oc_api_error("Rate limit exceeded", 429, True, **{"retry-after": "30"})),
        "",
    ),
    "overloaded": (1, opencode_error(oc_api_error("Overloaded", 529, True)), ""),
    "5xx": (1, opencode_error(oc_api_error("Internal server error", 500, True)), ""),
    # the 2.x runner's error object (issue anomalyco/opencode#50062)
    "drop": (
        1,
        opencode_error(
            {
                "type": "provider.transport",
                "message": "ECONNRESET: The socket connection was closed unexpectedly",
            }
        ),
        "",
    ),
    "echo": (0, opencode_answer(ECHO_ANSWER), ""),
    "empty": (0, opencode_answer(""), ""),
    "plain": (1, "", "Error: Session not found\n"),
}


# -- aider (`aider --message ... --no-pretty --no-stream`) -------------------------------

AIDER_BANNER = (
    "Aider v0.86.2\n"
    "Main model: anthropic/claude-sonnet-4-20250514 with ask edit format, infinite output\n"
    "Weak model: anthropic/claude-3-5-haiku-20241022\n"
    "Git repo: .git with 12 files\n"
    "Repo-map: using 4096 tokens, auto refresh\n"
    "\n"
)


def aider_answer(text: str) -> str:
    reply = (
        f"{text}\n" if text else "Empty response received from LLM. Check your provider account?\n"
    )
    return (
        AIDER_BANNER
        + reply
        + "\n"
        + "Tokens: 12k sent, 1.2k cache write, 2.4k cache hit, 345 received.\n"
        + "Cost: $0.05 message, $0.05 session.\n"
    )


def aider_error(*lines: str) -> str:
    return AIDER_BANNER + "".join(line + "\n" for line in lines) + "\n"


AIDER: dict[str, Sample] = {
    "success": (0, aider_answer(ANSWER), ""),
    # lines aider 0.86.2 prints before its banner (aider/main.py: analytics-disable set in
    # a config file; aider/io.py: TERM=dumb)
    "notices": (
        0,
        "Analytics have been permanently disabled.\n"
        "Detected dumb terminal, disabling fancy input and pretty output.\n" + aider_answer(ANSWER),
        "",
    ),
    # recorded (issue Aider-AI/aider#3802); aider exits 0 whatever happened
    "auth": (
        0,
        aider_error(
            "litellm.AuthenticationError: AuthenticationError: OpenrouterException - "
            '{"error":{"message":"No auth credentials found","code":401}}',
            "The API provider is not able to authenticate you. Check your API key.",
        ),
        "",
    ),
    "quota": (
        0,
        aider_error(
            'litellm.APIError: APIError: OpenrouterException - {"error":{"message":"Insufficient '
            'credits. Add more using https://openrouter.ai/settings/credits","code":402}}',
            "Insufficient credits with the API provider. Please add credits.",
        ),
        "",
    ),
    "rate": (
        0,
        aider_error(
            "litellm.RateLimitError: RateLimitError: AnthropicException - rate limit exceeded",
            "The API provider has rate limited you. Try again later or check your quotas.",
            "Retrying in 0.2 seconds...",
            "litellm.RateLimitError: RateLimitError: AnthropicException - rate limit exceeded",
            "The API provider has rate limited you. Try again later or check your quotas.",
        ),
        "",
    ),
    # as 0.86.2 printed it (tests/data/cli_samples/aider-0.86.2-anthropic-529)
    "overloaded": (
        0,
        aider_error(
            "litellm.InternalServerError: AnthropicError - "
            '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            "The API provider's servers are down or overloaded.",
        ),
        "",
    ),
    "5xx": (
        0,
        aider_error(
            "litellm.InternalServerError: OpenAIException - 500 Internal Server Error",
            "The API provider's servers are down or overloaded.",
        ),
        "",
    ),
    "drop": (
        0,
        # as 0.86.2 printed it (tests/data/cli_samples/aider-0.86.2-drop): litellm names a
        # dropped connection an InternalServerError
        aider_error(
            "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.",
            "The API provider's servers are down or overloaded.",
        ),
        "",
    ),
    # as 0.86.2 printed it (tests/data/cli_samples/aider-0.86.2-404)
    "model": (
        0,
        aider_error(
            "litellm.NotFoundError: OpenAIException - The model `m-1` does not exist or you do "
            "not have access to it.",
            "",
        ),
        "",
    ),
    "echo": (0, aider_answer(ECHO_ANSWER), ""),
    "empty": (0, aider_answer(""), ""),
    # argparse refusing an option this version does not have
    "args": (2, "", "aider: error: unrecognized arguments: --bogus\n"),
}
# what aider 0.86.2 says on stderr of every run past its argument parser, its stdin not a
# terminal, unless TERM=dumb turned its fancy input off (tests/data/cli_samples/aider-0.86.2-*)
AIDER_STDIN_WARNING = "Warning: Input is not a terminal (fd=0).\n"
AIDER = {
    case: (code, stdout, stderr or ("" if case in ("args", "notices") else AIDER_STDIN_WARNING))
    for case, (code, stdout, stderr) in AIDER.items()
}


# -- goose (`goose run --no-session --output-format json`) -------------------------------


def goose_message(role: str, *content: dict[str, Any], msg_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": msg_id,
        "role": role,
        "created": 1789551821,
        "content": list(content),
        "metadata": {"userVisible": True, "agentVisible": True},
    }
    if role == "assistant":
        message["metadata"]["inference"] = {
            "provider": "anthropic",
            "requestedModel": "claude-sonnet-4-5",
        }
    return message


def goose_output(
    *messages: dict[str, Any], status: str = "completed", usage: bool = True, zero: bool = False
) -> str:
    metadata: dict[str, Any] = {"total_tokens": None, "status": status}
    if zero:
        # a request the provider refused: goose's totals are zero, its cost 0.0 (1.50.1)
        counts = ("total_tokens", "input_tokens", "output_tokens", "cache_read_input_tokens")
        metadata = {**dict.fromkeys(counts, 0), "cache_write_input_tokens": 0}
        metadata.update(cost_usd=0.0, status=status)
    elif usage:
        metadata = {
            "total_tokens": 5357,
            "input_tokens": 5257,
            "output_tokens": 100,
            "cache_read_input_tokens": 4352,
            "cache_write_input_tokens": 0,
            "cost_usd": 0.0184,
            "status": status,
        }
    doc = {
        "messages": [goose_message("user", {"type": "text", "text": "(prompt)"}), *messages],
        "metadata": metadata,
    }
    return json.dumps(doc, indent=2) + "\n"


def goose_answer(text: str) -> str:
    return goose_output(
        goose_message(
            "assistant",
            *([{"type": "text", "text": "I'll list the files."}] if text else []),
            {
                "type": "toolRequest",
                "id": "call_1",
                "toolCall": {
                    "status": "success",
                    "value": {"name": "developer__shell", "arguments": {"command": "ls"}},
                },
            },
            msg_id="gen-1",
        ),
        goose_message(
            "user",
            {
                "type": "toolResponse",
                "id": "call_1",
                "toolResult": {
                    "status": "success",
                    "value": {
                        "content": [{"type": "text", "text": "README.md\nsrc\n"}],
                        "isError": False,
                    },
                },
            },
        ),
        goose_message(
            "assistant", *([{"type": "text", "text": text}] if text else []), msg_id="gen-2"
        ),
    )


def goose_own(text: str) -> dict[str, Any]:
    """A message goose wrote itself in its assistant's place (an error it turned into text):
    no inference, which goose records only for what its model wrote."""
    message = goose_message("assistant", {"type": "text", "text": text}, msg_id="gen-1")
    del message["metadata"]["inference"]
    return message


def goose_ran_into(error: str) -> str:
    text = (
        f"Ran into this error: {error}.\n\n"
        "Please retry if you think this is a transient or recoverable error."
    )
    return goose_output(goose_own(text))


GOOSE_401 = (
    "Ran into this error: Authentication error: Authentication failed for "
    "https://api.anthropic.com/v1/messages. Status: 401 Unauthorized."
)

GOOSE: dict[str, Sample] = {
    "success": (0, goose_answer(ANSWER), ""),
    # typed error content in goose's words (the recorded 1.50.1 run of the sample
    # goose-1.50.1-401); status error and exit 1 as upstream's headless run ends on a
    # typed error in the last message (session/mod.rs at 021a75e2: headless_run_error)
    "auth": (
        1,
        goose_output(
            {
                **goose_message(
                    "assistant", {"type": "error", "kind": "authentication", "message": GOOSE_401}
                ),
                # goose's own message, never the model's: no inference, hidden from the agent
                "metadata": {"userVisible": True, "agentVisible": False},
            },
            status="error",
            zero=True,
        ),
        f"Error: {GOOSE_401}\n",
    ),
    "quota": (
        1,
        goose_output(
            goose_message(
                "assistant",
                {
                    "type": "error",
                    "kind": "creditsExhausted",
                    "message": "Credits exhausted: Your credit balance is too low.",
                },
            ),
            status="error",
            usage=False,
        ),
        "Error: Credits exhausted: Your credit balance is too low.\n",
    ),
    # other provider errors become goose's own reply text and the run "completes" (exit 0)
    "rate": (
        0,
        goose_ran_into("Rate limit exceeded: Rate limit exceeded. Please retry after 12 seconds"),
        "",
    ),
    "overloaded": (
        0,
        goose_ran_into("Server error: Server error (529 <unknown status code>): Overloaded"),
        "",
    ),
    "5xx": (
        0,
        goose_ran_into(
            "Server error: Server error (500 Internal Server Error): Internal server error"
        ),
        "",
    ),
    "drop": (
        0,
        goose_output(
            goose_own(
                "Network error: Could not connect to api.anthropic.com — check your network "
                "connection and try again.\n\nPlease resend your message to try again."
            )
        ),
        "",
    ),
    # an error of the stream goose could not handle, as aaif-goose/goose's session code
    # prints it in json mode (crates/goose-cli/src/session/mod.rs at 021a75e2, output.rs
    # at 03843b36): its error on stderr (again from main), its notice on stdout before the
    # document, whose messages end with its own question in place of the prompt (the
    # error's own words are an example)
    "unknown": (
        1,
        "\n  error: The error above was an exception we were not able to handle.\n"
        "These errors are often related to connection or authentication\n"
        "We've removed the conversation up to the most recent user message\n"
        "- depending on the error you may be able to continue\n\n"
        + json.dumps(
            {
                "messages": [
                    goose_message(
                        "assistant",
                        {"type": "text", "text": "Yes \u2014 what would you like me to do?"},
                    )
                ],
                "metadata": {"total_tokens": None, "status": "error"},
            },
            indent=2,
        )
        + "\n",
        "Error: Stream decode error: unexpected end of stream\n"
        "Error: Stream decode error: unexpected end of stream\n",
    ),
    "echo": (0, goose_answer(ECHO_ANSWER), ""),
    "empty": (0, goose_answer(""), ""),
    "plain": (1, "", "Error: Failed to start extension developer: No such file or directory\n"),
}


# -- GitHub Copilot CLI (`copilot --output-format json`) --------------------------------

COPILOT_SESSION = "d60f7463-5d66-44b2-b8c4-60a0c0c36289"


def cp(kind: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "data": data,
        "id": "5f8f1a8c-2b1d",
        "timestamp": "2026-07-31T07:16:46.181Z",
        **extra,
    }


def copilot_result(code: int) -> dict[str, Any]:
    return {
        "type": "result",
        "timestamp": "2026-07-31T07:16:46.223Z",
        "sessionId": COPILOT_SESSION,
        "exitCode": code,
        "usage": {
            "premiumRequests": 1,
            "totalApiDurationMs": 2833,
            "sessionDurationMs": 8931,
            "codeChanges": {"linesAdded": 0, "linesRemoved": 0, "filesModified": []},
        },
    }


def copilot_answer(text: str) -> str:
    return jsonl(
        cp("session.tools_updated", {"model": "claude-sonnet-4.6"}, ephemeral=True),
        cp("user.message", {"content": "(prompt)"}),
        cp("assistant.turn_start", {"turnId": "0", "interactionId": "i1"}),
        cp(
            "assistant.message",
            {
                "messageId": "m0",
                "model": "claude-sonnet-4.6",
                "content": "",
                "toolRequests": [
                    {"toolCallId": "c1", "name": "view", "arguments": {"path": "README.md"}}
                ],
                "turnId": "0",
                "outputTokens": 41,
            },
        ),
        cp(
            "tool.execution_start",
            {
                "toolCallId": "c1",
                "toolName": "view",
                "arguments": {"path": "README.md"},
                "turnId": "0",
            },
        ),
        cp(
            "tool.execution_complete",
            {
                "toolCallId": "c1",
                "success": True,
                "result": {"content": "# demo", "detailedContent": "# demo"},
                "model": "claude-sonnet-4.6",
                "turnId": "0",
            },
        ),
        cp(
            "assistant.message",
            {
                "messageId": "m1",
                "model": "claude-sonnet-4.6",
                "content": text,
                "toolRequests": [],
                "turnId": "0",
                "outputTokens": 12,
            },
        ),
        cp("assistant.turn_end", {"turnId": "0"}),
        copilot_result(0),
    )


def copilot_error(data: dict[str, Any]) -> str:
    return jsonl(
        cp("user.message", {"content": "(prompt)"}),
        cp("assistant.turn_start", {"turnId": "0", "interactionId": "i1"}),
        cp("session.error", data),
        copilot_result(1),
    )


COPILOT: dict[str, Sample] = {
    "success": (0, copilot_answer(ANSWER), ""),
    # recorded (issue github/copilot-cli#3746): plain text on stderr, exit 1
    "auth": (
        1,
        "",
        "Error: No authentication information found.\n"
        "Copilot can be authenticated with GitHub using an OAuth Token or a Fine-Grained Personal "
        "Access Token.\n"
        "To authenticate, you can use any of the following methods:\n"
        "  • Start 'copilot' and run the '/login' command\n"
        "  • Set the COPILOT_GITHUB_TOKEN, GH_TOKEN, or GITHUB_TOKEN environment variable\n"
        "  • Run 'gh auth login' to authenticate with the GitHub CLI\n",
    ),
    "quota": (
        1,
        copilot_error(
            {
                "errorType": "quota",
                "message": "You have no quota",
                "statusCode": 402,
                "errorCode": "quota_exceeded",
            }
        ),
        "",
    ),
    "rate": (
        1,
        copilot_error(
            {
                "errorType": "rate_limit",
                "message": "Sorry, you've hit a rate limit that restricts the number of requests. "
                "Please try again in 30 seconds.",
                "statusCode": 429,
                "errorCode": "user_model_rate_limited",
            }
        ),
        "",
    ),
    "overloaded": (
        1,
        copilot_error(
            {
                "errorType": "query",
                "message": "503 Service Unavailable: the model is overloaded",
                "statusCode": 503,
            }
        ),
        "",
    ),
    "5xx": (
        1,
        copilot_error(
            {"errorType": "query", "message": "500 Internal Server Error", "statusCode": 500}
        ),
        "",
    ),
    "drop": (1, copilot_error({"errorType": "query", "message": "stream disconnected"}), ""),
    "echo": (0, copilot_answer(ECHO_ANSWER), ""),
    "empty": (0, copilot_answer(""), ""),
    "model": (1, "", 'Error: Model "__invalid__" from --model flag is not available.\n'),
}


# -- ollama (`ollama run --verbose MODEL`) -----------------------------------------------

OLLAMA_STATS = (
    "total duration:       1.02s\n"
    "load duration:        31.2ms\n"
    "prompt eval count:    12 token(s)\n"
    "prompt eval duration: 40ms\n"
    "prompt eval rate:     300.00 tokens/s\n"
    "eval count:           10 token(s)\n"
    "eval duration:        160ms\n"
    "eval rate:            62.50 tokens/s\n"
)
OLLAMA: dict[str, Sample] = {
    "success": (0, f"{ANSWER}\n\n", OLLAMA_STATS),
    # a cloud model without a sign-in: the notice on stdout, exit 0
    "auth": (
        0,
        "You need to be signed in to Ollama to run Cloud models.\n\n"
        "If your browser did not open, navigate to:\n"
        "    https://ollama.com/connect?name=host&key=abc\n\n",
        "",
    ),
    "rate": (1, "", "Error: 429 Too Many Requests: rate limit exceeded, please retry in 30s\n"),
    "overloaded": (
        1,
        "",
        "Error: 503 Service Unavailable: server overloaded, please try again later\n",
    ),
    "5xx": (
        1,
        "",
        "Error: 500 Internal Server Error: llama runner process has terminated: exit status 2\n",
    ),
    "drop": (1, "", "Error: could not connect to ollama server, run 'ollama serve' to start it\n"),
    "echo": (0, f"{ECHO_ANSWER}\n\n", OLLAMA_STATS),
    "empty": (0, "\n\n", OLLAMA_STATS),
    "model": (1, "", "Error: pull model manifest: file does not exist\n"),
}


SAMPLES: dict[str, dict[str, Sample]] = {
    "claude": CLAUDE,
    "codex": CODEX,
    "cursor": CURSOR,
    "gemini": GEMINI,
    "qwen": QWEN,
    "opencode": OPENCODE,
    "aider": AIDER,
    "goose": GOOSE,
    "copilot": COPILOT,
    "ollama": OLLAMA,
}
