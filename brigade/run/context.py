"""What every cell of one run shares (`RunContext`), and the battery's hidden tests.

Kept apart from the runner and the graders, which it names none of: a run whose
cells are all up to date builds its context without importing what runs a seat
or a grader.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brigade.core.specs import DEFAULT_COMMAND_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from brigade.core.specs import SandboxMode, SeatSpec
    from brigade.core.usage import Price
    from brigade.run.budget import Budget

# the placeholder of a command grader's words that names the manifest's folder
MANIFEST_DIR = "{manifest_dir}"


@dataclass(frozen=True)
class RunContext:
    """Where a run reads and writes, shared by every cell of one invocation."""

    out: Path
    workspace: Path
    manifest_dir: Path
    manifest_digest: str
    retry_transient: bool = False
    # the roster, as graders that run a seat or a command need it: its seats (a judge's
    # time limit and folder), its folder, the default time limit of command graders
    seats: Mapping[str, SeatSpec] = field(default_factory=dict)
    roster_dir: str = "."
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT_SECONDS
    # the roster's price table: a cost the CLI did not report is priced with it
    prices: Mapping[str, Price] = field(default_factory=dict)
    sandbox: SandboxMode | None = None  # --sandbox: every seat's sandbox mode (None: its own)
    # the run's spending cap (None: no cap): seat runs and judges start only when it admits
    budget: Budget | None = None
    # the roster's `secrets.env`: more variables whose values are secrets (details quote none)
    secret_env: tuple[str, ...] = ()
    # the manifest file (a run's, or a regrade's from plan.json): where a removed workspace's
    # setup is, and what a seat must not read when a grader's test patch is written in it
    manifest: Path | None = None
    # the hidden tests of every case of the battery (command graders' files): no seat sees
    # another case's either
    unseen: tuple[str, ...] = ()


def unseen_paths(
    specs: Sequence[Mapping[str, Any]], manifest_dir: Path, manifest: Path | None = None
) -> tuple[str, ...]:
    """The files under the manifest's folder that command graders name (a `test_patch_file`,
    a `{manifest_dir}/...` word of the command), and the `manifest` itself when a grader's
    `test_patch` is written inline in it: the seat's sandbox hides them, so the agent never
    reads the tests it is graded by."""
    found: dict[str, None] = {}
    root = os.path.realpath(manifest_dir)
    for spec in specs:
        if spec.get("type") != "command":
            continue
        if spec.get("test_patch") is not None and manifest is not None:
            found[os.path.realpath(manifest)] = None
        name = spec.get("test_patch_file")
        if isinstance(name, str) and name:
            found[os.path.normpath(os.path.join(root, name))] = None
        command = spec.get("command")
        words = [command] if isinstance(command, str) else command
        if not isinstance(words, list):
            continue
        for word in words:
            if not isinstance(word, str) or MANIFEST_DIR + "/" not in word:
                continue
            # every `{manifest_dir}/path` in the word (a shell line may name several)
            for piece in word.split(MANIFEST_DIR + "/")[1:]:
                relative = piece.split()[0].strip("'\"") if piece.split() else ""
                path = os.path.normpath(os.path.join(root, relative))
                if relative and path.startswith(root + os.sep):
                    found[path] = None
    return tuple(found)


def battery_unseen(
    graders: Iterable[Sequence[Mapping[str, Any]]], manifest_dir: Path, manifest: Path | None
) -> tuple[str, ...]:
    """`unseen_paths` of every case of a battery: a seat reads no case's hidden tests (it
    could keep another case's in a state folder its later cells read)."""
    found: dict[str, None] = {}
    for specs in graders:
        found.update(dict.fromkeys(unseen_paths(specs, manifest_dir, manifest)))
    return tuple(found)
