"""`brigade validate`: every problem of a document in one run, one line each, with "did you
mean"; warnings CI can gate on with --strict (exit 1)."""

from __future__ import annotations

from conftest import FAKE_CLI, Project

from brigade.inputs import schemas
from brigade.run.graders import GRADERS

READ_ONLY = (
    "warning: seat agent: read-only run, but the exec adapter cannot enforce it; the seat may "
    "still change the workspace (the seat's acknowledge_read_only: true silences this)\n"
)


def validate(project: Project, *args: str):  # type: ignore[no-untyped-def]
    return project.brigade(
        "validate", str(project.manifest), "--roster", str(project.roster), *args
    )


def test_every_problem_of_a_manifest_is_listed_with_did_you_mean(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "a", "prompt": "x", "trails": 2},
            {"id": "a", "prompt": "y"},
            {"id": "b", "prompt_file": "missing.md"},
            {"id": "c", "prompt": "z", "trials": 0},
        ],
        grader=[{"type": "exit_status"}],
    )
    done = validate(project)
    m = project.manifest
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"brigade: {m}: grader: unknown key (did you mean 'graders'?) (allowed: "
        "cases, description, execution, graders, max_cost, name, roster, schema, seats, setup, "
        "trials, workspace)\n"
        f"brigade: {m}: cases[0].trails: unknown key (did you mean 'trials'?) (allowed: "
        "description, graders, id, metadata, prompt, prompt_file, setup, trials, workspace)\n"
        f"brigade: {m}: cases[3].trials: must be at least 1, got 0\n"
    )
    project.write_manifest(
        [
            {"id": "a", "prompt": "x"},
            {"id": "a", "prompt": "y"},
            {"id": "b", "prompt_file": "no.md"},
        ]
    )
    done = validate(project)
    assert done.stderr == (
        f"brigade: {m}: cases[1].id: duplicate case id 'a' (first used at cases[0])\n"
        f"brigade: {m}: cases[2].prompt_file: 'no.md' does not exist\n"
    )


def test_every_problem_of_a_roster_is_listed(project: Project) -> None:
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI, "modle": "m", "timeout_seconds": -1},
            "other": {"cli": "nosuchcli"},
        }
    )
    project.write_manifest([{"id": "a", "prompt": "x"}])
    done = validate(project)
    r = project.roster
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    allowed = ", ".join(sorted(schemas.schema("brigade.roster.v1")["$defs"]["seat"]["properties"]))
    assert lines[0] == (
        f"brigade: {r}: seats.agent.modle: unknown key (did you mean 'model'?) (allowed: {allowed})"
    )
    assert lines[1] == f"brigade: {r}: seats.agent.timeout_seconds: must be greater than 0, got -1"
    assert len(lines) == 2


def test_strict_exits_1_on_warnings(project: Project) -> None:
    project.write_manifest(
        [
            {"id": "a", "prompt": "x", "graders": [{"type": "exact_output", "expect": "x"}]},
            {"id": "b", "prompt": "x", "graders": [{"type": "regex_output", "pattern": "(a+)+"}]},
            {"id": "c", "prompt": "x", "graders": [{"type": "exact_outptu", "expected": "x"}]},
        ]
    )
    m = project.manifest
    warnings = (
        f"warning: {m}: cases[0] (a) graders[0]: unknown field 'expect' for exact_output graders "
        "(did you mean 'expected'?) — this grader will record grader_error until fixed\n"
        f"warning: {m}: cases[1] (b) graders[0]: pattern '(a+)+' repeats a group that itself "
        "repeats (like (a+)+): it can take exponential time, and is stopped at the grader's "
        "time limit (grader_error)\n"
        f"warning: {m}: cases[2] (c) graders[0]: unknown grader type 'exact_outptu' (did you "
        f"mean 'exact_output'?) (known: {', '.join(sorted(GRADERS))}) — this grader "
        "will record grader_error until fixed\n"
    ) + READ_ONLY
    lenient = validate(project)
    assert (lenient.returncode, lenient.stderr) == (0, warnings)
    assert lenient.stdout == (
        f"{m}: ok: 3 case(s) x 1 seat(s) = 3 cell(s), roster {project.roster}\n"
    )
    strict = validate(project, "--strict")
    assert (strict.returncode, strict.stderr) == (1, warnings)
    # a clean battery whose seat acknowledges its unenforced read-only runs passes --strict
    project.write_roster({"agent": {"cli": FAKE_CLI, "acknowledge_read_only": True}})
    project.write_manifest([{"id": "a", "prompt": "x"}])
    clean = validate(project, "--strict")
    assert (clean.returncode, clean.stderr) == (0, "")
    writable = project.root / "w.yaml"
    project.write_roster()
    project.write_manifest([{"id": "a", "prompt": "x"}], execution={"mode": "writable-worktree"})
    assert validate(project, "--strict").returncode == 0  # (read-only is not asked for)
    assert not writable.exists()
