"""Working the way doit users and CI expect, through the real `doit` and `brigade`: subsets,
single cells, typos and bad invocations (exit 2), case ids doit cannot name, forget and
rerun, another reporter keeping the lock and the exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import DODO, Project, wait_for
from test_progress import masked

from brigade.engine.names import cell_task_name
from brigade.front.tasks import DOIT_VARIABLES

WARNING = (
    "brigade: seat {seat}: read-only run, but the exec adapter cannot enforce it; the seat "
    "may still change the workspace (the seat's acknowledge_read_only: true silences this)\n"
)
SEATS = ("opus", "sonnet")
CASES = [
    {
        "id": "greet",
        "prompt": "answer: hello",
        "graders": [{"type": "exact_output", "expected": "hello"}],
    },
    {
        "id": "fix",
        "prompt": "answer: nope",
        "graders": [{"type": "exact_output", "expected": "hello"}],
    },
    {"id": "flaky", "prompt": "tempfail: upstream 502"},
]


@pytest.fixture
def two_seats(project: Project) -> Project:
    from conftest import FAKE_CLI

    project.write_roster({seat: {"cli": FAKE_CLI} for seat in SEATS})
    project.write_manifest(CASES, seats=SEATS, trials=2)
    return project


def launched(project: Project) -> list[str]:
    """The coordinates of the agent processes launched so far, in order."""
    if not project.log.exists():
        return []
    return [line.split()[0] for line in project.log.read_text().splitlines()]


def report_path(project: Project) -> str:
    return str(project.out / "report" / "index.html")


# -- 1. subsets ----------------------------------------------------------------------------


def test_a_subset_through_brigade_run(two_seats: Project) -> None:
    project = two_seats
    done = project.run("--case", "gr*", "--seat", "opus", "--trial", "2", "--case", "fix")
    assert done.returncode == 1, done.stderr
    assert launched(project) == ["greet:opus:2", "fix:opus:2"]
    assert masked(done.stderr) == (
        WARNING.format(seat="opus") + "brigade: [1/2] greet:opus:2 accepted <t>\n"
        "brigade: [2/2] fix:opus:2 rejected <t>\n"
        "brigade: 2 of 12 cells (subset: cases=gr*,fix seats=opus trials=2): accepted 1, "
        f"rejected 1 -> rejected (exit 1); <t>; report: {report_path(project)}\n"
    )
    # summary.json, the export and the report cover the whole plan
    summary = project.summary()
    assert summary["total_cells"] == 12
    assert (summary["counts"]["missing"], summary["exit_code"]) == (10, 3)
    exported = json.loads((project.out / "export" / "summary.json").read_text())
    assert exported["counts"] == summary["counts"]
    junit = (project.out / "report" / "junit.xml").read_text()
    assert junit.count("<testcase ") == 12


def test_a_subset_through_doit_variables_and_a_subset_that_is_done(two_seats: Project) -> None:
    project = two_seats
    done = project.doit("cases=greet,flaky", "seats=sonnet")
    assert done.returncode == 3, done.stderr  # the subset holds a measurement failure
    assert sorted(launched(project)) == [
        "flaky:sonnet:1",
        "flaky:sonnet:2",
        "greet:sonnet:1",
        "greet:sonnet:2",
    ]
    assert done.stderr.splitlines()[-1].startswith(
        "brigade: 4 of 12 cells (subset: cases=greet,flaky seats=sonnet): accepted 2, "
        "adapter_error 2; measurement failures 2 (provider_5xx 2) -> measurement_failure (exit 3)"
    )
    # unselected unfinished cells never make a subset exit 3
    again = project.doit("cases=greet", "seats=sonnet", "trials=1")
    assert again.returncode == 0, again.stderr
    assert masked(again.stderr) == (
        "brigade: 1 of 12 cells (subset: cases=greet seats=sonnet trials=1): accepted 1 -> "
        f"clean (exit 0); <t>; report: {report_path(project)}\n"
    )
    assert len(launched(project)) == 4
    # the hint about kept faults counts the subset's cells, never those it runs again
    kept = project.doit("cases=flaky", "seats=sonnet")
    assert kept.returncode == 3
    assert kept.stderr.splitlines()[-1] == (
        "brigade: 2 cells with apparatus faults kept; re-run them with --retry-transient "
        "(doit: retry_transient=1)"
    )
    rerun = project.doit("rerun=flaky:sonnet:1")
    assert rerun.returncode == 3
    assert "kept" not in rerun.stderr
    assert len(launched(project)) == 5
    # the whole plan still exits 3 (eight cells have not run)
    assert project.doit("seats=*").returncode == 3


def test_a_task_name_pattern_selects_the_matching_cells(two_seats: Project) -> None:
    project = two_seats
    # plain doit matches a pattern against the tasks it has before the plan runs: none of
    # the cells' (made after it); brigade says so, exit 2, nothing run
    plain = project.doit("cell:greet:*")
    assert (plain.returncode, plain.stderr) == (
        2,
        "brigade: no task is selected: doit matches a pattern such as 'cell:greet:*' only "
        "against the tasks it has before the plan runs; choose cells with cases=, seats=, "
        "trials= or rerun=, or run the pattern through brigade doit 'cell:greet:*'\n",
    )
    assert launched(project) == []
    assert not (project.out / ".doit.db").exists()  # a refused run leaves no doit DB
    done = project.brigade_doit("cell:greet:*")
    assert done.returncode == 0, done.stderr
    assert launched(project) == [
        "greet:opus:1",
        "greet:opus:2",
        "greet:sonnet:1",
        "greet:sonnet:2",
    ]
    # task names run those tasks only (doit's meaning): no summary written
    assert masked(done.stderr.splitlines()[-1]) == (
        "brigade: 4 of 12 cells (subset: task names): accepted 4 -> clean (exit 0); <t>"
    )
    assert not (project.out / "summary.json").exists()
    named = project.brigade_doit("cell:greet:*", "summary")  # with the summary, it is written
    assert named.returncode == 0
    assert project.summary()["counts"]["accepted"] == 4
    assert len(launched(project)) == 4


def test_a_single_cell_prints_its_outcome(two_seats: Project) -> None:
    project = two_seats
    done = project.doit("cell:fix:sonnet:1")
    assert done.returncode == 1
    assert masked(done.stderr) == (
        WARNING.format(seat="sonnet") + "brigade: [1/1] fix:sonnet:1 rejected <t>\n"
        "brigade: fix:sonnet:1: rejected (attempt 1, <t>): failed exact_output:0 "
        "(0 of 1 passed)\n"
        "brigade: 1 of 12 cells (subset: task names): rejected 1 -> rejected (exit 1); <t>\n"
    )
    again = project.doit("cell:fix:sonnet:1")  # up to date: its outcome again, exit 1
    assert again.returncode == 1
    assert masked(again.stderr) == (
        "brigade: fix:sonnet:1: rejected (attempt 1, <t>): failed exact_output:0 "
        "(0 of 1 passed)\n"
        "brigade: 1 of 12 cells (subset: task names): rejected 1 -> rejected (exit 1); <t>\n"
    )


# -- 2. typos and bad invocations: exit 2, nothing run ---------------------------------------


def test_typos_and_bad_invocations_exit_2(two_seats: Project) -> None:
    project = two_seats
    # both doors: plain doit over brigade's dodo, and brigade doit
    both = {
        ("cell:greet:sonet:1",): 'brigade: no such task "cell:greet:sonet:1" (did you mean '
        "cell:greet:sonnet:1?); doit list shows every task\n",
        ("nosuchtask",): 'brigade: no such task "nosuchtask"; doit list shows every task\n',
        ("cell:greet:opus:1", "--bogus"): 'brigade: no such task "--bogus": options go before '
        "task names (doit run [OPTIONS] [TASK...])\n",
        ("cases=gret",): "brigade: case 'gret' matches no case of the plan (did you mean "
        "'greet'?) (the plan has: greet, fix, flaky)\n",
        ("trials=9",): "brigade: trial 9: the plan has trials 1 to 2\n",
        ("rerun=greet:opus:3",): "brigade: no cell 'greet:opus:3' in the plan (did you mean "
        "'greet:opus:2' or 'greet:opus:1'?); a cell is case:seat:trial (brigade show DIR "
        "--cells lists them)\n",
        ("retry_transiet=1",): "brigade: unknown doit variable 'retry_transiet' (did you mean "
        "'retry_transient'?) (known: " + ", ".join(DOIT_VARIABLES) + ")\n",
    }
    # brigade doit only: what doit decides before any dodo code runs, or without telling it
    brigade_only = {
        ("cell:nothing*",): 'brigade: no such task "cell:nothing*": the pattern matches no '
        "task (doit list shows them)\n",
        ("--bogus-flag",): "ERROR: option --bogus-flag not recognized (brigade doit help run "
        "lists the options)\n",
        ("-n", "abc"): "ERROR: Error parsing parameter 'num_process' <class 'int'>. invalid "
        "literal for int() with base 10: 'abc' (brigade doit help run lists the options)\n",
        ("list", "cell:*"): 'brigade: no such task "cell:*": doit list takes task names, not '
        "patterns\n",
        ("info", "cell:greet:opus:9"): 'brigade: no such task "cell:greet:opus:9" (did you '
        "mean cell:greet:opus:2 or cell:greet:opus:1?); doit list shows every task\n",
        ("forget", "cell:gret:opus:1"): 'brigade: no such task "cell:gret:opus:1" (did you '
        "mean cell:greet:opus:1?); doit list shows every task\n",
        ("-n", "2", "-P", "process"): "brigade: doit -P process: brigade runs the seats in "
        "threads of doit's own process; drop -P process (-n N alone runs N seats at once)\n",
    }
    for args, message in both.items():
        for done in (project.doit(*args), project.brigade_doit(*args)):
            assert (done.returncode, done.stderr, done.stdout) == (2, message, ""), args
    for args, message in brigade_only.items():
        done = project.brigade_doit(*args)
        assert (done.returncode, done.stderr, done.stdout) == (2, message, ""), args
    # plain doit's own parse errors: doit's message and code, before any dodo is imported
    bogus = project.doit("--bogus-flag")
    assert bogus.returncode == 3
    assert bogus.stderr.startswith("ERROR: Error parsing Command: option --bogus-flag")
    assert launched(project) == []
    assert not (project.out / "cells").exists()
    bad = project.run("--trial", "x")
    assert bad.returncode == 2
    assert "--trial: not a trial number: 'x'" in bad.stderr


def test_installing_brigade_changes_nothing_of_doit_for_another_dodo(tmp_path) -> None:
    from importlib.metadata import entry_points

    # brigade registers nothing with doit (doit.COMMAND, doit.REPORTER, ... entry points)
    registered = [
        point
        for group in ("COMMAND", "LOADER", "BACKEND", "REPORTER")
        for point in entry_points(group=f"doit.{group}")
        if point.value.startswith("brigade")
    ]
    assert registered == []
    (tmp_path / "dodo.py").write_text(
        "import sys\n"
        "def task_hello():\n"
        "    'say hello'\n"
        "    def hello():\n"
        "        print('brigade imported:', 'brigade' in sys.modules)\n"
        "    return {'actions': [hello], 'verbosity': 2}\n"
    )

    def doit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "doit", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )

    ran = doit()
    assert (ran.returncode, ran.stdout) == (0, ".  hello\nbrigade imported: False\n")
    listed = doit("list")
    assert (listed.returncode, listed.stdout) == (0, "hello   say hello\n")
    forgot = doit("forget", "hello")
    assert (forgot.returncode, forgot.stdout, forgot.stderr) == (0, "forgetting hello\n", "")
    bogus = doit("--bogus-flag")
    assert bogus.returncode == 3  # doit's "error before task execution"
    assert bogus.stderr.startswith("ERROR: Error parsing Command: option --bogus-flag")
    # doit's own DB (its default backend), nothing of brigade's
    assert not [path.name for path in tmp_path.iterdir() if "brigade" in path.name]


# -- 15. a case id with '=' runs; doit cannot read it in a task name -------------------------


def test_a_case_id_with_an_equal_sign_runs(project: Project) -> None:
    project.write_manifest([{"id": "x=1", "prompt": "answer: a"}, {"id": "50%", "prompt": "b"}])
    assert (
        project.brigade(
            "validate", str(project.manifest), "--roster", str(project.roster)
        ).returncode
        == 0
    )
    listed = project.doit("list")
    assert [line.split()[0] for line in listed.stdout.splitlines() if line.startswith("cell:")] == [
        "cell:50%25:agent:1",  # (doit list sorts them)
        "cell:x%3D1:agent:1",
    ]
    one = project.doit(cell_task_name("x=1:agent:1"))
    assert one.returncode == 0, one.stderr
    assert launched(project) == ["x=1:agent:1"]
    plain = project.doit("cell:x=1:agent:1")  # doit reads this as a variable
    assert (plain.returncode, plain.stderr) == (
        2,
        "brigade: cell:x=1:agent:1: doit reads NAME=VALUE as a variable; in a task name '=' "
        "is written %3D: cell:x%3D1:agent:1\n",
    )
    assert project.run().returncode == 0
    assert project.doit("rerun=x=1:agent:1").returncode == 0
    assert launched(project) == ["x=1:agent:1", "50%:agent:1", "x=1:agent:1"]
    assert project.attempts("x=1:agent:1") == ["attempt-001", "attempt-002"]


# -- 2. forget, rerun, -a, always with a subset --------------------------------------------------


def test_doit_forget_reruns_a_cell_and_deleting_the_db_reruns_nothing(two_seats: Project) -> None:
    project = two_seats
    assert project.doit().returncode == 3
    assert len(launched(project)) == 12
    # plain doit's forget is doit's own: it clears doit's cache, the output directory stays
    # the truth (brigade doit forget records the cells to run again)
    plain = project.doit("forget", "cell:greet:opus:1")
    assert (plain.returncode, plain.stdout) == (0, "forgetting cell:greet:opus:1\n")
    assert project.doit("cell:greet:opus:1").returncode == 0
    assert len(launched(project)) == 12
    forgot = project.brigade_doit("forget", "cell:greet:opus:1", "cell:fix:*")
    assert forgot.returncode == 0, forgot.stderr
    record = project.out / "forgotten.json"
    assert forgot.stdout == (
        "brigade: 5 cell(s) forgotten: the next run that selects them runs each as a new "
        f"attempt (recorded in {record})\n"
        "forgetting cell:greet:opus:1\n"
        "forgetting cell:fix:opus:1\n"
        "forgetting cell:fix:opus:2\n"
        "forgetting cell:fix:sonnet:1\n"
        "forgetting cell:fix:sonnet:2\n"
    )
    entries = json.loads(record.read_text())["cells"]
    assert sorted(entry["coordinate"] for entry in entries.values()) == [
        "fix:opus:1",
        "fix:opus:2",
        "fix:sonnet:1",
        "fix:sonnet:2",
        "greet:opus:1",
    ]
    assert {entry["attempt"] for entry in entries.values()} == {1}
    one = project.doit("cell:greet:opus:1")
    assert one.returncode == 0
    assert project.attempts("greet:opus:1") == ["attempt-001", "attempt-002"]
    assert project.doit("cell:greet:opus:1").returncode == 0  # done: not again
    assert project.attempts("greet:opus:1") == ["attempt-001", "attempt-002"]
    (project.out / ".doit.db").unlink()  # doit's DB is a cache: nothing re-runs for it
    everything = project.doit()
    assert everything.returncode == 3
    assert launched(project)[12:] == [
        "greet:opus:1",
        "fix:opus:1",
        "fix:opus:2",
        "fix:sonnet:1",
        "fix:sonnet:2",
    ]
    assert not record.exists()  # every forgotten cell ran again
    cleared = project.brigade_doit("forget")
    assert cleared.returncode == 0
    assert "doit forget without cell names clears only doit's cache" in cleared.stderr
    (project.out / ".doit.db").unlink()
    assert project.doit().returncode == 3
    assert len(launched(project)) == 17


def test_rerun_always_and_doit_a_run_chosen_cells_again(two_seats: Project) -> None:
    project = two_seats
    assert project.run().returncode == 3
    rerun = project.brigade("rerun", str(project.out), "greet:*:1", "--quiet")
    assert rerun.returncode == 0, rerun.stderr
    assert masked(rerun.stderr) == (
        WARNING.format(seat="opus")
        + WARNING.format(seat="sonnet")
        + "brigade: 2 of 12 cells (subset: rerun): accepted 2 -> clean (exit 0); <t>; "
        f"report: {report_path(project)}\n"
    )
    assert launched(project)[12:] == ["greet:opus:1", "greet:sonnet:1"]
    assert project.doit("rerun=fix:opus:2").returncode == 1
    assert project.brigade_doit("-a", "cell:fix:sonnet:1").returncode == 1
    assert project.doit("always=1", "seats=opus", "trials=1", "cases=flaky").returncode == 3
    assert launched(project)[14:] == ["fix:opus:2", "fix:sonnet:1", "flaky:opus:1"]
    assert project.attempts("fix:opus:2") == ["attempt-001", "attempt-002"]
    assert project.doit().returncode == 3  # nothing else ran
    assert len(launched(project)) == 17
    missing = project.brigade("rerun", str(project.out), "greet:opus:7")
    assert missing.returncode == 2
    assert missing.stderr.startswith("brigade: no cell 'greet:opus:7' in the plan")


# -- 3. the lock and the exit code, whichever reporter doit uses ---------------------------------


def test_another_reporter_keeps_the_lock_and_the_exit_code(two_seats: Project) -> None:
    project = two_seats
    done = project.brigade_doit("-r", "json")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert sorted(t["name"] for t in report["tasks"] if t["name"].startswith("cell:")) == sorted(
        f"cell:{case['id']}:{seat}:{trial}" for case in CASES for seat in SEATS for trial in (1, 2)
    )
    assert done.stderr.splitlines()[-1].startswith("brigade: 12 cells: ")
    # a run holds the lock: doit with another reporter, and doit forget, are refused (plain
    # doit takes the lock for every command, brigade doit for those that write)
    block = project.root / "release"
    project.write_manifest([*CASES, {"id": "slow", "prompt": f"block: {block}"}], seats=SEATS)
    holder = project.doit_popen("cases=slow", "trials=1", "seats=opus")
    wait_for(lambda: "slow:opus:1" in launched(project), what="the slow cell running")
    for args in (
        ("-r", "json"),
        ("-r", "console", "cell:greet:opus:1"),
        ("forget", "cell:greet:opus:1"),
        ("ignore", "cell:greet:opus:1"),
    ):
        for refused in (project.doit(*args), project.brigade_doit(*args)):
            assert refused.returncode == 2, args
            assert re.search(
                r"another brigade run \(pid \d+\) is using this output", refused.stderr
            )
    assert project.brigade_doit("list").returncode == 0  # only reads: no lock
    block.touch()
    holder.communicate(timeout=60)
    assert holder.returncode == 0


def test_console_reporter_exit_code_over_a_rejected_cell(two_seats: Project) -> None:
    project = two_seats
    done = project.brigade_doit("-r", "console", "cell:fix:opus:1")
    assert done.returncode == 1, done.stderr
    assert done.stdout == ".  plan\n.  cell:fix:opus:1\n"
    # plain doit -r: doit's reporter alone, doit's exit code (a rejected cell is a result)
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "doit",
            "-f",
            str(DODO),
            "-r",
            "console",
            "cell:fix:opus:2",
            *project.variables(),
        ],
        capture_output=True,
        text=True,
        env=project.env(),
    )
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "-- plan\n.  cell:fix:opus:2\n"
    assert project.receipt("fix:opus:2")["state"] == "rejected"
