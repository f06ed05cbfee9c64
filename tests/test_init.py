"""brigade in the user's own repository: `brigade init`, then `doit` and `make eval` there,
exactly as a new user does it (a fresh git repository outside brigade's checkout, brigade
installed from a built wheel into a fresh virtual environment)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, brigade_command

from brigade.adapters import check_cli
from brigade.front.init import DODO, EXAMPLE_MANIFEST, MANIFEST, SNIPPET


def init(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(command or brigade_command()), "init"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_init_writes_a_dodo_a_battery_and_the_makefile(tmp_path: Path) -> None:
    done = init(tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == [
        "Makefile",
        "brigade.mk",
        "dodo.py",
        "evals/manifest.yaml",
        "evals/roster.yaml",
    ]
    dodo = (tmp_path / "dodo.py").read_text()
    assert dodo == DODO.format(manifest=MANIFEST)
    assert len(dodo.splitlines()) == 3
    assert (tmp_path / "Makefile").read_text() == "include brigade.mk\n"
    assert (tmp_path / "brigade.mk").read_text() == SNIPPET
    validated = subprocess.run(
        [*brigade_command(), "validate", str(tmp_path / MANIFEST)],
        capture_output=True,
        text=True,
    )
    assert validated.returncode == 0, validated.stderr


def test_the_example_manifest_names_only_clis_a_roster_takes() -> None:
    """The CLIs its comment suggests for a roster's `cli:` are adapter names (cursor, not
    its program's name cursor-agent, which a roster refuses)."""
    named = re.search(r"\(cli: ([^)]*)\)", EXAMPLE_MANIFEST)
    assert named
    clis = [c.strip() for c in named.group(1).split(",") if c.strip() != "..."]
    assert clis and all(check_cli(c) is None for c in clis), clis


def test_init_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    mine = tmp_path / "evals" / "roster.yaml"
    mine.write_text("mine\n")
    done = init(tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"brigade: {mine}: exists; brigade init never overwrites a file (move it away, or add "
        "what it would write by hand: README.md, In your own repository)\n"
    )
    assert mine.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["evals", "roster.yaml"]
    # a project's own Makefile is kept: the snippet goes beside it, with the line to add
    mine.unlink()
    (tmp_path / "Makefile").write_text("all:\n\ttrue\n")
    done = init(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "add this line to your Makefile for `make eval`: include brigade.mk" in done.stdout
    assert (tmp_path / "Makefile").read_text() == "all:\n\ttrue\n"
    again = init(tmp_path)
    assert again.returncode == 2
    assert f"{tmp_path / 'dodo.py'}: exists" in again.stderr


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with brigade installed from a wheel built from this
    checkout (not editable: the installed package must find its own files)."""
    root = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # built from a copy of the sources: a build/ folder left in the checkout by an earlier
    # build could carry modules since removed into the wheel
    source = root / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "build", "dist", "*.egg-info", ".brigade", "__pycache__"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(root)],
        check=True,
        capture_output=True,
        env=env,
    )
    (wheel,) = root.glob("brigade-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
        env=env,
    )
    return venv / "bin"


def test_a_new_user_runs_a_battery_in_their_own_repository(installed: Path, tmp_path: Path) -> None:
    project = tmp_path / "myproject"
    project.mkdir()
    git(project, "init", "-q")
    (project / "README").write_text("my project\n")
    git(project, "add", "-A")
    git(project, "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-qm", "init")
    env = {**os.environ, "PATH": f"{installed}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)

    def run(*argv: str, cwd: Path = project) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=300)

    # the installed package, not this checkout
    where = run(str(installed / "python"), "-c", "import brigade; print(brigade.__file__)")
    assert str(REPO) not in where.stdout and str(installed.parent) in where.stdout, where
    # exactly README's commands for a first evaluation in your own repository
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- own-repository-commands -->\s*```sh\n(.*?)\n```", readme, re.S)
    assert block is not None
    commands = [line.split("#")[0].split() for line in block.group(1).splitlines()]
    assert commands == [
        ["brigade", "init"],
        ["doit"],
        ["brigade", "show", ".brigade/evals/example"],
    ]
    assert run("brigade", "init").returncode == 0
    first = run("doit")
    assert first.returncode == 0, first.stderr
    assert "1 cells: accepted 1" in first.stderr.replace("1 cell:", "1 cells:"), first.stderr
    out = project / ".brigade" / "evals" / "example"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["accepted"] == 1
    # brigade doit there runs the battery the dodo names
    viabrigade = run("brigade", "doit", "-n", "2")
    assert viabrigade.returncode == 0, viabrigade.stderr
    assert "1 cells: accepted 1" in viabrigade.stderr.replace("1 cell:", "1 cells:")
    if shutil.which("make") is not None:
        made = run("make", "eval")
        assert made.returncode == 0, made.stderr  # up to date: nothing runs, still clean
        assert (project / ".brigade" / "make-status").read_text() == "0\n"
    # relative paths on doit's command line are relative to the folder doit is run from;
    # a missing manifest is named with the folder it was looked for in
    sub = project / "sub"
    sub.mkdir()
    rel = run("doit", "-f", "../dodo.py", "manifest=../evals/manifest.yaml", cwd=sub)
    assert rel.returncode == 0, rel.stderr
    missing = run("doit", "-f", "../dodo.py", "manifest=nothere.yaml", cwd=sub)
    assert missing.returncode == 2
    assert str(sub / "nothere.yaml") in missing.stderr
    # the suite's end-to-end smoke against the installed package: brigade run, show, regrade
    assert run("brigade", "run", "evals/manifest.yaml", "--always").returncode == 0
    shown = run(*commands[2])
    assert shown.returncode == 0 and "echo" in shown.stdout, shown.stderr
    assert run("brigade", "regrade", str(out)).returncode == 0
    # what init wrote and the output folder, nothing else (an empty sub/ is no change)
    status = run("git", "status", "--porcelain")
    assert sorted(line[3:] for line in status.stdout.splitlines()) == [
        ".brigade/",
        "Makefile",
        "brigade.mk",
        "dodo.py",
        "evals/",
    ]
