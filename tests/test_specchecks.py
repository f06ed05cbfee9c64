"""The graders' spec checks are kept in brigade's cache folder: an unchanged battery's
resume answers them from there, and imports nothing that runs a seat or a grader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GRADED, Project

from brigade.engine import session as sessions
from brigade.inputs.cache import cache_dir
from brigade.run import graders, specchecks

BROKEN = {"type": "regex_output", "pattern": "("}
NESTED = {"type": "regex_output", "pattern": "(a+)+$"}


def key(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)


def entries() -> list[Path]:
    folder = cache_dir() / "specs"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_a_check_is_made_once_then_answered_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    specs = {key(BROKEN): BROKEN, key(NESTED): NESTED}
    first = specchecks.spec_checks(specs)
    assert first[key(BROKEN)][0] and first[key(BROKEN)][1] == ()
    assert first[key(NESTED)][0] is None and "exponential time" in first[key(NESTED)][1][0]
    assert len(entries()) == 1

    def refused(spec: object) -> str:
        raise AssertionError("checked again")

    monkeypatch.setattr(graders, "spec_problem", refused)
    assert specchecks.spec_checks(specs) == first


def test_another_set_of_specs_or_another_code_is_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    specchecks.spec_checks({key(BROKEN): BROKEN})
    specchecks.spec_checks({key(NESTED): NESTED})
    assert len(entries()) == 2
    monkeypatch.setattr(specchecks.sources, "code_digest", lambda: "another code")
    specchecks.spec_checks({key(NESTED): NESTED})
    assert len(entries()) == 3


@pytest.mark.parametrize(
    "garbage",
    [
        b"not json",
        b"[]",
        b"{}",  # answers for none of the specs
        b'{"DIGEST": ["a problem"]}',
        b'{"DIGEST": [7, []]}',
        b'{"DIGEST": [null, "a warning"]}',
        b'{"DIGEST": [null, [7]]}',
        b'{"DIGEST": [null, []], "other": [null, []]}',  # answers for more than asked
    ],
)
def test_a_cache_entry_that_is_not_such_answers_is_checked_again(garbage: bytes) -> None:
    """The cache folder is the user's, shared by every brigade: an entry that is not what
    this code writes (a crash, an edit, another writer) is never trusted."""
    specs = {key(BROKEN): BROKEN}
    right = specchecks.spec_checks(specs)
    (entry,) = entries()
    digest = next(iter(json.loads(entry.read_text())))
    entry.write_bytes(garbage.replace(b"DIGEST", digest.encode()))
    assert specchecks.spec_checks(specs) == right
    assert json.loads(entry.read_text()) == {digest: [right[key(BROKEN)][0], []]}


def test_a_cache_entry_that_is_a_symlink_or_a_folder_is_not_read(tmp_path: Path) -> None:
    specs = {key(NESTED): NESTED}
    right = specchecks.spec_checks(specs)
    (entry,) = entries()
    lie = tmp_path / "lie.json"
    digest = next(iter(json.loads(entry.read_text())))
    lie.write_text(json.dumps({digest: [None, []]}))
    entry.unlink()
    entry.symlink_to(lie)
    assert specchecks.spec_checks(specs) == right


def test_cached_warnings_are_the_warnings_checked(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "a", "prompt": "x", "graders": [BROKEN]},
            {"id": "b", "prompt": "y", "graders": [NESTED, {"type": "exit_status"}]},
        ]
    )
    manifest = sessions.load_inputs(project.manifest, project.roster)[0]
    first = sessions.grader_warnings(manifest)
    assert [line.split(": ", 2)[1] for line in first] == [
        "cases[0] (a) graders[0]",
        "cases[1] (b) graders[0]",
    ]
    assert sessions.grader_warnings(manifest) == first


# the modules that run a seat or a grader, and the adapters that drive and read a seat's
# CLI: a run whose cells are all up to date needs none
RUNNING = (
    "regex",
    "brigade.adapters.base",
    "brigade.adapters.common",
    "brigade.adapters.exec",
    "brigade.run.graders",
    "brigade.run.command_grader",
    "brigade.run.judge",
    "brigade.run.runner",
    "brigade.run.seat",
    "brigade.run.sandbox",
    "brigade.run.worktree",
    "brigade.run.doctor",
)

SHOW_IMPORTS = """
import sys
from brigade.front import cli
try:
    cli.main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
sys.stderr.write("IMPORTED " + " ".join(sorted(sys.modules)) + "\\n")
"""


def test_a_no_op_run_imports_nothing_that_runs_a_seat_or_a_grader(project: Project) -> None:
    pattern = {"type": "regex_output", "pattern": "hel+o"}  # checked with the regex engine
    project.write_manifest([{**GRADED[0], "graders": [pattern]}, GRADED[1]])
    assert project.run().returncode == 1
    done = subprocess.run(
        [sys.executable, "-c", SHOW_IMPORTS, *project.run_args()],
        capture_output=True,
        text=True,
        env=project.env(),
        timeout=120,
    )
    assert project.launches() == 2, done.stderr
    imported = set(done.stderr.rsplit("IMPORTED ", 1)[1].split())
    assert "brigade.engine.engine" in imported
    assert imported.isdisjoint(RUNNING), sorted(imported & set(RUNNING))
