"""The command grader: pass, fail, a partial score from JUnit, and every way it cannot measure
(cannot start, time limit, JUnit missing, stale or malformed) is a grader_error."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from brigade.core.taxonomy import Verdict, classify_grades
from brigade.inputs import schemas
from brigade.run.graders import GradeContext, LiveWorkspace, Setting, run_graders, spec_problem

CELL_ID = "c" * 64
PY = sys.executable


def context(tmp_path: Path, final_text: str = "hello\n") -> GradeContext:
    out = tmp_path / "out"
    attempt = out / "cells" / CELL_ID / "attempts" / "attempt-001"
    run_dir = attempt / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "final.txt").write_text(final_text)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "manifest").mkdir()
    return GradeContext(
        cell_id=CELL_ID,
        final_text=final_text,
        output_digest="sha256:" + hashlib.sha256(final_text.encode()).hexdigest(),
        output_ref=f"cells/{CELL_ID}/attempts/attempt-001/run/final.txt",
        exit_code=0,
        manifest_dir=tmp_path / "manifest",
        workspace=LiveWorkspace(work),
        changed_files=None,
        setting=Setting(
            out=out,
            workspace=work,
            run_dir=run_dir,
            graders_dir=attempt / "graders",
            coordinate="case:seat:1",
            attempt=1,
            prompt="the prompt",
            execution_mode="read-only",
            seat="seat",
            # these tests look at the command's files and pids from outside: no sandbox
            # (tests/test_sandbox.py grades in it)
            sandbox="off",
        ),
    )


def grade(ctx: GradeContext, spec: dict[str, Any]) -> dict[str, Any]:
    [result] = run_graders([spec], ctx)
    assert schemas.problems(result, "brigade.grader_result.v2") == []
    assert schemas.problems(result, "brigade.grader_result.v1") != []
    return result


def python(code: str, **extra: Any) -> dict[str, Any]:
    """A command grader running a Python snippet."""
    return {"type": "command", "command": [PY, "-c", code], **extra}


FOLDER = f"cells/{CELL_ID}/attempts/attempt-001/graders/command-0"
LOGS = {"stdout": f"{FOLDER}/stdout.log", "stderr": f"{FOLDER}/stderr.log"}


def test_a_command_that_exits_0_passes(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    result = grade(ctx, python("print('all tests passed')"))
    del result["duration_seconds"]
    assert result == {
        "schema": "brigade.grader_result.v2",
        "grader_id": "command:0",
        "grader_type": "command",
        "version": "1",
        "status": "scored",
        "score": 1.0,
        "score_min": 0,
        "score_max": 1,
        "detail": "exit status 0, expected 0",
        "component_checks": [],
        "cell_id": CELL_ID,
        "output_digest": ctx.output_digest,
        "output_refs": [ctx.output_ref],
        "exit_code": 0,
        "logs": LOGS,
        "enforcement": {"applied": "none", "network": "host"},  # the sandbox is off
    }
    assert (tmp_path / "out" / FOLDER / "stdout.log").read_text() == "all tests passed\n"


def test_a_command_that_exits_otherwise_fails_and_shows_the_end_of_its_output(
    tmp_path: Path,
) -> None:
    code = "import sys; print('x' * 300); print('1 failed, 2 passed'); sys.exit(3)"
    result = grade(context(tmp_path), python(code))
    assert (result["status"], result["score"], result["exit_code"]) == ("scored", 0.0, 3)
    shown = json.dumps("…" + ("x" * 300 + "\n1 failed, 2 passed")[-239:], ensure_ascii=False)
    assert result["detail"] == f"exit status 3, expected 0; the output ends {shown}"


def test_the_expected_exit_status_is_the_pass(tmp_path: Path) -> None:
    result = grade(context(tmp_path), python("import sys; sys.exit(3)", expected_exit=3))
    assert (result["status"], result["score"], result["detail"]) == (
        "scored",
        1.0,
        "exit status 3, expected 3",
    )


def test_a_shell_command_line_with_placeholders(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (tmp_path / "manifest" / "hidden test.py").write_text("print('hidden ran')\n")
    spec = {
        "type": "command",
        "command": "{python} {manifest_dir}/'hidden test.py' > {grader_dir}/copy.txt",
    }
    result = grade(ctx, spec)
    assert (result["status"], result["score"]) == ("scored", 1.0)
    assert (tmp_path / "out" / FOLDER / "work" / "copy.txt").read_text() == "hidden ran\n"


def test_the_command_runs_in_the_workspace_with_the_cell_named_and_stdin_closed(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    code = (
        "import json, os, sys; names = ['BRIGADE_CELL_ID', 'BRIGADE_COORDINATE', 'BRIGADE_SEAT',"
        " 'BRIGADE_RUN_DIR', 'BRIGADE_ANSWER_FILE', 'BRIGADE_GRADER_DIR', 'BRIGADE_WORKSPACE',"
        " 'BRIGADE_EXECUTION_MODE'];"
        " print(json.dumps({'cwd': os.getcwd(), 'stdin': sys.stdin.read(),"
        " 'env': {n: os.environ.get(n) for n in names}}))"
    )
    grade(ctx, python(code))
    seen = json.loads((tmp_path / "out" / FOLDER / "stdout.log").read_text())
    run_dir = tmp_path / "out" / "cells" / CELL_ID / "attempts" / "attempt-001" / "run"
    assert seen == {
        "cwd": str(tmp_path / "work"),
        "stdin": "",
        "env": {
            "BRIGADE_CELL_ID": CELL_ID,
            "BRIGADE_COORDINATE": "case:seat:1",
            "BRIGADE_SEAT": "seat",
            "BRIGADE_RUN_DIR": str(run_dir),
            "BRIGADE_ANSWER_FILE": str(run_dir / "final.txt"),
            # the command's own folder: brigade's logs of the grading are beside it
            "BRIGADE_GRADER_DIR": str(tmp_path / "out" / FOLDER / "work"),
            "BRIGADE_WORKSPACE": str(tmp_path / "work"),
            "BRIGADE_EXECUTION_MODE": "read-only",
        },
    }


def junit(*cases: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>\n"
    )


def case(name: str, inner: str = "") -> str:
    return f'<testcase classname="tests.test_calc" name="{name}">{inner}</testcase>'


def writes(path: str, text: str, exit_code: int = 1) -> dict[str, Any]:
    """A command grader that writes `text` to `path` and exits, scored from that JUnit file."""
    code = f"import sys; open({path!r}, 'w').write({text!r}); sys.exit({exit_code})"
    return python(code, score_from=f"junit:{path}")


def test_a_partial_score_from_junit(tmp_path: Path) -> None:
    document = junit(
        *[case(f"test_{i}") for i in range(7)],
        case("test_7", '<failure message="assert 1 == 2">trace</failure>'),
        case("test_8", '<error message="fixture broke"/>'),
        case("test_9", '<failure message="assert 3 == 4"/>'),
        case("test_skipped", '<skipped message="not on linux"/>'),
    )
    result = grade(context(tmp_path), writes("report.xml", document))
    assert (result["status"], result["score"], result["exit_code"]) == ("scored", 0.7, 1)
    assert result["detail"] == (
        "7 of 10 test(s) passed (2 failed, 1 error(s), 1 skipped and not counted); "
        "exit status 1, expected 0"
    )
    assert result["component_checks"] == [
        {"name": "exit status", "passed": False, "detail": "exit status 1, expected 0"},
        {"name": "tests.test_calc.test_7", "passed": False, "detail": "failed: assert 1 == 2"},
        {"name": "tests.test_calc.test_8", "passed": False, "detail": "error: fixture broke"},
        {"name": "tests.test_calc.test_9", "passed": False, "detail": "failed: assert 3 == 4"},
    ]
    assert result["logs"] == {**LOGS, "junit": f"{FOLDER}/junit.xml"}
    assert (tmp_path / "out" / FOLDER / "junit.xml").read_text() == document


def test_junit_in_the_grader_folder_and_every_test_passing(tmp_path: Path) -> None:
    spec = python(
        "import os; open(os.environ['BRIGADE_GRADER_DIR'] + '/r.xml', 'w').write("
        + repr(junit(case("a"), case("b")))
        + ")",
        score_from="junit:{grader_dir}/r.xml",
    )
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["score"]) == ("scored", 1.0)
    assert not (tmp_path / "work" / "r.xml").exists()


ERROR = ("grader_error", None)


def test_a_command_that_cannot_start_is_a_grader_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-program"
    result = grade(context(tmp_path), {"type": "command", "command": [str(missing), "-q"]})
    assert (result["status"], result["score"], result["exit_code"]) == (*ERROR, None)
    assert result["detail"] == (
        f"the command could not start: cannot launch {missing}: No such file or directory"
    )
    assert result["logs"] == LOGS  # what proc wrote about it


def test_a_command_past_its_time_limit_fails_the_code_under_test(tmp_path: Path) -> None:
    """Code that never ends makes its tests time out: that is the code's result (a score
    of 0 that says so), not a fault of the apparatus."""
    spec = python("import time; print('started', flush=True); time.sleep(600)")
    result = grade(context(tmp_path), {**spec, "timeout_seconds": 0.5})
    assert (result["status"], result["score"]) == ("scored", 0.0)
    assert result["exit_code"] == -15  # SIGTERM ended it
    assert result["detail"] == (
        "the tests timed out: the command did not finish within its time limit of 0.5 s "
        "(timeout_seconds) and its process group was killed; the code under test may never "
        'end; the output ends "started"'
    )
    assert result["component_checks"] == [
        {"name": "time limit", "passed": False, "detail": "not finished in 0.5 s"}
    ]
    assert classify_grades([result]) == Verdict("rejected")
    assert (tmp_path / "out" / FOLDER / "stdout.log").read_text() == "started\n"


def test_timeout_is_error_keeps_a_hanging_suite_a_grader_error(tmp_path: Path) -> None:
    code = "import sys, time; print('waiting for a server', file=sys.stderr, flush=True); "
    spec = python(code + "time.sleep(600)", score_from="junit:r.xml", timeout_is="error")
    result = grade(context(tmp_path), {**spec, "timeout_seconds": 0.5})
    assert (result["status"], result["score"], result["exit_code"]) == (*ERROR, -15)
    assert result["detail"] == (
        "the command did not finish within its time limit of 0.5 s (timeout_seconds); its "
        'process group was killed; its stderr ends "waiting for a server"'
    )
    assert classify_grades([result]).state == "grader_error"


def test_the_default_time_limit_comes_from_the_setting(tmp_path: Path) -> None:
    import dataclasses

    ctx = context(tmp_path)
    assert ctx.setting is not None
    short = dataclasses.replace(ctx, setting=dataclasses.replace(ctx.setting, command_timeout=0.5))
    result = grade(short, python("import time; time.sleep(600)"))
    assert result["detail"].startswith(
        "the tests timed out: the command did not finish within its time limit of 0.5 s"
    )


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("not xml at all", "the JUnit file report.xml is not well-formed XML (syntax error: "),
        ("<coverage/>", "the JUnit file report.xml is not JUnit XML (its root is <coverage>"),
        (junit(), "the JUnit file report.xml holds no test that ran (0 skipped)"),
        (
            junit(case("a", "<skipped/>")),
            "the JUnit file report.xml holds no test that ran (1 skipped)",
        ),
        (
            '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;">]>'
            "<testsuites>&b;</testsuites>",
            "the JUnit file report.xml is not well-formed XML (EntitiesForbidden(",
        ),
    ],
    ids=["garbage", "not junit", "empty", "all skipped", "entities"],
)
def test_a_malformed_junit_file_is_a_grader_error(tmp_path: Path, text: str, detail: str) -> None:
    result = grade(context(tmp_path), writes("report.xml", text, exit_code=0))
    assert (result["status"], result["score"], result["exit_code"]) == (*ERROR, 0)
    assert result["detail"].startswith(detail), result["detail"]
    assert result["logs"]["junit"] == f"{FOLDER}/junit.xml"


def test_a_missing_or_stale_junit_file_is_a_grader_error(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    spec = python("pass", score_from="junit:report.xml")
    missing = grade(ctx, spec)
    assert (missing["status"], missing["detail"]) == (
        "grader_error",
        "the command wrote no JUnit file at report.xml; its stderr is empty",
    )
    (tmp_path / "work" / "report.xml").write_text(junit(case("a")))  # left from before
    stale = grade(ctx, spec)
    assert (stale["status"], stale["detail"]) == (
        "grader_error",
        "the JUnit file report.xml was not written by this run of the command; its stderr is empty",
    )


def test_a_fifo_as_junit_file_is_never_opened(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    spec = python("import os; os.mkfifo('report.xml')", score_from="junit:report.xml")
    result = grade(ctx, spec)
    assert (result["status"], result["detail"]) == (
        "grader_error",
        "cannot read the JUnit file report.xml: the JUnit file is not a regular file; its "
        "stderr is empty",
    )


def test_graders_run_again_start_from_empty_logs(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    grade(ctx, writes("report.xml", junit(case("a")), exit_code=0))
    assert (tmp_path / "out" / FOLDER / "junit.xml").exists()
    again = grade(ctx, python("pass"))
    assert again["logs"] == LOGS
    assert not (tmp_path / "out" / FOLDER / "junit.xml").exists()


def test_without_a_run_the_command_grader_is_a_grader_error(tmp_path: Path) -> None:
    import dataclasses

    ctx = dataclasses.replace(context(tmp_path), setting=None)
    [result] = run_graders([python("pass")], ctx)
    assert (result["status"], result["detail"], result["exit_code"], result["logs"]) == (
        "grader_error",
        "command graders run only on a cell of a run (no run folder here)",
        None,
        {},
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"type": "command"}, "command graders need a 'command' field"),
        ({"type": "command", "command": []}, "command must be a non-empty list of strings"),
        ({"type": "command", "command": ["", "x"]}, "command[0] (the program) must not be empty"),
        ({"type": "command", "command": [1]}, "command must be a non-empty list of strings"),
        ({"type": "command", "command": "  "}, "command must not be empty"),
        ({"type": "command", "command": 5}, "field 'command' must be list or str, got int"),
        (
            {"type": "command", "command": ["a\0"]},
            "command contains a NUL byte, which no command line can carry",
        ),
        (
            {"type": "command", "command": ["t"], "score_from": "xml:r.xml"},
            "score_from 'xml:r.xml' must be junit:PATH (a JUnit XML file)",
        ),
        (
            {"type": "command", "command": ["t"], "score_from": "junit:../r.xml"},
            "score_from path '../r.xml' must be a relative path inside its folder",
        ),
        (
            {"type": "command", "command": ["t"], "expected_exit": True},
            "field 'expected_exit' must be int, got bool",
        ),
        (
            {"type": "command", "command": ["t"], "timeout_seconds": 700000},
            "field 'timeout_seconds' must be a number of seconds above 0 and at most 604800, "
            "got 700000",
        ),
        ({"type": "command", "command": ["t"], "shell": True}, "unknown field 'shell'"),
    ],
)
def test_spec_problems(spec: dict[str, Any], problem: str) -> None:
    found = spec_problem(spec)
    assert found is not None and found.startswith(problem), found


def test_a_valid_spec_has_no_problem() -> None:
    spec = {
        "type": "command",
        "command": ["python", "-m", "pytest", "-q"],
        "score_from": "junit:{grader_dir}/junit.xml",
        "expected_exit": 0,
        "timeout_seconds": 3600,
    }
    assert spec_problem(spec) is None


def test_v1_results_stay_v1(tmp_path: Path) -> None:
    [result] = run_graders([{"type": "exit_status"}], context(tmp_path))
    assert result["schema"] == "brigade.grader_result.v1"
    assert schemas.problems(result, "brigade.grader_result.v1") == []
    assert schemas.problems(result, "brigade.grader_result.v2") != []
    assert not (
        tmp_path / "out" / "cells" / CELL_ID / "attempts" / "attempt-001" / "graders"
    ).exists()


def test_no_process_outlives_its_grader(tmp_path: Path) -> None:
    from conftest import alive, wait_for

    pids = tmp_path / "pids"
    code = (
        "import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', "
        "'import os, time; os.setsid(); time.sleep(600)']); "
        f"open({str(pids)!r}, 'w').write(str(child.pid))"
    )
    result = grade(context(tmp_path), python(code))
    assert result["score"] == 1.0
    pid = int(pids.read_text())
    wait_for(lambda: not alive(pid), what="the grader's straggler ended")
    assert os.path.exists(tmp_path / "out" / FOLDER / "stdout.log")


def test_a_junit_file_in_the_grader_folder_is_named_by_its_resolved_path(
    tmp_path: Path,
) -> None:
    """Regression: the detail said `{grader_dir}/j.xml`, the placeholder as written."""
    code = "import os; open(os.environ['BRIGADE_GRADER_DIR'] + '/j.xml', 'w').write('<html/>')"
    result = grade(context(tmp_path), python(code, score_from="junit:{grader_dir}/j.xml"))
    assert (result["status"], result["detail"]) == (
        "grader_error",
        f"the JUnit file {FOLDER}/work/j.xml is not JUnit XML (its root is <html>, not "
        "<testsuites> or <testsuite>); its stderr is empty",
    )


def test_every_test_passing_with_another_exit_status_is_no_pass(tmp_path: Path) -> None:
    """The score is the share of tests passed; the pass also needs the expected exit status
    (its component check): the cell is rejected."""
    result = grade(context(tmp_path), writes("report.xml", junit(case("a")), exit_code=1))
    assert (result["status"], result["score"]) == ("scored", 1.0)
    assert result["component_checks"] == [
        {"name": "exit status", "passed": False, "detail": "exit status 1, expected 0"}
    ]
    assert classify_grades([result]) == Verdict("rejected")
    passing = grade(context(tmp_path / "ok"), writes("report.xml", junit(case("a")), exit_code=0))
    assert classify_grades([passing]) == Verdict("accepted")


def test_a_command_that_cannot_do_its_work_ends_its_detail_with_its_stderr(
    tmp_path: Path,
) -> None:
    """pytest not installed: the interpreter says so on stderr and writes no JUnit file."""
    code = (
        "import sys; print('warming up', file=sys.stderr); "
        "print(sys.executable + ': No module named pytest', file=sys.stderr); sys.exit(1)"
    )
    result = grade(context(tmp_path), python(code, score_from="junit:r.xml"))
    assert (result["status"], result["score"], result["exit_code"]) == (*ERROR, 1)
    assert result["detail"] == (
        "the command wrote no JUnit file at r.xml; its stderr ends "
        + json.dumps(f"warming up\n{PY}: No module named pytest")
    )


def test_the_stderr_a_detail_quotes_is_its_last_lines_with_secrets_replaced(
    tmp_path: Path,
) -> None:
    import dataclasses

    ctx = dataclasses.replace(context(tmp_path), redact=lambda t: t.replace("s3cret", "<env>"))
    lines = "".join(f"print('line {i}', file=sys.stderr); " for i in range(9))
    code = f"import sys; {lines}print('token s3cret', file=sys.stderr)"
    result = grade(ctx, python(code, score_from="junit:r.xml"))
    assert result["detail"].endswith(
        "its stderr ends " + json.dumps("line 5\nline 6\nline 7\nline 8\ntoken <env>")
    )


def required(*names: str, **extra: Any) -> dict[str, Any]:
    document = junit(
        case("test_a"),
        case("test_b", '<failure message="assert 1 == 2"/>'),
        case("test_s", "<skipped/>"),
    )
    return {**writes("report.xml", document, exit_code=1), "require_tests": list(names), **extra}


def test_required_tests_that_did_not_run_are_failed_checks(tmp_path: Path) -> None:
    spec = required("tests.test_calc.test_a", "test_b", "test_gone", "test_s")
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["score"]) == ("scored", 0.25)
    assert result["detail"] == (
        "1 of 4 test(s) passed (1 failed, 0 error(s), 2 required but not run, 1 skipped and "
        "not counted); exit status 1, expected 0"
    )
    assert result["component_checks"][1:] == [
        {"name": "tests.test_calc.test_b", "passed": False, "detail": "failed: assert 1 == 2"},
        {
            "name": "test_gone",
            "passed": False,
            "detail": "required, did not run: not in the JUnit file",
        },
        {"name": "test_s", "passed": False, "detail": "required, did not run: skipped"},
    ]


def test_every_required_test_passing_passes(tmp_path: Path) -> None:
    document = junit(case("test_a"), case("test_b"))
    spec = {**writes("r.xml", document, exit_code=0), "require_tests": ["test_a", "test_b"]}
    result = grade(context(tmp_path), spec)
    assert (result["score"], result["component_checks"]) == (
        1.0,
        [{"name": "exit status", "passed": True, "detail": "exit status 0, expected 0"}],
    )
    assert classify_grades([result]) == Verdict("accepted")


def test_deleted_tests_that_are_required_are_a_rejection_not_a_fault(tmp_path: Path) -> None:
    """A JUnit file with no test in it measures nothing (grader_error), unless tests were
    required: then they did not run, and the code is rejected."""
    spec = {**writes("r.xml", junit(), exit_code=5), "require_tests": ["test_a"]}
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["score"]) == ("scored", 0.0)
    assert result["detail"].startswith("0 of 1 test(s) passed (0 failed, 0 error(s), 1 required")
    assert classify_grades([result]) == Verdict("rejected")


def test_require_tests_base_needs_a_base_commit(tmp_path: Path) -> None:
    spec = {**writes("r.xml", junit(case("a")), exit_code=0), "require_tests": "base"}
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["exit_code"]) == ("grader_error", 0)
    assert result["detail"] == (
        "require_tests: base needs a writable-worktree run (a base commit to run the tests "
        "at); name the required tests instead"
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"timeout_is": "pass"}, "timeout_is 'pass' must be 'fail' (the code under test"),
        ({"timeout_is": 1}, "field 'timeout_is' must be str, got int"),
        ({"require_tests": "all"}, "require_tests 'all' must be a list of test names, or 'base'"),
        ({"require_tests": []}, "require_tests must be a non-empty list of test names"),
        ({"require_tests": ["a", ""]}, "require_tests must be a non-empty list of test names"),
        ({"require_tests": [3]}, "require_tests must be a non-empty list of test names"),
    ],
)
def test_verdict_option_problems(extra: dict[str, Any], problem: str) -> None:
    spec = {"type": "command", "command": ["t"], "score_from": "junit:r.xml", **extra}
    found = spec_problem(spec)
    assert found is not None and found.startswith(problem), found


def test_require_tests_needs_a_junit_file() -> None:
    assert spec_problem({"type": "command", "command": ["t"], "require_tests": ["a"]}) == (
        "require_tests needs score_from: junit:PATH (the JUnit file says which tests ran)"
    )
