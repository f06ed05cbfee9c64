"""One run per output directory: an advisory lock naming its holder's pid.

fcntl.flock is released by the kernel when the holder dies, so a killed run
never leaves a lock that blocks the next one. (filelock truncates the lock
file on every attempt, which would erase the holder's pid we report.)
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import time
from pathlib import Path
from typing import IO

from brigade.core.terminal import printable
from brigade.errors import EnvironmentProblem, LockHeld
from brigade.outdir.store import LOCK_FILE, read_regular

_held: dict[Path, IO[str]] = {}
# what acquiring a lock made: the lock file (when new) and the folders created for it,
# removed again by `discard_refused` when the command is refused
_made: dict[Path, list[Path]] = {}


def holder_pid(path: Path) -> str:
    """The pid recorded in a lock file, or '?' when it cannot be read."""
    try:
        return read_regular(path, 64)[:64].decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def acquire(out: Path, *, wait: bool, poll: float = 0.2) -> None:
    """Hold the output directory's lock for the rest of this process (idempotent).

    Without `wait`, a lock held by another process raises LockHeld naming it.
    """
    path = _lock_path(out)
    if path in _held:
        return
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise EnvironmentProblem(f"{out}: output path exists and is not a folder") from None
        try:
            fd = os.open(path, flags | os.O_EXCL, 0o666)
            made.insert(0, path)
        except FileExistsError:
            # never through a symbolic link: the lock file is truncated and written below
            fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvironmentProblem(
                f"{path}: the lock file is a symbolic link; brigade never writes through one "
                "(remove the link)"
            ) from None
        if exc.errno == errno.EISDIR:
            raise _not_a_file(path) from None
        raise _unusable(out, exc) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_file(path)
    handle = os.fdopen(fd, "r+")
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
                print(
                    printable(f"brigade: waiting for pid {holder} to release {out}"),
                    file=sys.stderr,
                )
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
    _made[path] = made


def _lock_path(out: Path) -> Path:
    """The lock file: in the output folder (resolved), the file itself never resolved."""
    return out.resolve() / LOCK_FILE


def _not_a_file(path: Path) -> EnvironmentProblem:
    return EnvironmentProblem(f"{path}: the lock file is not a regular file (remove it)")


def _unusable(out: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(f"{out}: cannot write to the output directory: {exc.strerror or exc}")


def held(out: Path) -> bool:
    """Whether this process holds the output directory's lock."""
    return (out / LOCK_FILE).resolve() in _held


def discard_refused() -> None:
    """Release every lock this process holds after its command was refused (exit 2), and
    remove what acquiring them made (a new lock file, new folders) where nothing else was
    written since: a refused command leaves nothing behind."""
    for path in list(_held):
        made = _made.pop(path, [])
        release(path.parent)
        if path in made and _only_lock(path.parent):
            path.unlink(missing_ok=True)
        for folder in made:
            if folder != path:
                try:
                    folder.rmdir()  # only when empty
                except OSError:
                    break


def _only_lock(folder: Path) -> bool:
    try:
        return os.listdir(folder) == [LOCK_FILE]
    except OSError:
        return False


def release(out: Path) -> None:
    """Release the lock if this process holds it."""
    path = _lock_path(out)
    _made.pop(path, None)
    handle = _held.pop(path, None)
    if handle is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        finally:
            handle.close()
