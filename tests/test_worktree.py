"""Writable runs' worktrees: the changes a seat leaves, written as changes.patch and applied
to a fresh worktree of the base commit, exactly; the repository gets no object from it."""

from __future__ import annotations

import codecs
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git

from brigade.run import worktree


def objects(repo: Path) -> list[str]:
    return sorted(
        str(p.relative_to(repo / ".git" / "objects"))
        for p in (repo / ".git" / "objects").rglob("*")
        if p.is_file()
    )


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def named(patch: bytes) -> set[str]:
    """The paths a patch changes (git quotes unusual ones C-style)."""
    found = set()
    for line in patch.splitlines():
        if not line.startswith(b"diff --git "):
            continue
        if line.endswith(b'"'):
            quoted = line.rsplit(b' "b/', 1)[1][:-1]
            found.add(codecs.escape_decode(quoted)[0].decode("utf-8"))
        else:
            found.add(line.split(b" b/", 1)[1].decode("utf-8"))
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "pkg" / "keep.py").write_text("keep\n")
    (root / "pkg" / "gone.py").write_text("gone\n")
    (root / "pkg" / "edit.py").write_text("one\ntwo\n")
    (root / "top.txt").write_text("outside the workspace\n")
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


@pytest.mark.parametrize("prefix", ["", "pkg"])
def test_a_patch_reproduces_every_change_in_a_fresh_worktree(
    repo: Path, tmp_path: Path, prefix: str
) -> None:
    workspace = repo / prefix if prefix else repo
    tree = worktree.create(worktree.find_repo(workspace))
    try:
        cwd = tree.cwd
        target = cwd / ("edit.py" if prefix else "pkg/edit.py")
        target.write_text("one\n2\n")
        os.remove(cwd / ("gone.py" if prefix else "pkg/gone.py"))
        (cwd / "new dir").mkdir()
        (cwd / "new dir" / "ünïcode name.txt").write_text("new\n")
        (cwd / "empty.txt").write_bytes(b"")
        (cwd / "run.log").write_text("ignored, still a change\n")
        (cwd / "blob.bin").write_bytes(bytes(range(256)) * 4)
        (cwd / "tool.sh").write_text("#!/bin/sh\n")
        (cwd / "tool.sh").chmod(0o755)
        (cwd / "link").symlink_to("tool.sh")
        (tree.root / "top.txt").write_text("changed outside the workspace\n")
        before = objects(repo)
        patch = tmp_path / "changes.patch"
        worktree.write_patch(tree, patch)
        assert objects(repo) == before  # not even the empty blob
        changed, deleted = worktree.changes(tree)
        left = files(cwd)
    finally:
        worktree.remove(tree)
    assert named(patch.read_bytes()) == set(changed) | set(deleted)
    # a change outside the workspace is outside the patch too, as `changes` counts
    assert ("top.txt" in named(patch.read_bytes())) == (prefix == "")
    fresh = worktree.create(worktree.find_repo(workspace))
    try:
        worktree.apply_patch(fresh, patch)
        assert files(fresh.cwd) == left
        assert os.readlink(fresh.cwd / "link") == "tool.sh"
        assert os.access(fresh.cwd / "tool.sh", os.X_OK)
    finally:
        worktree.remove(fresh)
    assert git(repo, "worktree", "list").count("\n") == 1


def test_no_change_is_an_empty_patch_that_applies(repo: Path, tmp_path: Path) -> None:
    tree = worktree.create(worktree.find_repo(repo))
    patch = tmp_path / "changes.patch"
    try:
        worktree.write_patch(tree, patch)
    finally:
        worktree.remove(tree)
    assert patch.read_bytes() == b""
    fresh = worktree.create(worktree.find_repo(repo))
    try:
        worktree.apply_patch(fresh, patch)
    finally:
        worktree.remove(fresh)


def test_the_seats_commits_count_and_git_settings_do_not_change_the_patch(
    repo: Path, tmp_path: Path
) -> None:
    git(repo, "config", "diff.noprefix", "true")
    git(repo, "config", "diff.external", "false")
    git(repo, "config", "apply.whitespace", "error")
    tree = worktree.create(worktree.find_repo(repo))
    patch = tmp_path / "changes.patch"
    try:
        (tree.root / "pkg" / "keep.py").write_text("kept, with a trailing space \n")
        git(tree.root, "commit", "-qam", "the seat's commit")
        worktree.write_patch(tree, patch)
    finally:
        worktree.remove(tree)
    assert patch.read_text().startswith("diff --git a/pkg/keep.py b/pkg/keep.py\n")
    fresh = worktree.create(worktree.find_repo(repo))
    try:
        worktree.apply_patch(fresh, patch)
        assert (fresh.root / "pkg" / "keep.py").read_text() == "kept, with a trailing space \n"
    finally:
        worktree.remove(fresh)


def test_a_patch_that_does_not_apply_says_why(repo: Path, tmp_path: Path) -> None:
    patch = tmp_path / "changes.patch"
    patch.write_text(
        "diff --git a/pkg/keep.py b/pkg/keep.py\n--- a/pkg/keep.py\n+++ b/pkg/keep.py\n"
        "@@ -1 +1 @@\n-not what is there\n+x\n"
    )
    fresh = worktree.create(worktree.find_repo(repo))
    try:
        with pytest.raises(OSError, match="^git apply failed: error: patch failed: pkg/keep.py:1"):
            worktree.apply_patch(fresh, patch)
    finally:
        worktree.remove(fresh)
    assert subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True).stdout == b""
