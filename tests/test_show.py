"""`brigade show`: one cell by coordinate or id prefix in every state, and the cell list."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_CLI, Project, git_workspace

from brigade.core.identity import CELL_SCHEMA
from brigade.core.plan import Cell, Plan, plan_from_document
from brigade.core.receipts import Receipt
from brigade.errors import InputError
from brigade.outdir import store
from brigade.outdir.results import read_plan_document
from brigade.report.detail import Attempt, CellRecord, Text
from brigade.report.model import failed_checks, usage_text
from brigade.report.show import cell_text, find_cell
from brigade.run.context import RunContext
from brigade.run.runner import running_receipt

HELLO = [{"type": "exact_output", "expected": "hello"}]
LINES = "import sys\nprint('\\n'.join(f'line {i}' for i in range(1, 61)))\n"


def states_project(project: Project) -> None:
    """Cells in every state once the run is done (running and missing are made after)."""
    script = project.root / "lines.py"
    script.write_text(LINES)
    project.write_roster(
        {
            "alpha": {"cli": FAKE_CLI, "timeout_seconds": 3},
            "beta": {"cli": f"exec:{{python}} {script}", "timeout_seconds": 3},
        }
    )
    project.write_manifest(
        [
            {"id": "ok", "prompt": "answer: hello", "graders": HELLO},
            {"id": "wrong", "prompt": "answer: Hello! How can I help you today?", "graders": HELLO},
            {"id": "crash", "prompt": "stderr: boom\nexit: 2", "graders": HELLO},
            {"id": "drop", "prompt": "tempfail: connection reset by peer", "graders": HELLO},
            {"id": "free", "prompt": "answer: anything", "graders": []},
            {
                "id": "broken",
                "prompt": "answer: hello",
                "graders": [{"type": "regex_output", "pattern": "("}],
            },
            {"id": "slow", "prompt": "sleep: 30", "graders": HELLO},
            {"id": "again", "prompt": "answer: hello", "graders": HELLO},
            {"id": "more", "prompt": "answer: hello", "graders": HELLO},
        ],
        seats=("alpha", "beta"),
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A run with every state: 18 cells, then `again:alpha:1` left running by a killed run
    and a new case `late` planned but never run (missing)."""
    project = Project(tmp_path_factory.mktemp("show"))
    cache = str(tmp_path_factory.mktemp("cache"))  # never the user's input cache
    states_project(project)
    done = project.doit("jobs=4", BRIGADE_CACHE_DIR=cache)
    assert done.returncode == 3, done.stderr
    # a run killed while `again:alpha:1` ran its second attempt left it running
    plan = plan_from_document(read_plan_document(project.out))
    cell = next(c for c in plan.cells if c.coordinate == "again:alpha:1")
    ctx = RunContext(project.out, project.workspace, project.root, plan.manifest_digest)
    attempt = store.new_attempt(project.out, cell.cell_id, 1)
    store.write_receipt(
        project.out, running_receipt(ctx, cell, attempt, "2030-01-02T03:04:05.000Z")
    )
    # a case added since: planned (doit plan), never run
    manifest = project.manifest.read_text()
    project.manifest.write_text(
        manifest.replace("cases:\n", "cases:\n- id: late\n  prompt: 'answer: late'\n", 1)
    )
    assert project.doit("plan", BRIGADE_CACHE_DIR=cache).returncode == 3  # incomplete
    return project


def receipts_of(project: Project) -> dict[str, dict[str, Any]]:
    return project.receipts()


def show(project: Project, *args: str) -> tuple[int, str, str]:
    done = project.brigade("show", str(project.out), *args)
    return done.returncode, done.stdout, done.stderr


def attempt_line(receipt: dict[str, Any], number: int = 1, label: str | None = None) -> str:
    label = label or receipt["state"] + (
        f" ({receipt['failure_reason']})" if receipt.get("failure_reason") else ""
    )
    return f"    {number}  {label}  {receipt['started_at']}  {receipt['duration_seconds']:>7.2f} s"


def folders(project: Project, coordinate: str, attempt: int = 1, files: str = "") -> list[str]:
    cell = project.cell_dir(coordinate)
    run = cell / "attempts" / f"attempt-{attempt:03d}" / "run"
    lines = ["", "folders:", f"  cell  {cell}", f"  run   {run}"]
    return lines + ([f"        {files}"] if files else [])


RUN_FILES = "final.txt stdout.log stderr.log run.json"


def test_a_rejected_cell_by_coordinate_and_by_id_prefix(finished: Project) -> None:
    receipt = receipts_of(finished)["wrong:alpha:1"]
    expected = "\n".join(
        [
            "wrong:alpha:1  rejected",
            "  failed exact_output:0 (0 of 1 passed)",
            f"  cell {receipt['cell_id']}",
            "  case wrong, seat alpha, trial 1, read-only",
            "",
            "attempts:",
            attempt_line(receipt, label="rejected"),
            "",
            "graders:",
            "  exact_output:0  scored 0  output differs from the expected text at line 1, "
            'column 1: expected "hello", got "Hello! How can I help you today?"',
            "",
            "answer (final.txt, 1 line(s)):",
            "  Hello! How can I help you today?",
            *folders(finished, "wrong:alpha:1", files=RUN_FILES),
        ]
    )
    assert show(finished, "wrong:alpha:1") == (0, expected + "\n", "")
    assert show(finished, receipt["cell_id"][:10]) == (0, expected + "\n", "")
    assert show(finished, receipt["cell_id"].upper()) == (0, expected + "\n", "")


def test_every_state_says_why(finished: Project) -> None:
    receipts = receipts_of(finished)
    expected_heads = {
        "ok:alpha:1": ["ok:alpha:1  accepted", "  all 1 grader(s) passed"],
        "crash:alpha:1": ["crash:alpha:1  execution_error", "  the seat exited with status 2"],
        "slow:alpha:1": [
            "slow:alpha:1  execution_error (timeout)",
            "  the seat hit its time limit",
        ],
        "drop:alpha:1": [
            "drop:alpha:1  adapter_error (transport_drop)",
            "  transport_drop: connection reset by peer",
        ],
        "free:alpha:1": [
            "free:alpha:1  unscored",
            "  no graders: the answer is recorded, not scored",
        ],
        "broken:alpha:1": [
            "broken:alpha:1  grader_error",
            "  grader(s) could not run: regex_output:0 (a fault of the apparatus)",
        ],
        "again:alpha:1": [
            "again:alpha:1  running",
            "  attempt 2 started at 2030-01-02T03:04:05.000Z and has not finished: it is still "
            "running, or its run was killed (the next run starts a new attempt)",
        ],
        "late:alpha:1": ["late:alpha:1  missing", "  not run yet"],
    }
    for coordinate, head in expected_heads.items():
        code, out, err = show(finished, coordinate)
        assert (code, err) == (0, ""), coordinate
        assert out.splitlines()[:2] == head, coordinate

    code, out, _ = show(finished, "crash:alpha:1")
    crash = receipts["crash:alpha:1"]
    assert out.split("\nattempts:\n", 1)[1] == "\n".join(
        [
            attempt_line(crash),
            "",
            "answer (final.txt, 1 line(s)):",
            "  ok",
            "",
            "stderr:",
            "  boom",
            *folders(finished, "crash:alpha:1", files=RUN_FILES),
            "",
        ]
    )
    code, out, _ = show(finished, "drop:alpha:1")
    drop = receipts["drop:alpha:1"]
    assert out.split("\nattempts:\n", 1)[1] == "\n".join(
        [
            attempt_line(drop) + "  fault transport_drop: connection reset by peer",
            "",
            "answer (final.txt, 0 line(s)):",
            "  (empty)",
            "",
            "stderr:",
            "  connection reset by peer",
            *folders(finished, "drop:alpha:1", files=RUN_FILES),
            "",
        ]
    )
    code, out, _ = show(finished, "broken:alpha:1")
    assert "\ngraders:\n  regex_output:0  grader_error  bad regular expression '(': " in out

    # the running cell: its finished first attempt, then the one in flight (no answer yet)
    code, out, _ = show(finished, "again:alpha:1")
    first = json.loads(
        (finished.cell_dir("again:alpha:1") / "attempts" / "attempt-001" / "cell.json").read_text()
    )
    assert out.split("\nattempts:\n", 1)[1] == "\n".join(
        [
            attempt_line(first),
            "    2  running   2030-01-02T03:04:05.000Z          –",
            *folders(finished, "again:alpha:1", attempt=2),
            "",
        ]
    )
    # the missing cell has no folder yet
    code, out, _ = show(finished, "late:alpha:1")
    cell = finished.cell_dir("late:alpha:1")
    assert out.split("\n", 4)[4] == f"\nattempts:\n  none\n\nfolders:\n  cell  {cell}\n"


def test_a_long_answer_is_cut_past_a_screenful_unless_full(finished: Project) -> None:
    code, out, _ = show(finished, "ok:beta:1")
    assert code == 0
    answer = out.split("answer (final.txt, 60 line(s)):\n", 1)[1].split("\n\nfolders:")[0]
    assert answer.splitlines() == [
        *(f"  line {i}" for i in range(1, 41)),
        "  [truncated: 20 more line(s); --full shows the whole answer]",
    ]
    code, out, _ = show(finished, "ok:beta:1", "--full")
    answer = out.split("answer (final.txt, 60 line(s)):\n", 1)[1].split("\n\nfolders:")[0]
    assert answer.splitlines() == [f"  line {i}" for i in range(1, 61)]


def test_an_ambiguous_or_unknown_cell_exits_2(finished: Project) -> None:
    ids = [c["cell_id"] for c in finished.plan()["cells"]]
    # 20 cells, 16 hex digits: two ids start alike
    first = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    sharing = [
        f"{c['cell_id'][:12]} ({c['coordinate']})"
        for c in finished.plan()["cells"]
        if c["cell_id"].startswith(first)
    ]
    code, out, err = show(finished, first)
    listed = ", ".join(sharing[:10]) + (
        f" and {len(sharing) - 10} more" if len(sharing) > 10 else ""
    )
    assert (code, out) == (2, "")
    assert err == (
        f"brigade: {first!r} is the start of {len(sharing)} cell ids: {listed}; give more of it\n"
    )
    code, out, err = show(finished, "nope:alpha:1")
    assert (code, out) == (2, "")
    assert err == (
        "brigade: no cell 'nope:alpha:1' in the plan: give a coordinate (case:seat:trial, see "
        "`brigade show DIR --cells`) or the start of a cell id\n"
    )
    assert show(finished, "ok:alpha:1", "--cells")[0] == 2
    assert show(finished, "--state", "accepted")[0] == 2


def row(coordinate: str, state: str, reason: str, attempt: str, duration: str) -> list[str]:
    return [coordinate, state, reason, attempt, duration, "–"]


def test_cells_are_listed_one_per_line(finished: Project) -> None:
    receipts = receipts_of(finished)

    def seconds(coordinate: str) -> str:
        return f"{receipts[coordinate]['duration_seconds']:.2f} s"

    code, out, err = show(finished, "--cells", "--seat", "alpha")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["coordinate", "state", "reason", "attempt", "duration", "cost"]
    table = [line.split("  ") for line in lines[1:]]
    table = [[part.strip() for part in line if part.strip()] for line in table]
    assert table == [
        row("late:alpha:1", "missing", "-", "–", "–"),
        row("ok:alpha:1", "accepted", "-", "1", seconds("ok:alpha:1")),
        row("wrong:alpha:1", "rejected", "exact_output:0", "1", seconds("wrong:alpha:1")),
        row("crash:alpha:1", "execution_error", "exit 2", "1", seconds("crash:alpha:1")),
        row("drop:alpha:1", "adapter_error", "transport_drop", "1", seconds("drop:alpha:1")),
        row("free:alpha:1", "unscored", "-", "1", seconds("free:alpha:1")),
        row("broken:alpha:1", "grader_error", "regex_output:0", "1", seconds("broken:alpha:1")),
        row("slow:alpha:1", "execution_error", "timeout", "1", seconds("slow:alpha:1")),
        ["again:alpha:1", "running", "-", "2", "–", "–"],
        row("more:alpha:1", "accepted", "-", "1", seconds("more:alpha:1")),
    ]

    code, out, _ = show(finished, "--cells", "--state", "execution_error", "--state", "missing")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [
        "late:alpha:1",
        "late:beta:1",
        "crash:alpha:1",
        "slow:alpha:1",
    ]
    code, out, _ = show(finished, "--cells", "--case", "ok", "--json")
    assert code == 0
    assert json.loads(out) == [
        {
            "coordinate": f"ok:{seat}:1",
            "cell_id": receipts[f"ok:{seat}:1"]["cell_id"],
            "state": "accepted" if seat == "alpha" else "rejected",
            "reason": "-" if seat == "alpha" else "exact_output:0",
            "attempt": 1,
            "duration_seconds": receipts[f"ok:{seat}:1"]["duration_seconds"],
            "cost_usd": None,
        }
        for seat in ("alpha", "beta")
    ]
    for flag, value, known in (
        ("--state", "done", "accepted, rejected"),
        ("--seat", "gamma", "alpha, beta"),
        ("--case", "none", "late, ok, wrong"),
    ):
        code, out, err = show(finished, "--cells", flag, value)
        assert (code, out) == (2, "")
        assert err.startswith(f"brigade: {flag}: no {flag[2:]} {value!r} (known: {known}")


def test_show_json_of_one_cell(finished: Project) -> None:
    code, out, _ = show(finished, "crash:alpha:1", "--json")
    assert code == 0
    doc = json.loads(out)
    receipt = receipts_of(finished)["crash:alpha:1"]
    run = str(finished.cell_dir("crash:alpha:1") / "attempts" / "attempt-001" / "run")
    assert doc == {
        "coordinate": "crash:alpha:1",
        "cell_id": receipt["cell_id"],
        "state": "execution_error",
        "reason": "the seat exited with status 2",
        "receipt": receipt,
        "attempts": [
            {
                "attempt": 1,
                "state": "execution_error",
                "started_at": receipt["started_at"],
                "finished_at": receipt["finished_at"],
                "duration_seconds": receipt["duration_seconds"],
                "failure_reason": None,
                "fault": None,
                "run_dir": run,
                "reused": None,
            }
        ],
        "usage": None,
        "answer": "ok\n",
        "answer_truncated": False,
        "stderr_tail": "boom",
        "changed_files": None,
        "deleted_files": None,
        "transcript_entries": None,
        "cell_dir": str(finished.cell_dir("crash:alpha:1")),
        "run_dir": run,
    }


def test_a_writable_run_lists_the_files_it_changed(project: Project) -> None:
    git_workspace(project)
    project.write_manifest(
        [
            {
                "id": "edit",
                "prompt": "write: src/app.py=print('v2')\nwrite: notes.md=hi\ndelete: README",
            }
        ],
        execution={"mode": "writable-worktree"},
    )
    assert project.doit().returncode == 0
    done = project.brigade("show", str(project.out), "edit:agent:1")
    changed = done.stdout.split("\nchanged files:\n", 1)[1].split("\n\n")[0]
    assert changed.splitlines() == [
        "  changed  notes.md",
        "  changed  src/app.py",
        "  deleted  README",
    ]


# --- pure parts -------------------------------------------------------------------


def fake_plan(ids: list[str]) -> Plan:
    from brigade.core.specs import SeatSpec

    seat = SeatSpec(name="s", cli="exec:true")
    cells = tuple(
        Cell(i, f"c{n}:s:1", f"c{n}", "p", seat, 1, (), "read-only", "k") for n, i in enumerate(ids)
    )
    return Plan("t", "d", cells, ())


def test_find_cell_by_coordinate_or_unique_prefix() -> None:
    plan = fake_plan(["abc1" + "0" * 60, "abd2" + "0" * 60, "c0:s:1" + "0" * 58])
    assert find_cell(plan, "c1:s:1").cell_id.startswith("abd2")
    assert find_cell(plan, "abc").cell_id.startswith("abc1")
    assert find_cell(plan, "ABD").cell_id.startswith("abd2")
    # a coordinate wins over an id that starts with the same text
    assert find_cell(plan, "c0:s:1").coordinate == "c0:s:1"
    with pytest.raises(InputError) as raised:
        find_cell(plan, "ab")
    assert str(raised.value) == (
        "'ab' is the start of 2 cell ids: abc100000000 (c0:s:1), abd200000000 (c1:s:1); "
        "give more of it"
    )
    with pytest.raises(InputError):
        find_cell(plan, "")


def test_usage_is_shown_when_known() -> None:
    assert usage_text(None) is None
    assert usage_text({"input_tokens": None, "cost_source": "unknown"}) is None
    assert usage_text(
        {
            "input_tokens": 1200,
            "cached_input_tokens": 800,
            "output_tokens": 90,
            "reasoning_tokens": None,
            "turns": 3,
            "cost_usd": 0.004,
            "cost_source": "reported",
            "models": {"local-7b": {"input_tokens": 1200}},
        }
    ) == (
        "1,200 input tokens (800 cached), 90 output tokens, 3 turn(s), $0.004000 (reported), "
        "model local-7b"
    )
    plan = fake_plan(["a" * 64])
    record = CellRecord(
        cell=plan.cells[0],
        receipt=Receipt.of(
            {
                "schema": CELL_SCHEMA,
                "cell_id": "a" * 64,
                "state": "accepted",
                "attempt": 1,
                "graders": [],
                "usage": {"output_tokens": 5, "model": "m1"},
            }
        ),
        attempts=(Attempt(1, "accepted", "T", "T", 1.0, None, None, Path("/o/run")),),
        cell_dir=Path("/o"),
        run_dir=None,
        run_doc=None,
        answer=Text("hi\n"),
        stderr_tail=None,
        transcript=None,
        changes=None,
    )
    assert "\nusage: 5 output tokens, model m1\n" in cell_text(record)


def test_doit_info_says_where_a_cell_is(finished: Project) -> None:
    cell_id = receipts_of(finished)["wrong:alpha:1"]["cell_id"]
    done = finished.doit("info", "cell:wrong:alpha:1")
    assert done.returncode == 0, done.stderr
    meta = done.stdout.split("meta       : ", 1)[1]
    assert ast.literal_eval(meta) == {  # doit prints the dict with pprint
        "cell_id": cell_id,
        "folder": str(finished.out / "cells" / cell_id),
    }


def test_failed_component_checks_are_listed_bounded_and_cut() -> None:
    checks = [{"name": "exit status", "passed": True, "detail": "exit status 0, expected 0"}]
    checks += [{"name": f"t{i}", "passed": False, "detail": "x " * 200} for i in range(12)]
    lines, more = failed_checks({"component_checks": checks})
    assert (len(lines), more) == (10, 2)
    assert lines[0] == ("t0: " + "x " * 200)[:299] + "…"
    assert failed_checks({"component_checks": None}) == ([], 0)
    assert failed_checks({"component_checks": [{"name": "a\nb", "passed": False}]}) == (
        ["a b"],
        0,
    )


def test_the_state_table_aligns_the_total_row_under_short_seat_names() -> None:
    from brigade.core.taxonomy import COUNT_KEYS
    from brigade.front.cli import show_table

    counts = {k: 0 for k in COUNT_KEYS} | {"accepted": 1}
    summary = {"counts": counts, "by_seat": {"echo": {"counts": counts}}}
    assert show_table(summary).splitlines() == [
        "seat   accepted",
        "echo          1",
        "total         1",
    ]


def test_a_project_folder_given_for_an_output_directory_names_those_under_it(
    tmp_path: Path,
) -> None:
    """`brigade show .` in one's project: the refusal names its output directories."""
    with pytest.raises(InputError) as raised:
        read_plan_document(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}: no readable plan.json here; is this a brigade output directory?"
    )
    for name in ("example", "smoke"):
        (tmp_path / ".brigade" / "evals" / name).mkdir(parents=True)
    (tmp_path / ".brigade" / "evals" / "a-file").write_text("")
    with pytest.raises(InputError) as raised:
        read_plan_document(tmp_path)
    assert str(raised.value).endswith(
        "is this a brigade output directory? (the output directories under it: "
        ".brigade/evals/example, .brigade/evals/smoke)"
    )
    # a seat's link planted at .brigade/evals (or .brigade) is not followed: no hint
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "evals" / "theirs").mkdir(parents=True)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / ".brigade").mkdir()
    (planted / ".brigade" / "evals").symlink_to(elsewhere / "evals")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".brigade").symlink_to(elsewhere)
    for folder in (planted, linked):
        with pytest.raises(InputError) as raised:
            read_plan_document(folder)
        assert str(raised.value).endswith("is this a brigade output directory?"), folder
