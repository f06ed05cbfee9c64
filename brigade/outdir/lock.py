"""One run per output directory: an advisory lock naming its holder's pid.

fcntl.flock is released by the kernel when the holder dies, so a killed run
never leaves a lock that blocks the next one. (filelock truncates the lock
file on every attempt, which would erase the holder's pid we report.)
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import IO

from brigade.errors import EnvironmentProblem, LockHeld
from brigade.outdir.store import LOCK_FILE

_held: dict[Path, IO[str]] = {}


def holder_pid(path: Path) -> str:
    """The pid recorded in a lock file, or '?' when it cannot be read."""
    try:
        return path.read_text().strip() or "?"
    except OSError:
        return "?"


def acquire(out: Path, *, wait: bool, poll: float = 0.2) -> None:
    """Hold the output directory's lock for the rest of this process (idempotent).

    Without `wait`, a lock held by another process raises LockHeld naming it.
    """
    path = (out / LOCK_FILE).resolve()
    if path in _held:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")
    except FileExistsError:
        raise EnvironmentProblem(f"{out}: output path exists and is not a folder") from None
    except OSError as exc:
        raise _unusable(out, exc) from None
    announced = False
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = holder_pid(path)
            if not wait:
                handle.close()
                raise LockHeld(
                    f"{out}: another brigade run (pid {holder}) is using this output "
                    "directory; wait for it to finish or pass --wait (doit: wait=1)"
                ) from None
            if not announced:
                print(f"brigade: waiting for pid {holder} to release {out}", file=sys.stderr)
                announced = True
            time.sleep(poll)
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    except OSError as exc:  # a full disk: the lock is not worth a traceback
        handle.close()
        raise _unusable(out, exc) from None
    _held[path] = handle


def _unusable(out: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(f"{out}: cannot write to the output directory: {exc.strerror or exc}")


def release(out: Path) -> None:
    """Release the lock if this process holds it."""
    path = (out / LOCK_FILE).resolve()
    handle = _held.pop(path, None)
    if handle is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        finally:
            handle.close()
