"""git as brigade runs it over a checkout or a worktree that a seat or a grader's command
could have written: with a configuration neither can influence.

A seat (or the code under test) writes the worktree's files (`.gitattributes`,
`.gitmodules`) and, unconfined, any configuration file git reads. brigade runs
git over those folders after the seat ended, outside any sandbox, as the user:
no program the repository or the worktree names may run then. So every such
command gets:

- no system or global configuration file (`GIT_CONFIG_NOSYSTEM`,
  `GIT_CONFIG_GLOBAL=/dev/null`), and no inherited `GIT_*` variable; the user's
  `safe.directory` entries are carried over (read once, from the user's own
  files), so a checkout git accepted before is accepted still;
- every key that runs a program or reaches out pinned (`PINNED`), as command-line
  configuration, which beats every configuration file;
- every filter, diff and merge driver the repository's configuration defines
  blanked: a `filter=` attribute a seat writes names nothing that runs.

Per-worktree configuration (`config.worktree`) is never read: brigade's commands
over a worktree name the repository's own git folder, not the worktree's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from brigade.run.proc import capture_bytes

# (key, value) set on every command: each runs a program, reaches the network or
# writes where brigade does not ask it to
PINNED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.alternateRefsCommand", ""),
    ("core.attributesFile", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
# the keys of a named driver that run a program, and what blanks each
DRIVER_KEYS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}
_ENVIRONMENT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_SSH_COMMAND": "false",
}

_safe_lock = threading.Lock()
_safe: list[tuple[str, ...]] = []


def _user_safe_directories() -> tuple[str, ...]:
    """The `safe.directory` entries of the user's own system and global configuration
    (read once per process; reading configuration runs nothing)."""
    with _safe_lock:
        if not _safe:
            found: list[str] = []
            for scope in ("--system", "--global"):
                code, out, _ = capture_bytes(
                    ["git", "config", scope, "--null", "--get-all", "safe.directory"],
                    timeout=60,
                    env=_plain_environment(),
                )
                if code == 0:
                    found += [v for v in out.decode("utf-8", "replace").split("\0") if v]
            _safe.append(tuple(found))
        return _safe[0]


def _plain_environment() -> dict[str, str]:
    """brigade's environment without any variable that tells git where or how to work."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def environment(
    pairs: Sequence[tuple[str, str]] = (), extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """git's environment: no configuration file but the repository's, `PINNED` and `pairs`
    as command-line configuration, then `extra` (an index, an objects folder)."""
    env = _plain_environment()
    env.update(_ENVIRONMENT)
    settings = [
        *(("safe.directory", path) for path in _user_safe_directories()),
        *PINNED,
        *pairs,
    ]
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for index, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    if extra:
        env.update(extra)
    return env


def blanked_drivers(names: Sequence[str]) -> list[tuple[str, str]]:
    """The settings that blank every driver among configuration key `names`
    (`filter.<driver>.clean` blanks `filter.<driver>`'s programs)."""
    drivers: dict[tuple[str, str], None] = {}
    for name in names:
        section, _, rest = name.partition(".")
        subsection = rest.rpartition(".")[0]
        if section.lower() in DRIVER_KEYS and subsection:
            drivers[(section.lower(), subsection)] = None
    return [
        (f"{section}.{subsection}.{key}", value)
        for section, subsection in drivers
        for key, value in DRIVER_KEYS[section]
    ]


class Git:
    """git over one repository (its own git folder `git_dir`) with the configuration fixed
    when it is made: the repository's drivers read once, then blanked on every command."""

    def __init__(self, git_dir: Path | None, cwd: Path) -> None:
        self.git_dir = git_dir
        self.cwd = cwd
        self._pairs: list[list[tuple[str, str]]] = []

    def pairs(self) -> list[tuple[str, str]]:
        """The settings blanking the repository's drivers (read on the first command)."""
        if not self._pairs:
            self._pairs.append([])
            code, out, _ = self.run(
                ["config", "--null", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."],
                timeout=60,
            )
            if code == 0:
                names = [line for line in out.decode("utf-8", "replace").split("\0") if line]
                self._pairs[0] = blanked_drivers(names)
        return self._pairs[0]

    def run(
        self,
        args: Sequence[str],
        *,
        work_tree: Path | None = None,
        cwd: Path | None = None,
        extra: Mapping[str, str] | None = None,
        timeout: float = 120,
        stdin: bytes | None = None,
        stdout_path: Path | None = None,
    ) -> tuple[int | None, bytes, str]:
        """`git args` (its git folder named, and `work_tree` when given): (code, stdout, stderr);
        code None when git could not run or timed out."""
        head = ["git"]
        if self.git_dir is not None:
            head.append(f"--git-dir={self.git_dir}")
        if work_tree is not None:
            head.append(f"--work-tree={work_tree}")
        return capture_bytes(
            [*head, *args],
            cwd=cwd or self.cwd,
            timeout=timeout,
            stdin=stdin,
            stdout_path=stdout_path,
            env=environment(self.pairs(), extra),
        )
