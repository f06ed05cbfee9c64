"""brigade's cache folder (`BRIGADE_CACHE_DIR`): atomic entries, pruning. Only ever saves time."""

from __future__ import annotations

import os
import time
from pathlib import Path

from brigade import fs


def cache_dir() -> Path:
    """$BRIGADE_CACHE_DIR, else $XDG_CACHE_HOME/brigade, else ~/.cache/brigade."""
    explicit = os.environ.get("BRIGADE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "brigade"


# Cached inputs not written again for this long are dropped when a new one is
# written (every edit of a manifest adds an entry; none is ever needed again).
CACHE_KEEP_SECONDS = 30 * 24 * 3600


def write_cache_entry(entry: Path, data: bytes) -> None:
    """Write one file of the cache folder atomically, then drop the folder's stale entries.

    A cache that cannot be written only costs time: errors are swallowed.
    """
    try:
        fs.atomic_write(entry, data, durable=False)  # no temp file left by a failure
    except OSError:
        return
    prune(entry.parent, CACHE_KEEP_SECONDS)


def prune(folder: Path, keep_seconds: float) -> None:
    """Delete the files in a cache folder last written more than `keep_seconds` ago."""
    horizon = time.time() - keep_seconds
    try:
        with os.scandir(folder) as entries:
            for item in entries:
                try:
                    if item.is_file(follow_symlinks=False) and item.stat().st_mtime < horizon:
                        os.unlink(item.path)
                except OSError:
                    continue
    except OSError:
        pass
