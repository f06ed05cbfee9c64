"""SWE-bench instances as a manifest: pure conversion of its JSONL records, no I/O.

An instance (`instance_id`, `repo`, `base_commit`, `problem_statement`, `test_patch`,
`FAIL_TO_PASS`, `PASS_TO_PASS`, optional `environment_setup_commit` and `setup`)
becomes a case: the repository at `base_commit` as its workspace, the problem statement
as its prompt, and a command grader that applies `test_patch` and runs exactly the named
tests, requiring each of them (resolved = every one passes, as SWE-bench defines it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from brigade.core import jsontext
from brigade.errors import InputError

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")
TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# a case id as a manifest takes it: no ':', no control character, no surrounding space
_CASE_ID = re.compile(r"[^:\s\x00-\x1f\x7f]([^:\x00-\x1f\x7f]*[^:\s\x00-\x1f\x7f])?")
MAX_ID = 200
# a repository as SWE-bench names it (`owner/name`): plain names, nothing a path could climb
_REPO_PART = re.compile(r"[A-Za-z0-9._-]+")


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
            doc = jsontext.parse(line, limit=None)
        except ValueError as exc:
            raise InputError(f"{where}: not a JSON object ({exc})") from None
        if not isinstance(doc, dict):
            raise InputError(f"{where}: not a JSON object")
        for key in REQUIRED:
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise InputError(f"{where}: {key}: must be a non-empty string")
        if len(doc["instance_id"]) > MAX_ID or not _CASE_ID.fullmatch(doc["instance_id"]):
            raise InputError(
                f"{where}: instance_id: must be a name of at most {MAX_ID} characters without "
                "':', control characters or surrounding spaces (it is the case's id)"
            )
        if not repo_name(doc["repo"]):
            raise InputError(
                f"{where}: repo: must be owner/name or name (letters, digits, '.', '_', '-'), "
                f"not {doc['repo']!r}"
            )
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
            value = jsontext.parse(value, limit=None)
        except ValueError:
            raise InputError(f"{where}: must be a list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise InputError(f"{where}: must be a list of test ids")
    for test in value:
        # pytest reads such a word as an option (--junitxml=..., -p PLUGIN), never a test
        if test.startswith("-") or "\0" in test:
            raise InputError(f"{where}: a test id cannot start with '-' or hold NUL: {test!r}")
    return value


def repo_name(repo: str) -> bool:
    """Whether `repo` is `owner/name` or `name` of plain names (no '..', no root, no '//'):
    its clone is looked for under --repos only."""
    parts = repo.split("/")
    return len(parts) <= 2 and all(
        _REPO_PART.fullmatch(part) and part not in (".", "..") for part in parts
    )


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
    safe = _SAFE_NAME.sub("_", instance_id)
    if safe != instance_id or safe.startswith("."):
        # ids spelled alike once made safe (`a/b`, `a_b`) keep files of their own
        safe = f"{safe}-{hashlib.sha256(instance_id.encode()).hexdigest()[:12]}"
    return f"swebench/{safe}.test.patch"


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
