"""The `command` grader: run a command (a test suite) over what the seat left, score its exit.

It runs in the cell's post-run workspace: the workspace itself in a read-only
run (for a case with a workspace of its own, a fresh worktree of its built commit); in a
writable run a fresh detached worktree of the run's base commit with
the seat's stored changes (run/changes.patch, its digest verified) applied, so
grading and every regrade see exactly what the seat left and never need the
agent. Its process is run by run/proc like a seat's (own process group, time
limit, stop on signal, stragglers ended), stdin closed, its output in the
grader's folder, and in the filesystem sandbox the cell's seat ran in (its mode
and network; see run/sandbox): only the folder it runs in (with a worktree's git
metadata), the grader's folder and /tmp are writable, the output directory is
hidden but for the run folder (read-only) and the grader's own. Score 1 when it
exits with the expected status, else 0; or, with `score_from: junit:PATH`, the
share of the JUnit file's tests that passed.

A command that outlives its time limit is the result of the code under test (code
that never ends makes its tests time out): a score of 0 that says so, unless
`timeout_is: error` says the suite hangs by itself (grader_error). Tests the grader
requires (`require_tests`: a list of names, or `base`, every test that ran when the
command ran at the run's base commit) and that did not run are failed component
checks: deleting tests is no way to pass. A command that cannot start, and a JUnit
file that is missing, stale or malformed, are grader_error: a broken measurement,
never a zero; the detail ends with the last lines of the command's stderr. But when
the JUnit file (or the test patch) fails only over the seat's changes, the command
reporting (the patch applying) at the run's base commit, the seat broke the
measurement: a score of 0, never a grader_error it could hide a rejection behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import stat
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.core.identity import digest
from brigade.core.specs import DEFAULT_COMMAND_TIMEOUT_SECONDS
from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.run import gitcmd, proc, reuse, sandbox, worktree
from brigade.run.context import MANIFEST_DIR
from brigade.run.grading import (
    Field,
    GradeContext,
    Graded,
    GraderFault,
    GraderType,
    NotReadable,
    Setting,
    contained_file,
    need_setting,
    read_regular,
    relative_path,
    tail,
)
from brigade.run.seat import worktree_repo

# command graders may take as long as a seat may
MAX_COMMAND_SECONDS = 604800.0
DEFAULT_COMMAND_SECONDS = DEFAULT_COMMAND_TIMEOUT_SECONDS
STDOUT = "stdout.log"
STDERR = "stderr.log"
JUNIT_COPY = "junit.xml"
JUNIT_PREFIX = "junit:"
# set for the grader's process (and all it starts): all of them end with it
GRADER_DIR_VARIABLE = "BRIGADE_GRADER_DIR"
# what a detail quotes of the command's output (its end: a test summary)
OUTPUT_CHARACTERS = 240
# failed tests a result lists as component checks (and required tests that did not run)
FAILED_SHOWN = 20
# what a fault's detail quotes of the command's stderr (its last lines)
STDERR_LINES = 5
STDERR_CHARACTERS = 200
# timeout_is: what a command outliving its time limit is
TIMEOUT_FAILS = "fail"  # the code under test never ended: a failing score
TIMEOUT_ERRORS = "error"  # the suite hangs by itself: grader_error
# require_tests: every test that ran when the command ran at the run's base commit
REQUIRE_BASE = "base"
# the folder (in the grader's) where the command runs at the base commit
BASE_FOLDER = "base"
# the command's own folder in the grader's (BRIGADE_GRADER_DIR, {grader_dir}): the one the
# code under test may write; brigade's files of the grading (logs, the JUnit copy, base/)
# are beside it, where it cannot
WORK_FOLDER = "work"
# the placeholders a command (and a JUnit path) may use
PYTHON = "{python}"
GRADER_DIR = "{grader_dir}"


def _check(spec: Mapping[str, Any]) -> None:
    command = spec["command"]
    if isinstance(command, list):
        if not command or not all(isinstance(part, str) for part in command):
            raise GraderFault("command must be a non-empty list of strings, or a string")
        if not command[0]:
            raise GraderFault("command[0] (the program) must not be empty")
        parts = command
    else:
        if not command.strip():
            raise GraderFault("command must not be empty")
        parts = [command]
    if any("\0" in part for part in parts):
        raise GraderFault("command contains a NUL byte, which no command line can carry")
    junit = junit_path(spec)
    if spec["test_patch"] is not None and spec["test_patch_file"] is not None:
        raise GraderFault("test_patch and test_patch_file: give one of them")
    if spec["test_patch_file"] is not None:
        relative_path(spec["test_patch_file"], "test_patch_file")
    if spec["timeout_is"] not in (TIMEOUT_FAILS, TIMEOUT_ERRORS):
        raise GraderFault(
            f"timeout_is {spec['timeout_is']!r} must be {TIMEOUT_FAILS!r} (the code under "
            f"test never ended: a failing score) or {TIMEOUT_ERRORS!r} (grader_error)"
        )
    required = spec["require_tests"]
    if required is None:
        return
    if isinstance(required, str):
        if required != REQUIRE_BASE:
            raise GraderFault(
                f"require_tests {required!r} must be a list of test names, or "
                f"{REQUIRE_BASE!r} (every test that ran at the run's base commit)"
            )
    elif not required or not all(isinstance(name, str) and name for name in required):
        raise GraderFault("require_tests must be a non-empty list of test names")
    if junit is None:
        raise GraderFault(
            "require_tests needs score_from: junit:PATH (the JUnit file says which tests ran)"
        )


def junit_path(spec: Mapping[str, Any]) -> str | None:
    """The JUnit file `score_from` names (relative, or under {grader_dir}/), or None."""
    source = spec["score_from"]
    if source is None:
        return None
    if not source.startswith(JUNIT_PREFIX) or not source[len(JUNIT_PREFIX) :]:
        raise GraderFault(f"score_from {source!r} must be junit:PATH (a JUnit XML file)")
    path = source[len(JUNIT_PREFIX) :]
    inside = path[len(GRADER_DIR) + 1 :] if path.startswith(GRADER_DIR + "/") else path
    relative_path(inside, "score_from path")
    return path


def _default_limit(spec: Mapping[str, Any], ctx: GradeContext) -> float:
    return ctx.setting.command_timeout if ctx.setting is not None else DEFAULT_COMMAND_SECONDS


@dataclass(frozen=True)
class Place:
    """Where the command runs: the folder, and the stored changes applied there (if any)."""

    cwd: Path
    patch: Path | None = None
    root: Path | None = None  # the fresh worktree (writable runs)


@contextlib.contextmanager
def post_run_workspace(setting: Setting, *, changes: bool = True) -> Iterator[Place]:
    """The cell's workspace as the seat left it: the workspace (read-only runs), or a fresh
    worktree of the run's base commit with its verified changes.patch applied, removed after.

    `changes=False`: the base commit as it was before the seat ran (a writable run only).
    """
    if setting.execution_mode != "writable-worktree" and setting.own_head is not None:
        # a case's own workspace: a fresh worktree of its built commit (what the read-only
        # seat saw; before and after it are the same), so the tree every attempt starts
        # from never gets what a command writes
        try:
            tree = worktree.create(
                worktree_repo(setting.workspace, setting.own_head), setting.out
            )
        except (OSError, EnvironmentProblem) as exc:
            raise GraderFault(f"cannot make a fresh worktree of the workspace: {exc}") from None
        try:
            yield Place(tree.cwd, None, tree.root)
        finally:
            worktree.remove(tree)
        return
    if setting.execution_mode != "writable-worktree":
        if not changes:
            raise GraderFault(
                f"require_tests: {REQUIRE_BASE} needs a writable-worktree run (a base commit "
                "to run the tests at); name the required tests instead"
            )
        yield Place(setting.workspace)
        return
    snapshot = setting.snapshot or {}
    head = snapshot.get("head")
    if not isinstance(head, str):
        raise GraderFault("this run recorded no base commit to re-create its worktree from")
    patch = setting.run_dir / worktree.PATCH
    if changes and setting.changes_digest is None:
        raise GraderFault(
            "this run stored no changes.patch (it was recorded before brigade kept one): "
            "its changes cannot be re-applied for the command"
        )
    if changes and store.file_digest(patch) != setting.changes_digest:
        raise GraderFault("run/changes.patch does not match the changes_digest of the receipt")
    try:
        # a grader_error is graded again by `brigade regrade` or the next run, never by
        # --retry-transient (which runs the seat again)
        repo = worktree_repo(
            setting.workspace,
            head,
            "fetch it there, then run `brigade regrade` or the run again: it grades "
            "grader_error cells again",
        )
        prefix = snapshot.get("prefix")
        repo = dataclasses.replace(repo, prefix=prefix if isinstance(prefix, str) else "")
        tree = worktree.create(repo, setting.out)
    except (OSError, EnvironmentProblem) as exc:
        raise GraderFault(f"cannot re-create the run's worktree: {exc}") from None
    try:
        if not changes:
            yield Place(tree.cwd, None, tree.root)
            return
        try:
            worktree.apply_patch(tree, patch)
        except OSError as exc:
            raise GraderFault(
                f"the stored changes do not apply to commit {head[:12]}: {exc}"
            ) from None
        yield Place(tree.cwd, patch, tree.root)
    finally:
        worktree.remove(tree)


TEST_PATCH = "test.patch"


def test_patch_text(spec: Mapping[str, Any], manifest_dir: Path) -> bytes | None:
    """The grader's test patch (inline, or its file under the manifest's folder), or None."""
    if spec.get("test_patch") is not None:
        return str(spec["test_patch"]).encode("utf-8")
    name = spec.get("test_patch_file")
    if name is None:
        return None
    path = contained_file(manifest_dir, name, "test_patch_file")
    try:
        return read_regular(path, "test_patch_file")
    except OSError as exc:
        raise GraderFault(f"test_patch_file {name!r} cannot be read: {exc}") from None


class _SeatBrokeTests(Exception):
    """The test patch applies at the run's base commit but not over the seat's changes: the
    seat changed what the tests extend. Its doing, a failing score, never a grader fault
    (else a seat that cannot pass would turn its rejection into a measurement failure)."""


def _apply_test_patch(
    spec: Mapping[str, Any],
    ctx: GradeContext,
    place: Place,
    folder: Path,
    setting: Setting | None = None,
) -> None:
    """Apply the grader's test patch (tests the agent never saw) in the post-run worktree,
    before the command runs; GraderFault when there is no worktree or it does not apply,
    `_SeatBrokeTests` when it does not apply over the seat's changes only (`setting`: the
    run whose base commit is tried then)."""
    text = test_patch_text(spec, ctx.manifest_dir)
    if text is None:
        return
    if place.root is None:
        raise GraderFault(
            "test_patch needs a writable-worktree run: it is applied to a fresh worktree, "
            "never to the workspace itself"
        )
    patch = folder / TEST_PATCH
    store.atomic_write_bytes(patch, text, sync_dir=False)
    args = ["apply", "--whitespace=nowarn", "--binary"]
    relative = os.path.relpath(place.cwd, place.root)
    if relative != ".":
        args.append(f"--directory={relative}")
    code, _, err = gitcmd.Git(None, place.root).run([*args, str(patch)], timeout=600)
    if code != 0:
        said = " ".join(err.split()) or f"exit status {code}"
        message = f"the test patch does not apply over the seat's changes: {said}"
        # over the seat's changes only (a writable run's): does it apply without them?
        if place.patch is not None and setting is not None:
            if _applies_at_base(setting, args, patch):
                raise _SeatBrokeTests(
                    f"{message} (it applies at the base commit: the seat changed what the "
                    "tests extend)"
                )
        raise GraderFault(message)


def _applies_at_base(setting: Setting, args: list[str], patch: Path) -> bool:
    """Whether the test patch applies to a fresh worktree of the run's base commit."""
    try:
        with post_run_workspace(setting, changes=False) as base:
            if base.root is None:
                return False
            code, _, _ = gitcmd.Git(None, base.root).run(
                [*args, "--check", str(patch)], timeout=600
            )
            return code == 0
    except GraderFault:
        return False


def expand(text: str, values: Mapping[str, str], *, quote: bool = False) -> str:
    """A command word (or a shell command line) with its placeholders replaced."""
    for placeholder, value in values.items():
        text = text.replace(placeholder, shlex.quote(value) if quote else value)
    return text


def command_argv(command: list[str] | str, values: Mapping[str, str]) -> list[str]:
    """The argv to run: a list as it is, a string through /bin/sh -c (placeholders expanded)."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", expand(command, values, quote=True)]
    return [expand(part, values) for part in command]


def environment(ctx: GradeContext, setting: Setting, folder: Path, cwd: Path) -> dict[str, str]:
    """The command's environment: ours, then BRIGADE_* naming the cell and its files."""
    env = dict(os.environ)
    env.update(
        {
            "BRIGADE_CELL_ID": ctx.cell_id,
            "BRIGADE_COORDINATE": setting.coordinate,
            "BRIGADE_SEAT": setting.seat,
            "BRIGADE_RUN_DIR": str(setting.run_dir),
            "BRIGADE_ANSWER_FILE": str(setting.run_dir / "final.txt"),
            GRADER_DIR_VARIABLE: str(folder),
            "BRIGADE_WORKSPACE": str(cwd),
            "BRIGADE_EXECUTION_MODE": setting.execution_mode,
        }
    )
    return env


def program_folders(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> list[Path]:
    """The folders of the program a command line runs and of the paths it names."""
    found = sandbox.named_paths(argv)
    program = proc.resolve_executable(argv[0], cwd, env) if argv else None
    if program is not None:
        found += sandbox.program_paths(program)
    return found


@contextlib.contextmanager
def command_sandbox(
    ctx: GradeContext,
    setting: Setting,
    folder: Path,
    place: Place,
    env: Mapping[str, str],
    argv: Sequence[str],
) -> Iterator[sandbox.CommandSandbox]:
    """The sandbox the command runs in: the cell's seat's mode (or --sandbox) and network,
    its roster paths; GraderFault when it is required and cannot run here."""
    seat = setting.seats.get(setting.seat)
    mode = setting.sandbox or (seat.sandbox.mode if seat is not None else "auto")
    home = env.get("HOME") or os.path.expanduser("~")
    writable, readable, hidden = sandbox.roster_paths(seat, home) if seat else ((), (), ())
    scope = contextlib.ExitStack()
    try:
        box = scope.enter_context(
            sandbox.command_sandbox(
                place.cwd,
                mode=mode,
                network=seat.network if seat is not None else True,
                worktree=place.root,
                writable=(folder, *writable),
                # the answer (BRIGADE_ANSWER_FILE) and the manifest's files ({manifest_dir})
                readable=(setting.run_dir, ctx.manifest_dir, *readable),
                hidden=(
                    setting.out,
                    setting.workspace / ".brigade" / "evals",
                    *map(Path, setting.unseen),
                    *hidden,
                ),
                # the program and what its command line names (a checkout under /tmp)
                visible=(setting.workspace, *program_folders(argv, place.cwd, env)),
            )
        )
    except (OSError, sandbox.SandboxError) as exc:
        raise GraderFault(f"sandbox: {exc}") from None
    with scope:
        yield box


def _stat(path: Path | None) -> tuple[int, int, int, int] | None:
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _logs(setting: Setting, folder: Path) -> dict[str, str]:
    """The grader's log files that exist, relative to the output directory (those of its run
    at the base commit as base_stdout, base_stderr and base_junit)."""
    found: dict[str, str] = {}
    for where, prefix in ((folder, ""), (folder / BASE_FOLDER, "base_")):
        for name in (STDOUT, STDERR, JUNIT_COPY):
            if _regular(where / name):
                found[prefix + name.split(".")[0]] = os.path.relpath(where / name, setting.out)
    return found


def _clear_logs(folder: Path) -> None:
    """Remove what a previous grading left (its logs, its JUnit copy, its base run's folder,
    the command's own folder: whatever is at those names, never followed), and make the
    command's folder afresh."""
    for name in (STDOUT, STDERR, JUNIT_COPY):
        fs.remove(folder / name)
    _clear_base(folder)
    _fresh_work(folder)


def _clear_base(folder: Path) -> None:
    """Remove the base run's folder (or whatever is in its place: never followed)."""
    fs.remove(folder / BASE_FOLDER)


def _fresh_work(folder: Path) -> Path:
    """The command's own, empty folder in `folder` (what was there removed)."""
    work = folder / WORK_FOLDER
    fs.remove(work)
    work.mkdir()
    return work


def _end_of(path: Path) -> str:
    """The last few kilobytes of a log (a regular file, never followed), '' when none."""
    try:
        with os.fdopen(store.open_regular(path), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4 * OUTPUT_CHARACTERS))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _output_tail(folder: Path, ctx: GradeContext) -> str:
    """The end of the command's output (stdout, else stderr), secrets replaced, quoted."""
    for name in (STDOUT, STDERR):
        text = _end_of(folder / name)
        if text.strip():
            return json.dumps(tail(ctx.redact(text), OUTPUT_CHARACTERS), ensure_ascii=False)
    return ""


def _with_stderr(message: str, folder: Path, ctx: GradeContext) -> str:
    """A fault's message ending with the last lines of the command's stderr (secrets
    replaced, quoted): why it could not do its work is usually there."""
    lines = [line for line in _end_of(folder / STDERR).splitlines() if line.strip()]
    if not lines:
        return f"{message}; its stderr is empty"
    text = tail(ctx.redact("\n".join(lines[-STDERR_LINES:])), STDERR_CHARACTERS)
    return f"{message}; its stderr ends {json.dumps(text, ensure_ascii=False)}"


def _run_command(
    spec: Mapping[str, Any],
    ctx: GradeContext,
    setting: Setting,
    place: Place,
    folder: Path,
    extra: dict[str, Any],
) -> proc.ProcResult:
    """Run the command once where `place` says, its logs in `folder`, {grader_dir} its
    own folder in there (the only one of the grader's it may write)."""
    work = folder / WORK_FOLDER
    values = {PYTHON: sys.executable, MANIFEST_DIR: str(ctx.manifest_dir), GRADER_DIR: str(work)}
    env = environment(ctx, setting, work, place.cwd)
    argv = command_argv(spec["command"], values)
    with command_sandbox(ctx, setting, work, place, env, argv) as box:
        extra["enforcement"] = {
            "applied": box.decision.applied,
            "network": "isolated" if box.decision.network_isolated else "host",
        }
        return proc.run(
            argv,
            cwd=place.cwd,
            env=env,
            stdin_text=None,
            timeout=ctx.time_limit,
            stdout_path=folder / STDOUT,
            stderr_path=folder / STDERR,
            tag=(GRADER_DIR_VARIABLE, str(work)),
            confine=box.confine,
        )


def _timeout_message(limit: float) -> str:
    return (
        f"the command did not finish within its time limit of {limit:g} s "
        "(timeout_seconds); its process group was killed"
    )


def _grade(spec: Mapping[str, Any], ctx: GradeContext) -> Graded:
    setting, folder = need_setting(ctx, "command")
    _clear_logs(folder)
    extra: dict[str, Any] = {"exit_code": None}
    limit = ctx.time_limit
    cases: list[JUnitCase] | None = None
    unmeasured: str | None = None  # why the JUnit file over the seat's changes is no report
    try:
        with post_run_workspace(setting) as place:
            _apply_test_patch(spec, ctx, place, folder, setting)
            junit = _junit_file(spec, place.cwd, folder / WORK_FOLDER)
            before = _stat(junit)
            if place.patch is not None:
                extra["output_refs"] = [os.path.relpath(place.patch, setting.out)]
            result = _run_command(spec, ctx, setting, place, folder, extra)
            extra["exit_code"] = result.exit_code
            if not result.launched:
                raise GraderFault(f"the command could not start: {result.launch_error}")
            if result.timed_out and spec["timeout_is"] == TIMEOUT_ERRORS:
                raise GraderFault(_with_stderr(_timeout_message(limit), folder, ctx))
            if junit is not None and not result.timed_out:
                named = _junit_name(spec, folder / WORK_FOLDER, setting.out)
                try:
                    cases = _read_junit(named, junit, before, folder)
                except GraderFault as fault:
                    if place.patch is None:  # no seat's changes to tell apart
                        raise GraderFault(_with_stderr(str(fault), folder, ctx)) from None
                    unmeasured = _with_stderr(str(fault), folder, ctx)
        if unmeasured is not None:
            return _unmeasured(spec, ctx, setting, folder, unmeasured, extra)
        required = spec["require_tests"]
        if required == REQUIRE_BASE and cases is not None:
            required = _base_tests(spec, ctx, setting, folder)
    except _SeatBrokeTests as broke:
        check = {"name": "test patch", "passed": False, "detail": "does not apply"}
        return Graded(0.0, str(broke), [check], {**extra, "logs": _logs(setting, folder)})
    except GraderFault as fault:
        raise GraderFault(str(fault), {**extra, "logs": _logs(setting, folder)}) from None
    extra["logs"] = _logs(setting, folder)
    expected = spec["expected_exit"]
    code = result.exit_code
    status = f"exit status {code}, expected {expected}"
    output = _output_tail(folder, ctx)
    said = f"; the output ends {output}" if output else ""
    if result.timed_out:
        # the code under test never ended (timeout_is: error makes this a grader_error)
        check = {"name": "time limit", "passed": False, "detail": f"not finished in {limit:g} s"}
        detail = (
            f"the tests timed out: the command did not finish within its time limit of "
            f"{limit:g} s (timeout_seconds) and its process group was killed; the code under "
            f"test may never end{said}"
        )
        return Graded(0.0, detail, [check], extra)
    if cases is None:
        passed = code == expected
        return Graded(1.0 if passed else 0.0, status + ("" if passed else said), [], extra)
    checks = [{"name": "exit status", "passed": code == expected, "detail": status}]
    try:
        named = _junit_name(spec, folder / WORK_FOLDER, setting.out)
        score, detail, found = junit_score(cases, required, named)
    except GraderFault as fault:
        raise GraderFault(_with_stderr(str(fault), folder, ctx), extra) from None
    checks += [_redacted_check(check, ctx.redact) for check in found]
    return Graded(score, f"{detail}; {status}", checks, extra)


def _unmeasured(
    spec: Mapping[str, Any],
    ctx: GradeContext,
    setting: Setting,
    folder: Path,
    why: str,
    extra: dict[str, Any],
) -> Graded:
    """The grade when the command left no JUnit report over the seat's changes: when it
    leaves one at the run's base commit, the seat's changes broke the test run (code that
    ends the runner early, forges its report): a failing score, never a way to turn a
    rejection into a measurement failure. Else the grader's own fault (GraderFault)."""
    try:
        _base_tests(spec, ctx, setting, folder)
    except GraderFault:
        raise GraderFault(why) from None
    check = {"name": "test run", "passed": False, "detail": "no JUnit report"}
    detail = (
        f"{why} (at the base commit the command reports: the seat's changes broke the test "
        "run)"
    )
    return Graded(0.0, detail, [check], {**extra, "logs": _logs(setting, folder)})


def _base_tests(
    spec: Mapping[str, Any], ctx: GradeContext, setting: Setting, folder: Path
) -> list[str]:
    """The tests that ran (passed, failed or errored) when the command ran at the run's base
    commit, before the seat's changes: `require_tests: base`. Its logs go to base/ in the
    grader's folder; a command that cannot run there is a GraderFault."""
    _clear_base(folder)
    base = folder / BASE_FOLDER
    base.mkdir()
    _fresh_work(base)
    with post_run_workspace(setting, changes=False) as place:
        _apply_test_patch(spec, ctx, place, base)
        junit = _junit_file(spec, place.cwd, base / WORK_FOLDER)
        before = _stat(junit)
        result = _run_command(spec, ctx, setting, place, base, {})
        at = "at the base commit (require_tests: base)"
        if not result.launched:
            raise GraderFault(f"the command could not start {at}: {result.launch_error}")
        if result.timed_out:
            message = f"{at}, {_timeout_message(ctx.time_limit)}"
            raise GraderFault(_with_stderr(message, base, ctx))
        assert junit is not None  # (require_tests needs score_from: junit)
        named = _junit_name(spec, base / WORK_FOLDER, setting.out)
        try:
            cases = _read_junit(named, junit, before, base)
        except GraderFault as fault:
            raise GraderFault(_with_stderr(f"{at}, {fault}", base, ctx)) from None
    ran = [case.label for case in cases if case.outcome != "skipped"]
    if not ran:
        skipped = len(cases)
        raise GraderFault(
            f"{at}, the JUnit file {named} holds no test that ran ({skipped} skipped): "
            "there is no test to require"
        )
    return ran


def _redacted_check(check: Mapping[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """A component check naming a test, with what it quotes replaced first, then cut: a
    test's name and message may quote the prompt or a secret."""
    shown: dict[str, Any] = {"name": tail_cut(redact(check["name"])), "passed": check["passed"]}
    if "detail" in check:
        shown["detail"] = tail_cut(redact(check["detail"]))
    return shown


def _junit_file(spec: Mapping[str, Any], cwd: Path, folder: Path) -> Path | None:
    path = junit_path(spec)
    if path is None:
        return None
    if path.startswith(GRADER_DIR + "/"):
        return contained_file(folder, path[len(GRADER_DIR) + 1 :], "score_from path")
    return contained_file(cwd, path, "score_from path")


def _junit_name(spec: Mapping[str, Any], folder: Path, out: Path) -> str:
    """The JUnit file as a detail names it: a path in the grader's folder relative to the
    output directory (its `{grader_dir}` resolved), else as written (relative to where the
    command ran)."""
    path = junit_path(spec) or ""
    if path.startswith(GRADER_DIR + "/"):
        return os.path.relpath(folder / path[len(GRADER_DIR) + 1 :], out)
    return path


def _read_junit(
    named: str, junit: Path, before: tuple[int, int, int, int] | None, folder: Path
) -> list[JUnitCase]:
    """The JUnit file's test cases; a copy is kept in the grader's folder."""
    if _stat(junit) is None:
        raise GraderFault(f"the command wrote no JUnit file at {named}")
    if _stat(junit) == before:
        raise GraderFault(f"the JUnit file {named} was not written by this run of the command")
    try:
        data = read_regular(junit, "the JUnit file")
    except (OSError, NotReadable) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise GraderFault(f"cannot read the JUnit file {named}: {reason}") from None
    store.atomic_write_bytes(folder / JUNIT_COPY, data, durable=False)
    return junit_cases(data, named)


def tail_cut(text: str, limit: int = 200) -> str:
    """At most `limit` characters of text, `…` where cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


@dataclass(frozen=True)
class JUnitCase:
    """One test case of a JUnit file."""

    label: str  # `classname.name` (or the name alone): how checks and require_tests name it
    name: str
    outcome: str  # passed, failed, errors or skipped
    message: str  # of its failure or error


def junit_cases(data: bytes, named: str) -> list[JUnitCase]:
    """The test cases of a JUnit XML document; GraderFault when it is not JUnit XML.

    Parsed with defusedxml: entity expansion and external references are refused.
    """
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    try:
        root = fromstring(data)
    except (ParseError, DefusedXmlException, ValueError) as exc:
        raise GraderFault(f"the JUnit file {named} is not well-formed XML ({exc})") from None
    if _local(root.tag) not in ("testsuites", "testsuite"):
        raise GraderFault(
            f"the JUnit file {named} is not JUnit XML (its root is <{_local(root.tag)}>, "
            "not <testsuites> or <testsuite>)"
        )
    cases: list[JUnitCase] = []
    for case in root.iter():
        if _local(case.tag) != "testcase":
            continue
        kinds = {_local(child.tag) for child in case}
        if "failure" in kinds:
            outcome = "failed"
        elif "error" in kinds:
            outcome = "errors"
        elif "skipped" in kinds:
            outcome = "skipped"
        else:
            outcome = "passed"
        classname, name = case.get("classname"), case.get("name") or "?"
        message = next(
            (c.get("message") or "" for c in case if _local(c.tag) in ("failure", "error")), ""
        )
        label = f"{classname}.{name}" if classname else name
        cases.append(JUnitCase(label, name, outcome, message))
    return cases


def junit_score(
    cases: Sequence[JUnitCase], required: Sequence[str] | None, named: str
) -> tuple[float, str, list[dict[str, Any]]]:
    """The score (tests passed over tests run, required tests that did not run counted as
    failed), the detail and a check per failed test and per required test that did not run
    (the first FAILED_SHOWN of each, unredacted); GraderFault when nothing was measured.

    A required name matches a test's `classname.name` or its name alone.
    """
    summary = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures: list[dict[str, Any]] = []
    for case in cases:
        summary[case.outcome] += 1
        if case.outcome in ("failed", "errors") and len(failures) < FAILED_SHOWN:
            word = "failed" if case.outcome == "failed" else "error"
            detail = f"{word}: {case.message}" if case.message else word
            failures.append({"name": case.label, "passed": False, "detail": detail})
    missing: list[dict[str, Any]] = []
    for name in dict.fromkeys(required or ()):
        found = [case for case in cases if name in (case.label, case.name)]
        if any(case.outcome != "skipped" for case in found):
            continue
        why = "skipped" if found else "not in the JUnit file"
        missing.append({"name": name, "passed": False, "detail": f"required, did not run: {why}"})
    ran = summary["passed"] + summary["failed"] + summary["errors"]
    if ran + len(missing) == 0:
        raise GraderFault(
            f"the JUnit file {named} holds no test that ran ({summary['skipped']} skipped): "
            "nothing was measured"
        )
    counted = ran + len(missing)
    lost = f", {len(missing)} required but not run" if required is not None else ""
    detail = (
        f"{summary['passed']} of {counted} test(s) passed ({summary['failed']} failed, "
        f"{summary['errors']} error(s){lost}, {summary['skipped']} skipped and not counted)"
    )
    return round(summary["passed"] / counted, 6), detail, failures + missing[:FAILED_SHOWN]


def _inputs(spec: Mapping[str, Any], ctx: GradeContext) -> Mapping[str, Any] | None:
    """What a command reads besides the run's stored changes at its base commit (the grader
    key's run part): the files and folders its command line names by absolute path (the
    tests the agent never sees, the program), the manifest's folder when it uses
    `{manifest_dir}`, and the sandbox it runs in. None in a read-only run: the command runs
    in the live workspace, whose state cannot be named. What it imports from its
    environment (an installed pytest) is not named either."""
    setting = ctx.setting
    if setting is None or setting.execution_mode != "writable-worktree":
        return None
    values = {PYTHON: sys.executable, MANIFEST_DIR: str(ctx.manifest_dir), GRADER_DIR: GRADER_DIR}
    command = spec["command"]
    if isinstance(command, str):
        try:
            words = shlex.split(expand(command, values, quote=True))
        except ValueError:
            return None
        parts = [command]
    else:
        words, parts = command_argv(command, values), command
    own = (setting.out, setting.workspace / ".brigade")
    named: dict[str, str | None] = {}
    for word in words:
        text = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        if os.path.isabs(text) and "\0" not in text:
            named[text] = reuse.path_digest(Path(text), own)
            if named[text] is None:
                return None
    if spec.get("test_patch_file") is not None:
        try:
            patch = test_patch_text(spec, ctx.manifest_dir)
        except GraderFault:
            return None
        named["test_patch_file"] = digest(patch) if patch is not None else None
    folder = None
    if any(MANIFEST_DIR in part for part in parts):
        folder = reuse.tree_digest(ctx.manifest_dir, own)
        if folder is None:
            return None
    seat = setting.seats.get(setting.seat)
    return {
        "named": named,
        "manifest_dir": folder,
        "sandbox": setting.sandbox or (seat.sandbox.mode if seat is not None else "auto"),
        "network": seat.network if seat is not None else True,
    }


GRADER = GraderType(
    "1",
    {
        "command": Field((list, str), required=True),
        "expected_exit": Field((int,), default=0),
        "score_from": Field((str,), default=None),
        "timeout_is": Field((str,), default=TIMEOUT_FAILS),
        "require_tests": Field((list, str), default=None),
        # tests the agent never sees: a patch applied over its changes before the command
        "test_patch": Field((str,), default=None),
        "test_patch_file": Field((str,), default=None),
    },
    _grade,
    _check,
    process=True,
    default_limit=_default_limit,
    max_limit=MAX_COMMAND_SECONDS,
    inputs=_inputs,
)
