"""Make the two git repositories manifests/coding.yaml evaluates, from the plain folders
beside this file: fixit/ (the calculator) and shop/ (the shop), each committed as a
repository of its own under .brigade/repos/ at the checkout's top, tagged v1.

brigade's checkout cannot hold a git repository as such, so the example makes its own.
From the repository root (docs/coding-benchmarks.md):
    .venv/bin/python manifests/make_repos.py
A repository that is already there is left as it is. The commits have a fixed author and
date, so every checkout makes the very same commits (the same shas): manifests/swebench.jsonl
names them as its instances' `base_commit`, so a change to a file of fixit/ or shop/ needs
the new sha written there too (tests/test_readme.py fails until it is).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOS = HERE.parent / ".brigade" / "repos"
PROJECTS = ("fixit", "shop")
TAG = "v1"
IDENTITY = {
    "GIT_AUTHOR_NAME": "brigade example",
    "GIT_AUTHOR_EMAIL": "example@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "brigade example",
    "GIT_COMMITTER_EMAIL": "example@localhost",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}
# whatever the user's own git configuration says: no hook, no signing, no prompt
SETTINGS = [
    "-c", "core.hooksPath=/dev/null",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "init.defaultBranch=main",
    "-c", "core.autocrlf=false",
]  # fmt: skip


def git(repo: Path, *args: str) -> None:
    """Run git in `repo` (its output shown only when it fails)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        done = subprocess.run(
            ["git", *SETTINGS, *args], cwd=repo, env={**env, **IDENTITY}, capture_output=True
        )
    except FileNotFoundError:
        sys.exit("make_repos: git is not installed (the example's repositories need it)")
    if done.returncode != 0:
        sys.exit(f"make_repos: git {args[0]} in {repo} failed: {done.stderr.decode().strip()}")


def make(name: str) -> str:
    """Make one repository (unless it exists); what was done, as a line."""
    repo = REPOS / name
    if repo.exists():
        return f"{repo} exists: left as it is"
    scratch = REPOS / f".{name}.partial"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(
        HERE / name, scratch, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
    )
    git(scratch, "init", "--quiet")
    git(scratch, "add", "--all")
    git(scratch, "commit", "--quiet", "--no-verify", "-m", f"{name}: the example's project")
    git(scratch, "tag", TAG)
    head = (scratch / ".git" / "refs" / "tags" / TAG).read_text().strip()
    scratch.rename(repo)  # a repository is there whole or not at all
    return f"{repo}: made at {head}, tagged {TAG}"


def main() -> None:
    """Make every repository of the example."""
    REPOS.mkdir(parents=True, exist_ok=True)
    for name in PROJECTS:
        print(make(name))


if __name__ == "__main__":
    main()
