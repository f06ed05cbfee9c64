"""A seat's own HOME (`home: isolated`): a fresh folder per attempt holding only what its
CLI needs to log in, read-only.

By default a seat's CLI reads the user's own settings, hooks, MCP servers and
plugins from HOME (`~/.claude/settings.json`, `~/.codex/config.toml`, ...): the
same roster measures other agents on other machines, and a user's hook runs in
every cell. An isolated seat gets instead an empty HOME of its attempt, made
when the seat starts and removed when it ends, into which brigade copies only
the files its adapter names as its login (`Adapter.auth_files`: claude's
credentials file, not its settings), read-only. The variables that would point
the CLI back at the user's folders (XDG_CONFIG_HOME, CODEX_HOME, ...) are
dropped, unless the seat's own `env` sets them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import fs

PREFIX = "brigade-home-"
# a login file is small; anything bigger (or not a regular file) is not provided
MAX_AUTH_BYTES = 1 << 20
# what moves a CLI's configuration away from HOME, back to the user's own folders
RELOCATING = (
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "CURSOR_CONFIG_DIR",
    "GEMINI_CLI_HOME",
    "COPILOT_HOME",
    "GOOSE_PATH_ROOT",
    "OLLAMA_HOME",
)


@dataclass(frozen=True)
class IsolatedHome:
    """An attempt's HOME: its folder, the login files provided (as `~/...` names) and their
    copies in it (read-only)."""

    folder: Path
    provided: tuple[str, ...]
    copies: tuple[Path, ...]

    def environment(self, env: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
        """The seat's environment with this HOME: the variables that would lead back to the
        user's folders dropped, unless the seat's own `env` (`own`) sets them."""
        isolated = {
            name: value for name, value in env.items() if name not in RELOCATING or name in own
        }
        isolated["HOME"] = str(self.folder)
        return isolated

    def record(self) -> dict[str, Any]:
        """run.json's `home`: the mode and the names of the files provided (never contents)."""
        return {"mode": "isolated", "provided": list(self.provided)}


@contextlib.contextmanager
def isolated_home(auth_files: Sequence[str], user_home: str) -> Iterator[IsolatedHome]:
    """A fresh HOME holding copies of the `auth_files` (`~/...`, under `user_home`) that
    exist there as regular files, read-only; removed afterwards with whatever the seat
    left in it."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))  # private: mode 0700
    try:
        provided: list[str] = []
        copies: list[Path] = []
        for name in auth_files:
            relative = name[2:] if name.startswith("~/") else name
            data = _login_file(Path(user_home) / relative)
            if data is None:
                continue
            copy = folder / relative
            copy.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            descriptor = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            provided.append(name)
            copies.append(copy)
        yield IsolatedHome(folder, tuple(provided), tuple(copies))
    finally:
        remove(folder)


def _login_file(path: Path) -> bytes | None:
    """A login file of the user's (a regular file, bounded); None when there is none."""
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(MAX_AUTH_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_AUTH_BYTES else None


def remove(folder: Path) -> None:
    """Remove an attempt's HOME, also where the seat took the write permission away; what
    cannot be removed stays (one more private folder in the temporary folder, never an
    error of the run). Links in it are removed, never followed."""

    def retry(function: Any, path: str, _: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, ignore_errors=True)
            else:
                function(path)

    try:
        shutil.rmtree(folder, onerror=retry)
    except RecursionError:  # folders nested past Python's recursion: removed without it
        with contextlib.suppress(OSError):
            fs.remove(folder)
