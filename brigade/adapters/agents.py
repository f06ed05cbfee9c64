"""Built-in adapters for agent CLIs the user has installed and logged in.

Each adapter drives one CLI non-interactively with the user's own login (no
provider SDKs, no stored keys): it builds the command line for a read-only or
a writable run and reads the final message and any apparatus fault back out of
what the process printed. Flags follow each CLI's own documentation.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brigade.adapters import (
    Adapter,
    Enforcement,
    Fault,
    Invocation,
    Reading,
    SeatRequest,
    codex_rpc,
    last_line,
)
from brigade.roster import SeatSpec

# Prepended only where the CLI has no native read-only mode (goose): the run
# then happens in the user's shared checkout, so the instruction is all there is.
READ_ONLY_NOTICE = (
    "This is a read-only run: do not create, modify or delete any files and do not run "
    "commands that change the workspace. Inspect, then answer.\n\n"
)

_DETAIL_LIMIT = 500

# Checked in this order: a message can mention both a 429 and a dropped stream,
# and the more specific cause should win.
_FAULT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "workspace_untrusted",
        re.compile(
            r"not inside a trusted directory|(?:workspace|folder|directory) (?:is )?not trusted"
            r"|untrusted (?:workspace|folder|directory)|trust (?:this|the) (?:workspace|folder)"
            r"|workspace trust",
            re.IGNORECASE,
        ),
    ),
    (
        "rate_limited",
        re.compile(
            r"\b429\b|rate[ _-]?limit|too many requests|usage limit|hit your (?:usage )?limit"
            r"|RESOURCE_EXHAUSTED|(?<!disk )quota exceeded|exceeded (?:your )?(?:current )?quota",
            re.IGNORECASE,
        ),
    ),
    (
        "provider_error",
        re.compile(
            r"(?:status|code|http|error)\W{0,3}(?:50[0-4]|529)\b|\b(?:50[0-4]|529) (?:internal"
            r"|bad gateway|service unavailable|gateway timeout|overloaded)|overloaded"
            r"|internal server error|server_error|service unavailable|bad gateway"
            r"|gateway timeout|InternalServerError|ServiceUnavailable",
            re.IGNORECASE,
        ),
    ),
    (
        "transport_error",
        re.compile(
            r"connection (?:reset|refused|closed|aborted|error|lost)|stream disconnected"
            r"|disconnected before|broken pipe|ECONNRESET|ECONNREFUSED|ETIMEDOUT|ENOTFOUND"
            r"|EAI_AGAIN|socket hang up|network error|fetch failed|error sending request"
            r"|APIConnectionError|could not connect|dial tcp|(?:request|connection|read) timed out",
            re.IGNORECASE,
        ),
    ),
)


def classify_fault(message: str) -> str | None:
    """The apparatus fault kind an error message clearly reports, or None."""
    for kind, pattern in _FAULT_PATTERNS:
        if pattern.search(message):
            return kind
    return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _DETAIL_LIMIT else line[: _DETAIL_LIMIT - 3] + "..."


def _opt(flag: str, value: str | None) -> tuple[str, ...]:
    return (flag, value) if value else ()


def _opt_eq(flag: str, value: str | None) -> tuple[str, ...]:
    # The `--flag=value` form: the CLI's variadic options cannot swallow it and a
    # value starting with '-' is not mistaken for an option.
    return (f"{flag}={value}",) if value else ()


def _reasoning_not_applied(seat: SeatSpec) -> tuple[str, ...]:
    return ("reasoning",) if seat.reasoning else ()


def _json_values(text: str) -> list[Any]:
    """Every JSON document in text: the whole of it, else one per line (JSONL)."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        return [json.loads(stripped)]
    except ValueError:
        pass
    values: list[Any] = []
    for line in stripped.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                values.append(json.loads(line))
            except ValueError:
                continue
    if values:
        return values
    # A pretty-printed document after a line of chatter (a login notice, a warning).
    start = stripped.find("\n{")
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(stripped[start + 1 :])
            return [value]
        except ValueError:
            pass
    return []


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(values: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON objects among values, arrays flattened one level."""
    found: list[dict[str, Any]] = []
    for value in values:
        if isinstance(value, dict):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, dict))
    return found


def _message_of(error: Any) -> str | None:
    """A readable message from an error field (string, or object with message/code)."""
    if error is None or error is False:
        return None
    if isinstance(error, str):
        return error or None
    if isinstance(error, dict):
        data = _obj(error.get("data"))
        message = error.get("message") or data.get("message") or error.get("name")
        status = error.get("code") or error.get("status") or data.get("statusCode")
        text = str(message) if message else json.dumps(error, sort_keys=True)
        name = error.get("name") or error.get("type")
        if name and message and str(name) != str(message):
            text = f"{name}: {text}"
        if status is not None and str(status) not in text:
            text = f"{text} (status {status})"
        return text
    return str(error)


@dataclass(frozen=True)
class _Plan:
    """The CLI-specific part of an Invocation."""

    args: tuple[str, ...]
    stdin_text: str | None
    enforcement: Enforcement
    env: Mapping[str, str] = field(default_factory=dict)
    not_applied: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Parsed:
    """The final message and any error the CLI reported in its output.

    `fault_kind` is set when the CLI itself said which apparatus fault it was
    (a structured error code); otherwise the error's text is classified.
    """

    final_text: str
    error: str | None = None
    fault_kind: str | None = None


def _judge(
    parsed: _Parsed,
    *,
    exit_code: int | None,
    stdout: str,
    stderr: str,
    marker: re.Pattern[str] | None,
) -> Reading:
    """Turn a parsed output and exit status into a Reading, flagging only clear faults."""
    text = parsed.final_text
    if parsed.error:
        kind = parsed.fault_kind or classify_fault(parsed.error)
        if kind:
            return Reading(final_text=text, fault=Fault(kind=kind, detail=_one_line(parsed.error)))
    if exit_code is None:
        # Killed (timeout or signal): the caller records that; no guessing here.
        return Reading(final_text=text)
    err_line = last_line(stderr)
    # stdout is the agent's answer for plain-text CLIs, so only a line shaped like
    # the CLI's own error report may be read as one.
    marked = [
        line
        for line in (last_line(stdout), err_line)
        if marker is not None and line and marker.search(line)
    ]
    if exit_code != 0:
        for line in (err_line, *marked):
            kind = classify_fault(line) if line else None
            if kind:
                return Reading(final_text=text, fault=Fault(kind=kind, detail=_one_line(line)))
        return Reading(final_text=text)
    for line in marked:
        kind = classify_fault(line)
        if kind:
            return Reading(final_text=text, fault=Fault(kind=kind, detail=_one_line(line)))
    if not text.strip():
        kind = classify_fault(err_line) if err_line else None
        if kind:
            return Reading(final_text=text, fault=Fault(kind=kind, detail=_one_line(err_line)))
        detail = parsed.error or err_line or "exited 0 without a final message"
        return Reading(final_text=text, fault=Fault(kind="empty_output", detail=_one_line(detail)))
    return Reading(final_text=text)


class _AgentCli:
    """Shared behaviour: subclasses supply the argv plan and the output parser."""

    name: str
    binary: str
    error_marker: re.Pattern[str] | None = None

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command, stdin and environment for this seat and prompt."""
        plan = self._plan(request)
        return Invocation(
            argv=(self.binary, *plan.args),
            stdin_text=plan.stdin_text,
            read_only_enforcement=plan.enforcement,
            env=dict(plan.env),
            settings_not_applied=plan.not_applied,
            transport=request.seat.transport,
            driver=plan.driver,
        )

    def read(self, *, exit_code: int | None, stdout: str, stderr: str) -> Reading:
        """The final message and any apparatus fault from the process output."""
        return _judge(
            self._parse(stdout, stderr),
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            marker=self.error_marker,
        )

    def version_argv(self, seat: SeatSpec) -> tuple[str, ...] | None:
        """The CLI's `--version` command."""
        return (self.binary, "--version")

    def _plan(self, request: SeatRequest) -> _Plan:
        raise NotImplementedError

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        return _Parsed(final_text=stdout.strip())


def _parse_result_object(stdout: str) -> _Parsed | None:
    """Claude Code style `{"type": "result", "result": ..., "is_error": ...}` output."""
    results = [d for d in _dicts(_json_values(stdout)) if d.get("type") == "result"]
    if not results:
        return None
    result = results[-1]
    raw = result.get("result")
    text = raw if isinstance(raw, str) else ""
    subtype = str(result.get("subtype") or "")
    error: str | None = None
    if result.get("is_error") or subtype.startswith("error"):
        error = _message_of(result.get("error")) or text or subtype or "error"
    return _Parsed(final_text=text, error=error)


class ClaudeAdapter(_AgentCli):
    """Claude Code in print mode (`claude -p`), prompt on stdin, JSON result."""

    name = "claude"
    binary = "claude"
    # Every built-in tool that can change files; Bash goes too because a shell
    # can write anywhere. Deny rules beat allow rules and permission modes.
    read_only_denied = "Bash,Edit,MultiEdit,Write,NotebookEdit"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        if request.writable:
            # Edits inside the worktree plus shell commands; no prompt can be
            # answered in print mode, so anything else is refused rather than asked.
            permissions: tuple[str, ...] = (
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash",
            )
            enforcement: Enforcement = "none"
        else:
            # An explicit mode overrides a permissive default in the user's settings;
            # --strict-mcp-config keeps configured MCP servers (which may write) out.
            permissions = (
                "--permission-mode",
                "default",
                "--disallowedTools",
                self.read_only_denied,
                "--strict-mcp-config",
            )
            enforcement = "hard"
        args = (
            "-p",
            "--output-format",
            "json",
            *permissions,
            *_opt("--model", seat.model),
            *_opt("--effort", seat.reasoning),
        )
        return _Plan(args=args, stdin_text=request.prompt, enforcement=enforcement)

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        return _parse_result_object(stdout) or _Parsed(final_text=stdout.strip())


class CodexAdapter(_AgentCli):
    """OpenAI Codex: `codex exec --json ... -` (prompt on stdin, JSONL events), or a
    JSON-RPC session with `codex app-server` when the roster's codex_transport says so.
    """

    name = "codex"
    binary = "codex"

    def _plan(self, request: SeatRequest) -> _Plan:
        if request.seat.codex_transport == "app-server":
            return self._app_server_plan(request)
        seat = request.seat
        reasoning: tuple[str, ...] = ()
        if seat.reasoning:
            # The value of a -c override is TOML; a JSON string is a valid TOML string.
            reasoning = ("-c", f"model_reasoning_effort={json.dumps(seat.reasoning)}")
        args = (
            "exec",
            "--json",
            # The workspace may be a plain folder; without this codex refuses to start.
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write" if request.writable else "read-only",
            *_opt("--model", seat.model),
            *reasoning,
            "-",
        )
        return _Plan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )

    def _app_server_plan(self, request: SeatRequest) -> _Plan:
        # The session (thread/start with the sandbox, turn/start with the prompt)
        # is held by brigade's own client, which runs `codex app-server` itself.
        doc = codex_rpc.session_document(
            prompt=request.prompt,
            cwd=str(request.cwd),
            writable=request.writable,
            model=request.seat.model,
            effort=request.seat.reasoning,
        )
        return _Plan(
            args=("app-server",),
            stdin_text=json.dumps(doc, ensure_ascii=False),
            enforcement="none" if request.writable else "hard",
            driver=(sys.executable, "-m", codex_rpc.__name__),
        )

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        events = _dicts(_json_values(stdout))
        if not events:
            return _Parsed(final_text=stdout.strip())
        if any("method" in event or "result" in event for event in events):
            return _parse_app_server(events)
        text = ""
        failed: str | None = None
        stream_error: str | None = None
        completed = False
        for event in events:
            kind = event.get("type")
            item = _obj(event.get("item"))
            item_type = item.get("type") or item.get("item_type")
            if kind == "item.completed" and item_type in ("agent_message", "assistant_message"):
                text = str(item.get("text") or "")
            elif kind == "turn.completed":
                completed = True
            elif kind == "turn.failed":
                failed = _message_of(event.get("error")) or "turn failed"
            elif kind == "error":
                stream_error = _message_of(event.get("message")) or "error"
        # Codex reports transient reconnects as error events and then carries on;
        # they only count when the turn never completed.
        error = failed or (None if completed else stream_error)
        return _Parsed(final_text=text, error=error)


def _parse_app_server(messages: list[dict[str, Any]]) -> _Parsed:
    """The final message and any error from a `codex app-server` session transcript."""
    text = ""
    completed = False
    failure: _Parsed | None = None
    notice: _Parsed | None = None
    for message in messages:
        method = message.get("method")
        params = _obj(message.get("params"))
        if method is None:
            error = message.get("error")
            if error is not None and failure is None:
                # The server refused one of brigade's requests (-32001: overloaded).
                code = _obj(error).get("code")
                kind = "provider_error" if code == -32001 else None
                failure = _Parsed("", _message_of(error) or "request failed", kind)
            continue
        if "id" in message:
            continue  # a request from the server; the client has answered it
        if method == "item/completed":
            item = _obj(params.get("item"))
            if item.get("type") == "agentMessage":
                text = str(item.get("text") or "")
        elif method == "turn/completed":
            completed = True
            turn = _obj(params.get("turn"))
            status = turn.get("status")
            if status == "failed" and failure is None:
                failure = _codex_error(turn.get("error"), "turn failed")
            elif status == "interrupted" and failure is None:
                failure = _Parsed("", "turn interrupted")
        elif method == "error" and params.get("willRetry") is not True:
            notice = _codex_error(params.get("error"), "error")
    if failure is None and not completed:
        failure = notice or _Parsed(
            "",
            "connection closed: codex app-server ended before the turn completed",
            "transport_error",
        )
    if failure is None:
        return _Parsed(final_text=text)
    return _Parsed(final_text=text, error=failure.error, fault_kind=failure.fault_kind)


def _codex_error(error: Any, fallback: str) -> _Parsed:
    """An app-server TurnError: its message, and the fault its codexErrorInfo names."""
    body = _obj(error)
    message = str(body.get("message") or fallback)
    info = body.get("codexErrorInfo")
    if info is None:
        return _Parsed("", message)
    kind, label = _codex_error_kind(info)
    return _Parsed("", f"{message} ({label})", kind)


# CodexErrorInfo names (lower-cased) that are apparatus faults, with the fault and
# a readable label; anything else (context window, bad request...) is the agent's.
_CODEX_FAULTS = {
    "usagelimitexceeded": ("rate_limited", "usage limit exceeded"),
    "ratelimitexceeded": ("rate_limited", "rate limit exceeded"),
    "serveroverloaded": ("provider_error", "server overloaded"),
    "internalservererror": ("provider_error", "internal server error"),
    "httpconnectionfailed": ("transport_error", "connection failed"),
    "responsestreamconnectionfailed": ("transport_error", "stream connection failed"),
    "responsestreamdisconnected": ("transport_error", "stream disconnected"),
    "responsetoomanyfailedattempts": ("transport_error", "connection failed, retries exhausted"),
}


def _codex_error_kind(info: Any) -> tuple[str | None, str]:
    """The apparatus fault a CodexErrorInfo value names (or None), and a readable label."""
    if isinstance(info, str):
        name, detail = info, {}
    elif isinstance(info, dict) and len(info) == 1:
        name, value = next(iter(info.items()))
        detail = _obj(value)
    else:
        return None, json.dumps(info, sort_keys=True)
    kind, label = _CODEX_FAULTS.get(name.replace("_", "").lower(), (None, name))
    status = detail.get("httpStatusCode")
    if isinstance(status, int):
        label = f"{label}, HTTP {status}"
        if status == 429:
            kind = "rate_limited"
        elif status >= 500:
            kind = "provider_error"
        elif status >= 400:
            kind = None  # the provider refused the request (auth, bad request)
    return kind, label


class CursorAdapter(_AgentCli):
    """Cursor Agent (`cursor-agent -p`), trusted workspace, prompt after `--`."""

    name = "cursor"
    binary = "cursor-agent"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        if request.writable:
            # Without --force print mode proposes edits and commands but applies none.
            mode: tuple[str, ...] = ("--force",)
        else:
            mode = ("--mode", "ask")
        args = (
            "-p",
            "--output-format",
            "json",
            # An untrusted workspace makes headless runs stop without doing anything.
            "--trust",
            *mode,
            *_opt("--model", seat.model),
            "--",
            request.prompt,
        )
        return _Plan(
            args=args,
            stdin_text=None,
            enforcement="none" if request.writable else "hard",
            not_applied=_reasoning_not_applied(seat),
        )

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        return _parse_result_object(stdout) or _Parsed(final_text=stdout.strip())


def _parse_response_object(stdout: str, stderr: str) -> _Parsed:
    """Gemini CLI style `{"response": ..., "error": {...}}` (errors may go to stderr)."""
    for document in _dicts(_json_values(stdout)):
        if "response" in document or "error" in document:
            text = document.get("response")
            return _Parsed(
                final_text=text if isinstance(text, str) else "",
                error=_message_of(document.get("error")),
            )
    for document in _dicts(_json_values(stderr)):
        if "error" in document:
            return _Parsed(final_text=stdout.strip(), error=_message_of(document["error"]))
    return _Parsed(final_text=stdout.strip())


class GeminiAdapter(_AgentCli):
    """Gemini CLI in headless mode, prompt on stdin, JSON output."""

    name = "gemini"
    binary = "gemini"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        args = (
            "--output-format",
            "json",
            # In headless mode the default approval mode refuses every tool that
            # would need a confirmation (edits, shell); yolo approves them all.
            "--approval-mode",
            "yolo" if request.writable else "default",
            *_opt("--model", seat.model),
        )
        return _Plan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
            # With folder trust enabled, an untrusted folder silently drops yolo back
            # to default, and a writable run would then change nothing.
            env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
            not_applied=_reasoning_not_applied(seat),
        )

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        return _parse_response_object(stdout, stderr)


class QwenAdapter(_AgentCli):
    """Qwen Code in headless mode, prompt on stdin, JSON message array."""

    name = "qwen"
    binary = "qwen"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        args = (
            "--output-format",
            "json",
            # As in Gemini CLI (its upstream): tools needing approval fail headless.
            "--approval-mode",
            "yolo" if request.writable else "default",
            *_opt("--model", seat.model),
        )
        return _Plan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
            not_applied=_reasoning_not_applied(seat),
        )

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        return _parse_result_object(stdout) or _parse_response_object(stdout, stderr)


class OpencodeAdapter(_AgentCli):
    """opencode (`opencode run --format json`), prompt on stdin, JSONL events."""

    name = "opencode"
    binary = "opencode"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        # The plan agent denies edits; `run` auto-rejects every permission it would
        # have to ask for, so its shell cannot change anything either.
        agent: tuple[str, ...] = () if request.writable else ("--agent", "plan")
        args = (
            "run",
            "--format",
            "json",
            *agent,
            *_opt("--model", seat.model),
            *_opt("--variant", seat.reasoning),
        )
        return _Plan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        events = _dicts(_json_values(stdout))
        if not events:
            return _Parsed(final_text=stdout.strip())
        steps: list[list[str]] = [[]]
        error: str | None = None
        for event in events:
            kind = event.get("type")
            part = _obj(event.get("part"))
            if kind == "step_start":
                steps.append([])
            elif kind == "text" and isinstance(part.get("text"), str):
                steps[-1].append(part["text"])
            elif kind == "error":
                error = _message_of(event.get("error")) or "error"
        # The final message is the text of the last step that said anything.
        texts = next((step for step in reversed(steps) if any(t.strip() for t in step)), [])
        return _Parsed(final_text="\n".join(t.strip() for t in texts if t.strip()), error=error)


class AiderAdapter(_AgentCli):
    """aider with `--message`, no commits, history files kept in the run folder."""

    name = "aider"
    binary = "aider"
    # aider prints provider errors as `litellm.XxxError: ...` and its own advice
    # as `The API provider ...`, often after a 0 exit once its retries run out.
    error_marker = re.compile(r"^litellm\.\w+|^The API provider\b")

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        read_only: tuple[str, ...] = ()
        if not request.writable:
            # Ask mode has no edit format: the model's reply is never applied to files.
            read_only = ("--chat-mode", "ask", "--no-suggest-shell-commands")
        args = (
            # --yes-always answers aider's own questions; the settings after it stop
            # it from committing, touching .gitignore, opting in to analytics or
            # opening a browser on the user's behalf.
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-analytics",
            "--no-check-update",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-stream",
            f"--chat-history-file={request.run_dir / 'aider.chat.history.md'}",
            f"--input-history-file={request.run_dir / 'aider.input.history'}",
            *read_only,
            *_opt("--model", seat.model),
            *_opt("--reasoning-effort", seat.reasoning),
            f"--message={request.prompt}",
        )
        return _Plan(
            args=args,
            stdin_text=None,
            enforcement="none" if request.writable else "hard",
        )


class GooseAdapter(_AgentCli):
    """goose (`goose run --no-session -t`), JSON output; read-only only by instruction."""

    name = "goose"
    binary = "goose"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        env: dict[str, str] = {}
        if request.writable:
            text = request.prompt
            # A configured approve/chat mode would block or drop tool calls headless.
            env["GOOSE_MODE"] = "auto"
            enforcement: Enforcement = "none"
        else:
            text = READ_ONLY_NOTICE + request.prompt
            enforcement = "soft"
        # clap would take a leading '-' for an option; the joined form is unambiguous.
        text_args = (f"--text={text}",) if text.startswith("-") else ("-t", text)
        args = (
            "run",
            "--no-session",
            "--output-format",
            "json",
            *_opt("--model", seat.model),
            *text_args,
        )
        return _Plan(
            args=args,
            stdin_text=None,
            enforcement=enforcement,
            env=env,
            not_applied=_reasoning_not_applied(seat),
        )

    def _parse(self, stdout: str, stderr: str) -> _Parsed:
        for document in _dicts(_json_values(stdout)):
            messages = document.get("messages")
            if not isinstance(messages, list):
                continue
            for message in reversed(messages):
                if not isinstance(message, dict) or message.get("role") != "assistant":
                    continue
                content = message.get("content")
                items = content if isinstance(content, list) else [content]
                texts = [
                    item["text"]
                    for item in items
                    if isinstance(item, dict)
                    and item.get("type") == "text"
                    and isinstance(item.get("text"), str)
                ]
                if any(t.strip() for t in texts):
                    return _Parsed(final_text="\n".join(t.strip() for t in texts if t.strip()))
            return _Parsed(final_text="")
        return _Parsed(final_text=stdout.strip())


class CopilotAdapter(_AgentCli):
    """GitHub Copilot CLI, prompt piped on stdin, response only (`-s`)."""

    name = "copilot"
    binary = "copilot"

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        # Non-interactive runs need --allow-all-tools; deny rules take precedence
        # over it, and shell goes too because a shell can write anywhere.
        denied: tuple[str, ...] = (
            () if request.writable else ("--deny-tool=write", "--deny-tool=shell")
        )
        args = (
            "-s",
            "--allow-all-tools",
            *denied,
            *_opt_eq("--model", seat.model),
            *_opt_eq("--reasoning-effort", seat.reasoning),
        )
        return _Plan(
            args=args,
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
        )


class OllamaAdapter(_AgentCli):
    """A local model through `ollama run <model>`, prompt on stdin, plain text out."""

    name = "ollama"
    binary = "ollama"

    def __init__(self, model: str) -> None:
        model = model.strip()
        if not model:
            raise ValueError("ollama: needs a model name after 'ollama:' (e.g. ollama:llama3.2)")
        self.model = model

    def _plan(self, request: SeatRequest) -> _Plan:
        seat = request.seat
        not_applied: tuple[str, ...] = ()
        if seat.model and seat.model != self.model:
            # The model named in `ollama:<model>` is the one that runs.
            not_applied = ("model",)
        think: tuple[str, ...] = ()
        if seat.reasoning:
            # Thinking text would otherwise be printed ahead of the answer.
            think = (f"--think={seat.reasoning}", "--hidethinking")
        # A bare model has no tools at all, so nothing can write the workspace.
        return _Plan(
            args=("run", *think, self.model),
            stdin_text=request.prompt,
            enforcement="none" if request.writable else "hard",
            not_applied=not_applied,
        )


AGENTS: dict[str, Adapter] = {
    adapter.name: adapter
    for adapter in (
        ClaudeAdapter(),
        CodexAdapter(),
        CursorAdapter(),
        GeminiAdapter(),
        OpencodeAdapter(),
        AiderAdapter(),
        GooseAdapter(),
        QwenAdapter(),
        CopilotAdapter(),
    )
}
