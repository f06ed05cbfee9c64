"""Graders: every type scores pass / fail, and every fault of the apparatus is a grader_error."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from brigade.inputs import schemas
from brigade.run.graders import (
    GRADERS,
    GradeContext,
    LiveWorkspace,
    run_graders,
    spec_problem,
)

CELL_ID = "c" * 64


def context(
    tmp_path: Path,
    final_text: str = "hello\n",
    *,
    exit_code: int | None = 0,
    changed_files: tuple[str, ...] | None = None,
    workspace: bool = True,
) -> GradeContext:
    manifest_dir = tmp_path / "manifest"
    work = tmp_path / "work"
    manifest_dir.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    return GradeContext(
        cell_id=CELL_ID,
        final_text=final_text,
        output_digest="sha256:" + hashlib.sha256(final_text.encode()).hexdigest(),
        output_ref="run/final.txt",
        exit_code=exit_code,
        manifest_dir=manifest_dir,
        workspace=LiveWorkspace(work) if workspace else None,
        changed_files=changed_files,
    )


def grade(ctx: GradeContext, spec: dict[str, Any]) -> dict[str, Any]:
    [result] = run_graders([spec], ctx)
    assert schemas.problems(result, "brigade.grader_result.v1") == []
    assert "exit_code" not in result
    return result


def outcome(ctx: GradeContext, spec: dict[str, Any]) -> tuple[str, float | None]:
    result = grade(ctx, spec)
    return result["status"], result["score"]


PASS = ("scored", 1.0)
FAIL = ("scored", 0.0)
ERROR = ("grader_error", None)


# --- the result document ----------------------------------------------------


def test_result_document(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    results = run_graders(
        [{"type": "exit_status"}, {"type": "exact_output", "expected": "hello"}], ctx
    )
    for result in results:
        assert result["duration_seconds"] >= 0
        del result["duration_seconds"]
    assert results == [
        {
            "schema": "brigade.grader_result.v1",
            "grader_id": "exit_status:0",
            "grader_type": "exit_status",
            "version": "1",
            "status": "scored",
            "score": 1.0,
            "score_min": 0,
            "score_max": 1,
            "detail": "exit status 0, expected 0",
            "component_checks": [],
            "cell_id": CELL_ID,
            "output_digest": ctx.output_digest,
            "output_refs": ["run/final.txt"],
        },
        {
            "schema": "brigade.grader_result.v1",
            "grader_id": "exact_output:1",
            "grader_type": "exact_output",
            "version": "1",
            "status": "scored",
            "score": 1.0,
            "score_min": 0,
            "score_max": 1,
            "detail": "output equals the expected text",
            "component_checks": [],
            "cell_id": CELL_ID,
            "output_digest": ctx.output_digest,
            "output_refs": ["run/final.txt"],
        },
    ]


def test_no_graders_no_results(tmp_path: Path) -> None:
    assert run_graders([], context(tmp_path)) == []


def test_every_type_is_known() -> None:
    assert sorted(GRADERS) == [
        "command",
        "diff_constraints",
        "exact_output",
        "exit_status",
        "expected_file",
        "file_exists",
        "json_field",
        "judge",
        "regex_output",
        "verify_receipt",
    ]


# --- exit_status -------------------------------------------------------------


def test_exit_status(tmp_path: Path) -> None:
    assert outcome(context(tmp_path, exit_code=0), {"type": "exit_status"}) == PASS
    assert outcome(context(tmp_path, exit_code=3), {"type": "exit_status"}) == FAIL
    assert outcome(context(tmp_path, exit_code=3), {"type": "exit_status", "expected": 3}) == PASS
    assert outcome(context(tmp_path, exit_code=None), {"type": "exit_status"}) == FAIL


@pytest.mark.parametrize("expected", [True, "0", 0.0, None])
def test_exit_status_wrong_field_type(tmp_path: Path, expected: Any) -> None:
    result = grade(context(tmp_path), {"type": "exit_status", "expected": expected})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"].startswith("field 'expected' must be int, got ")


# --- exact_output ------------------------------------------------------------


def test_exact_output(tmp_path: Path) -> None:
    spec = {"type": "exact_output", "expected": "hello"}
    assert outcome(context(tmp_path, "hello"), spec) == PASS
    assert outcome(context(tmp_path, "hello\n\n"), spec) == PASS
    assert outcome(context(tmp_path, "hello\r\n"), spec) == PASS
    assert outcome(context(tmp_path, "hello"), {**spec, "expected": "hello\n"}) == PASS
    assert outcome(context(tmp_path, "hello "), spec) == FAIL
    assert outcome(context(tmp_path, " hello"), spec) == FAIL
    assert outcome(context(tmp_path, "Hello"), spec) == FAIL
    assert outcome(context(tmp_path, "\nhello"), spec) == FAIL


@pytest.mark.parametrize(
    "output, expected, detail",
    [
        (
            "help",
            "hello",
            'at line 1, column 4: expected "hello", got "help"',
        ),
        (
            "Hello! How can I help you today?",
            "hello",
            'at line 1, column 1: expected "hello", got "Hello! How can I help you today?"',
        ),
        (
            "hel",
            "hello",
            'at line 1, column 4 (the output ends early): expected "hello", got "hel"',
        ),
        (
            "hello world",
            "hello",
            'at line 1, column 6 (the output goes on): expected "hello", got "hello world"',
        ),
        (
            "first line\nsecond line\nthe third line is long " + "x" * 100,
            "first line\nsecond line\nthe 3rd line",
            'at line 3, column 5: expected …"ine\\nsecond line\\nthe 3rd line", '
            'got …"ine\\nsecond line\\nthe third line is long xxxxxxxxxxxxxxxxxxxxx"…',
        ),
    ],
    ids=["word", "greeting", "short", "long", "third line"],
)
def test_exact_output_shows_expected_and_got_at_the_first_difference(
    tmp_path: Path, output: str, expected: str, detail: str
) -> None:
    result = grade(context(tmp_path, output), {"type": "exact_output", "expected": expected})
    assert result["detail"] == f"output differs from the expected text {detail}"


def test_details_quote_no_secret_and_stay_short(tmp_path: Path) -> None:
    """What a detail quotes of the output is redacted before it is cut or escaped, and no
    detail grows past its bound however long the output or the spec."""
    secret = "the-prompt-text-that-must-not-leak"
    ctx = dataclasses.replace(
        context(tmp_path, f'{secret} says "hi"\n' * 1000),
        redact=lambda text: text.replace(secret, "<prompt>"),
    )
    (tmp_path / "work" / "r.json").write_text(f"{secret} is not JSON")
    specs = [
        {"type": "exact_output", "expected": "x"},
        {"type": "regex_output", "pattern": "nope" * 100},
        {"type": "regex_output", "pattern": "says", "negate": True},
        {"type": "json_field", "path": "a", "expected": 1},
        {"type": "verify_receipt", "path": "r.json"},
        {"type": "exact_output", "expected": "x" * 10_000},
    ]
    for result in run_graders(specs, ctx):
        assert secret not in result["detail"] and secret[:20] not in result["detail"]
        assert len(result["detail"]) <= 500, result["detail"]
    assert [r["detail"] for r in run_graders(specs[:1], ctx)] == [
        'output differs from the expected text at line 1, column 1: expected "x", '
        'got "<prompt> says \\"hi\\"\\n<prompt> says \\"hi\\"\\n<prompt> says \\"hi\\"\\n<pr"…'
    ]


def test_exact_output_needs_expected(tmp_path: Path) -> None:
    result = grade(context(tmp_path), {"type": "exact_output"})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"] == "exact_output graders need a 'expected' field"


# --- regex_output ------------------------------------------------------------


def test_regex_output_multiline_search(tmp_path: Path) -> None:
    ctx = context(tmp_path, "The answer:\n42\ndone\n")
    assert outcome(ctx, {"type": "regex_output", "pattern": r"^42$"}) == PASS
    assert outcome(ctx, {"type": "regex_output", "pattern": "answer"}) == PASS
    assert outcome(ctx, {"type": "regex_output", "pattern": r"^answer"}) == FAIL
    assert outcome(ctx, {"type": "regex_output", "pattern": "ANSWER"}) == FAIL


def test_regex_output_ignore_case_and_negate(tmp_path: Path) -> None:
    ctx = context(tmp_path, "I REFUSED.\n")
    spec = {"type": "regex_output", "pattern": r"\brefused\b"}
    assert outcome(ctx, {**spec, "ignore_case": True}) == PASS
    assert outcome(ctx, {**spec, "negate": True}) == PASS
    assert outcome(ctx, {**spec, "ignore_case": True, "negate": True}) == FAIL


@pytest.mark.parametrize(
    "spec, output, result, detail",
    [
        (
            {"pattern": "^hello$"},
            "Hello! How can I help you today?",
            FAIL,
            "pattern /^hello$/ not found in the output, which begins "
            '"Hello! How can I help you today?"',
        ),
        ({"pattern": "help"}, "Hi.\nHow can I help?", PASS, "pattern /help/ found at line 2"),
        (
            {"pattern": "sorry", "negate": True},
            "Sure.",
            PASS,
            "pattern /sorry/ absent, as required",
        ),
        (
            {"pattern": "sorry", "negate": True},
            "Hi.\nI am so sorry, I cannot do that at all, not now, not ever, never again.",
            FAIL,
            "pattern /sorry/ found at line 2 (negate: it must not be): "
            '"Hi.\\nI am so sorry, I cannot do that at all, not now, not eve"…',
        ),
        (
            {"pattern": "x" * 200},
            "a" * 200,
            FAIL,
            f'pattern /{"x" * 80}/… not found in the output, which begins "{"a" * 60}"…',
        ),
    ],
    ids=["not found", "found", "absent", "found but negated", "long"],
)
def test_regex_output_details_show_the_pattern_and_the_output(
    tmp_path: Path, spec: dict[str, Any], output: str, result: tuple[str, Any], detail: str
) -> None:
    graded = grade(context(tmp_path, output), {"type": "regex_output", **spec})
    assert ((graded["status"], graded["score"]), graded["detail"]) == (result, detail)


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?P<x>a)(?P<x>b)"])
def test_bad_regex_is_grader_error(tmp_path: Path, pattern: str) -> None:
    result = grade(context(tmp_path), {"type": "regex_output", "pattern": pattern})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"].startswith(f"bad regular expression {pattern!r}: ")
    assert spec_problem({"type": "regex_output", "pattern": pattern}) == result["detail"]


def test_regex_wrong_field_types(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert outcome(ctx, {"type": "regex_output", "pattern": 1}) == ERROR
    assert outcome(ctx, {"type": "regex_output", "pattern": "x", "ignore_case": "yes"}) == ERROR
    assert outcome(ctx, {"type": "regex_output", "pattern": "x", "negate": 1}) == ERROR


# --- spec problems -----------------------------------------------------------


def test_unknown_type(tmp_path: Path) -> None:
    result = grade(context(tmp_path), {"type": "llm_judge", "rubric": "x"})
    assert (result["status"], result["score"]) == ERROR
    assert result["grader_id"] == "llm_judge:0"
    assert result["grader_type"] == "llm_judge"
    assert result["version"] == "0"
    assert result["detail"].startswith(
        "unknown grader type 'llm_judge' (did you mean 'judge'?) (known: command, "
    )


@pytest.mark.parametrize("kind", [None, 5, ["exit_status"]])
def test_missing_or_non_string_type(tmp_path: Path, kind: Any) -> None:
    spec = {} if kind is None else {"type": kind}
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["score"]) == ERROR
    assert result["grader_type"] == "unknown"
    assert result["grader_id"] == "unknown:0"
    assert result["detail"].startswith("unknown grader type ")


def test_unknown_field(tmp_path: Path) -> None:
    result = grade(context(tmp_path), {"type": "exact_output", "expected": "x", "expect": "y"})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"] == (
        "unknown field 'expect' for exact_output graders (did you mean 'expected'?)"
    )


def test_common_fields_are_allowed(tmp_path: Path) -> None:
    spec = {"type": "exit_status", "name": "ran", "description": "the seat exited 0"}
    assert outcome(context(tmp_path), spec) == PASS


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "regex_output"},
        {"type": "json_field", "path": "a"},
        {"type": "json_field", "expected": 1},
        {"type": "file_exists"},
        {"type": "expected_file"},
        {"type": "verify_receipt"},
    ],
    ids=lambda spec: "-".join(sorted(spec)) + ":" + spec["type"],
)
def test_missing_required_field(tmp_path: Path, spec: dict[str, Any]) -> None:
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"].startswith(f"{spec['type']} graders need a ")


def test_grader_fault_does_not_stop_the_others(tmp_path: Path) -> None:
    results = run_graders(
        [
            {"type": "regex_output", "pattern": "("},
            {"type": "exact_output", "expected": "hello"},
            {"type": "nope"},
        ],
        context(tmp_path),
    )
    assert [(r["grader_id"], r["status"], r["score"]) for r in results] == [
        ("regex_output:0", "grader_error", None),
        ("exact_output:1", "scored", 1.0),
        ("nope:2", "grader_error", None),
    ]


# --- json_field --------------------------------------------------------------

DOC = (
    '{"status": "completed", "checks": {"passed": 3, "ok": true}, '
    '"items": [{"n": "a"}, {"n": "b"}]}'
)


@pytest.mark.parametrize(
    "path, expected, result",
    [
        ("status", "completed", PASS),
        ("status", "failed", FAIL),
        ("checks.passed", 3, PASS),
        ("checks.passed", 4, FAIL),
        ("checks.passed", "3", FAIL),
        ("checks.passed", 3.0, PASS),  # JSON has one number type
        ("checks.ok", True, PASS),
        ("checks.ok", 1, FAIL),
        ("checks", {"passed": 3, "ok": True}, PASS),
        ("items.0.n", "a", PASS),
        ("items.1.n", "b", PASS),
        ("items.-1.n", "b", PASS),
        ("items.2.n", "c", FAIL),
        ("items.x", "a", FAIL),
        ("missing", None, FAIL),
        ("status.deeper", "x", FAIL),
    ],
)
def test_json_field(tmp_path: Path, path: str, expected: Any, result: tuple[str, Any]) -> None:
    spec = {"type": "json_field", "path": path, "expected": expected}
    assert outcome(context(tmp_path, DOC), spec) == result


def test_json_field_null_value(tmp_path: Path) -> None:
    spec = {"type": "json_field", "path": "a", "expected": None}
    assert outcome(context(tmp_path, '{"a": null}'), spec) == PASS
    assert outcome(context(tmp_path, '{"a": 0}'), spec) == FAIL
    assert outcome(context(tmp_path, "{}"), spec) == FAIL


def test_json_field_output_not_json_is_a_fail(tmp_path: Path) -> None:
    result = grade(
        context(tmp_path, "not json"), {"type": "json_field", "path": "a", "expected": 1}
    )
    assert (result["status"], result["score"]) == FAIL
    assert result["detail"] == (
        'output is not JSON (Expecting value: line 1 column 1 (char 0)); it begins "not json"'
    )


@pytest.mark.parametrize(
    "path, detail",
    [
        (
            "checks.failed",
            "checks.failed is absent: the output is an object; checks is an object with keys "
            '"passed", "ok"',
        ),
        ("items.5.n", "items.5.n is absent: the output is an object; items is a list of 2 item(s)"),
        (
            "items.x",
            "items.x is absent: the output is an object; items is a list of 2 item(s), "
            "indexed by numbers",
        ),
        (
            "status.deeper",
            "status.deeper is absent: the output is an object; status is a string, not an "
            "object or a list",
        ),
        (
            "items.0.n.x",
            "items.0.n.x is absent: the output is an object; items is a list of 2 item(s); "
            "items.0 is an object; items.0.n is a string, not an object or a list",
        ),
        ("checks.passed", "checks.passed = 3, expected 4"),
    ],
)
def test_json_field_says_what_it_found_at_each_step(tmp_path: Path, path: str, detail: str) -> None:
    result = grade(context(tmp_path, DOC), {"type": "json_field", "path": path, "expected": 4})
    assert ((result["status"], result["score"]), result["detail"]) == (FAIL, detail)


def test_json_field_lists_the_first_keys_of_a_big_object(tmp_path: Path) -> None:
    text = json.dumps({f"key{i}": i for i in range(20)})
    result = grade(context(tmp_path, text), {"type": "json_field", "path": "x", "expected": 1})
    keys = ", ".join(f'"key{i}"' for i in range(8))
    assert result["detail"] == f"x is absent: the output is an object with keys {keys} and 12 more"


FENCED = "```json\n" + DOC + "\n```\n"


@pytest.mark.parametrize(
    "output",
    [FENCED, "```\n" + DOC + "\n```", "\n  ```JSON \r\n" + DOC + "\r\n  ```  \n"],
    ids=["json", "no language", "spaces and CRLF"],
)
def test_json_field_reads_an_answer_in_one_code_fence(tmp_path: Path, output: str) -> None:
    spec = {"type": "json_field", "path": "checks.passed", "expected": 3}
    result = grade(context(tmp_path, output), spec)
    assert ((result["status"], result["score"]), result["detail"]) == (
        PASS,
        "checks.passed = 3, expected 3 (read inside the answer's Markdown code fence)",
    )
    assert result["version"] == "2"


@pytest.mark.parametrize(
    "output",
    [
        "Here it is:\n" + FENCED,
        FENCED + "\nDone.",
        FENCED + FENCED,
        "```json " + DOC + "```",
    ],
    ids=["text before", "text after", "two fences", "one line"],
)
def test_json_field_reads_only_an_answer_that_is_one_fence(tmp_path: Path, output: str) -> None:
    spec = {"type": "json_field", "path": "checks.passed", "expected": 3}
    result = grade(context(tmp_path, output), spec)
    assert (result["status"], result["score"]) == FAIL
    assert result["detail"].startswith("output is not JSON (")


def test_json_field_can_require_bare_json(tmp_path: Path) -> None:
    spec = {"type": "json_field", "path": "checks.passed", "expected": 3, "allow_fence": False}
    result = grade(context(tmp_path, FENCED), spec)
    assert ((result["status"], result["score"]), result["detail"]) == (
        FAIL,
        "output is a Markdown code fence, not bare JSON (allow_fence: false)",
    )
    assert outcome(context(tmp_path, DOC), spec) == PASS
    assert outcome(context(tmp_path), {**spec, "allow_fence": "no"}) == ERROR


@pytest.mark.parametrize("path", ["", ".a", "a.", "a..b"])
def test_json_field_bad_path(tmp_path: Path, path: str) -> None:
    spec = {"type": "json_field", "path": path, "expected": 1}
    assert outcome(context(tmp_path, DOC), spec) == ERROR


@pytest.mark.parametrize(
    "path, expected",
    [("checks", {"passed": 3, "ok": 1}), ("flags", [1, 0])],
    ids=["object", "list"],
)
def test_json_field_type_strict_inside_containers(tmp_path: Path, path: str, expected: Any) -> None:
    text = '{"checks": {"passed": 3, "ok": true}, "flags": [true, false]}'
    spec = {"type": "json_field", "path": path, "expected": expected}
    assert outcome(context(tmp_path, text), spec) == FAIL


# --- file_exists -------------------------------------------------------------


def test_file_exists(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (tmp_path / "work" / "out").mkdir()
    (tmp_path / "work" / "out" / "report.md").write_text("x")
    assert outcome(ctx, {"type": "file_exists", "path": "out/report.md"}) == PASS
    assert outcome(ctx, {"type": "file_exists", "path": "out"}) == PASS
    assert outcome(ctx, {"type": "file_exists", "path": "out/other.md"}) == FAIL
    assert [
        r["detail"]
        for r in run_graders(
            [
                {"type": "file_exists", "path": "out/./report.md"},
                {"type": "file_exists", "path": "out/other.md"},
            ],
            ctx,
        )
    ] == [
        "out/report.md exists in the workspace",
        "out/other.md does not exist in the workspace",
    ]
    writable = dataclasses.replace(ctx, changed_files=())
    assert grade(writable, {"type": "file_exists", "path": "x"})["detail"] == (
        "x does not exist in the run's worktree"
    )


def test_file_exists_without_workspace(tmp_path: Path) -> None:
    result = grade(context(tmp_path, workspace=False), {"type": "file_exists", "path": "x"})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"] == "no workspace was recorded for this run"


def escape_link(tmp_path: Path, folder: str, name: str = "link") -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text('{"status": "completed"}')
    (tmp_path / folder / name).symlink_to(outside)


@pytest.mark.parametrize("kind", ["file_exists", "verify_receipt"])
@pytest.mark.parametrize("path", ["/etc/hostname", "../outside.txt", "a/../../outside.txt", "link"])
def test_workspace_paths_may_not_escape(tmp_path: Path, kind: str, path: str) -> None:
    ctx = context(tmp_path)
    escape_link(tmp_path, "work")
    result = grade(ctx, {"type": kind, "path": path})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"].startswith(f"path {path!r} ")


def test_symlink_inside_the_workspace_is_fine(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (tmp_path / "work" / "real.txt").write_text("x")
    (tmp_path / "work" / "alias.txt").symlink_to(tmp_path / "work" / "real.txt")
    assert outcome(ctx, {"type": "file_exists", "path": "alias.txt"}) == PASS


# --- expected_file -----------------------------------------------------------


def test_expected_file(tmp_path: Path) -> None:
    ctx = context(tmp_path, "line one\nline two\n")
    (tmp_path / "manifest" / "golden").mkdir()
    (tmp_path / "manifest" / "golden" / "crlf.txt").write_bytes(b"line one\r\nline two\r\n\r\n")
    (tmp_path / "manifest" / "golden" / "other.txt").write_text("line one\nline 2\n")
    assert outcome(ctx, {"type": "expected_file", "path": "golden/crlf.txt"}) == PASS
    result = grade(ctx, {"type": "expected_file", "path": "golden/other.txt"})
    assert (result["status"], result["score"]) == FAIL
    assert result["detail"] == (
        'output differs from golden/other.txt at line 2, column 6: expected "line one\\nline 2", '
        'got "line one\\nline two"'
    )


@pytest.mark.parametrize(
    "path, detail",
    [
        ("missing.txt", "cannot read expected file 'missing.txt': No such file or directory"),
        ("folder", "cannot read expected file 'folder': Is a directory"),
        ("latin1.txt", "cannot read expected file 'latin1.txt': not UTF-8"),
        ("/etc/hostname", "path '/etc/hostname' must be a relative path inside its folder"),
        ("../outside.txt", "path '../outside.txt' must be a relative path inside its folder"),
        ("link", "path 'link' leads outside its folder"),
    ],
)
def test_unreadable_expected_file_is_grader_error(tmp_path: Path, path: str, detail: str) -> None:
    ctx = context(tmp_path)
    (tmp_path / "manifest" / "folder").mkdir()
    (tmp_path / "manifest" / "latin1.txt").write_bytes(b"caf\xe9\n")
    escape_link(tmp_path, "manifest")
    result = grade(ctx, {"type": "expected_file", "path": path})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"] == detail


# --- diff_constraints --------------------------------------------------------


def test_diff_constraints_pass(tmp_path: Path) -> None:
    ctx = context(tmp_path, changed_files=("src/app.py", "tests/test_app.py"))
    spec = {
        "type": "diff_constraints",
        "allowed": ["^src/", "^tests/"],
        "forbidden": ["secret"],
        "max_files": 2,
    }
    result = grade(ctx, spec)
    assert (result["status"], result["score"]) == PASS
    assert result["detail"] == "2 changed file(s) within constraints"
    assert result["component_checks"] == [
        {"name": "src/app.py", "passed": True},
        {"name": "tests/test_app.py", "passed": True},
        {"name": "max_files", "passed": True, "detail": "2 changed, at most 2 allowed"},
    ]


def test_diff_constraints_violations(tmp_path: Path) -> None:
    ctx = context(tmp_path, changed_files=("src/app.py", "README.md", "src/secret.key"))
    spec = {
        "type": "diff_constraints",
        "allowed": ["^src/"],
        "forbidden": [r"\.key$"],
        "max_files": 1,
    }
    result = grade(ctx, spec)
    assert (result["status"], result["score"]) == FAIL
    assert result["detail"] == ("3 constraint(s) violated: README.md, src/secret.key, max_files")
    assert result["component_checks"] == [
        {"name": "src/app.py", "passed": True},
        {"name": "README.md", "passed": False, "detail": "matches no allowed pattern"},
        {"name": "src/secret.key", "passed": False, "detail": "matches forbidden /\\.key$/"},
        {"name": "max_files", "passed": False, "detail": "3 changed, at most 1 allowed"},
    ]


def test_diff_constraints_defaults_allow_everything(tmp_path: Path) -> None:
    assert (
        outcome(context(tmp_path, changed_files=("a", "b")), {"type": "diff_constraints"}) == PASS
    )
    assert outcome(context(tmp_path, changed_files=()), {"type": "diff_constraints"}) == PASS
    spec = {"type": "diff_constraints", "max_files": 0}
    assert outcome(context(tmp_path, changed_files=()), spec) == PASS
    assert outcome(context(tmp_path, changed_files=("a",)), spec) == FAIL


def test_diff_constraints_without_changed_files(tmp_path: Path) -> None:
    result = grade(context(tmp_path, changed_files=None), {"type": "diff_constraints"})
    assert (result["status"], result["score"]) == ERROR
    assert "no changed-file list was recorded" in result["detail"]


@pytest.mark.parametrize(
    "fields",
    [
        {"allowed": ["("]},
        {"forbidden": ["[z-a]"]},
        {"allowed": [1]},
        {"allowed": "^src/"},
        {"max_files": True},
        {"max_files": "3"},
    ],
)
def test_diff_constraints_bad_spec(tmp_path: Path, fields: dict[str, Any]) -> None:
    spec = {"type": "diff_constraints", **fields}
    assert outcome(context(tmp_path, changed_files=("a",)), spec) == ERROR


# --- verify_receipt ----------------------------------------------------------


@pytest.mark.parametrize(
    "content, result, detail",
    [
        (
            b'{"status": "completed"}',
            PASS,
            "out/r.json in the workspace: status is 'completed', expected 'completed'",
        ),
        (
            b'{"status": "failed"}',
            FAIL,
            "out/r.json in the workspace: status is 'failed', expected 'completed'",
        ),
        (b"{}", FAIL, "out/r.json in the workspace: status is None, expected 'completed'"),
        (
            b'["completed"]',
            FAIL,
            "out/r.json in the workspace: status is None, expected 'completed'",
        ),
        (
            b"{not json",
            FAIL,
            'out/r.json in the workspace is not valid JSON; it begins "{not json"',
        ),
        (
            b"\xff\xfe",
            FAIL,
            'out/r.json in the workspace is not valid JSON; it begins "\ufffd\ufffd"',
        ),
        (None, FAIL, "out/r.json was not written (looked in the workspace)"),
    ],
    ids=["completed", "other status", "no status", "list", "invalid JSON", "binary", "missing"],
)
def test_verify_receipt(
    tmp_path: Path, content: bytes | None, result: tuple[str, Any], detail: str
) -> None:
    ctx = context(tmp_path)
    if content is not None:
        (tmp_path / "work" / "out").mkdir()
        (tmp_path / "work" / "out" / "r.json").write_bytes(content)
    graded = grade(ctx, {"type": "verify_receipt", "path": "out/r.json"})
    assert (graded["status"], graded["score"]) == result
    assert graded["detail"] == detail


def test_verify_receipt_expected_status(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (tmp_path / "work" / "r.json").write_text('{"status": "failed"}')
    spec = {"type": "verify_receipt", "path": "r.json", "expected_status": "failed"}
    assert outcome(ctx, spec) == PASS
    assert outcome(ctx, {**spec, "expected_status": 1}) == ERROR


def test_verify_receipt_without_workspace(tmp_path: Path) -> None:
    spec = {"type": "verify_receipt", "path": "r.json"}
    assert outcome(context(tmp_path, workspace=False), spec) == ERROR


# --- time limits, FIFOs, deep and huge JSON (issue 15, items 4 and 7) -------------------


def test_a_backtracking_pattern_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    ctx = context(tmp_path, "a" * 40 + "!")
    spec = {"type": "regex_output", "pattern": "^(a|aa)+$", "timeout_seconds": 0.2}
    result = grade(ctx, spec)
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"].startswith("stopped at its time limit of 0.2 s (timeout_seconds)")
    forbidden = {"type": "diff_constraints", "forbidden": ["^(a|aa)+$"], "timeout_seconds": 0.2}
    changed = context(tmp_path, changed_files=("a" * 40 + "!",))
    assert outcome(changed, forbidden) == ERROR


@pytest.mark.parametrize("limit", [0, -1, "5", True, 1e9, None])
def test_a_bad_time_limit_is_a_grader_error(tmp_path: Path, limit: Any) -> None:
    spec = {"type": "exact_output", "expected": "hello", "timeout_seconds": limit}
    result = grade(context(tmp_path), spec)
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"].startswith("field 'timeout_seconds' must be a number of seconds")
    assert spec_problem(spec) == result["detail"]


def test_a_grader_that_takes_longer_than_its_limit_is_a_grader_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brigade.run import graders

    clock = iter([0.0, 100.0, 200.0, 300.0])
    monkeypatch.setattr(graders.time, "perf_counter", lambda: next(clock))
    result = grade(context(tmp_path), {"type": "exact_output", "expected": "hello"})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"] == ("took 100.0 s, more than its time limit of 10 s (timeout_seconds)")


def test_nested_repetition_is_recognised() -> None:
    from brigade.run.graders import nested_repetition, pattern_warnings

    for pattern in ["^(a+)+$", "(x*)*y", "((ab)+c)*", r"(\w+\s?)+$", "(?:a{1,}b?)+"]:
        assert nested_repetition(pattern), pattern
    for pattern in ["a+b+", "(ab)+", "(a{2})+", "[a+]+", "(a|b)+", "(", "ok"]:
        assert not nested_repetition(pattern), pattern
    assert pattern_warnings({"type": "diff_constraints", "forbidden": ["(a+)+", "b"]}) == [
        "pattern '(a+)+' repeats a group that itself repeats (like (a+)+): it can take "
        "exponential time, and is stopped at the grader's time limit (grader_error)"
    ]


@pytest.mark.parametrize("grader", ["verify_receipt", "file_exists"])
def test_a_fifo_left_by_the_agent_is_never_opened(tmp_path: Path, grader: str) -> None:
    ctx = context(tmp_path)
    os.mkfifo(tmp_path / "work" / "r.json")
    result = grade(ctx, {"type": grader, "path": "r.json"})
    if grader == "verify_receipt":
        assert (result["status"], result["score"]) == FAIL
        assert result["detail"] == (
            "r.json in the workspace is not a readable regular file of at most 16 MiB"
        )
    else:
        assert (result["status"], result["score"]) == PASS


def test_a_fifo_as_expected_file_is_a_grader_error(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    os.mkfifo(tmp_path / "manifest" / "expected.txt")
    result = grade(ctx, {"type": "expected_file", "path": "expected.txt"})
    assert (result["status"], result["score"]) == ERROR
    assert result["detail"] == (
        "cannot read expected file 'expected.txt': it is not a regular file"
    )


def nested_json(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize(
    ("output", "path", "detail"),
    [
        (nested_json(5000), "0", "output is JSON nested deeper than 200 levels"),
        (nested_json(300), "0", "output is JSON nested deeper than 200 levels"),
        (
            '{"a": [1, 2]}',
            "a." + "9" * 5000,
            "a." + "9" * 77 + "… is absent: the output is an object; a is a list of 2 item(s)",
        ),
        (
            '{"a": [1, 2]}',
            "a.-" + "9" * 30,
            "a.-" + "9" * 30 + " is absent: the output is an object; a is a list of 2 item(s)",
        ),
        (
            '{"a": [1, 2]}',
            "a.\u00b2",
            "a.\u00b2 is absent: the output is an object; a is a list of 2 item(s), indexed by "
            "numbers",
        ),
    ],
    ids=["5000 deep", "300 deep", "huge index", "huge negative index", "unicode digit"],
)
def test_deep_json_and_huge_indexes_are_failing_grades(
    tmp_path: Path, output: str, path: str, detail: str
) -> None:
    result = grade(context(tmp_path, output), {"type": "json_field", "path": path, "expected": 1})
    assert (result["status"], result["score"]) == FAIL
    assert result["detail"] == detail


def test_json_field_shows_values_with_secrets_replaced_before_cutting(tmp_path: Path) -> None:
    secret = "a secret that must not be shown " * 3
    ctx = dataclasses.replace(
        context(tmp_path, json.dumps({"said": "x" * 190 + secret})),
        redact=lambda text: text.replace(secret, "<prompt>"),
    )
    result = grade(ctx, {"type": "json_field", "path": "said", "expected": 1})
    assert result["detail"] == f'said = "{"x" * 190}<prompt>", expected 1'


def test_a_pattern_with_backslashes_and_quotes_is_shown_as_written(tmp_path: Path) -> None:
    pattern = '"refused"\\s*:\\s*true\\b'
    graded = grade(context(tmp_path, "{}"), {"type": "regex_output", "pattern": pattern})
    assert graded["detail"].startswith('pattern /"refused"\\s*:\\s*true\\b/ not found')
    tab = grade(context(tmp_path, "x"), {"type": "regex_output", "pattern": "a\tb"})
    assert tab["detail"].startswith("pattern /a\\tb/ not found")
