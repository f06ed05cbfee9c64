"""End to end: the real doit and brigade CLI run fake agents; states, receipts, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import FAKE_CLI, Project

from brigade.inputs import schemas

MIXED_ROSTER = {
    "agent": {"cli": FAKE_CLI, "timeout_seconds": 1.5},
    "missing": {"cli": "exec:/nonexistent/agent-binary --flag"},
}


def mixed_battery(project: Project) -> None:
    """One case per outcome, on the fake agent."""
    project.write_roster(MIXED_ROSTER)
    project.write_manifest(
        [
            {
                "id": "good",
                "prompt": "answer: hello",
                "graders": [{"type": "exact_output", "expected": "hello"}],
            },
            {
                "id": "wrong",
                "prompt": "answer: goodbye",
                "graders": [{"type": "exact_output", "expected": "hello"}],
            },
            {"id": "plain", "prompt": "answer: anything"},
            {"id": "crash", "prompt": "stderr: boom\nexit: 3"},
            {"id": "slow", "prompt": "sleep: 30\nanswer: late"},
            {"id": "drop", "prompt": "tempfail: connection reset by peer"},
            {"id": "5xx", "prompt": "tempfail: provider said HTTP 503 Service Unavailable"},
        ],
        seats=("agent",),
    )


EXPECTED_MIXED = {
    "good:agent:1": ("accepted", None),
    "wrong:agent:1": ("rejected", None),
    "plain:agent:1": ("unscored", None),
    "crash:agent:1": ("execution_error", None),
    "slow:agent:1": ("execution_error", "timeout"),
    "drop:agent:1": ("adapter_error", "transport_drop"),
    "5xx:agent:1": ("adapter_error", "provider_5xx"),
}


def outcomes(project: Project) -> dict[str, tuple[str, str | None]]:
    return {coord: (r["state"], r.get("failure_reason")) for coord, r in project.receipts().items()}


def test_mixed_battery_through_doit(project: Project) -> None:
    mixed_battery(project)
    done = project.doit()
    assert done.returncode == 3, done.stderr
    assert outcomes(project) == EXPECTED_MIXED
    summary = project.summary()
    assert summary["counts"] == {
        "accepted": 1,
        "rejected": 1,
        "unscored": 1,
        "execution_error": 2,
        "adapter_error": 2,
        "grader_error": 0,
        "running": 0,
        "missing": 0,
    }
    assert summary["measurement_failures"] == 3
    assert summary["measurement_failure_kinds"] == {
        "adapter_error": 2,
        "grader_error": 0,
        "timeout": 1,
    }
    assert summary["exit_code"] == 3
    assert summary["outcome"] == "measurement_failure"
    # details of the apparatus faults are kept
    assert project.receipt("drop:agent:1")["failure_detail"] == "connection reset by peer"
    crash = project.receipt("crash:agent:1")
    assert crash["exit_code"] == 3
    assert "failure_reason" not in crash


def test_a_seat_whose_program_is_missing_refuses_the_run(project: Project) -> None:
    project.write_roster(MIXED_ROSTER)
    project.write_manifest([{"id": "c", "prompt": "answer: x"}], seats=("agent", "missing"))
    for done in (project.run(), project.doit()):
        assert done.returncode == 2
        assert done.stderr == (
            "brigade: seat missing needs '/nonexistent/agent-binary', which cannot be run "
            "here (not found on PATH, or not executable): install it or fix the seat's cli "
            "in the roster (brigade doctor checks every seat)\n"
        )
        assert not (project.out / "cells").exists() and not (project.out / "plan.json").exists()


def test_mixed_battery_through_brigade_run_in_parallel(project: Project) -> None:
    mixed_battery(project)
    done = project.run("-n", "4")
    assert done.returncode == 3, done.stderr
    assert outcomes(project) == EXPECTED_MIXED


def test_timeout_keeps_partial_output_and_kills_the_group(project: Project, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    project.write_roster({"agent": {"cli": FAKE_CLI, "timeout_seconds": 1}})
    project.write_manifest([{"id": "slow", "prompt": "spawn: 60\nstderr: started\nsleep: 30"}])
    done = project.doit(FAKE_AGENT_PIDS=str(pids))
    assert done.returncode == 3
    receipt = project.receipt("slow:agent:1")
    assert (receipt["state"], receipt["failure_reason"]) == ("execution_error", "timeout")
    run_dir = Path(receipt["run_dir"])
    assert (run_dir / "stderr.log").read_text() == "started\n"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "timed_out"
    child = int(pids.read_text().split()[0])
    assert not Path(f"/proc/{child}").exists() or "Z" in _proc_state(child)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "gone"


def test_receipts_and_run_records_validate(project: Project) -> None:
    mixed_battery(project)
    project.doit()
    for coordinate, receipt in project.receipts().items():
        assert schemas.problems(receipt, "brigade.eval_cell.v1") == [], coordinate
        run_dir = Path(receipt["run_dir"])
        attempt_copy = json.loads((run_dir.parent / "cell.json").read_text())
        assert attempt_copy == receipt
        run = json.loads((run_dir / "run.json").read_text())
        assert schemas.problems(run, "brigade.run.v1") == []
        workers = json.loads((run_dir / "worker-results.json").read_text())
        assert schemas.problems(workers, "brigade.worker_results.v1") == []
        for name in ("final.txt", "stdout.log", "stderr.log"):
            assert (run_dir / name).exists(), (coordinate, name)
    assert schemas.problems(project.plan(), "brigade.eval_plan.v1") == []
    assert schemas.problems(project.summary(), "brigade.eval_summary.v1") == []


def test_output_digest_is_the_sha256_of_final_txt(project: Project) -> None:
    import hashlib

    project.write_manifest(
        [{"id": "c", "prompt": "answer: hello", "graders": [{"type": "exit_status"}]}]
    )
    project.doit()
    receipt = project.receipt("c:agent:1")
    data = Path(receipt["run_dir"], "final.txt").read_bytes()
    assert data == b"hello\n"
    assert receipt["output_digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert receipt["graders"][0]["output_digest"] == receipt["output_digest"]


def test_seat_environment(project: Project) -> None:
    project.write_roster(
        {"agent": {"cli": FAKE_CLI, "model": "m-1", "reasoning": "high", "env": {"MODE": "strict"}}}
    )
    names = [
        "BRIGADE_CELL_ID",
        "BRIGADE_COORDINATE",
        "BRIGADE_RUN_DIR",
        "BRIGADE_MODEL",
        "BRIGADE_REASONING",
        "BRIGADE_EXECUTION_MODE",
        "MODE",
    ]
    project.write_manifest([{"id": name.lower(), "prompt": f"env: {name}"} for name in names])
    assert project.doit().returncode == 0
    answers = {
        name: Path(project.receipt(f"{name.lower()}:agent:1")["run_dir"], "final.txt").read_text()
        for name in names
    }
    cell = project.receipt("brigade_cell_id:agent:1")
    assert answers["BRIGADE_CELL_ID"] == cell["cell_id"] + "\n"
    assert answers["BRIGADE_COORDINATE"] == "brigade_coordinate:agent:1\n"
    run_dir = project.receipt("brigade_run_dir:agent:1")["run_dir"]
    # the seat's own folder, beside brigade's run folder (which it cannot write)
    assert answers["BRIGADE_RUN_DIR"] == str(Path(run_dir).parent / "seat") + "\n"
    assert answers["BRIGADE_MODEL"] == "m-1\n"
    assert answers["BRIGADE_REASONING"] == "high\n"
    assert answers["BRIGADE_EXECUTION_MODE"] == "read-only\n"
    assert answers["MODE"] == "strict\n"
    run = json.loads(Path(run_dir, "run.json").read_text())
    assert run["cwd"] == str(project.workspace)
    assert run["workspace_access"] == "shared-checkout"
    assert run["read_only_enforcement"] == "none"


def test_exit_codes(project: Project) -> None:
    project.write_manifest(
        [{"id": "c", "prompt": "answer: x", "graders": [{"type": "exit_status"}]}]
    )
    assert project.doit().returncode == 0
    project.write_manifest(
        [
            {"id": "c", "prompt": "answer: x", "graders": [{"type": "exit_status"}]},
            {
                "id": "d",
                "prompt": "answer: y",
                "graders": [{"type": "exact_output", "expected": "z"}],
            },
        ]
    )
    assert project.doit().returncode == 1
    # a no-op re-run over a plan with a rejected cell still exits 1, serial and parallel
    launches = project.launches()
    assert project.doit().returncode == 1
    assert project.doit("jobs=4").returncode == 1
    assert project.run().returncode == 1
    assert project.run("-n", "4").returncode == 1
    assert project.launches() == launches


def test_bad_manifest_through_doit_exits_2_with_one_line(project: Project) -> None:
    project.write_manifest([{"id": "c", "prompt": "x", "trials": 0}])
    done = project.doit()
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "cases[0].trials" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not project.out.exists()


def test_unknown_doit_variable_exits_2(project: Project) -> None:
    project.write_manifest([{"id": "c", "prompt": "x"}])
    done = project.doit("retry_transiet=1")
    assert done.returncode == 2
    assert "unknown doit variable 'retry_transiet'" in done.stderr


def test_doit_list_shows_a_task_per_cell(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}], trials=2)
    listed = project.doit("list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert [n for n in names if n.startswith("cell:")] == [
        "cell:a:agent:1",
        "cell:a:agent:2",
        "cell:b:agent:1",
        "cell:b:agent:2",
    ]
    assert not project.out.exists()  # listing writes nothing


def test_doit_targets_plan_one_cell_or_the_summary(project: Project) -> None:
    project.write_manifest(
        [{"id": "a", "prompt": "answer: 1"}, {"id": "b", "prompt": "answer: 2"}], trials=2
    )
    planned = project.doit("plan")
    assert planned.returncode == 3, planned.stderr  # nothing has run yet
    assert (project.out / "plan.json").exists()
    assert project.launches() == 0
    one = project.doit("cell:b:agent:2")  # its exit code covers that cell alone
    assert one.returncode == 0, one.stderr
    assert project.launches() == 1
    assert set(project.receipts()) == {"b:agent:2"}
    everything = project.doit("summary")  # needs every cell first
    assert everything.returncode == 0, everything.stderr
    assert project.launches() == 4
    assert project.summary()["counts"]["unscored"] == 4
    again = project.doit("jobs=2")
    assert again.returncode == 0, again.stderr
    assert project.launches() == 4


def test_brigade_run_runs_without_doit(project: Project) -> None:
    """`brigade run` is the run engine called directly: doit is never imported, and the
    output directory gets no doit DB; plain doit over the same battery then finds every
    cell finished and runs none again."""
    project.write_manifest([{"id": "a", "prompt": "answer: hi"}, {"id": "b", "prompt": "x"}])
    script = (
        "import sys\n"
        "from brigade.front import cli\n"
        f"code = cli.main({project.run_args()!r})\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] == 'doit'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=project.env(),
        cwd=project.workspace,
        timeout=120,
    )
    assert done.stdout == "0 []\n", done.stderr
    assert not (project.out / ".doit.db").exists()
    assert set(project.states().values()) == {"unscored"}
    again = project.doit()
    assert again.returncode == 0, again.stderr
    assert project.launches() == 2
