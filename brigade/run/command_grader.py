"""The `command` grader: run a command (a test suite) over what the seat left, score its exit.

It runs in the cell's post-run workspace: the workspace itself in a read-only
run; in a writable run a fresh detached worktree of the run's base commit with
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
A command that cannot start or outlives its time limit, and a JUnit file that is
missing, stale or malformed, are grader_error: a broken measurement, never a zero.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.specs import DEFAULT_COMMAND_TIMEOUT_SECONDS
from brigade.errors import EnvironmentProblem
from brigade.outdir import store
from brigade.run import proc, sandbox, worktree
from brigade.run.grading import (
    Field,
    GradeContext,
    Graded,
    GraderFault,
    GraderType,
    NotReadable,
    Setting,
    as_is,
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
# failed tests a result lists as component checks
FAILED_SHOWN = 20
# the placeholders a command (and a JUnit path) may use
PYTHON = "{python}"
MANIFEST_DIR = "{manifest_dir}"
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
    junit_path(spec)


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
def post_run_workspace(setting: Setting) -> Iterator[Place]:
    """The cell's workspace as the seat left it: the workspace (read-only runs), or a fresh
    worktree of the run's base commit with its verified changes.patch applied, removed after."""
    if setting.execution_mode != "writable-worktree":
        yield Place(setting.workspace)
        return
    snapshot = setting.snapshot or {}
    head = snapshot.get("head")
    if not isinstance(head, str):
        raise GraderFault("this run recorded no base commit to re-create its worktree from")
    patch = setting.run_dir / worktree.PATCH
    if setting.changes_digest is None:
        raise GraderFault(
            "this run stored no changes.patch (it was recorded before brigade kept one): "
            "its changes cannot be re-applied for the command"
        )
    if store.file_digest(patch) != setting.changes_digest:
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
        tree = worktree.create(repo)
    except (OSError, EnvironmentProblem) as exc:
        raise GraderFault(f"cannot re-create the run's worktree: {exc}") from None
    try:
        try:
            worktree.apply_patch(tree, patch)
        except OSError as exc:
            raise GraderFault(
                f"the stored changes do not apply to commit {head[:12]}: {exc}"
            ) from None
        yield Place(tree.cwd, patch, tree.root)
    finally:
        worktree.remove(tree)


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
                hidden=(setting.out, setting.workspace / ".brigade" / "evals", *hidden),
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


def _logs(setting: Setting, folder: Path) -> dict[str, str]:
    """The grader's log files that exist, relative to the output directory."""
    return {
        name.split(".")[0]: os.path.relpath(folder / name, setting.out)
        for name in (STDOUT, STDERR, JUNIT_COPY)
        if (folder / name).is_file()
    }


def _output_tail(folder: Path, ctx: GradeContext) -> str:
    """The end of the command's output (stdout, else stderr), secrets replaced, quoted."""
    for name in (STDOUT, STDERR):
        try:
            with os.fdopen(store.open_regular(folder / name), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 4 * OUTPUT_CHARACTERS))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        if text.strip():
            return json.dumps(tail(ctx.redact(text), OUTPUT_CHARACTERS), ensure_ascii=False)
    return ""


def _grade(spec: Mapping[str, Any], ctx: GradeContext) -> Graded:
    setting, folder = need_setting(ctx, "command")
    for name in (STDOUT, STDERR, JUNIT_COPY):  # a previous grading's logs
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
    extra: dict[str, Any] = {"exit_code": None}
    limit = ctx.time_limit
    try:
        with post_run_workspace(setting) as place:
            values = {
                PYTHON: sys.executable,
                MANIFEST_DIR: str(ctx.manifest_dir),
                GRADER_DIR: str(folder),
            }
            junit = _junit_file(spec, place.cwd, folder)
            before = _stat(junit)
            if place.patch is not None:
                extra["output_refs"] = [os.path.relpath(place.patch, setting.out)]
            env = environment(ctx, setting, folder, place.cwd)
            argv = command_argv(spec["command"], values)
            with command_sandbox(ctx, setting, folder, place, env, argv) as box:
                extra["enforcement"] = {
                    "applied": box.decision.applied,
                    "network": "isolated" if box.decision.network_isolated else "host",
                }
                result = proc.run(
                    argv,
                    cwd=place.cwd,
                    env=env,
                    stdin_text=None,
                    timeout=limit,
                    stdout_path=folder / STDOUT,
                    stderr_path=folder / STDERR,
                    tag=(GRADER_DIR_VARIABLE, str(folder)),
                    confine=box.confine,
                )
            extra["exit_code"] = result.exit_code
            if not result.launched:
                raise GraderFault(f"the command could not start: {result.launch_error}")
            if result.timed_out:
                raise GraderFault(
                    f"the command did not finish within its time limit of {limit:g} s "
                    "(timeout_seconds); its process group was killed"
                )
            counts = None
            if junit is not None:
                named = _junit_name(spec, folder, setting.out)
                counts = _read_junit(named, junit, before, folder, ctx.redact)
    except GraderFault as fault:
        raise GraderFault(str(fault), {**extra, "logs": _logs(setting, folder)}) from None
    extra["logs"] = _logs(setting, folder)
    expected = spec["expected_exit"]
    code = result.exit_code
    status = f"exit status {code}, expected {expected}"
    output = _output_tail(folder, ctx)
    said = f"; the output ends {output}" if output else ""
    if counts is None:
        passed = code == expected
        return Graded(1.0 if passed else 0.0, status + ("" if passed else said), [], extra)
    summary, failures = counts
    ran = summary["passed"] + summary["failed"] + summary["errors"]
    checks = [{"name": "exit status", "passed": code == expected, "detail": status}, *failures]
    detail = (
        f"{summary['passed']} of {ran} test(s) passed ({summary['failed']} failed, "
        f"{summary['errors']} error(s), {summary['skipped']} skipped and not counted); {status}"
    )
    return Graded(round(summary["passed"] / ran, 6), detail, checks, extra)


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
    named: str,
    junit: Path,
    before: tuple[int, int, int, int] | None,
    folder: Path,
    redact: Callable[[str], str],
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The JUnit file's test counts and failed tests; a copy is kept in the grader's folder."""
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
    return junit_counts(data, named, redact)


def tail_cut(text: str, limit: int = 200) -> str:
    """At most `limit` characters of text, `…` where cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def junit_counts(
    data: bytes, named: str, redact: Callable[[str], str] = as_is
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Passed, failed, errored and skipped test cases of a JUnit XML document, and a check per
    failed one (the first FAILED_SHOWN); GraderFault when it is not JUnit XML or ran no test.

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
    summary = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures: list[dict[str, Any]] = []
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
        summary[outcome] += 1
        if outcome in ("failed", "errors") and len(failures) < FAILED_SHOWN:
            classname, name = case.get("classname"), case.get("name") or "?"
            label = f"{classname}.{name}" if classname else name
            message = next(
                (c.get("message") or "" for c in case if _local(c.tag) in ("failure", "error")),
                "",
            )
            # what a test printed may quote the prompt or a secret: replaced before the cut
            check: dict[str, Any] = {"name": tail_cut(redact(label)), "passed": False}
            word = "failed" if outcome == "failed" else "error"
            check["detail"] = tail_cut(f"{word}: {redact(message)}") if message else word
            failures.append(check)
    if summary["passed"] + summary["failed"] + summary["errors"] == 0:
        raise GraderFault(
            f"the JUnit file {named} holds no test that ran ({summary['skipped']} skipped): "
            "nothing was measured"
        )
    return summary, failures


GRADER = GraderType(
    "1",
    {
        "command": Field((list, str), required=True),
        "expected_exit": Field((int,), default=0),
        "score_from": Field((str,), default=None),
    },
    _grade,
    _check,
    process=True,
    default_limit=_default_limit,
    max_limit=MAX_COMMAND_SECONDS,
)
