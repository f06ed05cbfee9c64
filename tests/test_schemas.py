"""The JSON Schema files: valid Draft 2020-12, one per tag; one-line messages naming the path."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from brigade.core.transcript import Entry, transcript_document
from brigade.errors import InputError
from brigade.inputs import schemas

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.json"))


def test_every_file_has_a_tag() -> None:
    assert sorted(p.name for p in SCHEMA_FILES) == sorted(schemas.FILES.values())
    assert len(SCHEMA_FILES) == 17


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=[p.name for p in SCHEMA_FILES])
def test_schema_file_is_valid_draft_2020_12(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    tag = doc["title"]
    assert schemas.FILES[tag] == path.name
    assert doc["$id"] == f"urn:brigade:schema:{path.name.removesuffix('.json')}"


@pytest.mark.parametrize("tag", sorted(schemas.FILES))
def test_loaded_schema_is_the_file(tag: str) -> None:
    on_disk = json.loads((SCHEMA_DIR / schemas.FILES[tag]).read_text(encoding="utf-8"))
    assert schemas.schema(tag) == on_disk


@pytest.mark.parametrize("tag", sorted(schemas.FILES))
def test_references_resolve(tag: str) -> None:
    # validating anything walks the $refs between files; an unresolvable one raises
    assert isinstance(schemas.problems({}, tag), list)


@pytest.mark.parametrize(
    "tag",
    # the original tool's roster.toml has no `schema` key; a usage object is part of others
    [
        t
        for t in sorted(schemas.FILES)
        if t not in ("brigade.worker_results.v1", "brigade.roster_toml.v1", "brigade.usage.v1")
    ],
)
def test_schema_constant_is_the_tag(tag: str) -> None:
    assert schemas.schema(tag)["properties"]["schema"] == {"const": tag}


# --- format_path ---------------------------------------------------------------


@pytest.mark.parametrize(
    "parts, text",
    [
        (["cases", 2, "graders", 0, "pattern"], "cases[2].graders[0].pattern"),
        (["seats", "worker", "cli"], "seats.worker.cli"),
        (["seats", "my-seat_1", "env", "A"], "seats.my-seat_1.env.A"),
        ([0, "id"], "[0].id"),
        (["seats", "a:b"], 'seats["a:b"]'),
        (["seats", "two words", "cli"], 'seats["two words"].cli'),
        (["seats", "ü"], 'seats["ü"]'),
        (["x.y"], '["x.y"]'),
        # characters that break a line (for str.splitlines) are escaped: one line per problem
        (["a\x85b", "c\u2028", "\u2029"], '["a\\u0085b"]["c\\u2028"]["\\u2029"]'),
        ([], "(top level)"),
    ],
)
def test_format_path(parts: list[Any], text: str) -> None:
    assert schemas.format_path(parts) == text


def test_a_value_quoted_in_a_problem_stays_on_one_line() -> None:
    doc = {"schema": {"\x85": None, "\u2028": 1}, "name": "m"}
    with pytest.raises(InputError) as refused:
        schemas.check_input(doc, "brigade.eval_manifest.v1", "m.yaml")
    assert str(refused.value).splitlines() == str(refused.value).split("\n")
    assert 'm.yaml: schema: must be "brigade.eval_manifest.v1", got {"\\u0085": null, ' in str(
        refused.value
    )


# --- describe: messages name the path --------------------------------------------

MANIFEST = "brigade.eval_manifest.v1"


def manifest(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": MANIFEST,
        "name": "m",
        "seats": ["worker"],
        "cases": [
            {"id": "a", "prompt": "p"},
            {"id": "b", "prompt": "q"},
            {"id": "c", "prompt": "r", "graders": [{"type": "regex_output", "pattern": "x"}]},
        ],
    }
    doc.update(changes)
    return doc


def only_problem(doc: Any, tag: str = MANIFEST) -> str:
    problems = schemas.problems(doc, tag)
    assert len(problems) == 1, problems
    return problems[0]


def test_valid_manifest_has_no_problems() -> None:
    assert schemas.problems(manifest(), MANIFEST) == []


def test_describe_nested_grader_field() -> None:
    doc = manifest()
    doc["cases"][2]["graders"][0] = {"pattern": "x"}
    assert only_problem(doc) == "cases[2].graders[0].type: is required but missing"


def test_describe_nested_grader_type() -> None:
    doc = manifest()
    doc["cases"][2]["graders"][0]["type"] = 7
    assert only_problem(doc) == "cases[2].graders[0].type: expected a string, got an integer"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"schema": "x"}, 'schema: must be "brigade.eval_manifest.v1", got "x"'),
        ({"trials": 0}, "trials: must be at least 1, got 0"),
        ({"trials": True}, "trials: expected an integer or a mapping, got a boolean"),
        ({"seats": []}, "seats: must not be empty"),
        ({"seats": ["a", "a"]}, "seats: contains duplicate entries"),
        (
            {"execution": {"mode": "x"}},
            'execution.mode: must be one of "read-only", "writable-worktree"; got "x"',
        ),
        (
            {"bogus": 1},
            "bogus: unknown key (allowed: cases, description, execution, graders, "
            "max_cost, name, roster, schema, seats, setup, trials, workspace)",
        ),
        ({"graders": {}}, "graders: expected a list, got a mapping"),
        (
            {"name": "a b"},
            "name: must be a plain name (letters, digits, '.', '_', '-'); it names "
            "the output folder",
        ),
    ],
)
def test_describe_messages(changes: dict[str, Any], message: str) -> None:
    assert only_problem(manifest(**changes)) == message


def test_describe_case_level() -> None:
    doc = manifest()
    doc["cases"][1] = {"id": "b"}
    assert only_problem(doc) == "cases[1]: needs a prompt or a prompt_file"
    doc["cases"][1] = {"id": "b", "prompt": "q", "prompt_file": "q.md"}
    assert only_problem(doc) == "cases[1]: has both prompt and prompt_file; keep one"
    doc["cases"][1] = {"id": "b", "prompt": "q", "extra": 1}
    assert only_problem(doc).startswith("cases[1].extra: unknown key (allowed: ")


def test_describe_roster_paths() -> None:
    doc = {"schema": "brigade.roster.v1", "seats": {"worker": {"cli": "x", "env": {"A": 1}}}}
    assert only_problem(doc, "brigade.roster.v1") == (
        "seats.worker.env.A: expected a string, got an integer"
    )
    doc = {"schema": "brigade.roster.v1", "seats": {"worker": {"model": "m"}}}
    assert only_problem(doc, "brigade.roster.v1") == "seats.worker.cli: is required but missing"


def test_describe_top_level() -> None:
    assert only_problem([]) == "(top level): expected a mapping, got a list"


def test_describe_long_values_are_shortened() -> None:
    problem = only_problem(manifest(schema="x" * 100))
    assert problem == 'schema: must be "brigade.eval_manifest.v1", got "' + "x" * 56 + "..."


def test_check_input_lists_every_problem_a_line_each() -> None:
    doc = manifest(trials=0, bogus=1, trails=2)
    with pytest.raises(InputError) as caught:
        schemas.check_input(doc, MANIFEST, "dir/m.yaml")
    allowed = (
        "cases, description, execution, graders, max_cost, name, roster, schema, seats, setup, "
        "trials, workspace"
    )
    assert str(caught.value).splitlines() == [
        f"dir/m.yaml: bogus: unknown key (allowed: {allowed})",
        f"dir/m.yaml: trails: unknown key (did you mean 'trials'?) (allowed: {allowed})",
        "dir/m.yaml: trials: must be at least 1, got 0",
    ]


def test_check_input_ok() -> None:
    assert schemas.check_input(manifest(), MANIFEST, "m.yaml") is None


def test_check_output_raises_invalid_document() -> None:
    with pytest.raises(schemas.InvalidDocument) as caught:
        schemas.check_output({"schema": "brigade.grader_result.v1"}, "brigade.grader_result.v1")
    assert str(caught.value).startswith("brigade.grader_result.v1: ")


def test_grader_result_has_no_exit_code() -> None:
    properties = schemas.schema("brigade.grader_result.v1")["properties"]
    assert "exit_code" not in properties
    assert schemas.schema("brigade.grader_result.v1")["additionalProperties"] is False


def test_grader_error_score_must_be_null() -> None:
    result = {
        "schema": "brigade.grader_result.v1",
        "grader_id": "regex_output:0",
        "grader_type": "regex_output",
        "version": "1",
        "status": "grader_error",
        "score": 0.0,
        "score_min": 0,
        "score_max": 1,
        "detail": "bad pattern",
        "component_checks": [],
        "duration_seconds": 0.0,
        "cell_id": "a" * 64,
        "output_digest": None,
        "output_refs": [],
    }
    assert schemas.problems(result, "brigade.grader_result.v1") == ["score: must be null, got 0.0"]
    assert schemas.problems({**result, "score": None}, "brigade.grader_result.v1") == []
    assert schemas.problems({**result, "exit_code": 0}, "brigade.grader_result.v1") != []


TRANSCRIPT = transcript_document(
    [
        Entry("system", text="model m-1"),
        Entry("message", role="user", text="hi"),
        Entry("reasoning", text="think"),
        Entry("tool_call", name="Read", input={"path": "a"}, call_id="c1"),
        Entry("tool_result", name="Read", output="x", is_error=False, call_id="c1"),
        Entry("error", text="oops"),
        Entry("message", role="assistant", text="done"),
    ]
)


def test_the_transcript_schema() -> None:
    assert schemas.problems(TRANSCRIPT, "brigade.transcript.v1") == []
    bad = {"schema": "brigade.transcript.v1", "entries": [{"kind": "chat"}]}
    assert schemas.problems(bad, "brigade.transcript.v1") != []
    extra = {"schema": "brigade.transcript.v1", "entries": [{"kind": "error", "x": 1}]}
    assert schemas.problems(extra, "brigade.transcript.v1") != []


def _mutations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Each top-level key dropped, each top-level value of the wrong kind, one extra key."""
    changed: list[dict[str, Any]] = []
    for key in doc:
        changed.append({k: v for k, v in doc.items() if k != key})
        changed.append({**doc, key: {"unexpected": [1]}})
        changed.append({**doc, key: -1})
    changed.append({**doc, "unexpected_key": True})
    return changed


def test_fast_output_check_agrees_with_jsonschema(project: Any) -> None:
    """check_output's compiled validator accepts and refuses exactly what jsonschema does,
    on every document a real mixed run writes and on broken variants of each."""
    from test_run import mixed_battery

    mixed_battery(project)
    manifest = yaml.safe_load(project.manifest.read_text())
    # a grader that runs a process writes grader_result.v2
    command = {"type": "command", "command": [sys.executable, "-c", "pass"]}
    manifest["cases"].append({"id": "command", "prompt": "answer: x", "graders": [command]})
    project.manifest.write_text(yaml.safe_dump(manifest))
    assert project.doit().returncode == 3
    from test_adapters import USAGE

    from brigade.core.usage import usage_document

    tags = set(schemas.FILES)
    seen: set[str] = set()
    documents = []
    for path in sorted(project.out.rglob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict):
            documents.append((path, doc.get("schema"), doc))
            # grader results live inside receipts
            for value in doc.values():
                if isinstance(value, list):
                    documents.extend(
                        (path, item.get("schema"), item) for item in value if isinstance(item, dict)
                    )
    # usage documents live inside run.json and receipts: those of every adapter's sample
    # the fake agents print no transcript: one with an entry of every kind stands for it
    documents.append((Path("run/transcript.json"), TRANSCRIPT["schema"], TRANSCRIPT))
    usage_docs = [usage_document(usage) for usage in USAGE.values() if usage is not None]
    documents.extend((Path("usage"), "brigade.usage.v1", doc) for doc in usage_docs)
    # nothing was forgotten in this run: a forgotten.json of one cell stands for one
    forgotten = {
        "schema": "brigade.forgotten.v1",
        "cells": {"a" * 64: {"coordinate": "c:s:1", "attempt": 1, "forgotten_at": "2026-01-01"}},
    }
    documents.append((Path("forgotten.json"), forgotten["schema"], forgotten))
    # the battery has no case with a workspace of its own: one built workspace stands for it
    built = {"schema": "brigade.workspace.v1", "key": "0" * 32, "ok": True, "head": "1" * 40}
    documents.append((Path("workspace.json"), built["schema"], {**built, "detail": None}))
    # brigade compare prints its document: one of two single-trial batteries stands for it
    from test_compare import comparison_of

    comparison = comparison_of(worse=8, better=1, same=29)
    documents.append((Path("compare.json"), comparison["schema"], comparison))
    for path, tag, doc in documents:
        if tag not in tags:
            continue
        seen.add(tag)
        for variant in [doc, *_mutations(doc)]:
            slow = not list(schemas.validator(tag).iter_errors(variant))
            try:
                schemas._compiled(tag)(variant)
                fast = True
            except Exception:
                fast = False
            assert fast == slow, (path.name, tag, variant)
    assert seen >= tags - {
        "brigade.eval_manifest.v1",
        "brigade.roster.v1",
        "brigade.roster_toml.v1",
    }
