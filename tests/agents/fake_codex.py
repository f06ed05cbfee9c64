"""A fake `codex` CLI: `--version`, `exec --json ... -` and a strict `app-server`.

Copied into a folder placed first on PATH under the name `codex`. It records
its argv in `<argv0>.argv`; the app-server also records every message it
received in `<argv0>.rpc` (JSONL); a hanging turn leaves its pid in
`<argv0>.hang.pid`. Words in the
prompt pick the behaviour (see SCENARIOS below).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

ME = sys.argv[0]


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def record(message: Any) -> None:
    with open(ME + ".rpc", "a") as handle:
        handle.write(json.dumps(message) + "\n")


def read_message() -> Any:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)  # the client closed the session
    message = json.loads(line)
    record(message)
    return message


THREAD = "019dcc58-bb7f-7b03-b82d-ed433f201b22"


def exec_mode() -> int:
    """`codex exec --json`: JSONL events as codex prints them."""
    prompt = sys.stdin.read()
    emit({"type": "thread.started", "thread_id": THREAD})
    emit({"type": "turn.started"})
    if "rate" in prompt:
        message = (
            "exceeded retry limit, last status: 429 Too Many Requests, "
            "request id: 8c2f0a7e-1b3d-4e5f-9a6b-7c8d9e0f1a2b"
        )
        emit({"type": "error", "message": message})
        emit({"type": "turn.failed", "error": {"message": message}})
        return 1
    item = {"id": "item_0", "type": "agent_message", "text": "hello from codex"}
    emit({"type": "item.completed", "item": item})
    usage = {
        "input_tokens": 52580,
        "cached_input_tokens": 24832,
        "cache_write_input_tokens": 0,
        "output_tokens": 417,
        "reasoning_output_tokens": 128,
    }
    emit({"type": "turn.completed", "usage": usage})
    return 0


SANDBOXES = {"read-only", "workspace-write", "danger-full-access"}
POLICIES = {"untrusted", "on-failure", "on-request", "never"}


def error(request_id: Any, code: int, message: str) -> None:
    emit({"id": request_id, "error": {"code": code, "message": message}})


def turn_done(thread: str, status: str, err: Any = None) -> None:
    turn = {"id": "turn_1", "status": status, "items": [], "error": err}
    emit({"method": "turn/completed", "params": {"threadId": thread, "turn": turn}})


def agent_message(text: str) -> None:
    item = {"type": "agentMessage", "id": "msg_1", "text": ""}
    emit({"method": "item/started", "params": {"item": item}})
    half = len(text) // 2
    for piece in (text[:half], text[half:]):
        emit({"method": "item/agentMessage/delta", "params": {"itemId": "msg_1", "delta": piece}})
    emit({"method": "item/completed", "params": {"item": {**item, "text": text}}})


def ask(method: str, params: dict[str, Any]) -> Any:
    """A server-initiated request; the client's answer."""
    emit({"method": method, "id": 900, "params": params})
    while True:
        message = read_message()
        if message.get("id") == 900 and "method" not in message:
            return message


def app_server() -> int:
    initialized = False
    handshake = False
    thread_params: dict[str, Any] | None = None
    while True:
        message = read_message()
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if "jsonrpc" in message:
            error(request_id, -32600, "unexpected jsonrpc member")
        elif method == "initialize":
            if handshake:
                error(request_id, -32600, "Already initialized")
                continue
            handshake = True
            if not params.get("clientInfo", {}).get("name"):
                error(request_id, -32602, "clientInfo.name is required")
                continue
            emit({"id": request_id, "result": {"userAgent": "fake_codex/0.0.1"}})
        elif method == "initialized" and request_id is None:
            initialized = True
        elif not initialized:
            error(request_id, -32600, "Not initialized")
        elif method == "thread/start":
            cwd = params.get("cwd")
            if params.get("sandbox") not in SANDBOXES:
                error(request_id, -32602, f"bad sandbox {params.get('sandbox')!r}")
            elif params.get("approvalPolicy") not in POLICIES:
                error(request_id, -32602, "bad approvalPolicy")
            elif not (isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd)):
                error(request_id, -32602, f"bad cwd {cwd!r}")
            else:
                thread_params = params
                thread = {"id": "thr_1", "preview": "", "modelProvider": "openai"}
                emit({"id": request_id, "result": {"thread": thread, "model": "gpt-fake"}})
                emit({"method": "thread/started", "params": {"thread": thread}})
        elif method == "turn/start":
            if thread_params is None or params.get("threadId") != "thr_1":
                error(request_id, -32600, "thread not found")
                continue
            texts = [i.get("text") for i in params.get("input", []) if i.get("type") == "text"]
            if len(texts) != 1 or not isinstance(texts[0], str):
                error(request_id, -32602, "input must hold one text item")
                continue
            run_turn(request_id, texts[0], thread_params, params)
        else:
            error(request_id, -32601, f"unknown method {method}")


def run_turn(
    request_id: Any, prompt: str, thread: dict[str, Any], turn_params: dict[str, Any]
) -> None:
    if "overloaded" in prompt:
        error(request_id, -32001, "Server overloaded; retry later.")
        return
    turn = {"id": "turn_1", "status": "inProgress", "items": [], "error": None}
    ids = {"threadId": "thr_1", "turnId": "turn_1"}
    emit({"id": request_id, "result": {"turn": turn}})
    emit({"method": "turn/started", "params": {"threadId": "thr_1", "turn": turn}})
    if "drop" in prompt:
        sys.stderr.write("fake codex: lost the connection to the model\n")
        os._exit(1)
    if "hang" in prompt:
        with open(ME + ".hang.pid", "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(600)
    if "usage" in prompt:
        err = {
            "message": "You've hit your usage limit. Try again later.",
            "codexErrorInfo": "usageLimitExceeded",
            "additionalDetails": None,
        }
        emit({"method": "error", "params": {"error": err, "willRetry": False, **ids}})
        turn_done("thr_1", "failed", err)
        return
    if "auth" in prompt:
        err = {
            "message": "Your access token could not be refreshed because your refresh token "
            "was revoked. Please log out and sign in again.",
            "codexErrorInfo": "unauthorized",
            "additionalDetails": None,
        }
        emit({"method": "error", "params": {"error": err, "willRetry": False, **ids}})
        turn_done("thr_1", "failed", err)
        return
    if "5xx" in prompt:
        info = {"responseTooManyFailedAttempts": {"httpStatusCode": 503}}
        err = {
            "message": "exceeded retry limit, last status: 503 Service Unavailable",
            "codexErrorInfo": info,
            "additionalDetails": None,
        }
        emit({"method": "error", "params": {"error": err, "willRetry": False, **ids}})
        turn_done("thr_1", "failed", err)
        return
    if "nomodel" in prompt:
        # as codex 0.99.0 printed it (tests/data/cli_samples/codex-0.99.0-app-server-404)
        details = (
            "unexpected status 404 Not Found: The model `m-1` does not exist or you do not "
            "have access to it., url: http://127.0.0.1:18766/v1/responses, request id: "
            "req_test_fixture_0001"
        )
        info = {"responseStreamDisconnected": {"httpStatusCode": 404}}
        for attempt in range(1, 6):
            retry = {
                "message": f"Reconnecting... {attempt}/5",
                "codexErrorInfo": info,
                "additionalDetails": details,
            }
            emit({"method": "error", "params": {"error": retry, "willRetry": True, **ids}})
        err = {"message": details, "codexErrorInfo": "other", "additionalDetails": None}
        emit({"method": "error", "params": {"error": err, "willRetry": False, **ids}})
        turn_done("thr_1", "failed", err)
        return
    if "context" in prompt:
        err = {"message": "context window exceeded", "codexErrorInfo": "contextWindowExceeded"}
        turn_done("thr_1", "failed", err)
        return
    if "flaky" in prompt:
        info = {"responseStreamDisconnected": {"httpStatusCode": None}}
        err = {"message": "Reconnecting... 1/5", "codexErrorInfo": info}
        emit({"method": "error", "params": {"error": err, "willRetry": True}})
    if "approve" in prompt:
        answer = ask(
            "item/commandExecution/requestApproval",
            {"threadId": "thr_1", "turnId": "turn_1", "itemId": "cmd_1", "command": "rm -rf x"},
        )
        agent_message(f"decision={answer.get('result', {}).get('decision')}")
    elif "question" in prompt:
        answer = ask("tool/requestUserInput", {"threadId": "thr_1", "questions": []})
        agent_message(f"refused={answer.get('error', {}).get('code')}")
    elif "silent" in prompt:
        agent_message("")
    elif "settings" in prompt:
        agent_message(
            json.dumps(
                {
                    "sandbox": thread.get("sandbox"),
                    "approvalPolicy": thread.get("approvalPolicy"),
                    "model": thread.get("model"),
                    "cwd": thread.get("cwd"),
                    "effort": turn_params.get("effort"),
                },
                sort_keys=True,
            )
        )
    elif "echo" in prompt:
        agent_message(prompt)
    else:
        agent_message("hello from codex app-server")
    total = {
        "totalTokens": 28912,
        "inputTokens": 28794,
        "cachedInputTokens": 23040,
        "outputTokens": 118,
        "reasoningOutputTokens": 64,
    }
    usage = {"total": total, "last": total, "modelContextWindow": 272000}
    emit({"method": "thread/tokenUsage/updated", "params": {**ids, "tokenUsage": usage}})
    turn_done("thr_1", "completed")


def main() -> int:
    args = sys.argv[1:]
    if args == ["--version"]:
        print("codex-cli 0.0.1")
        return 0
    with open(ME + ".argv", "w") as handle:
        json.dump(args, handle)
    if args[:1] == ["exec"]:
        return exec_mode()
    if args == ["app-server"]:
        return app_server()
    sys.stderr.write(f"error: unrecognized subcommand {args[:1]}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
