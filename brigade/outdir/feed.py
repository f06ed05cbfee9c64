"""The change feed: a line per receipt written, so a viewer sees a cell start or finish at
once without statting every cell.

`<out>/.changes.jsonl` holds one JSON object per line, `{"cell_id", "state", "attempt",
"t"}` (t: seconds since the epoch), appended by the run after each cell.json it writes
(`store.write_receipt`). It is a hint only, never the truth: a reader re-reads the named
cell's receipt, and a feed that is missing, cut or rotated costs it one full rescan. It
is kept small: once past FEED_LIMIT bytes the next append starts it anew (a reader sees
its inode change or its size shrink).
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FEED_FILE = ".changes.jsonl"
FEED_LIMIT = 4 * 1024 * 1024
# what one read of the feed takes at most (a reader far behind rescans instead)
READ_LIMIT = 1024 * 1024

_lock = threading.Lock()


def append(out: Path, cell_id: str, state: str, attempt: int) -> None:
    """Add a line for a receipt just written; a feed that cannot be written is skipped
    (it only saves readers time)."""
    line = json.dumps(
        {"cell_id": cell_id, "state": state, "attempt": attempt, "t": round(time.time(), 3)},
        separators=(",", ":"),
    )
    data = (line + "\n").encode()
    path = out / FEED_FILE
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with _lock:
        try:
            fd = os.open(path, flags, 0o644)
        except OSError:
            return
        try:
            if os.fstat(fd).st_size > FEED_LIMIT:
                os.ftruncate(fd, 0)
            os.write(fd, data)  # one write of a short line: appended whole
        except OSError:
            pass
        finally:
            os.close(fd)


@dataclass
class Tail:
    """Where a reader of a feed is: the file's inode and the offset read up to."""

    path: Path
    inode: int | None = None
    offset: int = 0
    rest: bytes = b""
    started: bool = False

    def read(self) -> list[dict[str, Any]] | None:
        """The entries appended since the last read; None when the reader must rescan
        everything (the first read, a feed started anew or gone, or too far behind)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            fresh = self.inode is not None or not self.started
            self.inode, self.offset, self.rest, self.started = None, 0, b"", True
            return None if fresh else []
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return []
            rescan = (
                not self.started
                or info.st_ino != self.inode
                or info.st_size < self.offset
                or info.st_size - self.offset > READ_LIMIT
            )
            if rescan:
                self.inode, self.offset, self.rest, self.started = (
                    info.st_ino,
                    info.st_size,
                    b"",
                    True,
                )
                return None
            if info.st_size == self.offset:
                return []
            data = os.pread(fd, info.st_size - self.offset, self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()  # a line being written: read with the next
        entries = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("cell_id"), str):
                entries.append(entry)
        return entries
