"""End to end: cases with their own workspace (a repository at a commit, a folder) and their
setup, built once per case as the doit task `setup:<case>`, through the real `brigade run`
and the real doit."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import socket
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_CLI, Project, git

# a seat that says what it sees: the version file, how many commits its checkout has, and
# whether the setup's product is there; a writable run also edits the version file
SEAT = textwrap.dedent(
    """\
    import os, subprocess, sys
    sys.stdin.read()
    with open(os.environ["FAKE_AGENT_LOG"], "a") as log:
        log.write(os.environ["BRIGADE_COORDINATE"] + "\\n")
    count = subprocess.run(["git", "rev-list", "--count", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
    built = open("built.txt").read().strip() if os.path.exists("built.txt") else "-"
    version = open("version.txt").read().strip()
    with open("version.txt", "a") as handle:
        handle.write("edited\\n")
    print(version, count, built)
    """
)


def make_repo(folder: Path, versions: list[str]) -> list[str]:
    """A repository with a commit per version (version.txt); the commits' shas."""
    folder.mkdir()
    git(folder, "init", "-q")
    shas = []
    for version in versions:
        (folder / "version.txt").write_text(version + "\n")
        git(folder, "add", "-A")
        git(folder, "commit", "-qm", version)
        shas.append(git(folder, "rev-parse", "HEAD").strip())
    return shas


def calc_repo(folder: Path, more: dict[str, str] | None = None) -> Path:
    """A repository of one commit ("bug") whose calc.add subtracts, with `more` files."""
    folder.mkdir()
    git(folder, "init", "-q")
    files = {"calc.py": "def add(a, b):\n    return a - b\n", **(more or {})}
    for name, text in files.items():
        (folder / name).write_text(text)
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "bug")
    return folder


def world_project(project: Project, setup: Any = None, trials: int = 1) -> dict[str, list[str]]:
    """Two cases over two repositories: `a` at its head, `b` at its first commit (with
    `setup`, when given), two seats, `trials` each."""
    shas = {
        "a": make_repo(project.root / "repo-a", ["a1", "a2"]),
        "b": make_repo(project.root / "repo-b", ["b1", "b2"]),
    }
    seat = project.root / "seat.py"
    seat.write_text(SEAT)
    project.write_roster(
        {
            "one": {"cli": f"exec:{sys.executable} {seat}"},
            "two": {"cli": f"exec:{sys.executable} {seat}", "model": "m2"},
        }
    )
    case_b: dict[str, Any] = {
        "id": "b",
        "prompt": "look",
        "workspace": {"repo": "repo-b", "commit": shas["b"][0][:10]},
        "graders": [{"type": "regex_output", "pattern": "^b1 1 "}],
    }
    if setup is not None:
        case_b["setup"] = setup
    project.write_manifest(
        [
            {
                "id": "a",
                "prompt": "look",
                "workspace": {"repo": str(project.root / "repo-a")},
                "graders": [{"type": "regex_output", "pattern": "^a2 1 -$"}],
            },
            case_b,
        ],
        seats=("one", "two"),
        trials=trials,
        execution={"mode": "writable-worktree"},
    )
    return shas


def test_each_case_runs_in_its_own_repository_at_its_commit(project: Project) -> None:
    shas = world_project(project)
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.states() == {
        "a:one:1": "accepted",
        "a:two:1": "accepted",
        "b:one:1": "accepted",
        "b:two:1": "accepted",
    }
    # the plan names each case's repository and its resolved commit
    worlds = {cell["coordinate"]: cell["workspace"] for cell in project.plan()["cells"]}
    assert worlds["a:one:1"] == {"repo": str(project.root / "repo-a"), "commit": shas["a"][1]}
    assert worlds["b:two:1"] == {"repo": str(project.root / "repo-b"), "commit": shas["b"][0]}
    assert project.receipt("b:one:1")["workspace"] == worlds["b:one:1"]
    # the seat saw one commit (no history: no later fix to read) and edited its own copy
    assert (project.cell_dir("a:one:1") / "attempts/attempt-001/run/final.txt").read_text() == (
        "a2 1 -\n"
    )
    patch = project.cell_dir("b:two:1") / "attempts/attempt-001/run/changes.patch"
    assert "+edited" in patch.read_text()
    # the repositories are as they were
    assert (project.root / "repo-b/version.txt").read_text() == "b2\n"
    assert git(project.root / "repo-b", "status", "--porcelain") == ""
    # nothing changed: nothing runs
    launches = project.launches()
    again = project.run()
    assert again.returncode == 0, again.stderr
    assert project.launches() == launches
    # the report shows each case's repository and commit (its name, never its path)
    pages = "".join(p.read_text() for p in (project.out / "report").rglob("*.html"))
    assert f"repo repo-a @ {shas['a'][1][:12]}" in pages
    assert f"repo repo-b @ {shas['b'][0][:12]}" in pages
    # export: repository paths are projected like every other path
    exported = "".join(p.read_text() for p in (project.out / "export").rglob("*.json"))
    assert str(project.root) not in exported
    shown = {
        doc["coordinate"]: doc["workspace"]
        for path in (project.out / "export").rglob("*.json")
        if "coordinate" in (doc := json.loads(path.read_text()))
    }
    assert shown["a:one:1"] == {"repo": "<manifest-dir>/repo-a", "commit": shas["a"][1]}
    assert shown["b:two:1"] == {"repo": "<manifest-dir>/repo-b", "commit": shas["b"][0]}


def test_a_manifest_default_workspace_and_setup_serve_cases_that_name_none(
    project: Project,
) -> None:
    shas = {"a": make_repo(project.root / "repo-a", ["a1"])}
    shas["b"] = make_repo(project.root / "repo-b", ["b1"])
    project.write_manifest(
        [
            {"id": "inherits", "prompt": "answer: ok"},
            {"id": "own", "prompt": "answer: ok", "workspace": {"repo": "repo-b"}},
        ],
        workspace={"repo": "repo-a"},
        setup=["echo built > built.txt"],
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    worlds = {cell["case_id"]: cell["workspace"] for cell in project.plan()["cells"]}
    assert {case: world["commit"] for case, world in worlds.items()} == {
        "inherits": shas["a"][0],
        "own": shas["b"][0],
    }
    # the default setup serves both (a case's own workspace keeps the default setup)
    assert worlds["inherits"]["setup"] == worlds["own"]["setup"]
    assert len(list((project.out / "workspaces").glob("*/tree/built.txt"))) == 2


def test_cases_without_a_workspace_keep_their_ids(project: Project) -> None:
    project.write_manifest([{"id": "plain", "prompt": "answer: ok"}])
    assert project.run().returncode == 0
    before = project.plan()["cells"][0]
    make_repo(project.root / "repo", ["r1"])
    project.write_manifest(
        [
            {"id": "plain", "prompt": "answer: ok"},
            {"id": "own", "prompt": "answer: ok", "workspace": {"repo": "repo"}},
        ]
    )
    launches = project.launches()
    assert project.run().returncode == 0
    cells = {cell["coordinate"]: cell for cell in project.plan()["cells"]}
    assert cells["plain:agent:1"] == before
    assert "workspace" not in before
    assert project.launches() == launches + 1


def test_a_moved_commit_makes_the_case_stale_and_only_it_runs(project: Project) -> None:
    shas = world_project(project)
    assert project.run().returncode == 0
    launches = project.launches()
    git(project.root / "repo-a", "commit", "-q", "--allow-empty", "-m", "a3")
    done = project.run()
    assert "2 stale cells" in done.stderr
    assert project.launches() == launches + 2  # case a's two cells only
    worlds = {cell["coordinate"]: cell["workspace"] for cell in project.plan()["cells"]}
    assert worlds["a:one:1"]["commit"] != shas["a"][1]


@pytest.mark.parametrize(
    ("workspace", "message"),
    [
        ({"repo": "nowhere"}, "cases[0].workspace.repo: 'nowhere' does not exist (no such folder)"),
        (
            {"repo": "repo", "commit": "nosuch"},
            "cases[0].workspace.commit: 'nosuch' is not a commit",
        ),
        (
            {"repo": "repo", "commit": "--all"},
            "cases[0].workspace.commit: '--all' is not a revision",
        ),
        ({"repo": "plain"}, "cases[0].workspace.repo: {root}/plain is not a git repository"),
        ({"dir": "../outside"}, "cases[0].workspace.dir: '../outside' is outside the manifest's"),
        ({"dir": "{root}/plain"}, "cases[0].workspace.dir: '{root}/plain' is outside the manifest"),
        ({"dir": "link"}, "cases[0].workspace.dir: 'link' is outside the manifest's folder"),
    ],
)
def test_a_workspace_that_cannot_be_is_refused_before_anything_runs(
    project: Project, workspace: dict[str, str], message: str
) -> None:
    make_repo(project.root / "repo", ["r1"])
    (project.root / "plain").mkdir()
    (project.root.parent / "outside").mkdir(exist_ok=True)
    (project.root / "link").symlink_to(project.root.parent / "outside")
    workspace = {key: value.format(root=project.root) for key, value in workspace.items()}
    project.write_manifest([{"id": "c", "prompt": "answer: ok", "workspace": workspace}])
    for done in (project.run(), project.doit()):
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert message.format(root=project.root) in lines[0]
        assert not project.out.exists()
    assert project.launches() == 0


def test_a_folder_workspace_is_copied_for_each_attempt(project: Project) -> None:
    world = project.root / "world"
    world.mkdir()
    (world / "version.txt").write_text("d1\n")
    seat = project.root / "seat.py"
    seat.write_text(SEAT)
    project.write_roster({"one": {"cli": f"exec:{sys.executable} {seat}"}})
    project.write_manifest(
        [
            {
                "id": "d",
                "prompt": "look",
                "workspace": {"dir": "world"},
                "graders": [{"type": "regex_output", "pattern": "^d1 1 -$"}],
            }
        ],
        seats=("one",),
        trials=2,
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.states() == {"d:one:1": "accepted", "d:one:2": "accepted"}
    assert (world / "version.txt").read_text() == "d1\n"
    digest = project.plan()["cells"][0]["workspace"]["digest"]
    pages = "".join(p.read_text() for p in (project.out / "report").rglob("*.html"))
    assert f"dir world @ {digest.removeprefix('sha256:')[:12]}" in pages
    assert project.run().returncode == 0 and project.launches() == 2  # unchanged: nothing
    # the folder edited: a new digest, a new build, both cells again (the old ones stale)
    (world / "version.txt").write_text("d2\n")
    edited = project.run()
    assert edited.returncode == 1, edited.stderr  # the grader still wants d1
    assert "2 stale cells" in edited.stderr
    assert project.launches() == 4
    assert project.plan()["cells"][0]["workspace"]["digest"] != digest
    assert len(list((project.out / "workspaces").iterdir())) == 2


def _setup_runs(project: Project) -> dict[str, str]:
    """Each built workspace's setup log, by folder."""
    return {
        folder.name: (folder / "setup.log").read_text()
        for folder in (project.out / "workspaces").iterdir()
        if (folder / "setup.log").exists()
    }


def test_setup_is_a_doit_task_built_once_and_rebuilt_only_when_it_changes(
    project: Project,
) -> None:
    world_project(project, setup=["echo first > built.txt"])
    manifest = project.manifest.read_text()
    project.manifest.write_text(manifest.replace("'^b1 1 '", "'^b1 1 first$'"))
    done = project.doit()
    assert done.returncode == 0, done.stderr
    assert project.launches() == 4
    logs = _setup_runs(project)
    assert len(logs) == 1
    state = next((project.out / "workspaces").glob("*/workspace.json"))
    stamp = state.stat().st_mtime_ns
    # nothing changed: no setup and no seat runs
    again = project.doit()
    assert again.returncode == 0, again.stderr
    assert project.launches() == 4
    assert state.stat().st_mtime_ns == stamp
    # the setup edited: only its case's setup and cells run again
    project.manifest.write_text(
        project.manifest.read_text()
        .replace("echo first", "echo second")
        .replace("'^b1 1 first$'", "'^b1 1 second$'")
    )
    edited = project.doit()
    assert edited.returncode == 0, edited.stderr
    assert project.launches() == 6
    assert sorted(project.log.read_text().split()[4:]) == ["b:one:1", "b:two:1"]
    assert len(_setup_runs(project)) == 2
    listed = project.doit("list", "--all")
    assert "setup:b" in listed.stdout and "setup:a" in listed.stdout


def test_a_failing_setup_is_an_apparatus_fault_of_every_cell_of_its_case(
    project: Project,
) -> None:
    world_project(project, setup=["echo cannot install >&2; exit 4"])
    for done in (project.doit(), project.run()):
        assert done.returncode == 3, done.stderr
    assert project.launches() == 2  # case a's seats only
    for coordinate in ("b:one:1", "b:two:1"):
        receipt = project.receipt(coordinate)
        assert receipt["state"] == "adapter_error"
        assert receipt["fault"]["kind"] == "setup_failed"
        log = receipt["failure_detail"].split("(log: ")[1].rstrip(")")
        assert "cannot install" in (project.out / log).read_text()
        # the log's end is the cell's own stderr, which show, the report and the viewer show
        attempt = project.receipt(coordinate)["attempt"]
        run = project.cell_dir(coordinate) / "attempts" / f"attempt-{attempt:03d}" / "run"
        stderr = run / "stderr.log"
        lines = stderr.read_text().splitlines()
        assert lines[1:] == [
            "brigade: the setup's log ends:",
            *(project.out / log).read_text().splitlines(),
        ]
        assert lines[-1] == "cannot install"
        shown = project.brigade("show", str(project.out), coordinate)
        assert "cannot install" in shown.stdout, shown.stdout
        page = (project.out / "report" / "index.html").read_text()
        assert "setup_failed" in page
    summary = project.summary()
    assert summary["measurement_failures"] == 2
    # --retry-transient runs the setup again (and its cells)
    project.manifest.write_text(project.manifest.read_text())
    retried = project.run("--retry-transient")
    assert retried.returncode == 3
    failed = [p.parent for p in (project.out / "workspaces").glob("*/setup.log")]
    assert [json.loads((f / "workspace.json").read_text())["ok"] for f in failed] == [False]
    assert project.launches() == 2


def test_one_setup_serves_every_seat_and_trial_and_an_edited_input_rebuilds_only_its_case(
    project: Project,
) -> None:
    count = project.root / "setups.log"  # each setup run adds a line (outside any sandbox)
    (project.root / "catalogue.csv").write_text("one\n")
    setup = {"commands": ['echo b >> "$SETUP_COUNT"'], "inputs": ["catalogue.csv"]}
    world_project(project, setup=setup, trials=2)
    done = project.run("--sandbox", "off", SETUP_COUNT=str(count))
    assert done.returncode == 0, done.stderr
    assert count.read_text() == "b\n"  # once, for case b's two seats x two trials
    assert project.launches() == 8
    # nothing changed: nothing runs, no setup either
    again = project.run("--sandbox", "off", SETUP_COUNT=str(count))
    assert again.returncode == 0, again.stderr
    assert (count.read_text(), project.launches()) == ("b\n", 8)
    # an input of the setup edited: its case's setup and four cells run again, the rest not
    (project.root / "catalogue.csv").write_text("two\n")
    edited = project.run("--sandbox", "off", SETUP_COUNT=str(count))
    assert edited.returncode == 0, edited.stderr
    assert "4 stale cells" in edited.stderr
    assert count.read_text() == "b\nb\n"
    assert sorted(project.log.read_text().split()[8:]) == [
        "b:one:1",
        "b:one:2",
        "b:two:1",
        "b:two:2",
    ]


def test_a_regrade_builds_a_removed_workspace_again_at_the_cases_commit(
    project: Project,
) -> None:
    world_project(project, setup=["echo built > built.txt"])
    # a command grader over each writable run's changes, at its case's built commit
    project.manifest.write_text(
        project.manifest.read_text().replace(
            "- type: regex_output\n    pattern: ^a2 1 -$",
            "- type: command\n    command: grep -qx a2 version.txt && grep -q edited version.txt",
        )
    )
    assert project.run().returncode == 0
    assert project.states()["a:one:1"] == "accepted"
    # the built trees are derived data: gone, a regrade builds them again (the same commits)
    heads = sorted(p.read_text() for p in (project.out / "workspaces").glob("*/workspace.json"))
    shutil.rmtree(project.out / "workspaces")
    regraded = project.brigade("regrade", str(project.out))
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert regraded.stdout.startswith("regraded 4 cell(s) from stored output (0 changed state)")
    assert set(project.states().values()) == {"accepted"}
    assert sorted(p.read_text() for p in (project.out / "workspaces").glob("*/workspace.json")) == (
        heads
    )
    assert project.launches() == 4
    # gone again, and the manifest's setup is no longer the one it was built with: the
    # regrade is refused before any cell is graded (never graded against another build)
    shutil.rmtree(project.out / "workspaces")
    project.manifest.write_text(project.manifest.read_text().replace("echo built", "echo other"))
    receipts = project.receipts()
    refused = project.brigade("regrade", str(project.out))
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "b:one:1: its case's built workspace (workspaces/" in refused.stderr
    assert "no longer has the setup it was built with" in refused.stderr
    assert project.receipts() == receipts


def test_a_setup_past_its_time_limit_fails_its_case(project: Project) -> None:
    world_project(project, setup={"commands": ["sleep 60"], "timeout_seconds": 0.5})
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert project.launches() == 2  # case a's seats only
    receipt = project.receipt("b:one:1")
    assert (receipt["state"], receipt["fault"]["kind"]) == ("adapter_error", "setup_failed")
    assert receipt["failure_detail"].startswith("setup: setup timed out (its limit is 0.5 s)")


# -- tests the agent never sees -----------------------------------------------------------

from brigade import fs  # noqa: E402
from brigade.run import sandbox, workspaces  # noqa: E402

AVAILABLE = sandbox.probe()
needs_bwrap = pytest.mark.skipif(not AVAILABLE.ok, reason=f"no sandbox: {AVAILABLE.detail}")

# a seat that tries to read the hidden tests, then fixes calc.py
PEEK = textwrap.dedent(
    """\
    import sys
    sys.stdin.read()
    seen = []
    for path in sys.argv[1:]:
        try:
            seen.append("read" if "SECRET" in open(path).read() else "blank")
        except OSError:
            seen.append("unreadable")
    with open("calc.py", "w") as handle:
        handle.write("def add(a, b):\\n    return a + b\\n")
    print(" ".join(seen))
    """
)
HIDDEN_CHECK = (
    "# SECRET check\nimport sys\nsys.path.insert(0, '')\nfrom calc import add\n"
    "assert add(2, 3) == 5\n"
)
TEST_PATCH = textwrap.dedent(
    """\
    diff --git a/test_new.py b/test_new.py
    new file mode 100644
    --- /dev/null
    +++ b/test_new.py
    @@ -0,0 +1,3 @@
    +# SECRET test
    +from calc import add
    +assert add(4, 5) == 9
    """
)


@needs_bwrap
def test_tests_named_by_graders_are_hidden_from_the_seat(project: Project) -> None:
    repo = calc_repo(project.root / "repo")
    hidden = project.root / "hidden"
    hidden.mkdir()
    (hidden / "check.py").write_text(HIDDEN_CHECK)
    (hidden / "test.patch").write_text(TEST_PATCH)
    seat = project.root / "peek.py"
    seat.write_text(PEEK)
    peek = f"exec:{sys.executable} {seat} {hidden}/check.py {hidden}/test.patch"
    project.write_roster({"agent": {"cli": peek}}, sandbox="required")
    python = "{python}"
    project.write_manifest(
        [
            {
                "id": "fix",
                "prompt": "fix add",
                "workspace": {"repo": "repo"},
                "graders": [
                    {"type": "command", "command": [python, "{manifest_dir}/hidden/check.py"]},
                    {
                        "type": "command",
                        "command": [python, "test_new.py"],
                        "test_patch_file": "hidden/test.patch",
                    },
                ],
            }
        ],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    receipt = project.receipt("fix:agent:1")
    assert receipt["state"] == "accepted", receipt
    run = project.cell_dir("fix:agent:1") / "attempts/attempt-001/run"
    # the seat could not read either file; the graders ran them over its changes
    seen = (run / "final.txt").read_text().split()
    assert len(seen) == 2 and set(seen) <= {"blank", "unreadable"}, seen
    assert "test_new.py" not in (run / "changes.patch").read_text()
    # the test patch never reached the case's repository
    assert not (repo / "test_new.py").exists()


@needs_bwrap
def test_an_inline_test_patch_is_hidden_with_the_manifest_that_holds_it(
    project: Project,
) -> None:
    calc_repo(project.root / "repo")
    seat = project.root / "peek.py"
    seat.write_text(PEEK)
    # the seat looks for the hidden test where it is written: in the manifest itself
    peek = f"exec:{sys.executable} {seat} {project.manifest}"
    project.write_roster({"agent": {"cli": peek}}, sandbox="required")
    graded = {"type": "command", "command": ["{python}", "test_new.py"], "test_patch": TEST_PATCH}
    project.write_manifest(
        [{"id": "fix", "prompt": "fix add", "workspace": {"repo": "repo"}, "graders": [graded]}],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.states() == {"fix:agent:1": "accepted"}
    run = project.cell_dir("fix:agent:1") / "attempts/attempt-001/run"
    assert (run / "final.txt").read_text().split()[0] in ("blank", "unreadable")


@needs_bwrap
def test_no_seat_reads_the_hidden_tests_of_another_case(project: Project) -> None:
    calc_repo(project.root / "repo")
    hidden = project.root / "hidden"
    hidden.mkdir()
    for name in ("a", "b"):
        (hidden / f"{name}.patch").write_text(TEST_PATCH)
    seat = project.root / "peek.py"
    seat.write_text(PEEK)
    # each case's seat looks for the other case's tests (a state folder its later cells
    # read would carry them there)
    peek = f"exec:{sys.executable} {seat} {hidden}/a.patch {hidden}/b.patch"
    project.write_roster({"agent": {"cli": peek}}, sandbox="required")
    project.write_manifest(
        [
            {
                "id": name,
                "prompt": "fix add",
                "workspace": {"repo": "repo"},
                "graders": [
                    {
                        "type": "command",
                        "command": ["{python}", "test_new.py"],
                        "test_patch_file": f"hidden/{name}.patch",
                    }
                ],
            }
            for name in ("a", "b")
        ],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    for coordinate in ("a:agent:1", "b:agent:1"):
        run = project.cell_dir(coordinate) / "attempts/attempt-001/run"
        seen = (run / "final.txt").read_text().split()
        assert len(seen) == 2 and set(seen) <= {"blank", "unreadable"}, (coordinate, seen)


def test_an_inline_test_patch_grades_and_one_that_does_not_apply_is_a_grader_error(
    project: Project,
) -> None:
    repo = calc_repo(project.root / "repo")
    fix = "write: calc.py=def add(a, b): return a + b\nanswer: fixed"
    python = "{python}"
    graded = {"type": "command", "command": [python, "test_new.py"], "test_patch": TEST_PATCH}
    stale = TEST_PATCH.replace("new file mode 100644\n--- /dev/null", "--- a/test_new.py")
    own = {"repo": "repo"}
    project.write_manifest(
        [
            {"id": "fix", "prompt": fix, "workspace": own, "graders": [graded]},
            {"id": "lazy", "prompt": "answer: no", "workspace": own, "graders": [graded]},
            {
                "id": "stale",
                "prompt": fix,
                "workspace": own,
                "graders": [{**graded, "test_patch": stale}],
            },
        ],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 3, done.stderr
    assert project.states() == {
        "fix:agent:1": "accepted",
        "lazy:agent:1": "rejected",
        "stale:agent:1": "grader_error",
    }
    result = project.receipt("stale:agent:1")["graders"][0]
    assert "the test patch does not apply over the seat's changes" in result["detail"], result
    # the test the patch adds never reached the seat's changes nor the repository
    run = project.cell_dir("fix:agent:1") / "attempts/attempt-001/run"
    assert "test_new.py" not in (run / "changes.patch").read_text()
    assert sorted(p.name for p in repo.iterdir()) == [".git", "calc.py"]


# -- the setup's network switch ----------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that says hello to every connection; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.sendall(b"hello\n")
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@needs_bwrap
def test_setup_has_its_own_network_switch_and_the_seat_keeps_its_own(
    project: Project, listener: int
) -> None:
    world = project.root / "world"
    world.mkdir()
    (world / "version.txt").write_text("d1\n")
    # the setup records what a connection to the listener got (it succeeds either way)
    fetch = (
        "import socket\n"
        "try:\n"
        f"    got = socket.create_connection(('127.0.0.1', {listener}), 10).recv(6).decode()\n"
        "except OSError as exc:\n"
        "    got = 'refused\\n'\n"
        "open('net.txt', 'w').write(got)\n"
    )
    project.log.touch()
    seat = {"cli": FAKE_CLI, "network": False, "sandbox": {"writable": [str(project.log)]}}
    project.write_roster({"agent": seat}, sandbox="auto")
    prompt = f"connect: 127.0.0.1:{listener}\nanswer: end"
    project.write_manifest(
        [
            {
                "id": "online",
                "prompt": prompt,
                "workspace": {"dir": "world"},
                "setup": [[sys.executable, "-c", fetch]],
            },
            {
                "id": "offline",
                "prompt": prompt,
                "workspace": {"dir": "world"},
                # (other commands: a setup's network switch is not part of what it builds)
                "setup": {"commands": [[sys.executable, "-c", fetch + "#\n"]], "network": False},
            },
        ]
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    built = {
        cell["case_id"]: workspaces.tree(project.out, _world(cell)) / "net.txt"
        for cell in project.plan()["cells"]
    }
    # the setup's network is on by default, off when it says so
    assert {case: path.read_text() for case, path in built.items()} == {
        "online": "hello\n",
        "offline": "refused\n",
    }
    # the seat's own switch holds whatever its case's setup had
    for coordinate in ("online:agent:1", "offline:agent:1"):
        final = (project.cell_dir(coordinate) / "attempts/attempt-001/run/final.txt").read_text()
        assert final == f"connect 127.0.0.1:{listener}: Connection refused\nend\n"


def _world(cell: dict[str, Any]) -> dict[str, Any]:
    """A plan cell's world as its identity has it (what names its built folder)."""
    recorded = dict(cell["workspace"])
    recorded.pop("repo", None)
    recorded.pop("dir", None)
    return recorded


# -- read-only runs ----------------------------------------------------------------------

# a read-only seat that says where it ran, what it sees and whether it could write there
LOOK = textwrap.dedent(
    """\
    import os, sys
    sys.stdin.read()
    try:
        with open(os.environ["FAKE_AGENT_LOG"], "a") as log:
            log.write(os.environ["BRIGADE_COORDINATE"] + "\\n")
    except OSError:
        pass  # outside the sandbox's writable folders
    seen = "planted" if os.path.exists("planted.txt") else "clean"
    try:
        with open("planted.txt", "w") as handle:
            handle.write("x")
        wrote = "wrote"
    except OSError:
        wrote = "refused"
    print(open("version.txt").read().strip(), seen, wrote)
    print(os.getcwd())
    """
)


def read_only_project(project: Project, workspace: dict[str, str], sandbox: str) -> None:
    """A read-only battery of one case over its own workspace, two trials; its command grader
    fails when it sees what the seat (or an earlier grading) wrote, and writes a file itself."""
    make_repo(project.root / "repo", ["r1", "r2"])
    seat = project.root / "look.py"
    seat.write_text(LOOK)
    project.write_roster({"one": {"cli": f"exec:{sys.executable} {seat}"}}, sandbox=sandbox)
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": "look",
                "workspace": workspace,
                "graders": [
                    {"type": "regex_output", "pattern": " clean "},
                    {
                        "type": "command",
                        "command": "test ! -e planted.txt && test ! -e graded.txt && "
                        "touch graded.txt",
                    },
                ],
            }
        ],
        seats=("one",),
        trials=2,
        execution={"mode": "read-only"},
    )


def _read_only_runs(project: Project) -> list[list[str]]:
    runs = []
    for trial in (1, 2):
        run = project.cell_dir(f"c:one:{trial}") / "attempts/attempt-001/run"
        assert json.loads((run / "run.json").read_text())["workspace_access"] == "read-only-copy"
        runs.append((run / "final.txt").read_text().split())
    return runs


def test_a_read_only_run_sees_its_cases_repository_fresh_for_each_attempt(
    project: Project,
) -> None:
    read_only_project(project, {"repo": "repo", "commit": "HEAD~1"}, sandbox="off")
    done = project.run("-n", "1")
    assert done.returncode == 0, done.stderr
    assert project.states() == {"c:one:1": "accepted", "c:one:2": "accepted"}
    runs = _read_only_runs(project)
    # the case's repository at its commit (not the run's --workspace), as built: what the
    # other attempt (and its grading) wrote is not there
    assert [run[:2] for run in runs] == [["r1", "clean"], ["r1", "clean"]]
    tree = next((project.out / "workspaces").glob("*/tree"))
    assert {run[3] for run in runs}.isdisjoint({str(tree), str(project.workspace)})
    assert not (tree / "planted.txt").exists() and not (tree / "graded.txt").exists()
    assert not (project.root / "repo/planted.txt").exists()


@needs_bwrap
def test_a_read_only_run_in_the_sandbox_cannot_write_its_cases_folder(project: Project) -> None:
    world = project.root / "world"
    world.mkdir()
    (world / "version.txt").write_text("d1\n")
    read_only_project(project, {"dir": "world"}, sandbox="required")
    done = project.run("-n", "1")
    assert done.returncode == 0, done.stderr
    assert project.states() == {"c:one:1": "accepted", "c:one:2": "accepted"}
    assert [run[:3] for run in _read_only_runs(project)] == [["d1", "clean", "refused"]] * 2
    assert sorted(p.name for p in world.iterdir()) == ["version.txt"]


# -- a built tree shipped to another machine ---------------------------------------------


def test_a_built_tree_travels_as_a_bundle_checked_by_its_digest(project: Project) -> None:
    from brigade.run import workspaces

    world_project(project, setup=["echo built > built.txt"])
    assert project.run().returncode == 0
    world = next(cell["workspace"] for cell in project.plan()["cells"] if cell["case_id"] == "b")
    world = {"commit": world["commit"], "setup": world["setup"]}
    state = workspaces.folder(project.out, world) / "workspace.json"
    recorded = json.loads(state.read_text())
    shipment, data = workspaces.bundle(project.out, world, recorded["head"])
    assert shipment.key == state.parent.name
    cache = project.root / "worker-cache"
    # bytes that are not the bundle's (one changed, or none) are refused; bytes that match
    # a digest but are no bundle fail in git; nothing is left behind either way
    for bad in (data[:-1] + bytes([data[-1] ^ 1]), b""):
        with pytest.raises(OSError, match="arrived with digest"):
            workspaces.unbundle(cache, shipment, bad)
        assert list(cache.glob("*")) == []
    garbage = b"not a bundle"
    forged = dataclasses.replace(shipment, digest="sha256:" + hashlib.sha256(garbage).hexdigest())
    with pytest.raises(OSError, match="git bundle failed"):
        workspaces.unbundle(cache, forged, garbage)
    assert list(cache.glob("*")) == []
    copy = workspaces.unbundle(cache, shipment, data)
    assert copy == cache / shipment.name
    assert git(copy, "rev-parse", "HEAD").strip() == recorded["head"]
    assert (copy / "built.txt").read_text() == "built\n"
    assert (copy / "version.txt").read_text() == "b1\n"
    assert git(copy, "rev-list", "--count", "HEAD").strip() == "1"
    # made once: a second seat run on this machine uses the copy as it is
    marker = copy / ".git" / "made-once"
    marker.write_text("")
    assert workspaces.unbundle(cache, shipment, b"") == copy
    assert marker.exists()
    assert sorted(p.name for p in cache.iterdir()) == [shipment.name]
    # a tree that is not at the commit it should be is not bundled
    with pytest.raises(OSError, match="is not at commit"):
        workspaces.bundle(project.out, world, "0" * 40)


def test_a_setup_log_is_read_from_its_end_never_through_a_link(tmp_path: Path) -> None:
    world = {"workspace": {"kind": "dir", "digest": "sha256:0"}, "setup": None}
    where = workspaces.folder(tmp_path, world)
    where.mkdir(parents=True)
    log = where / workspaces.SETUP_LOG
    log.write_bytes(b"x" * 100_000 + b"the end\n")
    assert workspaces.log_tail(tmp_path, world, limit=8) == b"the end\n"
    assert len(workspaces.log_tail(tmp_path, world)) == workspaces.LOG_TAIL
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    log.unlink()
    log.symlink_to(secret)
    assert workspaces.log_tail(tmp_path, world) == b""
    log.unlink()
    os.mkfifo(log)  # a FIFO is never opened for reading, so nothing waits on a writer
    assert workspaces.log_tail(tmp_path, world) == b""
    log.unlink()
    assert workspaces.log_tail(tmp_path, world) == b""


# -- a hostile setup ---------------------------------------------------------------------

# a setup that leaves a `.git` of its own in its product: a file naming another
# repository's git folder, or a repository whose configuration names a program to sign
# commits with (a script in the tree that leaves a mark where the sandbox cannot write)
PLANT_GITDIR = "open('.git', 'w').write('gitdir: {victim}/.git\\n'); open('p.txt', 'w').write('p')"
PLANT_SIGNER = textwrap.dedent(
    """\
    import os, subprocess
    subprocess.run(["git", "init", "-q"], check=True)
    with open("sign.sh", "w") as handle:
        handle.write("#!/bin/sh\\ntouch {mark}\\ncat >/dev/null\\nexit 1\\n")
    os.chmod("sign.sh", 0o755)
    signer = "[commit]\\n\\tgpgSign = true\\n[gpg]\\n\\tprogram = %s/sign.sh\\n"
    with open(".git/config", "a") as handle:
        handle.write(signer % os.getcwd())
    """
)


@needs_bwrap
def test_a_git_folder_the_setup_leaves_is_never_brigades(project: Project) -> None:
    make_repo(project.root / "repo", ["r1"])
    victim = project.root / "victim"
    make_repo(victim, ["v1"])
    before = git(victim, "rev-parse", "HEAD")
    mark = project.root / "signed-outside"
    project.log.touch()
    seat = {"cli": FAKE_CLI, "sandbox": {"writable": [str(project.log)]}}
    project.write_roster({"agent": seat}, sandbox="required")
    project.write_manifest(
        [
            {
                "id": case,
                "prompt": "answer: ok",
                "workspace": {"repo": "repo"},
                "setup": [[sys.executable, "-c", script]],
                "graders": [{"type": "command", "command": "test -f version.txt"}],
            }
            for case, script in (
                ("gitdir", PLANT_GITDIR.format(victim=victim)),
                ("signer", PLANT_SIGNER.format(mark=mark)),
            )
        ],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.states() == {"gitdir:agent:1": "accepted", "signer:agent:1": "accepted"}
    # no commit was made in the repository the setup named, no program it named ran
    assert git(victim, "rev-parse", "HEAD") == before
    assert git(victim, "status", "--porcelain") == ""
    assert not mark.exists()
    # each built tree is brigade's repository of one commit, holding what the setup made
    for tree in (project.out / "workspaces").glob("*/tree"):
        assert (tree / ".git").is_dir()
        assert git(tree, "rev-list", "--count", "HEAD").strip() == "1"
        log = (tree.parent / "setup.log").read_text()
        assert "removed the .git the setup left" in log, log
    assert len(list((project.out / "workspaces").glob("*/tree"))) == 2


# a read-only seat that gives itself the write bits back, then writes its copy and the
# copy's git folder
CHMOD_AND_WRITE = textwrap.dedent(
    """\
    import os, subprocess, sys
    sys.stdin.read()
    said = []
    git_dir = subprocess.run(
        ["git", "rev-parse", "--absolute-git-dir"], capture_output=True, text=True
    ).stdout.strip()
    for path in (".", "version.txt", git_dir, os.path.join(git_dir, "HEAD")):
        try:
            os.chmod(path, 0o755)
        except OSError:
            pass
    for path in ("version.txt", "new.txt", os.path.join(git_dir, "planted")):
        try:
            with open(path, "a") as handle:
                handle.write("x")
            said.append("wrote")
        except OSError:
            said.append("refused")
    print(" ".join(said), subprocess.run(["git", "rev-list", "--count", "HEAD"],
          capture_output=True, text=True).stdout.strip())
    """
)


@needs_bwrap
def test_a_read_only_copy_stays_read_only_in_the_sandbox_whatever_its_modes(
    project: Project,
) -> None:
    make_repo(project.root / "repo", ["r1"])
    seat = project.root / "chmod.py"
    seat.write_text(CHMOD_AND_WRITE)
    project.write_roster({"one": {"cli": f"exec:{sys.executable} {seat}"}}, sandbox="required")
    project.write_manifest(
        [{"id": "c", "prompt": "look", "workspace": {"repo": "repo"}}],
        seats=("one",),
        execution={"mode": "read-only"},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    run = project.cell_dir("c:one:1") / "attempts/attempt-001/run"
    # nothing written, and git still reads the copy's one commit
    assert (run / "final.txt").read_text().split() == ["refused"] * 3 + ["1"]


# a seat that looks for its case's later history in the repository the case names (found
# by searching the disk; here the prompt names it)
HISTORY = textwrap.dedent(
    """\
    import os, subprocess, sys
    repo = sys.stdin.read().strip()
    said = []
    for name in ("version.txt", ".git/HEAD"):
        try:
            said.append(open(os.path.join(repo, name)).read().strip().replace(" ", "_"))
        except OSError:
            said.append("unreadable")
    log = subprocess.run(["git", "-C", repo, "log", "--all", "--format=%s"],
                         capture_output=True, text=True).stdout.split()
    print(" ".join(said), ",".join(log) or "no-history")
    """
)


@needs_bwrap
@pytest.mark.parametrize("mode", ["writable-worktree", "read-only"])
def test_the_cases_own_repository_is_hidden_from_its_seat(project: Project, mode: str) -> None:
    make_repo(project.root / "repo", ["r1", "r2-the-fix"])
    seat = project.root / "history.py"
    seat.write_text(HISTORY)
    project.write_roster({"one": {"cli": f"exec:{sys.executable} {seat}"}}, sandbox="required")
    # the tests the seat's code runs under look for it too (and would take the fix)
    grader = {
        "type": "command",
        "command": f"cd {project.root}/repo; test ! -e version.txt && test ! -e .git",
    }
    project.write_manifest(
        [
            {
                "id": "c",
                "prompt": str(project.root / "repo"),
                "workspace": {"repo": "repo", "commit": "HEAD~1"},
                "graders": [grader],
            }
        ],
        seats=("one",),
        execution={"mode": mode},
    )
    done = project.run()
    assert done.returncode == 0, done.stderr
    assert project.states() == {"c:one:1": "accepted"}
    run = project.cell_dir("c:one:1") / "attempts/attempt-001/run"
    assert (run / "final.txt").read_text().split() == ["unreadable", "unreadable", "no-history"]


def test_a_setup_that_prints_without_end_leaves_a_bounded_log(project: Project) -> None:
    # a sparse stdout costs the setup nothing (make it 16 GiB): read whole, it would end
    # brigade, and its log would be as large, on disk for real
    grow = "import os; os.lseek(1, 256 << 20, 0); os.write(1, b'end\\n')"
    world_project(project, setup=[[sys.executable, "-c", grow]])
    done = project.run()
    assert done.returncode == 0, done.stderr
    log = next((project.out / "workspaces").glob("*/setup.log"))
    assert log.stat().st_size < 4 << 20
    # its end is kept (where a failing command says why)
    text = log.read_text(errors="replace")
    assert "bytes before not kept" in text and text.endswith("end\n")


def test_a_seat_that_breaks_the_test_patch_is_rejected_not_a_grader_error(
    project: Project,
) -> None:
    calc_repo(
        project.root / "repo", {"test_calc.py": "from calc import add\nassert add(1, 1) == 2\n"}
    )
    extends = textwrap.dedent(
        """\
        diff --git a/test_calc.py b/test_calc.py
        --- a/test_calc.py
        +++ b/test_calc.py
        @@ -1,2 +1,3 @@
         from calc import add
         assert add(1, 1) == 2
        +assert add(2, 3) == 5
        """
    )
    graded = {"type": "command", "command": ["{python}", "test_calc.py"], "test_patch": extends}
    own = {"repo": "repo"}
    # a seat that cannot fix the code rewrites the test the patch extends: the patch no
    # longer applies over its changes, though it does at the base commit
    sabotage = "write: test_calc.py=print('no test')\nanswer: done"
    project.write_manifest(
        [
            {"id": "sabotage", "prompt": sabotage, "workspace": own, "graders": [graded]},
            {"id": "honest", "prompt": "answer: cannot", "workspace": own, "graders": [graded]},
        ],
        execution={"mode": "writable-worktree"},
    )
    done = project.run()
    assert done.returncode == 1, done.stderr
    assert project.states() == {"sabotage:agent:1": "rejected", "honest:agent:1": "rejected"}
    result = project.receipt("sabotage:agent:1")["graders"][0]
    assert result["score"] == 0.0
    assert "does not apply over the seat's changes" in result["detail"], result
    assert "applies at the base commit" in result["detail"], result


# a setup that nests folders deeper than a path may be long, in its product and in a
# `.git` of its own, then fails or succeeds as told
NEST = (
    "import os, sys\n"
    "for where in ('deep', '.git'):\n"
    "    os.mkdir(where)\n"
    "    os.chdir(where)\n"
    "    for _ in range(3000):\n"
    "        os.mkdir('d')\n"
    "        os.chdir('d')\n"
    "    os.chdir(os.environ['PWD'])\n"
    "sys.exit(int(sys.argv[1]))\n"
)


def test_a_setup_that_nests_folders_without_end_is_built_or_failed_cleanly(
    project: Project,
) -> None:
    make_repo(project.root / "repo", ["r1"])
    project.write_manifest(
        [
            {
                "id": case,
                "prompt": "answer: ok",
                "workspace": {"repo": "repo"},
                "setup": [["sh", "-c", f'PWD=$(pwd) exec {sys.executable} -c "$0" {code}', NEST]],
            }
            for case, code in (("built", 0), ("failed", 1))
        ],
    )
    try:
        done = project.run()
        assert "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.returncode == 3, done.stderr[-2000:]
        states = {"built:agent:1": "unscored", "failed:agent:1": "adapter_error"}
        assert project.states() == states
        assert not list((project.out / "workspaces").glob(".*"))  # no scratch left behind
    finally:
        fs.remove(project.out)  # the built tree, as deep as the setup made it
