"""Stale cells: the per-run line only when the stale set changes; `brigade prune` lists them
and, with --yes, removes them, leaving summary.json, the export and the report consistent."""

from __future__ import annotations

import json

from conftest import Project
from test_progress import masked

STALE_LINE = (
    "brigade: 2 stale cells from an earlier plan (kept on disk, not counted; listed in "
    "plan.json stale_cells; brigade prune removes them)"
)


def test_prune_lists_and_removes_stale_cells(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "answer: 1"}, {"id": "b", "prompt": "x"}])
    assert project.doit().returncode == 0
    old = {cell["coordinate"]: cell["cell_id"] for cell in project.plan()["cells"]}
    project.write_manifest([{"id": "a", "prompt": "answer: 2"}, {"id": "b", "prompt": "y"}])
    edited = project.doit()
    assert edited.returncode == 0
    assert STALE_LINE in edited.stderr.splitlines()
    again = project.doit()  # the same stale cells: not said again
    assert STALE_LINE not in again.stderr.splitlines()
    assert sum(project.summary()["stale_counts"].values()) == 2

    listed = project.brigade("prune", str(project.out))
    assert listed.returncode == 0
    assert listed.stdout == (
        f"a:agent:1  unscored  stale  cells/{old['a:agent:1']}\n"
        f"b:agent:1  unscored  stale  cells/{old['b:agent:1']}\n"
        f"2 stale cell(s); brigade prune {project.out} --yes removes them\n"
    )
    assert (project.out / "cells" / old["a:agent:1"]).is_dir()  # listing removes nothing

    pruned = project.brigade("prune", str(project.out), "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines()[-1] == (
        "removed 2 stale cell(s); summary.json, the export and the report rewritten"
    )
    assert not (project.out / "cells" / old["a:agent:1"]).exists()
    assert project.plan()["stale_cells"] == []
    summary = project.summary()
    assert sum(summary["stale_counts"].values()) == 0
    exported = json.loads((project.out / "export" / "summary.json").read_text())
    assert exported["stale_counts"] == summary["stale_counts"]
    assert sorted(p.stem for p in (project.out / "export" / "cells").iterdir()) == sorted(
        cell["cell_id"] for cell in project.plan()["cells"]
    )
    assert "No stale cells." in (project.out / "report" / "index.html").read_text()
    assert project.brigade("prune", str(project.out)).stdout == "no stale cells\n"
    after = project.doit()
    assert after.returncode == 0
    assert masked(after.stderr).startswith("brigade: 2 cells: unscored 2 -> clean (exit 0)")


def test_prune_also_removes_cells_of_earlier_generations(project: Project) -> None:
    project.write_manifest([{"id": "a", "prompt": "1"}])
    assert project.doit().returncode == 0
    first = project.plan()["cells"][0]["cell_id"]
    for prompt in ("2", "3"):
        project.write_manifest([{"id": "a", "prompt": prompt}])
        assert project.doit().returncode == 0
    second = project.plan()["stale_cells"][0]["previous_cell_id"]
    listed = project.brigade("prune", str(project.out))
    assert listed.stdout.splitlines()[:2] == [
        f"a:agent:1  unscored  stale  cells/{second}",
        f"a:agent:1  unscored  not in the plan  cells/{first}",
    ]
    assert project.brigade("prune", str(project.out), "--yes").returncode == 0
    assert sorted(p.name for p in (project.out / "cells").iterdir()) == [
        project.plan()["cells"][0]["cell_id"]
    ]


def test_prune_removes_built_workspaces_no_cell_starts_from(project: Project) -> None:
    from test_workspaces import world_project

    world_project(project, setup=["echo first > built.txt"])
    assert project.doit().returncode == 0
    project.manifest.write_text(project.manifest.read_text().replace("first", "second"))
    assert project.doit().returncode == 0
    built = project.out / "workspaces"
    assert len(list(built.iterdir())) == 2 + 1  # case b's earlier build is still there
    leftover = built / ".0123abcd.killed"  # what a build that was killed left
    (leftover / "tree").mkdir(parents=True)
    (leftover / "tree" / "sub").mkdir()
    (leftover / "tree" / "sub").chmod(0o500)
    current = {p.name for p in built.iterdir()} - {leftover.name}

    listed = project.brigade("prune", str(project.out))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    stale_builds = [line for line in lines if line.startswith("workspace  not in the plan  ")]
    assert len(stale_builds) == 2
    assert f"workspace  not in the plan  workspaces/{leftover.name}" in stale_builds
    assert lines[-1] == (
        f"2 stale cell(s), 2 built workspace(s); brigade prune {project.out} --yes removes them"
    )
    pruned = project.brigade("prune", str(project.out), "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines()[-1].startswith(
        "removed 2 stale cell(s), 2 built workspace(s); "
    )
    assert {p.name for p in built.iterdir()} == current - {
        line.rsplit("/", 1)[1] for line in stale_builds
    }
    assert len(list(built.iterdir())) == 2
    launches = project.launches()
    again = project.doit()
    assert again.returncode == 0, again.stderr
    assert project.launches() == launches  # what the current cells start from was kept
    assert project.brigade("prune", str(project.out)).stdout == "no stale cells\n"
