"""Writable runs: a private detached git worktree per attempt, and what the seat changed in it.

What changed is computed against the commit the attempt started from, through the
worktree's own git folder as recorded when it was made: commits the seat made,
untracked and ignored files all count, and a seat that deletes or rewrites the
worktree's `.git` file changes nothing of that.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.run.proc import capture, capture_bytes

CHANGES_DIR = "changes"
# the seat's changes as a binary git diff against the attempt's base commit (in run/)
PATCH = "changes.patch"
# git settings that would change how a patch is written or applied, pinned
_PATCH_CONFIG = (
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "core.quotePath=true",
)
# large generated files are listed as changed but not copied into the run folder
MAX_SNAPSHOT_BYTES = 5 * 1024 * 1024
# nor is anything past this many bytes copied in all (a seat that fills node_modules)
MAX_SNAPSHOT_TOTAL = 200 * 1024 * 1024

# `git worktree add/remove` take locks in the shared .git; serialise them
_git_lock = threading.Lock()


@dataclass(frozen=True)
class Repo:
    """The git work tree holding the workspace."""

    toplevel: Path
    prefix: str  # the workspace's path inside the repository ("" at the top)
    head: str


@dataclass(frozen=True)
class Worktree:
    """A detached worktree of the repository's HEAD for one attempt."""

    root: Path
    repo: Repo
    git_dir: Path  # the worktree's own folder in the repository's .git (absolute)

    @property
    def cwd(self) -> Path:
        """Where the seat runs: the workspace's counterpart inside the worktree."""
        return self.root / self.repo.prefix if self.repo.prefix else self.root


# a seat may have written the configuration git reads in a worktree: no fsmonitor
# command from there runs outside its sandbox
SAFE_GIT = ("git", "-c", "core.fsmonitor=false")


def _git(
    args: list[str], cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[int | None, str, str]:
    return capture(
        [*SAFE_GIT, *args], cwd=cwd, timeout=120, env={**os.environ, **env} if env else None
    )


def find_repo(workspace: Path) -> Repo:
    """The repository of `workspace`; EnvironmentProblem when it is not a git work tree."""
    code, out, err = _git(["rev-parse", "--show-toplevel", "--show-prefix"], workspace)
    if code is None:
        raise EnvironmentProblem(
            "execution.mode writable-worktree needs git, which could not be run"
        )
    if code != 0:
        raise EnvironmentProblem(
            f"{workspace}: execution.mode writable-worktree needs the workspace to be a git "
            "work tree (run `git init` and commit, or pass --workspace)"
        )
    lines = out.splitlines()
    toplevel, prefix = Path(lines[0]), (lines[1] if len(lines) > 1 else "")
    code, head, _ = _git(["rev-parse", "--verify", "HEAD^{commit}"], workspace)
    if code != 0:
        raise EnvironmentProblem(
            f"{workspace}: the git work tree has no commit yet; writable-worktree runs "
            "start from HEAD, so commit something first"
        )
    return Repo(toplevel=toplevel, prefix=prefix.strip().rstrip("/"), head=head.strip())


def create(repo: Repo) -> Worktree:
    """Add a detached worktree of HEAD in a fresh temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="brigade-worktree-"))
    with _git_lock:
        code, _, err = _git(["worktree", "add", "--detach", str(root), repo.head], repo.toplevel)
    if code != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise OSError(f"git worktree add failed: {' '.join(err.split())}")
    code, git_dir, err = _git(["rev-parse", "--absolute-git-dir"], root)
    if code != 0 or not git_dir.strip():
        remove(Worktree(root=root, repo=repo, git_dir=root / ".git"))
        raise OSError(f"git rev-parse failed in the new worktree: {' '.join(err.split())}")
    return Worktree(root=root, repo=repo, git_dir=Path(git_dir.strip()))


def remove(worktree: Worktree) -> None:
    """Remove the worktree folder and git's record of it (best effort, never raises)."""
    with _git_lock:
        _git(["worktree", "remove", "--force", str(worktree.root)], worktree.repo.toplevel)
        shutil.rmtree(worktree.root, ignore_errors=True)
        _git(["worktree", "prune"], worktree.repo.toplevel)


def _tree_git(worktree: Worktree, args: list[str], env: Mapping[str, str] | None = None) -> str:
    """git on the worktree through the git folder recorded when it was made (whatever the
    seat did to its `.git` file); stdout, or OSError naming what failed."""
    command = [f"--git-dir={worktree.git_dir}", f"--work-tree={worktree.root}", *args]
    code, out, err = _git(command, worktree.repo.toplevel, env)
    if code != 0:
        raise OSError(f"git {args[0]} failed in the worktree: {' '.join(err.split())}")
    return out


def changes(
    worktree: Worktree, env: Mapping[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """(changed or created paths, deleted paths) relative to the workspace, sorted: against
    the commit the attempt started from, commits, untracked and ignored files included.

    `env` adds to git's environment (a sandboxed seat's commits keep their objects apart).
    """
    diff = _tree_git(
        worktree, ["diff", "--name-status", "-z", "--no-renames", worktree.repo.head, "--"], env
    )
    # every file git does not track, ignored ones too (no --exclude-standard)
    others = _tree_git(worktree, ["ls-files", "-z", "--others"], env)
    changed: set[str] = set()
    deleted: set[str] = set()
    fields = diff.split("\0")
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if path:
            (deleted if status.startswith("D") else changed).add(path)
    changed.update(path for path in others.split("\0") if path)
    prefix = worktree.repo.prefix + "/" if worktree.repo.prefix else ""

    def inside(paths: set[str]) -> list[str]:
        return sorted(p[len(prefix) :] for p in paths if p.startswith(prefix))

    return inside(changed - deleted), inside(deleted)


def write_patch(worktree: Worktree, target: Path, env: Mapping[str, str] | None = None) -> None:
    """Write the seat's changes to `target` as a binary git diff against the commit the
    attempt started from: commits, untracked and ignored files included (as `changes`
    counts them), paths relative to the workspace; OSError when git fails.

    A private index (the base tree, every file git does not track added as intent to
    add) lets git diff them all; what git writes on the way (the empty blob of an
    intent to add) goes to a private objects folder, never to the repository. `env`
    adds to git's environment (its alternates: where a sandboxed seat's commits are).
    """
    base = [
        "git",
        *_PATCH_CONFIG,
        f"--git-dir={worktree.git_dir}",
        f"--work-tree={worktree.root}",
    ]
    with tempfile.TemporaryDirectory(prefix="brigade-index-") as scratch:
        objects = Path(scratch) / "objects"
        objects.mkdir()
        extra = dict(env or {})
        alternates = [str(_common_dir(worktree) / "objects")]
        if extra.get("GIT_ALTERNATE_OBJECT_DIRECTORIES"):
            alternates.append(extra["GIT_ALTERNATE_OBJECT_DIRECTORIES"])
        variables = {
            **os.environ,
            **extra,
            "GIT_INDEX_FILE": f"{scratch}/index",
            "GIT_OBJECT_DIRECTORY": str(objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(alternates),
        }

        def git(args: list[str], **more: Any) -> bytes:
            code, out, err = capture_bytes(
                [*base, *args], cwd=worktree.root, timeout=600, env=variables, **more
            )
            if code != 0:
                raise OSError(f"git {args[0]} failed in the worktree: {' '.join(err.split())}")
            return out

        git(["read-tree", worktree.repo.head])
        others = git(["ls-files", "-z", "--others"])
        if others:
            listed = Path(scratch) / "others"
            listed.write_bytes(others)
            git(
                [
                    "add",
                    "--intent-to-add",
                    "--force",
                    f"--pathspec-from-file={listed}",
                    "--pathspec-file-nul",
                ]
            )
        relative = [f"--relative={worktree.repo.prefix}"] if worktree.repo.prefix else []
        diff = [
            "diff",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            *relative,
            worktree.repo.head,
            "--",
        ]
        git(diff, stdout_path=target)


def _common_dir(worktree: Worktree) -> Path:
    """The repository's own git folder (where its objects are), from the worktree's."""
    try:
        common = (worktree.git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:  # not a linked worktree's folder: the repository's own
        return worktree.git_dir
    return Path(os.path.normpath(worktree.git_dir / common))


def apply_patch(worktree: Worktree, patch: Path) -> None:
    """Apply a run's changes.patch to a fresh worktree of its base commit (at the workspace's
    place in it); OSError naming what git said when it does not apply."""
    if patch.stat().st_size == 0:
        return  # the seat changed nothing (git apply refuses an empty patch)
    args = ["apply", "--binary", "--whitespace=nowarn"]
    if worktree.repo.prefix:
        args.append(f"--directory={worktree.repo.prefix}")
    code, _, err = capture_bytes(
        ["git", *_PATCH_CONFIG, *args, str(patch)], cwd=worktree.root, timeout=600
    )
    if code != 0:
        raise OSError(f"git apply failed: {' '.join(err.split()) or f'exit status {code}'}")


def snapshot(worktree: Worktree, changed: list[str], run_dir: Path) -> list[str]:
    """Copy changed files into run/changes/ so graders can re-read them later; returns skipped."""
    skipped = []
    budget = MAX_SNAPSHOT_TOTAL
    for relative in changed:
        source = worktree.cwd / relative
        if source.is_symlink() or not source.is_file():
            skipped.append(relative)
            continue
        size = source.stat().st_size
        if size > MAX_SNAPSHOT_BYTES or size > budget:
            skipped.append(relative)
            continue
        budget -= size
        target = run_dir / CHANGES_DIR / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return skipped


class SnapshotWorkspace:
    """The workspace as a writable run left it: HEAD plus the recorded changes."""

    def __init__(self, run_dir: Path, record: dict[str, Any], repo_dir: Path) -> None:
        self.changes_dir = run_dir / CHANGES_DIR
        self.changed = set(record.get("changed_files") or [])
        self.deleted = set(record.get("deleted", []))
        self.head = record["head"]
        self.prefix = record.get("prefix", "")
        self.repo_dir = repo_dir

    def _git_path(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def exists(self, relative: str) -> bool:
        """Whether the path exists after the run (file or folder)."""
        relative = os.path.normpath(relative)
        if relative in self.deleted:
            return False
        if relative in self.changed or any(p.startswith(relative + "/") for p in self.changed):
            return True
        code, _, _ = _git(
            ["cat-file", "-e", f"{self.head}:{self._git_path(relative)}"], self.repo_dir
        )
        return code == 0

    def read_bytes(self, relative: str) -> bytes | None:
        """The file as the run left it, None when absent."""
        relative = os.path.normpath(relative)
        if relative in self.deleted:
            return None
        if relative in self.changed:
            try:
                return store.read_regular(self.changes_dir / relative)
            except OSError:
                return None
        code, data, _ = capture_bytes(
            ["git", "show", f"{self.head}:{self._git_path(relative)}"],
            cwd=self.repo_dir,
            timeout=60,
        )
        return data if code == 0 else None


def base_files(workspace: Path, head: str, paths: Sequence[str]) -> list[bytes | None] | None:
    """Each path's content at `head` (None where it did not exist), by one `git cat-file
    --batch`; None when the commit is not in the repository of `workspace`."""
    code, _, _ = capture_bytes(
        ["git", "cat-file", "-e", f"{head}^{{commit}}"], cwd=workspace, timeout=60
    )
    if code != 0:
        return None
    request = "".join(f"{head}:{path}\n" for path in paths).encode()
    code, data, _ = capture_bytes(
        ["git", "cat-file", "--batch"], cwd=workspace, timeout=60, stdin=request
    )
    if code != 0:
        return None
    found: list[bytes | None] = []
    position = 0
    try:
        for _ in paths:
            end = data.index(b"\n", position)
            header = data[position:end].split()
            position = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                found.append(data[position : position + size])
                position += size + 1
            else:
                found.append(None)  # missing at the base (a new file), or not a file
    except ValueError:  # output cut short: git was stopped
        return None
    return found
