"""End to end: what a command grader's verdict says when the code under test hangs, when the
agent deleted tests, and when the grader itself cannot start (through `brigade run`)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, git

REPO = Path(__file__).resolve().parents[1]
FIXIT = REPO / "manifests" / "fixit"

# a coding seat that does what its prompt says to the fixture repository's code
SEAT = textwrap.dedent(
    """\
    import os, sys
    from pathlib import Path
    prompt = sys.stdin.read()
    with open(os.environ["FAKE_AGENT_LOG"], "a") as log:
        log.write(os.environ["BRIGADE_COORDINATE"] + "\\n")
    calc = Path("calc.py")
    if "loop" in prompt:  # code that never ends
        calc.write_text("def add(a, b):\\n    while True:\\n        pass\\n")
    elif "delete" in prompt:  # the failing tests out of the way, the bug left as it was
        Path("test_calc.py").unlink()
    elif "vanish" in prompt:  # the test run ended before it writes its JUnit file
        Path("conftest.py").write_text("import os\\nos._exit(3)\\n")
    elif "forge" in prompt:  # a JUnit file that is no JUnit, and the run ended
        Path("conftest.py").write_text(
            "import os\\nopen(os.environ['BRIGADE_GRADER_DIR'] + '/junit.xml', 'w')"
            ".write('<nope')\\nos._exit(3)\\n"
        )
    elif "skip" in prompt:  # every test skipped
        tests = Path("test_calc.py")
        tests.write_text("import pytest\\npytestmark = pytest.mark.skip\\n" + tests.read_text())
    else:
        calc.write_text(calc.read_text().replace("return a - b", "return a + b"))
    print("done")
    """
)
PYTEST = ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
JUNIT = "--junitxml={grader_dir}/junit.xml"
SCORE = "junit:{grader_dir}/junit.xml"


def fixit_project(project: Project, prompt: str, **grader: Any) -> None:
    """The fixit fixture as the project's workspace (a git checkout), one case graded by
    pytest over the seat's changes."""
    shutil.copytree(FIXIT, project.workspace, dirs_exist_ok=True)
    git(project.workspace, "init", "-q")
    git(project.workspace, "add", "-A")
    git(project.workspace, "commit", "-qm", "fixture")
    seat = project.root / "seat.py"
    seat.write_text(SEAT)
    project.write_roster({"agent": {"cli": f"exec:{{python}} {seat}"}})
    spec = {"type": "command", "command": [*PYTEST, JUNIT], "score_from": SCORE, **grader}
    project.write_manifest(
        [{"id": "fix", "prompt": prompt, "graders": [spec]}],
        execution={"mode": "writable-worktree"},
    )


def only_grade(project: Project) -> dict[str, Any]:
    [result] = project.receipt("fix:agent:1")["graders"]
    return result


def test_code_that_never_ends_is_rejected_with_the_tests_timed_out(project: Project) -> None:
    fixit_project(project, "loop", timeout_seconds=3)
    done = project.run()
    assert done.returncode == 1, done.stderr  # a real result of the seat, not exit 3
    assert project.states() == {"fix:agent:1": "rejected"}
    result = only_grade(project)
    assert (result["status"], result["score"]) == ("scored", 0.0)
    assert result["detail"].startswith(
        "the tests timed out: the command did not finish within its time limit of 3 s "
        "(timeout_seconds) and its process group was killed; the code under test may never end"
    )
    assert result["component_checks"] == [
        {"name": "time limit", "passed": False, "detail": "not finished in 3 s"}
    ]
    summary = project.summary()
    assert summary["measurement_failures"] == 0
    assert summary["counts"]["rejected"] == 1


def test_timeout_is_error_keeps_the_timeout_a_grader_error(project: Project) -> None:
    fixit_project(project, "loop", timeout_seconds=3, timeout_is="error")
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert project.states() == {"fix:agent:1": "grader_error"}
    assert only_grade(project)["detail"].startswith(
        "the command did not finish within its time limit of 3 s (timeout_seconds); its "
        "process group was killed; its stderr "
    )


def test_deleting_the_tests_is_rejected_when_the_base_tests_are_required(
    project: Project,
) -> None:
    fixit_project(project, "delete", require_tests="base")
    done = project.run()
    assert done.returncode == 1, done.stderr
    assert project.states() == {"fix:agent:1": "rejected"}
    result = only_grade(project)
    assert result["score"] == 0.0
    assert result["detail"] == (
        "0 of 3 test(s) passed (0 failed, 0 error(s), 3 required but not run, 0 skipped and not "
        "counted); exit status 5, expected 0"
    )
    gone = "required, did not run: not in the JUnit file"
    assert result["component_checks"] == [
        {"name": "exit status", "passed": False, "detail": "exit status 5, expected 0"},
        {"name": "test_calc.test_add", "passed": False, "detail": gone},
        {"name": "test_calc.test_zero", "passed": False, "detail": gone},
        {"name": "test_calc.test_negative", "passed": False, "detail": gone},
    ]
    # the tests at the base commit ran in a folder of their own, logs kept
    folder = project.out / result["logs"]["base_junit"]
    assert folder.name == "junit.xml" and folder.parent.name == "base"
    assert 'name="test_negative"' in folder.read_text()
    assert project.launches() == 1


def test_skipping_the_required_tests_is_rejected(project: Project) -> None:
    fixit_project(project, "skip", require_tests="base")
    assert project.run().returncode == 1
    result = only_grade(project)
    assert result["score"] == 0.0
    assert [check["detail"] for check in result["component_checks"][1:]] == [
        "required, did not run: skipped"
    ] * 3


def test_without_required_tests_an_empty_suite_measures_nothing(project: Project) -> None:
    fixit_project(project, "delete")
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert only_grade(project)["detail"].startswith(
        "the JUnit file cells/"  # (its path in the output directory)
    )
    assert (
        "holds no test that ran (0 skipped): nothing was measured"
        in (only_grade(project)["detail"])
    )


def test_named_required_tests_and_a_fixed_bug(project: Project) -> None:
    fixit_project(project, "fix it", require_tests=["test_calc.test_add", "test_negative"])
    done = project.run()
    assert done.returncode == 0, done.stderr
    result = only_grade(project)
    assert result["detail"] == (
        "3 of 3 test(s) passed (0 failed, 0 error(s), 0 required but not run, 0 skipped and not "
        "counted); exit status 0, expected 0"
    )


def test_a_grader_that_cannot_start_is_a_grader_error_that_quotes_its_stderr(
    project: Project,
) -> None:
    """pytest not installed (here: a test runner no interpreter has)."""
    fixit_project(project, "fix it")
    spec = {
        "type": "command",
        "command": ["{python}", "-m", "no_such_test_runner", JUNIT],
        "score_from": SCORE,
    }
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [spec]}],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 3, done.stderr
    result = only_grade(project)
    assert result["status"] == "grader_error"
    assert result["detail"].startswith("the command wrote no JUnit file at cells/")
    assert result["detail"].endswith(': No module named no_such_test_runner"')
    missing = {"type": "command", "command": ["no-such-test-program", "-q"]}
    project.write_manifest(
        [{"id": "fix", "prompt": "fix it", "graders": [missing]}],
        execution={"mode": "writable-worktree"},
    )
    assert project.run().returncode == 3
    assert only_grade(project)["detail"] == (
        "the command could not start: cannot launch no-such-test-program: No such file or directory"
    )
    assert project.launches() == 1  # the grader edits reused the seat run


@pytest.mark.parametrize("prompt", ["vanish", "forge"])
def test_code_that_keeps_the_tests_from_reporting_is_rejected(
    project: Project, prompt: str
) -> None:
    """A seat that cannot fix the bug ends the test run before it writes its JUnit file (or
    leaves one that is no JUnit): at the base commit the command reports, so its changes
    broke the measurement, a failing score and never a grader_error."""
    fixit_project(project, prompt, require_tests=["test_calc.test_add"])
    done = project.run()
    assert done.returncode == 1, done.stderr
    assert project.states() == {"fix:agent:1": "rejected"}
    result = only_grade(project)
    assert result["score"] == 0.0
    assert "the seat's changes broke the test run" in result["detail"], result
    assert result["component_checks"][0]["name"] == "test run"
