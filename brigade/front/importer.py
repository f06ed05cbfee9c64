"""`brigade import swebench`: SWE-bench instances written as a manifest and its test patches."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from brigade.core import swebench
from brigade.errors import InputError
from brigade.inputs.documents import decode_utf8, read_regular_file
from brigade.outdir import store


def clone_of(repos: Path, repo: str) -> Path | None:
    """The local clone of `owner/name` under `repos`: `owner__name` (SWE-bench's own
    spelling), `owner/name` or `name`; None when there is none."""
    owner, _, name = repo.partition("/")
    for candidate in (repos / f"{owner}__{name}", repos / owner / name, repos / (name or owner)):
        if (candidate / ".git").exists():
            return candidate
    return None


def import_swebench(
    source: Path, repos: Path, to: Path, seats: list[str], roster: Path | None, name: str | None
) -> list[str]:
    """Write the manifest `to` (and its test patches under `swebench/` beside it) from a
    SWE-bench JSONL file; never overwrites a file. The case ids, in order."""
    try:
        text = decode_utf8(read_regular_file(source), str(source))
    except OSError as exc:
        raise InputError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    instances = swebench.parse_instances(text, str(source))
    if not repos.is_dir():
        raise InputError(f"{repos}: --repos is not a folder")
    if to.exists():
        raise InputError(f"{to}: exists; brigade import never overwrites a file")
    base = to.absolute().parent
    cases = []
    patches: dict[Path, str] = {}
    for instance in instances:
        clone = clone_of(repos, instance["repo"])
        if clone is None:
            raise InputError(
                f"{source}: {instance['instance_id']}: no clone of {instance['repo']} under "
                f"{repos} (looked for {instance['repo'].replace('/', '__')}, "
                f"{instance['repo']} and its name)"
            )
        relative = os.path.relpath(clone.absolute(), base)
        path = relative if not relative.startswith("..") else str(clone.absolute())
        cases.append(swebench.case_of(instance, path))
        target = base / swebench.patch_name(instance["instance_id"])
        if target.exists():
            raise InputError(f"{target}: exists; brigade import never overwrites a file")
        if any(str(other).casefold() == str(target).casefold() for other in patches):
            # (ids differing in case only: one file on a case-insensitive disk)
            raise InputError(
                f"{source}: {instance['instance_id']}: its test patch would be {target}, "
                "another instance's too"
            )
        patches[target] = instance["test_patch"]
    roster_name = None
    if roster is not None:
        roster_name = os.path.relpath(roster.absolute(), base)
    doc = swebench.manifest_of(name or to.stem, seats, cases, roster_name)
    for target, patch in patches.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        store.atomic_write_bytes(target, patch.encode("utf-8"))
    text = "# written by brigade import swebench\n" + yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, width=100
    )
    store.atomic_write_bytes(to, text.encode("utf-8"))
    return [case["id"] for case in cases]
