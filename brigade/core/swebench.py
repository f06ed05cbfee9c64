"""SWE-bench instances as a manifest: pure conversion of its JSONL records, no I/O.

An instance (`instance_id`, `repo`, `base_commit`, `problem_statement`, `test_patch`,
`FAIL_TO_PASS`, `PASS_TO_PASS`, optional `environment_setup_commit` and `setup`)
becomes a case: the repository at `base_commit` as its workspace, the problem statement
as its prompt, and a command grader that applies `test_patch` and runs exactly the named
tests, requiring each of them (resolved = every one passes, as SWE-bench defines it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from brigade.errors import InputError

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")
TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def parse_instances(text: str, label: str) -> list[dict[str, Any]]:
    """The instances of a JSONL file (one JSON object a line; blank lines skipped);
    InputError naming the line and field of the first problem."""
    instances: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{label}:{number}"
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{where}: not a JSON object ({exc})") from None
        if not isinstance(doc, dict):
            raise InputError(f"{where}: not a JSON object")
        for key in REQUIRED:
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise InputError(f"{where}: {key}: must be a non-empty string")
        for key in TEST_LISTS:
            doc[key] = test_list(doc.get(key, []), f"{where}: {key}")
        if not doc["FAIL_TO_PASS"] and not doc["PASS_TO_PASS"]:
            raise InputError(f"{where}: FAIL_TO_PASS and PASS_TO_PASS name no test")
        if doc["instance_id"] in seen:
            raise InputError(
                f"{where}: instance_id: {doc['instance_id']!r} is also on line "
                f"{seen[doc['instance_id']]}"
            )
        seen[doc["instance_id"]] = number
        setup = doc.get("setup")
        if setup is not None and (
            not isinstance(setup, list) or not all(isinstance(c, str) and c for c in setup)
        ):
            raise InputError(f"{where}: setup: must be a list of command lines")
        instances.append(doc)
    if not instances:
        raise InputError(f"{label}: holds no instance")
    return instances


def test_list(value: Any, where: str) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS: a list of test ids (SWE-bench also writes it as a JSON
    string holding the list)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise InputError(f"{where}: must be a list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise InputError(f"{where}: must be a list of test ids")
    return value


def junit_name(test_id: str) -> str:
    """A pytest node id as its JUnit XML names the test (`classname.name`):
    `tests/test_a.py::TestX::test_y[1]` is `tests.test_a.TestX.test_y[1]`."""
    path, _, rest = test_id.partition("::")
    if not rest:
        return test_id
    module = path[:-3] if path.endswith(".py") else path
    return ".".join([module.replace("/", "."), *rest.split("::")])


def patch_name(instance_id: str) -> str:
    """The file (under the manifest's folder) a case's test patch is written to."""
    return f"swebench/{_SAFE_NAME.sub('_', instance_id)}.test.patch"


def case_of(instance: Mapping[str, Any], repo_path: str) -> dict[str, Any]:
    """The manifest case of an instance whose repository clone is at `repo_path`."""
    tests: Sequence[str] = [*instance["FAIL_TO_PASS"], *instance["PASS_TO_PASS"]]
    grader = {
        "type": "command",
        "command": [
            "{python}",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--junitxml={grader_dir}/junit.xml",
            *[t for t in dict.fromkeys(tests)],
        ],
        "score_from": "junit:{grader_dir}/junit.xml",
        "require_tests": [junit_name(t) for t in dict.fromkeys(tests)],
        "test_patch_file": patch_name(instance["instance_id"]),
    }
    case: dict[str, Any] = {
        "id": instance["instance_id"],
        "prompt": instance["problem_statement"],
        "workspace": {"repo": repo_path, "commit": instance["base_commit"]},
        "graders": [grader],
        "metadata": {
            "repo": instance["repo"],
            "FAIL_TO_PASS": list(instance["FAIL_TO_PASS"]),
            "PASS_TO_PASS": list(instance["PASS_TO_PASS"]),
        },
    }
    if instance.get("environment_setup_commit"):
        case["metadata"]["environment_setup_commit"] = instance["environment_setup_commit"]
    if instance.get("setup"):
        case["setup"] = list(instance["setup"])
    return case


def manifest_of(
    name: str, seats: Sequence[str], cases: Sequence[dict[str, Any]], roster: str | None
) -> dict[str, Any]:
    """The manifest document of the imported cases."""
    doc: dict[str, Any] = {
        "schema": "brigade.eval_manifest.v1",
        "name": name,
        "seats": list(seats),
        "execution": {"mode": "writable-worktree"},
    }
    if roster is not None:
        doc["roster"] = roster
    doc["cases"] = list(cases)
    return doc
