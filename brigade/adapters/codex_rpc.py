"""A one-turn JSON-RPC session with `codex app-server`, for codex seats on that transport.

`codex app-server` speaks JSON-RPC 2.0 without the "jsonrpc" member, one JSON
object per line on stdin/stdout: the client sends `initialize`, the
`initialized` notification, `thread/start` and `turn/start`, then reads
notifications until `turn/completed`. brigade runs the driver
(`python -m brigade.run.codex_driver CODEX app-server`, `DRIVER_MODULE`) as the
seat's process with the session document on stdin, so the seat is still one
process group that the usual timeout ends. Every line the server prints is
copied to stdout, which the codex adapter reads back like any other CLI's
output.

`Session` is the protocol as a pure state machine; the driver (run/, where
processes are started) is the I/O around it.
"""

from __future__ import annotations

from collections.abc import Mapping
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

# the seat's program on this transport (run/codex_driver.py; named, as adapters start no
# process and import nothing of run/)
DRIVER_MODULE = "brigade.run.codex_driver"


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
