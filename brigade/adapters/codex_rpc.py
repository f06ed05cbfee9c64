"""A one-turn JSON-RPC session with `codex app-server`, for codex seats on that transport.

`codex app-server` speaks JSON-RPC 2.0 without the "jsonrpc" member, one JSON
object per line on stdin/stdout: the client sends `initialize`, the
`initialized` notification, `thread/start` and `turn/start`, then reads
notifications until `turn/completed`. brigade runs this module as the seat's
process (`python -m brigade.adapters.codex_rpc CODEX app-server`) with the
session document on stdin, so the seat is still one process group that the
usual timeout ends. Every line the server prints is copied to stdout, which
the codex adapter reads back like any other CLI's output.

`Session` is the protocol as a pure state machine; `main` is the I/O around it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CLIENT_NAME = "brigade"

# JSON-RPC's "method not found": the answer to a server request brigade cannot serve.
METHOD_NOT_FOUND = -32601

# Approval requests of the v2 protocol and their older v1 names.
_APPROVALS = {
    "item/commandExecution/requestApproval": ("accept", "decline"),
    "item/fileChange/requestApproval": ("accept", "decline"),
    "execCommandApproval": ("approved", "denied"),
    "applyPatchApproval": ("approved", "denied"),
}

# Seconds the server gets to exit once its stdin closes after the turn.
_EXIT_GRACE_SECONDS = 10.0


def session_document(
    *, prompt: str, cwd: str, writable: bool, model: str | None, effort: str | None
) -> dict[str, Any]:
    """What the driver reads on stdin: everything a session needs, nothing else."""
    return {"prompt": prompt, "cwd": cwd, "writable": writable, "model": model, "effort": effort}


@dataclass
class Session:
    """The client side of one thread with one turn; feed it server messages."""

    prompt: str
    cwd: str
    writable: bool
    model: str | None = None
    effort: str | None = None
    version: str = "0"
    finished: bool = False
    succeeded: bool = False
    thread_id: str | None = None
    _next_id: int = 0
    _pending: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], version: str) -> Session:
        return cls(
            prompt=str(doc["prompt"]),
            cwd=str(doc["cwd"]),
            writable=bool(doc["writable"]),
            model=doc.get("model"),
            effort=doc.get("effort"),
            version=version,
        )

    def start(self) -> list[dict[str, Any]]:
        """The opening message: the handshake request."""
        info = {"name": CLIENT_NAME, "title": "brigade evaluation runner", "version": self.version}
        return [self._request("initialize", {"clientInfo": info})]

    def feed(self, message: Any) -> list[dict[str, Any]]:
        """The messages to send in answer to one message from the server."""
        if not isinstance(message, dict) or self.finished:
            return []
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                return [self._answer_server_request(message["id"], method, message.get("params"))]
            return self._on_notification(method, message.get("params"))
        if "id" in message:
            return self._on_response(message)
        return []

    # -- internals ----------------------------------------------------------

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        self._pending[self._next_id] = method
        return {"method": method, "id": self._next_id, "params": params}

    def _on_response(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        method = self._pending.pop(message["id"], None) if _hashable(message["id"]) else None
        if method is None:
            return []
        if "error" in message or not isinstance(message.get("result"), dict):
            self.finished = True  # the adapter reads the error from the transcript
            return []
        result: dict[str, Any] = message["result"]
        if method == "initialize":
            return [{"method": "initialized"}, self._thread_start()]
        if method == "thread/start":
            thread = result.get("thread")
            thread_id = thread.get("id") if isinstance(thread, dict) else None
            if not isinstance(thread_id, str):
                self.finished = True
                return []
            self.thread_id = thread_id
            return [self._turn_start(thread_id)]
        return []

    def _thread_start(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "cwd": self.cwd,
            # Nobody is there to approve anything: the sandbox alone decides.
            "approvalPolicy": "never",
            "sandbox": "workspace-write" if self.writable else "read-only",
        }
        if self.model:
            params["model"] = self.model
        return self._request("thread/start", params)

    def _turn_start(self, thread_id: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "threadId": thread_id,
            "input": [{"type": "text", "text": self.prompt}],
        }
        if self.effort:
            params["effort"] = self.effort
        return self._request("turn/start", params)

    def _on_notification(self, method: str, params: Any) -> list[dict[str, Any]]:
        if method == "turn/completed" and isinstance(params, dict):
            thread_id = params.get("threadId")
            if thread_id is None or thread_id == self.thread_id:
                turn = params.get("turn")
                status = turn.get("status") if isinstance(turn, dict) else None
                self.finished = True
                self.succeeded = status == "completed"
        return []

    def _answer_server_request(self, request_id: Any, method: str, params: Any) -> dict[str, Any]:
        decisions = _APPROVALS.get(method)
        if decisions is not None:
            # Only reached when the server asks despite approvalPolicy "never":
            # a writable run may act in its own worktree, a read-only one may not.
            decision = decisions[0] if self.writable else decisions[1]
            return {"id": request_id, "result": {"decision": decision}}
        return {
            "id": request_id,
            "error": {
                "code": METHOD_NOT_FOUND,
                "message": f"{CLIENT_NAME} runs unattended and cannot answer {method}",
            },
        }


def _hashable(value: Any) -> bool:
    return isinstance(value, (int, str))


def _send(stream: Any, message: Mapping[str, Any]) -> None:
    stream.write(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")
    stream.flush()


def _echo(sink: Any, raw: bytes) -> None:
    """Copy one line of the server's output to the transcript as it comes."""
    sink.write(raw if raw.endswith(b"\n") else raw + b"\n")
    sink.flush()


def _copy(source: Any, sink: Any) -> None:
    for raw in source:
        _echo(sink, raw)


def drive(argv: Sequence[str], doc: Mapping[str, Any], version: str) -> int:
    """Run the server, hold one turn with it, copy what it prints to stdout; the exit code."""
    session = Session.from_document(doc, version)
    server = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    out = sys.stdout.buffer
    try:
        for message in session.start():
            _send(server.stdin, message)
        for raw in server.stdout:
            _echo(out, raw)
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # chatter on stdout; kept in the transcript, not understood
            for reply in session.feed(message):
                _send(server.stdin, reply)
            if session.finished:
                break
    except BrokenPipeError:
        pass  # the server went away; its exit status tells the rest
    finally:
        try:
            server.stdin.close()  # the end of the session: the server exits on EOF
        except BrokenPipeError:
            pass
    # Whatever it prints while shutting down still belongs in the transcript.
    drain = threading.Thread(target=_copy, args=(server.stdout, out), daemon=True)
    drain.start()
    try:
        code = server.wait(timeout=_EXIT_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        code = server.wait()
    drain.join(timeout=1.0)
    if session.finished:
        return 0 if session.succeeded else 1
    sys.stderr.write(
        f"brigade: connection closed: codex app-server exited with status {code} "
        "before the turn completed\n"
    )
    return code if code > 0 else 1


def main(args: Sequence[str] | None = None) -> int:
    from brigade import __version__

    argv = list(sys.argv[1:] if args is None else args)
    if not argv:
        sys.stderr.write("usage: python -m brigade.adapters.codex_rpc CODEX app-server\n")
        return 2
    doc = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    return drive(argv, doc, __version__)


if __name__ == "__main__":
    sys.exit(main())
