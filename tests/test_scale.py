"""Behaviour that matters for large batteries: collected finished cells, cheap no-op regrades."""

from __future__ import annotations

import json

from conftest import Project
from hypothesis import given
from hypothesis import strategies as st

from brigade.core.identity import TrialHasher, canonical_json, cell_id, identity_payload, run_key
from brigade.front.tasks import FINISHED_TASK

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
SEAT = st.fixed_dictionaries(
    {
        "seat": TEXT,
        "cli": TEXT,
        "model": st.none() | TEXT,
        "reasoning": st.none() | TEXT,
        "transport": st.none() | TEXT,
        "transport_version": st.none() | TEXT,
        "env": st.none() | st.dictionaries(TEXT, TEXT, min_size=1, max_size=3),
        "codex_transport": st.sampled_from([None, "exec", "app-server"]),
    }
)
GRADERS = st.lists(
    st.dictionaries(TEXT, st.none() | st.booleans() | st.integers() | TEXT, max_size=3).map(
        lambda d: {"type": "regex_output", **d}
    ),
    max_size=3,
)


@given(
    case_id=TEXT,
    prompt=TEXT,
    seat=SEAT,
    graders=GRADERS,
    trials=st.integers(1, 4),
    mode=st.sampled_from(["read-only", "writable-worktree"]),
)
def test_trial_digests_equal_the_reference_hashing(case_id, prompt, seat, graders, trials, mode):
    hasher = TrialHasher(seat, mode)
    digests = hasher.digests(case_id, prompt, canonical_json(graders), trials)
    for trial, digest, trial_run_key in digests:
        payload = identity_payload(
            case_id=case_id,
            prompt=prompt,
            seat=seat,
            trial=trial,
            graders=graders,
            execution_mode=mode,
        )
        assert digest == cell_id(payload)
        assert trial_run_key == run_key(payload)


def test_one_task_behaviour_at_every_size(project: Project) -> None:
    # a run collects finished cells in one task at every size (fast no-op); `doit list`
    # shows every cell, and a cell named on the command line has its own task
    project.write_roster({"agent": {"cli": "exec:true"}})
    project.write_manifest([{"id": "c", "prompt": "x"}], trials=1001)
    assert project.doit("jobs=2").returncode == 0
    assert project.summary()["counts"]["unscored"] == 1001
    names = [line.split()[0] for line in project.doit("list").stdout.splitlines()]
    assert FINISHED_TASK not in names
    assert len([n for n in names if n.startswith("cell:c:agent:")]) == 1001
    named = project.doit("cell:c:agent:1001")
    assert named.returncode == 0, named.stderr
    # a crashed cell re-runs; the rest stay finished
    receipt = project.receipt("c:agent:7")
    receipt["state"] = "running"
    (project.cell_dir("c:agent:7") / "cell.json").write_text(json.dumps(receipt))
    assert project.doit().returncode == 0
    assert project.receipt("c:agent:7")["attempt"] == 2
    assert project.receipt("c:agent:8")["attempt"] == 1


def test_regrade_leaves_unchanged_receipts_alone(project: Project) -> None:
    project.write_manifest(
        [{"id": "c", "prompt": "answer: hi", "graders": [{"type": "exit_status"}]}]
    )
    project.doit()
    receipt_file = project.cell_dir("c:agent:1") / "cell.json"
    before = receipt_file.read_bytes()
    done = project.brigade("regrade", str(project.out))
    assert done.returncode == 0
    assert "0 changed state" in done.stdout
    assert receipt_file.read_bytes() == before


def test_an_untouched_resume_keeps_summary_and_still_checks_reports(project: Project) -> None:
    project.write_manifest([{"id": "c", "prompt": "answer: secret words here"}])
    project.doit()
    project.doit()  # the receipt index now matches every receipt
    summary = project.out / "summary.json"
    before = summary.stat().st_mtime_ns
    assert project.doit().returncode == 0
    assert summary.stat().st_mtime_ns == before  # nothing changed: the summary still holds
    # a touched report is rendered and checked again (the planted text goes)
    page = project.out / "report" / "index.html"
    page.write_text(page.read_text() + "answer: secret words here")
    assert project.doit().returncode == 0
    assert "secret words" not in page.read_text()
    # a file planted in the export is caught even on an untouched resume
    (project.out / "export" / "notes.txt").write_text("answer: secret words here")
    done = project.doit()
    assert done.returncode != 0
    assert "export/notes.txt" in done.stderr


def test_an_export_file_edited_in_place_is_exported_again(project: Project) -> None:
    project.write_manifest([{"id": c, "prompt": f"answer: secret {c}"} for c in ("a", "b")])
    project.doit()
    project.doit()  # untouched from here on: every exported file is vouched for by its stat
    cells = project.out / "export" / "cells"
    exported = cells / f"{project.receipt('a:agent:1')['cell_id']}.json"
    original = exported.read_bytes()
    doc = json.loads(original)
    doc["note"] = "answer: secret a"
    exported.write_text(json.dumps(doc))  # same name, same inode: only its stat changed
    assert project.doit().returncode == 0
    assert exported.read_bytes() == original  # projected again from the receipt
    # a file of a cell no longer in the plan goes, and is forgotten
    project.write_manifest([{"id": "a", "prompt": "answer: secret a"}])
    assert project.doit().returncode == 0
    assert sorted(p.name for p in cells.iterdir()) == [exported.name]
    state = json.loads(next((project.out / ".export-state").glob("*.json")).read_text())
    assert sorted(state["entries"]) == [
        ".brigade-export.json",
        "cells/" + exported.name,
        "plan.json",
        "source:plan.json",
        "summary.json",
    ]
