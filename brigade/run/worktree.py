"""Writable runs: a private detached git worktree per attempt, and what the seat changed in it.

What changed is computed against the commit the attempt started from, through a
private index in the repository's own git folder: commits the seat made, untracked
and ignored files all count, and nothing the seat wrote into the worktree's git
folder (its `.git` file, index, HEAD, config.worktree) is read. Every git command
here runs as `run/gitcmd` says (no program the repository or the worktree names
runs); a worktree is removed with its registration, whatever the seat locked.

Each worktree made for an output directory is listed in its ledger
(`<out>/.worktrees/<name>.json`, written before `git worktree add`, removed with the
worktree): what a run killed with `kill -9` left (the folder in the temporary folder,
its registration in the repository) is removed by the next run (`remove_leftovers`),
which holds the lock. Only what a ledger names is touched, and only a folder brigade
names (`brigade-worktree-*` in the temporary folder) registered at that very path: a
worktree of the user's is never one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.run import gitcmd

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
# a repository the seat nests in its worktree is never asked whether it is modified: git
# would run `git status` in it, under the nested repository's own configuration (its
# filters, its fsmonitor), outside the sandbox
_NO_SUBMODULES = "--ignore-submodules=all"
# large generated files are listed as changed but not copied into the run folder
MAX_SNAPSHOT_BYTES = 5 * 1024 * 1024
# nor is anything past this many bytes copied in all (a seat that fills node_modules)
MAX_SNAPSHOT_TOTAL = 200 * 1024 * 1024

LEDGER_DIR = store.WORKTREE_LEDGER  # <out>/.worktrees
_FOLDER_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PREFIX = "brigade-worktree-"

# `git worktree add/remove` take locks in the shared .git; serialise them
_git_lock = threading.Lock()


@dataclass(frozen=True)
class Repo:
    """The git work tree holding the workspace."""

    toplevel: Path
    prefix: str  # the workspace's path inside the repository ("" at the top)
    head: str
    common_dir: Path  # the repository's own git folder (absolute): its objects, its config


@dataclass(frozen=True)
class Worktree:
    """A detached worktree of the repository's HEAD for one attempt."""

    root: Path
    repo: Repo
    git_dir: Path  # the worktree's own folder in the repository's .git (absolute)
    ledger: Path | None = None  # its record in the output directory's ledger

    @property
    def cwd(self) -> Path:
        """Where the seat runs: the workspace's counterpart inside the worktree."""
        return self.root / self.repo.prefix if self.repo.prefix else self.root


def _failed(what: str, err: str, code: int | None, where: str = "") -> str:
    detail = " ".join(err.split()) or (f"exit status {code}" if code else "git could not run")
    return f"git {what} failed{where}: {detail}"


def find_repo(workspace: Path) -> Repo:
    """The repository of `workspace`; EnvironmentProblem when it is not a git work tree."""
    git = gitcmd.Git(None, workspace)
    code, out, _ = git.run(
        [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
            "--show-prefix",
        ]
    )
    if code is None:
        raise EnvironmentProblem(
            "execution.mode writable-worktree needs git, which could not be run"
        )
    if code != 0:
        raise EnvironmentProblem(
            f"{workspace}: execution.mode writable-worktree needs the workspace to be a git "
            "work tree (run `git init` and commit, or pass --workspace)"
        )
    lines = out.decode("utf-8", "replace").splitlines()
    toplevel, common = Path(lines[0]), Path(lines[1])
    prefix = lines[2] if len(lines) > 2 else ""
    code, head, _ = git.run(["rev-parse", "--verify", "HEAD^{commit}"])
    if code != 0:
        raise EnvironmentProblem(
            f"{workspace}: the git work tree has no commit yet; writable-worktree runs "
            "start from HEAD, so commit something first"
        )
    return Repo(
        toplevel=toplevel,
        prefix=prefix.strip().rstrip("/"),
        head=head.decode().strip(),
        common_dir=Path(os.path.realpath(common)),
    )


def repository_git(repo: Repo) -> gitcmd.Git:
    """git over the repository's own git folder, configured as `gitcmd` says."""
    return gitcmd.Git(repo.common_dir, repo.toplevel)


def has_commit(repo: Repo, commit: str) -> bool:
    """Whether `commit` is a commit of the repository."""
    code, _, _ = repository_git(repo).run(["cat-file", "-e", f"{commit}^{{commit}}"], timeout=60)
    return code == 0


def create(repo: Repo, out: Path | None = None) -> Worktree:
    """Add a detached worktree of HEAD in a fresh temporary folder; with `out`, listed in
    that output directory's ledger first (so a crash leaves nothing the next run misses)."""
    root = Path(tempfile.mkdtemp(prefix=_PREFIX))
    ledger = None
    if out is not None:
        try:
            ledger = _record(out, root, repo)
        except OSError:
            shutil.rmtree(root, ignore_errors=True)
            raise
    git = repository_git(repo)
    with _git_lock:
        code, _, err = git.run(["worktree", "add", "--detach", str(root), repo.head])
    if code != 0:
        remove(Worktree(root=root, repo=repo, git_dir=root / ".git", ledger=ledger))
        raise OSError(_failed("worktree add", err, code))
    # the worktree's own folder, from the `.git` file git has just written
    code, out_text, err = gitcmd.Git(None, root).run(["rev-parse", "--absolute-git-dir"])
    git_dir = out_text.decode("utf-8", "replace").strip()
    made = Worktree(root=root, repo=repo, git_dir=Path(os.path.realpath(git_dir)), ledger=ledger)
    if code != 0 or not git_dir:
        remove(dataclasses.replace(made, git_dir=root / ".git"))
        raise OSError(_failed("rev-parse", err, code, " in the new worktree"))
    return made


def _record(out: Path, root: Path, repo: Repo) -> Path:
    """List a worktree about to be added in `out`'s ledger; the record's path."""
    doc = {"root": str(root), "common_dir": str(repo.common_dir), "host": socket.gethostname()}
    folder = fs.folder_in(out, [LEDGER_DIR])
    try:
        fs.write_at(folder, f"{root.name}.json", json.dumps(doc).encode(), durable=False)
    finally:
        os.close(folder)
    return out / LEDGER_DIR / f"{root.name}.json"


def write_protect(root: Path) -> None:
    """Take the write bits off every folder and file under `root` (links untouched): a
    read-only copy stays as it was made, as far as file modes go (the sandbox holds it
    read-only whatever the modes)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if not os.path.islink(os.path.join(folder, name))]
        for name in files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o222)
    # folders last, deepest first: their files were changed while they were writable
    for folder, _, _ in sorted(os.walk(root), key=lambda entry: -entry[0].count(os.sep)):
        info = os.lstat(folder)
        os.chmod(folder, stat.S_IMODE(info.st_mode) & ~0o222)


def _writable_again(root: Path) -> None:
    """Give the owner back every folder under `root` (no link followed), so it can be removed
    whatever modes a copy was given or a process set."""
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            # opened no-follow as a folder, changed through its descriptor: a link swapped
            # in for it (after it was listed) is never followed to a folder elsewhere
            fd = os.open(folder, _FOLDER_NOFOLLOW)
        except OSError:
            continue
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            if mode & 0o700 != 0o700:
                os.fchmod(fd, mode | 0o700)
            entries = list(os.scandir(folder))
        except OSError:
            continue
        finally:
            os.close(fd)
        stack += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]


def remove(worktree: Worktree) -> None:
    """Remove the worktree folder and git's record of it (best effort, never raises), then
    its ledger record.

    The record goes whatever the seat (or the code a grader tests) wrote there: a
    `locked` file, a HEAD naming its own objects, a broken `.git` file. Other
    worktrees of the repository are left as they are (no `git worktree prune`).
    """
    git = repository_git(worktree.repo)
    with _git_lock:
        # twice --force: a lock the seat wrote keeps nothing
        _writable_again(worktree.root)
        git.run(["worktree", "remove", "--force", "--force", str(worktree.root)])
        # (however deep the seat nested folders: git and rmtree give up on those)
        _remove_quietly(worktree.root)
        _drop_registration(worktree)
    if worktree.ledger is not None:
        with contextlib.suppress(OSError):
            fs.remove(worktree.ledger)


def remove_leftovers(out: Path) -> int:
    """Remove the worktrees a killed run left for `out` (its ledger's records of this
    machine), each folder with its registration; how many. Call with the run's lock held.

    A record is output-directory data a process could have written: only a folder named
    as brigade names them, directly in the temporary folder, is removed, and only the
    registration in that repository whose `gitdir` is that folder's `.git`.
    """
    folder = out / LEDGER_DIR
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return 0  # no ledger: nothing was left (the no-op path's one look)
    removed = 0
    temp = tempfile.gettempdir()
    for name in names:
        path = folder / name
        if not name.endswith(".json"):
            continue
        doc = fs.load_json(path)
        leftover = _leftover(doc, path, temp)
        if leftover is None:
            if not isinstance(doc, dict) or doc.get("host") == socket.gethostname():
                with contextlib.suppress(OSError):
                    fs.remove(path)  # not a record of a worktree of ours: dropped
            continue  # another machine's (a cluster worker's): its own to clean
        remove(leftover)
        removed += 1
    return removed


def _leftover(doc: Any, path: Path, temp: str) -> Worktree | None:
    """The worktree a ledger record names, when it is one brigade made on this machine."""
    if not isinstance(doc, dict) or doc.get("host") != socket.gethostname():
        return None
    root, common = doc.get("root"), doc.get("common_dir")
    if not isinstance(root, str) or not isinstance(common, str):
        return None
    base = os.path.basename(root)
    if (
        not base.startswith(_PREFIX)
        or path.name != f"{base}.json"
        or os.path.dirname(root) != temp
        or not os.path.isabs(common)
        or not os.path.isdir(common)
    ):
        return None
    common_dir = Path(common)
    # its registration: the folder of <repository>/worktrees whose gitdir is root/.git
    ours = os.path.join(os.path.realpath(root), ".git")
    git_dir = Path(root) / ".git"
    try:
        records = sorted(os.scandir(common_dir / "worktrees"), key=lambda entry: entry.name)
    except OSError:
        records = []
    for entry in records:
        if not entry.name.startswith(base) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            named = fs.read_regular(Path(entry.path) / "gitdir", 4096)
        except OSError:
            continue
        if os.path.realpath(named.decode("utf-8", "replace").strip()) == ours:
            git_dir = Path(entry.path)
            break
    repo = Repo(toplevel=common_dir, prefix="", head="", common_dir=common_dir)
    return Worktree(root=Path(root), repo=repo, git_dir=git_dir, ledger=path)


def _drop_registration(worktree: Worktree) -> None:
    """Remove the worktree's own folder in `<repository>/.git/worktrees/` when `git worktree
    remove` left it (what `git worktree prune` does for one whose folder is gone)."""
    record = worktree.git_dir
    if record.parent != worktree.repo.common_dir / "worktrees":
        return  # not a linked worktree's record (create failed half-way): nothing of ours
    if not record.name.startswith(worktree.root.name):
        return
    try:
        if not stat.S_ISDIR(os.lstat(record).st_mode):
            return
    except OSError:
        return  # removed by git
    _remove_quietly(record)


def _remove_quietly(folder: Path) -> None:
    """Remove a folder a seat could have written, however deep (best effort)."""
    with contextlib.suppress(OSError):
        if os.path.lexists(folder):
            fs.remove(folder)


class Inspection:
    """What a seat left in a worktree, read through a private index of the base commit (every
    file git does not track added as intent to add) in the repository's own git folder:
    nothing of the worktree's git folder (its index, HEAD, config.worktree) is read, and
    what git writes on the way (the empty blob of an intent to add) goes to a private
    objects folder, never to the repository."""

    def __init__(self, worktree: Worktree, scratch: Path) -> None:
        self.worktree = worktree
        self.scratch = scratch
        objects = scratch / "objects"
        objects.mkdir()
        self.git = repository_git(worktree.repo)
        self.extra = {
            "GIT_INDEX_FILE": str(scratch / "index"),
            "GIT_OBJECT_DIRECTORY": str(objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(worktree.repo.common_dir / "objects"),
        }
        self._run(["read-tree", worktree.repo.head])
        others = self._run(["ls-files", "-z", "--others"])
        if others:
            listed = scratch / "others"
            listed.write_bytes(others)
            # a name git refuses to hold (`.git.`, `GIT~1`: another file system's `.git`)
            # is left out, the rest added: such a file is no way to make the seat's work
            # unreadable (an apparatus fault where a failing score is due)
            self._run(
                [
                    "add",
                    "--intent-to-add",
                    "--force",
                    "--ignore-errors",
                    f"--pathspec-from-file={listed}",
                    "--pathspec-file-nul",
                ],
                ok=(0, 1),
            )

    def _run(
        self, args: list[str], stdout_path: Path | None = None, ok: tuple[int, ...] = (0,)
    ) -> bytes:
        code, out, err = self.git.run(
            [*_PATCH_CONFIG, *args],
            work_tree=self.worktree.root,
            extra=self.extra,
            timeout=600,
            stdout_path=stdout_path,
        )
        if code not in ok:
            raise OSError(_failed(args[0], err, code, " in the worktree"))
        return out

    def changes(self) -> tuple[list[str], list[str]]:
        """(changed or created paths, deleted paths) relative to the workspace, sorted."""
        diff = self._run(
            [
                "diff",
                "--name-status",
                "-z",
                "--no-renames",
                _NO_SUBMODULES,
                self.worktree.repo.head,
                "--",
            ]
        ).decode("utf-8", "replace")
        changed: set[str] = set()
        deleted: set[str] = set()
        fields = diff.split("\0")
        for status, path in zip(fields[0::2], fields[1::2], strict=False):
            if path:
                (deleted if status.startswith("D") else changed).add(path)
        prefix = self.worktree.repo.prefix + "/" if self.worktree.repo.prefix else ""

        def inside(paths: set[str]) -> list[str]:
            return sorted(p[len(prefix) :] for p in paths if p.startswith(prefix))

        return inside(changed), inside(deleted)

    def write_patch(self, target: Path) -> None:
        """Write the changes to `target` as a binary git diff against the base commit, paths
        relative to the workspace."""
        prefix = self.worktree.repo.prefix
        relative = [f"--relative={prefix}"] if prefix else []
        diff = [
            "diff",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            _NO_SUBMODULES,
            "--src-prefix=a/",
            "--dst-prefix=b/",
            *relative,
            self.worktree.repo.head,
            "--",
        ]
        # to a private file first: `target`'s folder may hold whatever a seat left there,
        # so it is written by fs (no link followed) once git is done
        diff_file = self.scratch / "changes.patch"
        self._run(diff, stdout_path=diff_file)
        with open(diff_file, "rb") as handle:
            fs.atomic_write(target, handle, sync_dir=False)


@contextlib.contextmanager
def inspect(worktree: Worktree) -> Iterator[Inspection]:
    """An `Inspection` of the worktree as it is now (its scratch folder removed after);
    OSError naming what failed."""
    with tempfile.TemporaryDirectory(prefix="brigade-index-") as scratch:
        yield Inspection(worktree, Path(scratch))


def changes(worktree: Worktree) -> tuple[list[str], list[str]]:
    """(changed or created paths, deleted paths) relative to the workspace, sorted: against
    the commit the attempt started from, commits, untracked and ignored files included."""
    with inspect(worktree) as seen:
        return seen.changes()


def write_patch(worktree: Worktree, target: Path) -> None:
    """Write the seat's changes to `target` as a binary git diff against the commit the
    attempt started from: commits, untracked and ignored files included (as `changes`
    counts them), paths relative to the workspace; OSError when git fails."""
    with inspect(worktree) as seen:
        seen.write_patch(target)


def apply_patch(worktree: Worktree, patch: Path) -> None:
    """Apply a run's changes.patch to a fresh worktree of its base commit (at the workspace's
    place in it); OSError naming what git said when it does not apply."""
    if patch.stat().st_size == 0:
        return  # the seat changed nothing (git apply refuses an empty patch)
    args = [*_PATCH_CONFIG, "apply", "--binary", "--whitespace=nowarn"]
    if worktree.repo.prefix:
        args.append(f"--directory={worktree.repo.prefix}")
    code, _, err = repository_git(worktree.repo).run(
        [*args, str(patch)], work_tree=worktree.root, cwd=worktree.root, timeout=600
    )
    if code != 0:
        raise OSError(_failed("apply", err, code))


def snapshot(worktree: Worktree, changed: list[str], run_dir: Path) -> list[str]:
    """Copy changed files into run/changes/ so graders can re-read them later; returns skipped.

    Only regular files are read (never through a link, `fs.read_regular`), and every
    folder on the way to a copy is made under `run_dir` without following a link
    (`fs.folder_in`): what the seat planted can neither be read nor written through.
    """
    skipped = []
    budget = MAX_SNAPSHOT_TOTAL
    for relative in changed:
        source = worktree.cwd / relative
        try:
            data = fs.read_regular(source, min(MAX_SNAPSHOT_BYTES, budget))
        except OSError:  # a link, a folder, a FIFO, gone: not a file to copy
            skipped.append(relative)
            continue
        if len(data) > MAX_SNAPSHOT_BYTES or len(data) > budget:
            skipped.append(relative)
            continue
        budget -= len(data)
        *folders, name = relative.split("/")
        folder = fs.folder_in(run_dir, [CHANGES_DIR, *folders])
        try:
            fs.write_at(folder, name, data, durable=False)
        finally:
            os.close(folder)
    return skipped


def snapshot_digest(run_dir: Path) -> str | None:
    """sha256 over the snapshot folder `run_dir/changes`: every name in it, a link by its
    target (never followed), a file by its bytes' digest, anything else by its kind; None
    when there is none."""
    root = run_dir / CHANGES_DIR
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            return None
    except OSError:
        return None
    digest = hashlib.sha256()
    stack = [""]
    while stack:
        relative = stack.pop()
        try:
            entries = sorted(os.scandir(root / relative), key=lambda entry: entry.name)
        except OSError:
            digest.update(f"?\0{relative}\0".encode())
            continue
        for entry in entries:
            name = f"{relative}/{entry.name}" if relative else entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                digest.update(f"l\0{name}\0{os.readlink(entry.path)}\0".encode())
            elif stat.S_ISDIR(mode):
                digest.update(f"d\0{name}\0".encode())
                stack.append(name)
            elif stat.S_ISREG(mode):
                digest.update(f"f\0{name}\0{store.file_digest(entry.path)}\0".encode())
            else:
                digest.update(f"o\0{name}\0".encode())
    return "sha256:" + digest.hexdigest()


class SnapshotWorkspace:
    """The workspace as a writable run left it: HEAD plus the recorded changes."""

    def __init__(self, run_dir: Path, record: dict[str, Any], repo_dir: Path) -> None:
        self.changes_dir = run_dir / CHANGES_DIR
        self.changed = set(record.get("changed_files") or [])
        self.deleted = set(record.get("deleted", []))
        self.head = record["head"]
        self.prefix = record.get("prefix", "")
        self.repo_dir = repo_dir
        self._git: list[gitcmd.Git] = []

    def git(self) -> gitcmd.Git:
        """git over the repository of the workspace (made when first used)."""
        if not self._git:
            self._git.append(gitcmd.Git(None, self.repo_dir))
        return self._git[0]

    def _git_path(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def exists(self, relative: str) -> bool:
        """Whether the path exists after the run (file or folder)."""
        relative = os.path.normpath(relative)
        if relative in self.deleted:
            return False
        if relative in self.changed or any(p.startswith(relative + "/") for p in self.changed):
            return True
        code, _, _ = self.git().run(
            ["cat-file", "-e", f"{self.head}:{self._git_path(relative)}"], timeout=60
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
        code, data, _ = self.git().run(
            ["show", "--no-textconv", f"{self.head}:{self._git_path(relative)}"], timeout=60
        )
        return data if code == 0 else None


def base_files(workspace: Path, head: str, paths: Sequence[str]) -> list[bytes | None] | None:
    """Each path's content at `head` (None where it did not exist), by one `git cat-file
    --batch`; None when the commit is not in the repository of `workspace`."""
    git = gitcmd.Git(None, workspace)
    code, _, _ = git.run(["cat-file", "-e", f"{head}^{{commit}}"], timeout=60)
    if code != 0:
        return None
    request = "".join(f"{head}:{path}\n" for path in paths).encode()
    code, data, _ = git.run(["cat-file", "--batch"], timeout=60, stdin=request)
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
