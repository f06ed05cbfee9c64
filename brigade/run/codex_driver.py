"""The codex app-server driver: the seat's process of a codex seat on that transport.

Run as `python -m brigade.run.codex_driver CODEX app-server` with the session
document on stdin (adapters/codex_rpc.DRIVER_MODULE); it starts the server
(through `proc`, in the seat's own process group, so the seat's timeout ends
both), holds one turn with it through `codex_rpc.Session` (the protocol, pure)
and copies every line the server prints to stdout, the transcript the codex
adapter reads back.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from brigade.adapters.codex_rpc import Session
from brigade.core import jsontext
from brigade.core.terminal import printable
from brigade.run import proc

# Seconds the server gets to exit once its stdin closes after the turn.
_EXIT_GRACE_SECONDS = 10.0


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
    server = proc.open_pipes(argv)
    assert server.stdin is not None and server.stdout is not None
    out = sys.stdout.buffer
    try:
        for message in session.start():
            _send(server.stdin, message)
        for raw in server.stdout:
            _echo(out, raw)
            try:
                message = jsontext.parse(raw, limit=None)
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
    code = proc.wait_or_kill(server, _EXIT_GRACE_SECONDS)
    drain.join(timeout=1.0)
    if session.finished:
        return 0 if session.succeeded else 1
    sys.stderr.write(
        printable(
            f"brigade: connection closed: codex app-server exited with status {code} "
            "before the turn completed"
        )
        + "\n"
    )
    return code if code > 0 else 1


def main(args: Sequence[str] | None = None) -> int:
    from brigade import __version__

    argv = list(sys.argv[1:] if args is None else args)
    if not argv:
        sys.stderr.write("usage: python -m brigade.run.codex_driver CODEX app-server\n")
        return 2
    doc = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    return drive(argv, doc, __version__)


if __name__ == "__main__":
    sys.exit(main())
