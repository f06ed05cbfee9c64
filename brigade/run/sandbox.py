"""The filesystem sandbox a seat runs in (bubblewrap on Linux): what it may see, write and reach.

The whole filesystem is visible read-only; `/tmp` is private to the seat; the
output directory (other cells' runs, the results) is hidden; only the seat's
own run folder, its CLI's state directories and, in a writable run, its own
worktree are writable. `proc` applies the result (`proc.Confinement`), so the
seat keeps its environment, stdin, logs, process group, timeout and stop.

Whether bubblewrap works here is probed once per process, when a seat is about
to run (never on a no-op resume).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from brigade import fs
from brigade.core.specs import SandboxMode, SeatSpec
from brigade.run import proc
from brigade.run.home import IsolatedHome

BWRAP = "bwrap"
# the wrapper's own processes (their /proc comm): not signalled for a graceful stop
WRAPPER_NAME = "bwrap"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)

# Paths bwrap itself sets up: nothing may be bound over them.
_RESERVED = ("/", "/dev", "/proc")
# Unix sockets that hand out control of this machine (a container engine is root on
# it): hidden from every seat, even with network access.
HOST_CONTROL_SOCKETS = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
)

Kind = Literal["hide", "ro", "rw"]
Applied = Literal["sandbox", "hard", "soft", "none"]


class SandboxError(ValueError):
    """A view that cannot be built (a relative or reserved path, a missing folder to run in)."""


@dataclass(frozen=True)
class Availability:
    """Whether the sandbox can run here; `detail` says what runs it, or why it cannot."""

    ok: bool
    detail: str
    executable: str | None = None
    # bwrap's own last line when it failed (for `brigade doctor`)
    raw: str | None = None


@dataclass(frozen=True)
class View:
    """What a sandboxed process sees: every path is read-only unless listed here.

    Paths must be absolute. `writable` and `readable` entries that do not exist
    are left out (a CLI that never ran here has no state folder yet); `visible`
    entries are bound read-only only where they would otherwise be hidden (under
    `/tmp` or a hidden folder), like the folder the command runs in.
    A deeper entry wins over a shallower one, so a readable file inside a
    writable folder stays read-only.
    """

    cwd: Path
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()
    network: bool = True
    setenv: Mapping[str, str] = field(default_factory=dict)


def _is_under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _depth(path: str) -> int:
    return path.count("/") if path != "/" else 0


def _real(path: Path | str, what: str) -> str:
    text = os.fspath(path)
    if not os.path.isabs(text):
        # bwrap would resolve it against its own root, not the seat's folder
        raise SandboxError(f"{what} path must be absolute: {text!r}")
    return os.path.realpath(text)


def mounts(view: View) -> tuple[list[tuple[str, Kind]], str]:
    """The view's mounts in the order they must be made (parents first), and the real cwd."""
    entries: dict[str, Kind] = {}

    def add(paths: Iterable[Path], kind: Kind, what: str) -> None:
        for path in paths:
            real = _real(path, what)
            if not os.path.lexists(real):
                continue
            if real in _RESERVED:
                raise SandboxError(f"{what} path {os.fspath(path)!r} cannot be bound: it is {real}")
            entries[real] = kind

    # later kinds win for the very same path: hidden beats writable beats readable
    add(view.readable, "ro", "readable")
    add(view.writable, "rw", "writable")
    add(view.hidden, "hide", "hidden")
    if not view.network:
        add([Path("/run")], "hide", "hidden")
    cwd = _real(view.cwd, "cwd")
    if not os.path.isdir(cwd):
        raise SandboxError(f"cannot run in {os.fspath(view.cwd)}: not a folder")

    def hidden(path: str) -> bool:
        # the deepest entry covering the path decides; /tmp is a private empty tmpfs
        best, kind = "/", "ro"
        for mount, mount_kind in [("/tmp", "hide"), *entries.items()]:
            if _is_under(path, mount) and len(mount) >= len(best):
                best, kind = mount, mount_kind
        return kind == "hide"

    for path in [cwd, *(_real(p, "visible") for p in view.visible)]:
        if os.path.exists(path) and hidden(path):
            entries[path] = "ro"
    ordered = sorted(entries.items(), key=lambda item: (_depth(item[0]), item[0]))
    return ordered, cwd


def bwrap_prefix(view: View, executable: str, *, unshare_user: bool) -> tuple[str, ...]:
    """The bwrap command line (up to and including `--`) that runs a command in `view`."""
    ordered, cwd = mounts(view)
    args = [
        executable,
        # the sandbox ends with the thread that started it (brigade waits for it there)
        "--die-with-parent",
        "--new-session",
        # a pid namespace: whatever the seat leaves behind ends with it, and it
        # cannot read other processes' environments (the harness's keys)
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        # a root caller keeps every capability otherwise, and could remount / writable
        "--cap-drop",
        "ALL",
    ]
    if unshare_user:
        args.append("--unshare-user")
    if not view.network:
        args.append("--unshare-net")
    args += [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        # for a root caller bwrap leaves the sysctl files writable
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--ro-bind-try",
        "/proc/sysrq-trigger",
        "/proc/sysrq-trigger",
        "--tmpfs",
        "/tmp",
    ]
    hidden_folders = []
    for path, kind in ordered:
        if kind == "hide":
            if os.path.isdir(path):
                args += ["--tmpfs", path]
                hidden_folders.append(path)
            else:
                args += ["--ro-bind", "/dev/null", path]
        elif kind == "ro":
            args += ["--ro-bind", path, path]
        else:
            args += ["--bind", path, path]
    # the empty folders hiding a path are read-only too, once what is bound inside
    # them has its mount point (--remount-ro does not reach those)
    for path in hidden_folders:
        args += ["--remount-ro", path]
    for name, value in sorted(view.setenv.items()):
        args += ["--setenv", name, value]
    args += ["--chdir", cwd, "--"]
    return tuple(args)


@functools.cache
def _root_without_sys_admin() -> bool:
    """uid 0 without CAP_SYS_ADMIN (root in a container): bwrap needs --unshare-user then."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    return not (int(line.split()[1], 16) >> 21) & 1  # CAP_SYS_ADMIN is 21
    except (OSError, ValueError):
        pass
    return False


def confinement(view: View, availability: Availability) -> proc.Confinement:
    """What `proc.run` applies to run a command in `view` (the sandbox must be available)."""
    if not availability.ok or availability.executable is None:
        raise SandboxError(f"the sandbox is not available: {availability.detail}")
    prefix = bwrap_prefix(view, availability.executable, unshare_user=_root_without_sys_admin())
    return proc.Confinement(prefix=prefix, wrapper=WRAPPER_NAME, status_option="--json-status-fd")


# bwrap's messages (stderr) and what they mean on this machine, most specific first
_REASONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"setting up uid map: Permission denied"),
        "AppArmor forbids unprivileged user namespaces "
        "(kernel.apparmor_restrict_unprivileged_userns=1): allow bwrap in an AppArmor "
        "profile or set that sysctl to 0",
    ),
    (
        re.compile(r"No permissions to creat"),
        "user namespaces are disabled for unprivileged users "
        "(kernel.unprivileged_userns_clone=0, or a container's seccomp profile)",
    ),
    (
        re.compile(r"max_\*_namespaces exceeded|ENOSPC"),
        "no user namespaces left (user.max_user_namespaces=0, or nested too deep)",
    ),
    (
        re.compile(r"kernel does not support user namespaces"),
        "the kernel has no user namespaces (bwrap would have to be installed setuid)",
    ),
    (
        re.compile(r"Creating new namespace failed: Operation not permitted"),
        "not allowed to create namespaces here (root without CAP_SYS_ADMIN, as in a container)",
    ),
    (
        re.compile(r"Can't mount proc"),
        "cannot mount a fresh /proc (a container with a masked /proc, or bwrap inside "
        "another sandbox)",
    ),
)


def _reason(stderr: str, code: int | None) -> tuple[str, str]:
    """(why, bwrap's last line) for a failed probe."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    raw = lines[-1] if lines else f"exit status {code}"
    for pattern, why in _REASONS:
        if pattern.search(stderr):
            return why, raw
    return f"bwrap cannot start a sandbox here ({raw})", raw


def probe(timeout: float = 30.0) -> Availability:
    """Whether the sandbox starts here: the very command line seats get, running `true`."""
    if not sys.platform.startswith("linux"):
        return Availability(
            False, f"the sandbox needs Linux (bubblewrap); nothing confines seats on {sys.platform}"
        )
    executable = shutil.which(BWRAP)
    if executable is None:
        return Availability(False, f"bwrap is not on PATH; {INSTALL_HINT}")
    prefix = bwrap_prefix(
        View(cwd=Path("/"), network=False), executable, unshare_user=_root_without_sys_admin()
    )
    start = time.monotonic()
    code, _, err = proc.capture([*prefix, "true"], timeout=timeout)
    elapsed = time.monotonic() - start
    if code != 0:
        why, raw = _reason(err, code)
        return Availability(False, why, executable, raw)
    _, out, _ = proc.capture([executable, "--version"], timeout=timeout)
    version = out.strip() or "bwrap"
    return Availability(
        True, f"{version} at {executable} ({elapsed * 1000:.0f} ms to start)", executable
    )


_probed: list[Availability] = []
_probe_lock = threading.Lock()


def availability() -> Availability:
    """The sandbox's availability, probed on first use and kept for the process."""
    with _probe_lock:
        if not _probed:
            _probed.append(probe())
        return _probed[0]


# -- seats ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorktreeGit:
    """The git metadata a writable run's worktree needs, and where its new objects go.

    The main repository's objects stay read-only (a writable objects folder would
    let the seat delete them): the seat's git writes new objects to a private
    folder and reads the repository's through an alternate. The files that say
    which repository the worktree belongs to stay read-only, so git run outside
    the sandbox later cannot be pointed at a repository the seat made up.
    """

    root: Path  # the worktree
    git_dir: Path  # <repository>/.git/worktrees/<name>
    common_dir: Path  # <repository>/.git
    objects: Path  # the private objects folder

    def inside_env(self) -> dict[str, str]:
        """Git's variables inside the sandbox: new objects to the private folder."""
        return {
            "GIT_OBJECT_DIRECTORY": str(self.objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.common_dir / "objects"),
        }

    def outside_env(self) -> dict[str, str]:
        """Git's variables for reading the worktree afterwards (it may hold the seat's commits)."""
        return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.objects)}

    def protected(self) -> tuple[Path, ...]:
        """The files that must stay read-only inside (they exist once `worktree_git` ran)."""
        return (
            self.root / ".git",
            self.git_dir / "commondir",
            self.git_dir / "gitdir",
            self.git_dir / "config.worktree",
        )


def _git_dir_of(root: Path) -> Path:
    """The metadata folder named by a linked worktree's `.git` file."""
    text = (root / ".git").read_text(encoding="utf-8")
    if not text.startswith("gitdir:"):
        raise SandboxError(f"{root}/.git is not a linked worktree's pointer")
    target = Path(text[len("gitdir:") :].strip())
    return Path(os.path.realpath(target if target.is_absolute() else root / target))


@contextlib.contextmanager
def worktree_git(root: Path, git_dir: Path | None = None) -> Iterator[WorktreeGit]:
    """A writable run's git access (a private objects folder, removed afterwards).

    `git_dir` is the worktree's metadata folder as recorded when it was made
    (default: the one its `.git` file names now).
    """
    git_dir = Path(os.path.realpath(git_dir)) if git_dir is not None else _git_dir_of(root)
    common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    common_dir = Path(os.path.realpath(git_dir / common))
    # an empty per-worktree config stays read-only: with extensions.worktreeConfig a
    # seat-written one would apply to git run on this worktree outside the sandbox
    (git_dir / "config.worktree").touch(exist_ok=True)
    objects = Path(tempfile.mkdtemp(prefix="brigade-objects-"))
    try:
        yield WorktreeGit(root=root, git_dir=git_dir, common_dir=common_dir, objects=objects)
    finally:
        # the seat wrote it: folders nested however deep
        with contextlib.suppress(OSError):
            fs.remove(objects)


def expand_path(text: str, home: str, base: str) -> Path:
    """A roster path: `~` is the seat's home, a relative path is relative to `base`."""
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    return Path(os.path.normpath(os.path.join(os.path.abspath(base), text)))


def roster_paths(
    seat: SeatSpec, home: str
) -> tuple[tuple[Path, ...], tuple[Path, ...], tuple[Path, ...]]:
    """The seat's roster `sandbox` paths (writable, readable, hidden), expanded."""

    def paths(texts: Iterable[str]) -> tuple[Path, ...]:
        return tuple(expand_path(text, home, seat.roster_dir) for text in texts)

    box = seat.sandbox
    return paths(box.writable), paths(box.readable), paths(box.hidden)


def brigade_paths() -> list[Path]:
    """brigade's interpreter and its own package (a program inside may run brigade's
    code, e.g. the codex driver): visible even in a checkout under /tmp."""
    return [Path(sys.prefix), Path(__file__).resolve().parents[1]]


def named_paths(argv: Sequence[str]) -> list[Path]:
    """The folders a command line names by absolute path (a script, a config, `--x=/path`).

    They stay readable where `/tmp` or a hidden folder would hide them: a program
    under `/tmp` (a checkout or a virtual environment there) must still start.
    A file's whole folder is named, as a script imports its neighbours.
    """
    found: list[Path] = []
    for arg in argv:
        text = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not os.path.isabs(text) or "\0" in text:
            continue
        try:
            path = Path(os.path.realpath(text))
            if path.is_dir():
                found.append(path)
            elif path.exists():
                found.append(path.parent)
        except (OSError, ValueError):
            continue
    return found


def program_paths(executable: str) -> list[Path]:
    """The folders a program needs to start: its own, its installation's (the parent of
    a `bin` folder: a virtual environment's packages) and its `#!` interpreter's."""
    found: list[Path] = []
    programs = [executable]
    with contextlib.suppress(OSError):
        with open(executable, "rb") as handle:
            first = handle.read(256).split(b"\n", 1)[0]
        if first.startswith(b"#!") and first[2:].split():
            programs.append(os.fsdecode(first[2:].split()[0]))
    for program in programs:
        for path in {Path(program), Path(os.path.realpath(program))}:
            if path.is_absolute():
                found.append(path.parent)
                if path.parent.name == "bin":
                    found.append(path.parent.parent)
    return found


def seat_view(
    seat: SeatSpec,
    *,
    cwd: Path,
    run_dir: Path,
    env: Mapping[str, str],
    state_paths: Sequence[str] = (),
    out: Path | None = None,
    workspace: Path | None = None,
    git: WorktreeGit | None = None,
    executable: str | None = None,
    argv: Sequence[str] = (),
    user_home: str | None = None,
    home: IsolatedHome | None = None,
) -> View:
    """What a seat sees: its run folder, CLI state and (writable runs) worktree writable.

    `env` is the seat's environment (its HOME locates the CLI's state);
    `out` the output directory, hidden but for the seat's own run folder. With an
    isolated `home`, that HOME is writable but for the login files in it; the roster's
    `~/` paths stay the user's own (`user_home`).
    """
    seat_home = env.get("HOME") or os.path.expanduser("~")
    roster_home = user_home or seat_home
    base = seat.roster_dir

    def paths(texts: Iterable[str], at: str = roster_home) -> tuple[Path, ...]:
        return tuple(expand_path(text, at, base) for text in texts)

    writable = [*paths(state_paths, seat_home), *paths(seat.sandbox.writable), run_dir]
    readable = list(paths(seat.sandbox.readable))
    if home is not None:
        writable.append(home.folder)
        readable += home.copies
    hidden = [*paths(seat.sandbox.hidden), *map(Path, HOST_CONTROL_SOCKETS)]
    if out is not None:
        hidden.append(out)
    if workspace is not None:
        # output folders in their default place: other batteries' results
        hidden.append(workspace / ".brigade" / "evals")
    setenv: dict[str, str] = {}
    if "TMPDIR" in env:
        setenv["TMPDIR"] = "/tmp"  # the only place a seat may make temporary files
    if git is not None:
        writable += [git.root, git.git_dir, git.objects]
        readable += git.protected()
        # the other worktrees' git folders (another seat's index, its commits' messages
        # in its reflog, a grader's): only this worktree's own is there
        hidden.append(git.common_dir / "worktrees")
        setenv.update(git.inside_env())
    visible = [cwd, *([workspace] if workspace else []), Path(os.path.abspath(base))]
    visible += brigade_paths()  # brigade's interpreter ({python}, the codex driver)
    if git is not None:
        visible += [git.common_dir.parent]
    if executable:
        visible += program_paths(executable)
    visible += named_paths(argv)
    # the seat's own folders win over anything hidden or read-only above them
    return View(
        cwd=cwd,
        writable=tuple(writable),
        readable=tuple(readable),
        hidden=tuple(hidden),
        visible=tuple(visible),
        network=seat.network,
        setenv=setenv,
    )


def command_view(
    cwd: Path,
    *,
    writable: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    visible: Sequence[Path] = (),
    network: bool = False,
    git: WorktreeGit | None = None,
) -> View:
    """What a command run over a cell's worktree (a grader's tests) sees.

    `cwd` (the worktree, or a folder in it) is writable: tests write caches and
    reports next to the code. Nothing else is, but `writable` and `/tmp`; with
    `git` the worktree's git metadata is handled as for the seat. `visible`
    paths are made readable where `/tmp` or a hidden folder would hide them.
    """
    all_writable = [cwd, *writable]
    all_readable = list(readable)
    # the only place the command may make temporary files
    setenv: dict[str, str] = {"TMPDIR": "/tmp"}
    all_hidden = [*hidden, *map(Path, HOST_CONTROL_SOCKETS)]
    if git is not None:
        all_writable += [git.root, git.git_dir, git.objects]
        all_readable += git.protected()
        all_hidden.append(git.common_dir / "worktrees")  # other seats' and graders'
        setenv.update(git.inside_env())
    all_visible = [*visible, *brigade_paths()]
    if git is not None:
        all_visible.append(git.common_dir.parent)
    return View(
        cwd=cwd,
        writable=tuple(all_writable),
        readable=tuple(all_readable),
        hidden=tuple(all_hidden),
        visible=tuple(all_visible),
        network=network,
        setenv=setenv,
    )


def command_confinement(view: View) -> proc.Confinement | None:
    """The sandbox for a command (`proc.run(..., confine=...)`), None when it is not available."""
    found = availability()
    return confinement(view, found) if found.ok else None


@dataclass(frozen=True)
class CommandSandbox:
    """A command's sandbox: what to pass to `proc.run(confine=...)` and what to record."""

    confine: proc.Confinement | None
    decision: Decision


@contextlib.contextmanager
def command_sandbox(
    cwd: Path,
    *,
    mode: SandboxMode = "auto",
    network: bool = False,
    worktree: Path | None = None,
    writable: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    visible: Sequence[Path] = (),
) -> Iterator[CommandSandbox]:
    """The sandbox a grader runs a command in over a cell's worktree (`cwd` inside it).

    The worktree (with `worktree`, its root: git inside works as for a writable
    seat) and `writable` may be written, nothing else; no network unless asked.
    `required` raises SandboxError when the sandbox cannot run here; `auto`
    then gives no confinement (`decision` says so).
    """
    decision = decide(mode, "none", network)
    if decision.applied != "sandbox":
        if mode == "required":
            raise SandboxError(
                f"the sandbox is required but cannot run here: {decision.unavailable}"
            )
        yield CommandSandbox(None, decision)
        return
    with contextlib.ExitStack() as scope:
        git = scope.enter_context(worktree_git(worktree)) if worktree is not None else None
        view = command_view(
            cwd,
            writable=writable,
            readable=readable,
            hidden=hidden,
            visible=visible,
            network=network,
            git=git,
        )
        yield CommandSandbox(confinement(view, availability()), decision)


@dataclass(frozen=True)
class Decision:
    """How a seat is confined: the sandbox, or only what its CLI does itself."""

    mode: SandboxMode
    applied: Applied
    network_isolated: bool
    unavailable: str | None = None  # why the sandbox was not used although it was wanted

    def record(self) -> dict[str, object]:
        """run.json's `enforcement`."""
        doc: dict[str, object] = {
            "applied": self.applied,
            "mode": self.mode,
            "network": "isolated" if self.network_isolated else "host",
        }
        if self.unavailable is not None:
            doc["unavailable"] = self.unavailable
        return doc


def decide(mode: SandboxMode, cli_level: Applied, network: bool) -> Decision:
    """Use the sandbox when the seat wants it and it works here (probed once), else the CLI's own.

    `required` without a working sandbox is the caller's to refuse; this only says so.
    """
    if mode == "off":
        return Decision(mode, cli_level, False)
    found = availability()
    if found.ok:
        return Decision(mode, "sandbox", not network)
    return Decision(mode, cli_level, False, found.detail)
