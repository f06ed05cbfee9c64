"""Cases with their own world: resolving a case's workspace, and building its starting state.

A case's workspace (a git repository at a commit, or a folder) is resolved before the
plan is made: the commit to its full sha, the folder to its content digest, the setup
to the digest of its commands and inputs (`resolve`). What every attempt of the case
starts from is built once per distinct workspace and setup (`ensure`), in the output
directory: `workspaces/<key>/tree/` is a git repository of its own holding one commit,
the workspace's files as the setup left them (the repository's history is not there,
so a seat cannot read a later fix from it). Writable runs branch their worktree from
that commit, read-only runs run in the tree; a regrade re-applies a run's patch to it.
`workspace.json` beside the tree records the key, the commit and whether the setup
failed (with its log, `setup.log`), so a second run finds it built.

A Dask worker cannot see the output directory: the coordinator sends it the built tree as
a git bundle of its one commit (`bundle`, named by the workspace's key and its digest), and
the worker makes its own copy once, from bytes whose digest it checks (`unbundle`), then
branches each attempt's worktree from that copy as a local run does from the tree.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.core.identity import canonical_json, text_digest, world_key
from brigade.core.specs import Case, Manifest, SetupSpec, WorkspaceSpec
from brigade.errors import InputError
from brigade.outdir import store
from brigade.run import gitcmd, proc, sandbox
from brigade.run.reuse import file_digest, path_digest

WORKSPACES_DIR = "workspaces"
TREE = "tree"
STATE = "workspace.json"
STATE_SCHEMA = "brigade.workspace.v1"
SETUP_LOG = "setup.log"
# how much of a failed setup's log each of its cells keeps in its own stderr.log (where
# `brigade show`, the report and the viewer show a cell's stderr)
LOG_TAIL = 16 * 1024
# what setup.log keeps of each command's stdout and of its stderr (their end, where an
# error is): the setup writes them and can make them any size (a sparse file costs nothing)
SETUP_LOG_LIMIT = 1024 * 1024
# the one commit of a built tree: fixed author and date, so equal files give equal commits
_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "brigade",
    "GIT_AUTHOR_EMAIL": "brigade@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "brigade",
    "GIT_COMMITTER_EMAIL": "brigade@localhost",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00+0000",
}


def git(
    args: list[str], cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 600
) -> tuple[int | None, str, str]:
    """git over a case's repository or a built tree, configured as `run/gitcmd` says (no
    program the repository names runs): (code, stdout, stderr)."""
    code, out, err = gitcmd.Git(None, cwd).run(args, extra=env, timeout=timeout)
    return code, out.decode("utf-8", "replace"), err


# -- resolving (before the plan) ------------------------------------------------------


def resolve(manifest: Manifest) -> Manifest:
    """The manifest with every case's workspace resolved (commit sha, folder digest, setup
    digest); InputError (exit 2, a line per problem) for a folder that is not a git
    repository or a commit it does not have. A manifest without workspaces is returned
    as it is."""
    if not any(case.workspace is not None for case in manifest.cases):
        return manifest
    commits = _commits(manifest.cases)
    digests: dict[str, str] = {}
    setups: dict[tuple[Any, ...], str] = {}
    problems: list[str] = []
    cases: list[Case] = []
    base = manifest.directory
    for index, case in enumerate(manifest.cases):
        workspace = case.workspace
        if workspace is None:
            cases.append(case)
            continue
        where = f"{manifest.path}: cases[{index}].workspace"
        if workspace.kind == "repo":
            found = commits[workspace.path, workspace.revision or "HEAD"]
            if isinstance(found, InputError):
                problems.append(str(found).replace(_WHERE, where))
                continue
            workspace = dataclasses.replace(workspace, commit=found)
        else:
            if workspace.path not in digests:
                digests[workspace.path] = folder_digest(Path(workspace.path))
            workspace = dataclasses.replace(workspace, digest=digests[workspace.path])
        setup = case.setup
        if setup is not None:
            known = (setup.commands, setup.inputs)  # cases sharing a setup: one digest
            if known not in setups:
                setups[known] = setup_digest(setup, base)
            setup = dataclasses.replace(setup, digest=setups[known])
        cases.append(case._replace(workspace=workspace, setup=setup))
    if problems:
        raise InputError("\n".join(problems))
    worlds = [case.world() for case in cases]
    return dataclasses.replace(
        manifest,
        cases=tuple(cases),
        # a moved branch or an edited folder changes the cells: the expansion's caches too
        content_digest=text_digest(canonical_json([manifest.content_digest, worlds])),
    )


_WHERE = "\0where\0"  # a problem's place, filled in for each case that has it


def _commits(cases: Iterable[Case]) -> dict[tuple[str, str], str | InputError]:
    """Each distinct (repository, revision) of the cases resolved, several repositories at
    once (a git process each)."""
    keys = sorted(
        {
            (case.workspace.path, case.workspace.revision or "HEAD")
            for case in cases
            if case.workspace is not None and case.workspace.kind == "repo"
        }
    )
    if len(keys) <= 1:
        return {key: _commit_of(key[0], key[1], _WHERE) for key in keys}
    found: dict[tuple[str, str], str | InputError] = {}

    def look_up(key: tuple[str, str]) -> None:
        found[key] = _commit_of(key[0], key[1], _WHERE)

    for start in range(0, len(keys), 8):  # eight gits at a time
        threads = [threading.Thread(target=look_up, args=(key,)) for key in keys[start : start + 8]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return found


def _commit_of(path: str, revision: str, where: str) -> str | InputError:
    if revision.startswith("-"):
        return InputError(f"{where}.commit: {revision!r} is not a revision")
    # one git: its folder's line says it is a repository, the next the commit's sha
    code, out, err = git(
        [
            "rev-parse",
            "--git-dir",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{revision}^{{commit}}",
        ],
        Path(path),
        timeout=60,
    )
    if code is None:
        return InputError(f"{where}: git could not be run (a repo workspace needs it)")
    lines = out.splitlines()
    if not lines:
        return InputError(f"{where}.repo: {path} is not a git repository")
    if code != 0 or len(lines) != 2:
        return InputError(f"{where}.commit: {revision!r} is not a commit of {path}")
    return lines[1]


def folder_digest(root: Path) -> str:
    """sha256 over a folder's names, links and regular files' bytes (`.git` left out)."""
    digest = hashlib.sha256()
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        for entry in entries:
            if entry.name == ".git":
                continue
            name = os.path.relpath(entry.path, root)
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                digest.update(f"l\0{name}\0{os.readlink(entry.path)}\0".encode())
            elif stat.S_ISDIR(info.st_mode):
                digest.update(f"d\0{name}\0".encode())
                stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode):
                mode = "x" if info.st_mode & 0o111 else "f"
                digest.update(f"{mode}\0{name}\0{file_digest(entry.path)}\0".encode())
    return "sha256:" + digest.hexdigest()


def setup_digest(setup: SetupSpec, base: Path) -> str:
    """What a setup is: its commands and its inputs' content (named relative to `base`)."""
    inputs = [[os.path.relpath(path, base), path_digest(Path(path))] for path in setup.inputs]
    commands = [c if isinstance(c, str) else list(c) for c in setup.commands]
    return text_digest(canonical_json({"commands": commands, "inputs": inputs}))


# -- the built starting state ------------------------------------------------------------


def folder(out: Path, world: Mapping[str, Any]) -> Path:
    """Where a workspace is built: `<out>/workspaces/<key>/`."""
    return out / WORKSPACES_DIR / world_key(world)


def tree(out: Path, world: Mapping[str, Any]) -> Path:
    """The built tree (a git repository of its own) every attempt starts from."""
    return folder(out, world) / TREE


@dataclass(frozen=True)
class Built:
    """What `workspace.json` says of a built workspace."""

    ok: bool
    head: str | None  # the tree's one commit (None: the setup failed)
    detail: str | None = None  # why it failed, its log named relative to the output dir


def state(out: Path, world: Mapping[str, Any]) -> Built | None:
    """The built workspace's record, None when it is not built (or its record is not ours)."""
    doc = store.read_json(folder(out, world) / STATE)
    if not isinstance(doc, dict) or doc.get("key") != world_key(world):
        return None
    head = doc.get("head")
    if doc.get("ok") is True and isinstance(head, str):
        if not (tree(out, world) / ".git").is_dir():
            return None
        return Built(True, head)
    return Built(False, None, str(doc.get("detail") or "the setup failed"))


def log_tail(out: Path, world: Mapping[str, Any], limit: int = LOG_TAIL) -> bytes:
    """The last `limit` bytes of a built workspace's setup log (b"" when there is none).

    The setup's commands wrote it: it is opened without following a link, only as a
    regular file, and only its end is read."""
    try:
        return fs.read_end(folder(out, world) / SETUP_LOG, limit)[0]
    except OSError:
        return b""


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def ensure(
    out: Path,
    workspace: WorkspaceSpec,
    setup: SetupSpec | None,
    world: Mapping[str, Any],
    *,
    retry_failed: bool = False,
    sandbox_mode: sandbox.SandboxMode | None = None,
) -> tuple[Built, bool]:
    """The built workspace, building it first when it is not (once per key, whoever asks):
    (its record, whether it was built now). A failed setup stays failed unless
    `retry_failed` (--retry-transient)."""
    with _lock(world_key(world)):
        found = state(out, world)
        if found is not None and (found.ok or not retry_failed):
            return found, False
        return build(out, workspace, setup, world, sandbox_mode=sandbox_mode), True


def build(
    out: Path,
    workspace: WorkspaceSpec,
    setup: SetupSpec | None,
    world: Mapping[str, Any],
    *,
    sandbox_mode: sandbox.SandboxMode | None = None,
) -> Built:
    """Build a workspace: its files in a fresh folder, the setup run there, one commit."""
    target = folder(out, world)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        built = _build_in(scratch, out, target, workspace, setup, sandbox_mode)
        record = {
            "schema": STATE_SCHEMA,
            "key": world_key(world),
            "ok": built.ok,
            "head": built.head,
            "detail": built.detail,
        }
        store.write_json(scratch / STATE, record, STATE_SCHEMA)
        if os.path.lexists(target):
            fs.remove(target)  # (an earlier build: the setup's product, nested however deep)
        os.replace(scratch, target)
        return built
    finally:
        _remove_quietly(scratch)


def _build_in(
    scratch: Path,
    out: Path,
    target: Path,
    workspace: WorkspaceSpec,
    setup: SetupSpec | None,
    sandbox_mode: sandbox.SandboxMode | None,
) -> Built:
    files = scratch / TREE
    log = scratch / SETUP_LOG
    log_name = os.path.relpath(target / SETUP_LOG, out)
    try:
        _export(workspace, files, scratch)
    except OSError as exc:
        store.atomic_write_bytes(log, f"brigade: {exc}\n".encode())
        return Built(False, None, f"the workspace could not be copied: {exc} (log: {log_name})")
    if setup is not None:
        failed = _run_setup(setup, files, log, scratch, sandbox_mode)
        if failed is not None:
            _remove_quietly(files)
            return Built(False, None, f"{failed} (log: {log_name})")
    try:
        if _drop_git(files):
            note = b"brigade: removed the .git the setup left (not brigade's)\n"
            store.atomic_write_bytes(log, _read(log) + note)
        head = _commit(files)
    except OSError as exc:
        _remove_quietly(files)
        return Built(False, None, f"the workspace could not be committed: {exc}")
    return Built(True, head)


def _export(workspace: WorkspaceSpec, files: Path, scratch: Path) -> None:
    """The workspace's files (a repository's at its commit, a folder's as they are)."""
    if workspace.kind == "dir":
        shutil.copytree(workspace.path, files, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return
    files.mkdir()
    # a private index: nothing is written into the case's repository
    env = {"GIT_INDEX_FILE": str(scratch / "index")}
    for args in (
        ["read-tree", str(workspace.commit)],
        ["checkout-index", "--all", "--force", f"--prefix={files}/"],
    ):
        code, _, err = git(args, Path(workspace.path), env)
        if code != 0:
            raise OSError(f"git {args[0]} failed: {' '.join(err.split()) or code}")
    with contextlib.suppress(FileNotFoundError):
        (scratch / "index").unlink()


def _argv(command: str | tuple[str, ...]) -> list[str]:
    return ["sh", "-c", command] if isinstance(command, str) else list(command)


def _run_setup(
    setup: SetupSpec,
    files: Path,
    log: Path,
    scratch: Path,
    sandbox_mode: sandbox.SandboxMode | None,
) -> str | None:
    """Run the setup's commands in `files` (sandboxed when the sandbox works here, with its
    network switch); their output goes to `log`. None, or why the setup failed."""
    deadline = time.monotonic() + setup.timeout_seconds
    env = {**os.environ, "BRIGADE_SETUP": "1"}
    parts: list[bytes] = []
    try:
        for number, command in enumerate(setup.commands, 1):
            argv = _argv(command)
            left = deadline - time.monotonic()
            if left <= 0:
                return f"setup timed out (its limit is {setup.timeout_seconds:g} s)"
            with sandbox.command_sandbox(
                files,
                mode=sandbox_mode or "auto",
                network=setup.network,
                visible=[*sandbox.named_paths(argv), *sandbox.brigade_paths()],
            ) as box:
                stdout, stderr = scratch / "stdout", scratch / "stderr"
                result = proc.run(
                    argv,
                    cwd=files,
                    env=env,
                    stdin_text=None,
                    timeout=left,
                    stdout_path=stdout,
                    stderr_path=stderr,
                    confine=box.confine,
                )
            parts.append(f"$ {' '.join(argv)}\n".encode())
            parts += [_read_end(stdout, SETUP_LOG_LIMIT), _read_end(stderr, SETUP_LOG_LIMIT)]
            if not result.launched:
                return f"setup command {number} could not start: {result.launch_error}"
            if result.timed_out:
                return f"setup timed out (its limit is {setup.timeout_seconds:g} s)"
            if result.exit_code != 0:
                return f"setup command {number} exited with status {result.exit_code}"
    except (OSError, sandbox.SandboxError) as exc:
        return f"setup could not run: {exc}"
    finally:
        store.atomic_write_bytes(log, b"".join(parts))
        for name in ("stdout", "stderr"):
            with contextlib.suppress(FileNotFoundError):
                (scratch / name).unlink()
    return None


def _read(path: Path) -> bytes:
    try:
        return store.read_regular(path)
    except OSError:
        return b""


def _read_end(path: Path, limit: int) -> bytes:
    """The last `limit` bytes of a command's output file (where its error is), saying how
    much came before; b"" when it cannot be read as a regular file."""
    try:
        data, size = fs.read_end(path, limit)
    except OSError:
        return b""
    cut = f"brigade: {size - limit} bytes before not kept\n" if size > limit else ""
    return cut.encode() + data


def _remove_quietly(folder: Path) -> None:
    """Remove a folder a setup wrote in, however deep it nested folders (best effort)."""
    with contextlib.suppress(OSError):
        if os.path.lexists(folder):
            fs.remove(folder)


def _drop_git(files: Path) -> bool:
    """Remove what the setup left at `files/.git` (never followed); whether there was one.

    The setup's product is not trusted: a `.git` file naming another repository would
    have brigade commit there, and a configuration of its own would name programs git
    runs outside the sandbox (a commit's signer). The built tree's repository is made by
    brigade alone."""
    return fs.remove(files / ".git")


def _commit(files: Path) -> str:
    """Make `files` a git repository of one commit holding everything in it; its sha."""
    for args in (
        ["init", "--quiet"],
        ["add", "--all", "--force", "."],
        # (no signing: nothing the product could name runs)
        ["commit", "--quiet", "--allow-empty", "--no-verify", "--no-gpg-sign"]
        + ["-m", "brigade workspace"],
        ["rev-parse", "HEAD"],
    ):
        code, stdout, err = git(args, files, _COMMIT_ENV)
        if code != 0:
            raise OSError(f"git {args[0]} failed: {' '.join(err.split()) or code}")
    return stdout.strip()


def rebuild_setup(
    workspace: WorkspaceSpec, setup: SetupSpec | None, manifest: Path | None, case_id: str
) -> SetupSpec | None:
    """The setup to build a removed workspace again exactly as it was (plan.json knows a
    setup by its digest only: its commands come from the manifest when its case's setup
    there has that digest still); InputError saying why it cannot be."""
    if workspace.kind == "dir" and folder_digest(Path(workspace.path)) != workspace.digest:
        raise InputError(f"the folder {workspace.path} has changed since it was built")
    if setup is None or setup.commands:
        return setup
    from brigade.inputs.manifest import load_manifest  # only when a build is gone

    if manifest is None:
        raise InputError("its setup is known here by its digest only (no manifest is known)")
    loaded = load_manifest(manifest)
    for case in loaded.cases:
        if case.id == case_id and case.setup is not None:
            found = dataclasses.replace(
                case.setup, digest=setup_digest(case.setup, loaded.directory)
            )
            if found.digest == setup.digest:
                return found
    raise InputError(f"{manifest} no longer has the setup it was built with")


# -- shipping a built tree to a Dask worker ---------------------------------------------


@dataclass(frozen=True)
class Shipment:
    """A built workspace as a worker receives it: its key, its one commit, the digest of its
    bundle's bytes (`sha256:<hex>`)."""

    key: str
    head: str
    digest: str

    @property
    def name(self) -> str:
        """The name the bundle goes by on the cluster and in a worker's cache."""
        return f"brigade-workspace-{self.key}-{self.digest.removeprefix('sha256:')[:16]}"


def bundle(out: Path, world: Mapping[str, Any], head: str) -> tuple[Shipment, bytes]:
    """The built tree's one commit as a git bundle (every object it needs) and what names it;
    OSError when git cannot make it or the tree is not at `head`."""
    source = tree(out, world)
    code, found, err = git(["rev-parse", "--verify", "HEAD^{commit}"], source, timeout=60)
    if code != 0 or found.strip() != head:
        raise OSError(f"the built workspace {source} is not at commit {head}")
    with tempfile.TemporaryDirectory(prefix="brigade-bundle-") as scratch:
        path = Path(scratch) / "tree.bundle"
        code, _, err = git(["bundle", "create", "--quiet", str(path), "HEAD"], source)
        if code != 0:
            raise OSError(f"git bundle failed: {' '.join(err.split()) or code}")
        data = store.read_regular(path)
    return Shipment(world_key(world), head, "sha256:" + hashlib.sha256(data).hexdigest()), data


def unbundle(cache: Path, shipment: Shipment, data: bytes) -> Path:
    """This machine's copy of a shipped workspace (a git repository at its one commit) in
    `cache`, made once: the bytes must have the shipment's digest and hold its commit.
    OSError when they do not or git fails; nothing half-made is left."""
    target = cache / shipment.name
    with _lock(str(target)):
        if (target / ".git").is_dir():  # made by an earlier seat run on this machine
            return target
        found = "sha256:" + hashlib.sha256(data).hexdigest()
        if found != shipment.digest:
            raise OSError(
                f"the workspace bundle {shipment.name} arrived with digest {found}, "
                f"not {shipment.digest}"
            )
        cache.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{shipment.name}.", dir=cache))
        try:
            path = scratch / "tree.bundle"
            store.atomic_write_bytes(path, data, durable=False)
            files = scratch / TREE
            files.mkdir()
            for args in (
                ["init", "--quiet"],
                ["bundle", "unbundle", str(path)],
                ["-c", "advice.detachedHead=false", "checkout", "-q", "--detach", shipment.head],
                ["rev-parse", "--verify", "HEAD^{commit}"],
            ):
                code, stdout, err = git(args, files)
                if code != 0:
                    raise OSError(f"git {args[0]} failed: {' '.join(err.split()) or code}")
            if stdout.strip() != shipment.head:
                raise OSError(f"the workspace bundle {shipment.name} is not at {shipment.head}")
            try:
                os.replace(files, target)
            except OSError:
                # another process sharing the cache made it first
                if not (target / ".git").is_dir():
                    raise
        finally:
            _remove_quietly(scratch)
        return target


_sources: dict[str, tuple[str, ...]] = {}


def source_paths(workspace: WorkspaceSpec) -> tuple[str, ...]:
    """What a seat must not see of its case's source: the repository (its later history, a
    checkout that may hold the fix) and its git folder wherever that is, or the folder.
    The seat has its own copy of the built commit; these are hidden from its sandbox."""
    found = _sources.get(workspace.path)
    if found is not None:
        return found
    paths = [workspace.path]
    if workspace.kind == "repo":
        code, out, _ = git(
            ["rev-parse", "--path-format=absolute", "--git-common-dir"],
            Path(workspace.path),
            timeout=60,
        )
        common = out.strip()
        if code == 0 and common and not _is_within(common, workspace.path):
            paths.append(common)  # a linked worktree's repository, elsewhere
    _sources[workspace.path] = found = tuple(paths)
    return found


def _is_within(path: str, folder: str) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def paths_of(cells: Iterable[Any]) -> list[str]:
    """The distinct workspace paths of the cells' cases (the export's and report's)."""
    return sorted({cell.workspace.path for cell in cells if cell.workspace is not None})
