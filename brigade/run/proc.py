"""The one place that spawns processes: run a command in its own process group.

`run` never decides pass or fail. A missing executable is a result
(`launched=False`), not an exception; `outcome` classifies what happened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple, NoReturn

from brigade import fs
from brigade.core.clock import utc_now
from brigade.core.taxonomy import FaultKind
from brigade.outdir import store

TERM_GRACE_SECONDS = 3.0
# launch errors that mean the program is not there to run
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ENOEXEC})

_live_lock = threading.Lock()


class _Live(NamedTuple):
    """A running seat's process group: what its processes carry, and what confines them."""

    tag: tuple[str, str] | None  # the (variable, value) every process it starts carries
    confine: Confinement | None
    # when its leader started (/proc's clock ticks since boot; None: not known here)
    born: int | None = None


_live_groups: dict[int, _Live] = {}
# the short helpers running (git, --version): children of ours, never a seat's escapee
_helpers: set[int] = set()
# seats whose leader has exited and whose processes are being ended
_ending: set[int] = set()
# set when brigade itself is being stopped: seats killed then are not results
stopping = threading.Event()


class Interrupted(Exception):
    """The run was stopped (SIGTERM / Ctrl-C) while a seat was running."""


@dataclass(frozen=True)
class Confinement:
    """A command prefix that confines a seat (the sandbox), as `proc` applies it.

    `prefix` runs the rest of the command line inside the confinement. The
    wrapper's own processes are named `wrapper` (their /proc comm): a graceful
    stop signals the processes inside first, because signalling the wrapper
    ends everything in it at once. `status_option` is the wrapper's option that
    takes a file descriptor and writes `"exit-code"` there once the command has
    run: without it, the command never started (a launch failure).
    """

    prefix: tuple[str, ...]
    wrapper: str
    status_option: str


@dataclass(frozen=True)
class ProcResult:
    """What happened to one process run."""

    launched: bool
    exit_code: int | None
    signal: int | None
    timed_out: bool
    launch_error: str | None
    started_at: str
    finished_at: str
    duration_seconds: float
    executable: str | None
    # the fault a launch failure is: binary_missing when the program is not there
    # (or cannot be executed), which waiting does not cure
    launch_fault: FaultKind | None = None


def resolve_executable(program: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    """Absolute path of the program that would run, or None when there is none."""
    if os.sep in program:
        candidate = (cwd / program) if not os.path.isabs(program) else Path(program)
        return str(candidate) if os.access(candidate, os.X_OK) and candidate.is_file() else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin_text: str | None,
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    grace: float = TERM_GRACE_SECONDS,
    should_stop: Callable[[], bool] | None = None,
    driver: Sequence[str] = (),
    tag: tuple[str, str] | None = None,
    confine: Confinement | None = None,
) -> ProcResult:
    """Run argv in a new session; stdout/stderr go straight to files (kept on timeout).

    With a `driver` (a command prefix such as a protocol client), the process
    started is the driver, given argv with its program resolved on PATH; a
    program that does not resolve is a launch failure, as it would be without.

    On timeout the whole process group gets SIGTERM, then SIGKILL after `grace`.
    Leftover members of the group (background children) are killed when the
    leader exits, and so is every process whose environment carries `tag` (a
    variable set for the seat alone, as BRIGADE_RUN_DIR): a grandchild that left
    the group with setsid still carries it, so no agent process outlives its cell.
    `should_stop` is polled while the seat runs (a Dask worker asks whether its
    task was cancelled); when it says yes the group is ended the same way and
    Interrupted is raised.

    With `confine` (the sandbox) the command runs inside it: the environment,
    stdin, logs and the process group are the same; a program that cannot be
    started inside is a launch failure as it would be without, and stopping it
    signals the processes inside before the confinement itself.
    """
    started_at = utc_now()
    start = time.monotonic()
    executable = resolve_executable(argv[0], cwd, env) if argv else None
    name = argv[0] if argv else "(empty command)"
    # a log is a new file: whatever a process put at its name before is removed, never
    # followed or written through
    with (
        os.fdopen(fs.fresh_file(stdout_path), "wb") as out,
        os.fdopen(fs.fresh_file(stderr_path), "wb") as err,
        _stdin_source(stdin_text) as stdin,
        _status_file(confine) as status,
    ):
        try:
            if driver or confine is not None:
                # the confinement would start anyway and only then fail to find it
                if executable is None:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
            command = [*driver, executable, *argv[1:]] if driver and executable else list(argv)
            pass_fds: tuple[int, ...] = ()
            if confine is not None and status is not None:
                wrapper, *options = confine.prefix
                pass_fds = (status.fileno(),)
                command = [
                    wrapper,
                    confine.status_option,
                    str(status.fileno()),
                    *options,
                    *command,
                ]
            adopting = become_subreaper()
            # started and registered at once: a seat's end looking for escapees meanwhile
            # never takes this new child of ours for one
            with _live_lock:
                proc = subprocess.Popen(
                    command,
                    cwd=cwd,
                    env=dict(env),
                    stdin=stdin,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=pass_fds,
                )
                born = _started_at(proc.pid) if adopting else None
                _live_groups[proc.pid] = _Live(tag, confine, born)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
            reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
            err.write(f"brigade: cannot launch {name}: {reason}\n".encode())
            missing = isinstance(exc, OSError) and exc.errno in _MISSING
            return _unlaunched(
                f"cannot launch {name}: {reason}",
                started_at,
                start,
                executable,
                "binary_missing" if missing else None,
            )
        # A timer ends the group on time; the wait itself blocks in waitpid, so a
        # finished seat is noticed at once (Popen.wait(timeout) polls with sleeps
        # of up to 50 ms, which adds up over thousands of cells).
        expiry = _Expiry(proc, grace, confine)
        timer = threading.Timer(timeout, expiry.fire)
        timer.daemon = True
        timer.start()
        stopped = _Expiry(proc, grace, confine)
        waited = threading.Event()
        if should_stop is not None:
            threading.Thread(
                target=_watch_stop, args=(should_stop, stopped, waited), daemon=True
            ).start()
        try:
            proc.wait()
        finally:
            timer.cancel()
            waited.set()
            _signal_group(proc.pid, signal.SIGKILL)
            if tag is not None:
                end_stragglers(*tag, exact=True)
            if born is not None:  # and what left both (setsid, its environment cleared)
                end_escapees(since=born, ending=proc.pid)
            with _live_lock:
                _live_groups.pop(proc.pid, None)
                _ending.discard(proc.pid)
        timed_out = expiry.fired
        code = proc.returncode
        ran = status is None or code is None or code < 0 or _command_ran(status)
    if stopping.is_set() or stopped.fired:
        raise Interrupted(f"stopped while running {argv[0]}")
    if not ran:
        # the confinement could not start the command (its reason is on stderr)
        reason = _last_line(stderr_path) or f"the sandbox exited {code}"
        return _unlaunched(
            f"cannot launch {name} in the sandbox: {reason}", started_at, start, executable
        )
    return ProcResult(
        launched=True,
        exit_code=code,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out,
        launch_error=None,
        started_at=started_at,
        finished_at=utc_now(),
        duration_seconds=round(time.monotonic() - start, 6),
        executable=executable,
    )


def _unlaunched(
    error: str,
    started_at: str,
    start: float,
    executable: str | None,
    fault: FaultKind | None = None,
) -> ProcResult:
    return ProcResult(
        launched=False,
        exit_code=None,
        signal=None,
        timed_out=False,
        launch_error=error,
        started_at=started_at,
        finished_at=utc_now(),
        duration_seconds=round(time.monotonic() - start, 6),
        executable=executable,
        launch_fault=fault,
    )


@contextlib.contextmanager
def _status_file(confine: Confinement | None) -> Iterator[IO[bytes] | None]:
    """Where a confinement reports that the command ran (None when there is none)."""
    if confine is None:
        yield None
        return
    with tempfile.TemporaryFile() as handle:
        yield handle


def _command_ran(status: IO[bytes]) -> bool:
    """Whether the confinement's status report says the command ran (it wrote its exit)."""
    status.seek(0)
    return b'"exit-code"' in status.read()


def _last_line(path: Path) -> str:
    try:
        lines = store.read_regular(path).decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


# a prompt this small fits a pipe's buffer (64 KiB on Linux), so it can be
# written before the seat starts; bigger prompts go through a temporary file
PIPE_PROMPT_BYTES = 16 * 1024


@contextlib.contextmanager
def _stdin_source(text: str | None) -> Iterator[int | IO[bytes]]:
    """What the seat reads on stdin: the prompt (pipe or temp file) or /dev/null."""
    if text is None:
        yield subprocess.DEVNULL
        return
    data = text.encode("utf-8")
    if len(data) <= PIPE_PROMPT_BYTES:
        read_end, write_end = os.pipe()
        try:
            os.write(write_end, data)
        finally:
            os.close(write_end)
        try:
            yield read_end
        finally:
            os.close(read_end)
        return
    with tempfile.TemporaryFile() as handle:
        handle.write(data)
        handle.seek(0)
        yield handle


class _Expiry:
    """Ends a seat's process group when its time is up: SIGTERM, then SIGKILL after a grace."""

    def __init__(
        self, proc: subprocess.Popen[bytes], grace: float, confine: Confinement | None = None
    ) -> None:
        self.proc = proc
        self.grace = grace
        self.confine = confine
        self.fired = False

    def fire(self) -> None:
        if self.proc.poll() is not None:
            return  # it finished just in time
        self.fired = True
        _terminate(self.proc.pid, self.confine)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return
            time.sleep(0.05)
        _signal_group(self.proc.pid, signal.SIGKILL)


# how often a seat's `should_stop` is asked (a cancelled remote seat ends within this)
STOP_POLL_SECONDS = 0.5


def _watch_stop(should_stop: Callable[[], bool], stopped: _Expiry, waited: threading.Event) -> None:
    while not waited.wait(STOP_POLL_SECONDS):
        if should_stop():
            stopped.fire()
            return


_stoppers: list[Callable[[], None]] = []


def on_stop(callback: Callable[[], None]) -> None:
    """Have terminate_all also call `callback` (the Dask executor cancels its remote seats)."""
    with _live_lock:
        _stoppers.append(callback)


def terminate_all(grace: float = TERM_GRACE_SECONDS) -> None:
    """Stop every process group still running (on SIGTERM or Ctrl-C of brigade)."""
    stopping.set()
    with _live_lock:
        stoppers = list(_stoppers)
    for stop in stoppers:
        try:
            stop()
        except Exception:  # best effort: the run is ending either way
            pass
    with _live_lock:
        live = dict(_live_groups)
    groups = list(live)
    tags = [seat.tag for seat in live.values() if seat.tag is not None]
    for pgid, seat in live.items():
        _terminate(pgid, seat.confine)
    deadline = time.monotonic() + grace
    pending = groups
    while pending and time.monotonic() < deadline:
        pending = [g for g in pending if _leader_running(g)]
        if pending:
            time.sleep(0.05)
    for pgid in groups:  # leaders that outlived the grace, and what their groups left behind
        _signal_group(pgid, signal.SIGKILL)
    for tag in tags:  # and what left the groups (setsid)
        end_stragglers(*tag, exact=True)
    end_escapees()  # and what left them without its environment: every seat is ending


def _terminate(pgid: int, confine: Confinement | None) -> None:
    """Ask a seat's process group to end (SIGTERM), the processes inside a confinement first.

    Signalling a confinement's own process ends everything inside it at once,
    without the grace a seat gets to finish writing; so its inner processes
    get the SIGTERM, and the group the SIGKILL when the grace is over.
    """
    if confine is None:
        _signal_group(pgid, signal.SIGTERM)
        return
    for pid in _descendants(pgid):
        if _comm(pid) != confine.wrapper:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)


def _descendants(root: int) -> list[int]:
    """Every process below `root` in the process tree (from /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat(name)
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def end_stragglers(
    variable: str, prefix: str, rounds: int = 20, *, exact: bool = False
) -> list[int]:
    """End this user's processes whose environment sets `variable` to a path under `prefix`.

    Seats of a run that was killed outright (kill -9, the OOM killer) live on in
    their own sessions. Every seat process, and whatever it starts, inherits
    `BRIGADE_RUN_DIR`, so before a crashed cell runs again its leftovers are
    found by that value and killed: they would otherwise keep spending and
    keep writing next to the new attempt. Reads /proc (Linux); elsewhere
    nothing is found. Returns the pids killed. `exact`: the value is `prefix` itself.
    """
    needle = f"\0{variable}={prefix}{chr(0) if exact else ''}".encode()
    ended: list[int] = []
    for _ in range(rounds):  # again: a straggler may have forked while being found
        found = [pid for pid in _processes_with(needle) if pid != os.getpid()]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        ended.extend(pid for pid in found if pid not in ended)
        time.sleep(0.05)  # a killed process's environment reads empty once it is gone
    return ended


def _processes_with(needle: bytes) -> list[int]:
    """Pids whose /proc/<pid>/environ holds `needle` (a NUL, then `NAME=value-prefix`)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    pids = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone, or another user's
            continue
        if needle in b"\0" + environ + b"\0":
            pids.append(int(name))
    return pids


# prctl(2): PR_SET_CHILD_SUBREAPER
_PR_SET_CHILD_SUBREAPER = 36
_subreaper: list[bool] = []


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (Linux), once.

    A process whose parent exits is then adopted by this one rather than by init:
    a seat's process that left the seat's group and session (setsid) and cleared
    its environment (so `end_stragglers` cannot find it) is still a child of
    brigade, found by `end_escapees`. Done when the first seat starts, never on a
    no-op. Whether it holds (False: not on Linux, or refused).
    """
    with _live_lock:
        if not _subreaper:
            _subreaper.append(_set_subreaper())
        return _subreaper[0]


def _set_subreaper() -> bool:
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after `(comm)`: state, ppid, pgrp, session, ...
    (None when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # `pid (comm) state ppid ...`: comm may hold spaces and parentheses
    return stat[stat.rfind(b")") + 2 :].split()


def _started_at(pid: int) -> int | None:
    """When a process started, in /proc's clock ticks since boot (its stat's 22nd field)."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def _escapees() -> list[tuple[int, int, bool]]:
    """(pid, start, zombie) of the children of this process that it did not start itself
    and that live in another session than its own.

    brigade starts every seat in a session of its own; a process brigade adopted
    (as subreaper) that is not in brigade's session came from a seat: its parent
    ended, and it had left its seat's group. What a library in brigade's own
    process starts shares brigade's session, and brigade's own helpers are known.
    """
    me, session = os.getpid(), os.getsid(0)
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat(name)
        if fields is None or len(fields) < 20 or int(fields[1]) != me:
            continue
        pid = int(name)
        if pid in _live_groups or pid in _helpers or int(fields[3]) == session:
            continue
        found.append((pid, int(fields[19]), fields[0] == b"Z"))
    return found


def end_escapees(
    *, since: int | None = None, ending: int | None = None, rounds: int = 20
) -> list[int]:
    """End the seat processes brigade adopted (see `_escapees`), with all they started.

    With `since` (when the seat whose leader is `ending` started): only those started
    since then that no other seat still running could have started, i.e. none started
    after another running seat did (a process's parent is not known once it has been
    adopted, so a parallel seat's own background process is left to that seat's end;
    a seat whose leader exited is ending, not running).
    Without: all of them (every seat is ending). Each is stopped first, then killed with
    what it started, and reaped; an adopted process that already exited is reaped too.
    Returns the pids killed.
    """
    ended: list[int] = []
    if ending is not None:
        with _live_lock:  # a seat ending too is not running: the two ends never wait on
            _ending.add(ending)  # each other to end what may be the other's
    for _ in range(rounds):  # again: what a killed one started is adopted in its turn
        with _live_lock:
            found = _escapees()
            others = [
                live.born
                for pid, live in _live_groups.items()
                if pid not in _ending and live.born is not None
            ]
        chosen = []
        for pid, start, zombie in found:
            if since is not None and (start < since or any(born <= start for born in others)):
                continue
            if zombie:
                _reap(pid)
            else:
                chosen.append(pid)
        if not chosen:
            break
        # stopped before they are killed: none forks while its tree is being read
        victims = chosen + [child for pid in chosen for child in _descendants(pid)]
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in victims:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        for pid in chosen:
            _reap(pid, wait=True)
        ended.extend(pid for pid in victims if pid not in ended)
    return ended


def _reap(pid: int, wait: bool = False) -> None:
    """Collect an adopted child's exit status (a killed one: waiting up to a second)."""
    deadline = time.monotonic() + (1.0 if wait else 0.0)
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.005)


def _leader_running(pgid: int) -> bool:
    """Whether a seat's leader (our child, pid == pgid) has not exited; it is not reaped.

    A group's exited leader stays a zombie until its waiting thread reaps it, which in
    serial mode is the very thread running the signal handler: `killpg(pgid, 0)` would
    see it alive for the whole grace.
    """
    if not hasattr(os, "waitid"):  # not on every Unix
        return _group_alive(pgid)
    try:
        return os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # already reaped: whatever is left of its group
        return _group_alive(pgid)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def open_pipes(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """A child whose stdin and stdout are pipes to this process, in this process's group (a
    seat's: its timeout ends both); the codex driver's app-server."""
    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def start_helper(argv: Sequence[str], pass_fds: Sequence[int]) -> subprocess.Popen[bytes]:
    """One of brigade's own helper programs beside this process (outdir/digests): its stdin
    and stdout pipes to this process, no stderr and no environment, and of this process's
    descriptors only `pass_fds` (in brigade's session and group: a Ctrl-C ends it with the
    run)."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        pass_fds=tuple(pass_fds),
        env={},
    )


def wait_or_kill(child: subprocess.Popen[bytes], grace: float) -> int:
    """A child's exit status, killed when it has not exited within `grace` seconds."""
    try:
        return child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait()


def capture_bytes(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float = 10.0,
    stdin: bytes | None = None,
    stdout_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int | None, bytes, str]:
    """Run a short helper command (git, `--version`): (code, stdout bytes, stderr text).

    `stdin` is fed to it (else it reads nothing); with `stdout_path` its stdout
    goes to that file instead (a git diff of any size); `env` replaces the
    environment when given. A missing program or a timeout gives code None
    instead of raising.
    """
    try:
        with contextlib.ExitStack() as scope:
            sink = (
                scope.enter_context(os.fdopen(fs.fresh_file(stdout_path), "wb"))
                if stdout_path
                else subprocess.PIPE
            )
            with _live_lock:  # registered as it starts (see run)
                helper = subprocess.Popen(
                    list(argv),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                    stdout=sink,
                    stderr=subprocess.PIPE,
                    env=dict(env) if env is not None else None,
                    start_new_session=True,
                )
                _helpers.add(helper.pid)
            try:
                out, err = helper.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                helper.kill()
                helper.communicate()
                return None, b"", str(exc)
            finally:
                if helper.returncode is None:  # (an exception while waiting)
                    helper.kill()
                    helper.wait()
                with _live_lock:
                    _helpers.discard(helper.pid)
    except OSError as exc:
        return None, b"", str(exc)
    return helper.returncode, out or b"", (err or b"").decode("utf-8", "replace")


def capture(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
) -> tuple[int | None, str, str]:
    """Like capture_bytes, with stdout decoded as UTF-8."""
    code, out, err = capture_bytes(argv, cwd=cwd, timeout=timeout, env=env)
    return code, out.decode("utf-8", "replace"), err


# set (to anything but empty or 0) to end the ordinary way: atexit handlers run (coverage)
CLEAN_EXIT_VARIABLE = "BRIGADE_CLEAN_EXIT"


def open_url(url: str) -> bool:
    """Hand a URL to the user's web browser (`brigade view --open`): the standard library's
    webbrowser starts it, outside any seat's process group. False when none could be."""
    import webbrowser

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


def end_process(code: int) -> NoReturn:
    """End brigade's own process with `code` once its output is flushed.

    Called only at the outermost entry points (the `brigade` script's `console`
    and the reporter of a plain `doit` run), when everything is written
    (receipts, summary, indexes, doit's DB) and the run lock is released. A run
    over many cells holds them all in memory; freeing them one by one on the
    way out costs more than a no-op resume's own work, and nothing is left for
    it to do. That exit skips atexit handlers: with BRIGADE_CLEAN_EXIT=1 the
    process exits the ordinary way instead.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to say
            pass
    if os.environ.get(CLEAN_EXIT_VARIABLE, "") not in ("", "0"):
        raise SystemExit(code)
    os._exit(code)
