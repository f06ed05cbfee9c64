"""Incremental builds down to the grader: a grader whose spec and inputs are unchanged
reuses its stored result instead of running again (a judge is a paid model call, a test
suite takes its time).

`grader_key` is the one function that says what a grader's result depends on: brigade's
code, the grader's kind and version, its spec as the plan has it (a judge's seat identity
included), its time limit, what the cell's run left (the answer's digest, the seat's exit
status, the stored changes' digest, the changed files, the base commit) and what the kind
itself reads besides (`GraderType.inputs`: an expected file's digest, the workspace file a
`file_exists` looks at, the files a command names and the manifest's folder it reads, the
prompt a judge is shown). A kind whose inputs cannot be named (a command in a read-only
run reads the live workspace) has no key: it always runs.

A stored result is reused only when it was scored (a grader_error is graded again) and
its key equals the one computed now. Reuse happens where a cell is graded from a stored
grading: a seat run reused after a grader edit (its source cell's grading) and the regrade
of a grader_error cell in a run (its own). `brigade regrade` runs every grader again.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade.core.identity import canonical_json, text_digest
from brigade.core.receipts import Receipt
from brigade.inputs.sources import code_digest
from brigade.outdir import store
from brigade.run.grading import GradeContext, GraderType

# what a folder's digest reads at most (a command's manifest folder, a folder it names);
# past that, the grader's inputs cannot be named and it always runs
MAX_TREE_FILES = 10_000
MAX_TREE_BYTES = 1 << 30
# <attempt>/graders: where graders that run a process leave their folders
GRADERS_DIR = "graders"

_digests: dict[tuple[str, int, int, int, int], str] = {}  # (path, stat) -> its digest
_digests_lock = threading.Lock()


def _stat_key(path: str, info: os.stat_result) -> tuple[str, int, int, int, int]:
    return (path, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def file_digest(path: Path | str) -> str | None:
    """`sha256:<hex>` of a regular file (streamed, never following a link), None when it
    cannot be read. A file read once in this process is not read again while its size,
    times and inode stay the same."""
    try:
        fd = store.open_regular(path)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        key = _stat_key(str(path), os.fstat(handle.fileno()))
        with _digests_lock:
            known = _digests.get(key)
        if known is not None:
            return known
        digest = hashlib.sha256()
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    found = "sha256:" + digest.hexdigest()
    with _digests_lock:
        _digests[key] = found
    return found


def tree_digest(root: Path, skip: Collection[Path] = ()) -> str | None:
    """sha256 over a folder's names and its regular files' bytes (a symlink counts by its
    target, never followed); hidden entries (`.git`, `.brigade`, ...) and the folders in
    `skip` are left out. None when it is no folder, or holds more than MAX_TREE_FILES files
    or MAX_TREE_BYTES."""
    skipped = {os.path.abspath(path) for path in skip}
    digest = hashlib.sha256()
    files = size = 0
    stack = [os.path.abspath(root)]
    try:
        if not stat.S_ISDIR(os.lstat(stack[0]).st_mode):
            return None
    except OSError:
        return None
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            return None
        for entry in entries:
            if entry.name.startswith(".") or entry.path in skipped:
                continue
            name = os.path.relpath(entry.path, root)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                digest.update(f"l\0{name}\0{os.readlink(entry.path)}\0".encode())
            elif stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode):
                files, size = files + 1, size + info.st_size
                if files > MAX_TREE_FILES or size > MAX_TREE_BYTES:
                    return None
                digest.update(f"f\0{name}\0{file_digest(entry.path)}\0".encode())
    return "sha256:" + digest.hexdigest()


def path_digest(path: Path, skip: Collection[Path] = ()) -> str | None:
    """What a path a command names holds: a file's digest, a folder's tree digest (None when
    too big to name), `missing` when there is nothing there."""
    try:
        info = os.stat(path)
    except OSError:
        return "missing"
    if stat.S_ISDIR(info.st_mode):
        return tree_digest(path, skip)
    return file_digest(os.path.realpath(path)) or "unreadable"


def grader_key(
    grader: GraderType, raw: Mapping[str, Any], spec: Mapping[str, Any], ctx: GradeContext
) -> str | None:
    """The key of a grader's result for this cell: sha256 over everything it depends on
    (see the module's docstring); None when its inputs cannot be named."""
    own = grader.inputs(spec, ctx) if grader.inputs is not None else {}
    if own is None:
        return None
    setting = ctx.setting
    snapshot = setting.snapshot if setting is not None else None
    run = {
        "output_digest": ctx.output_digest,
        "exit_code": ctx.exit_code,
        "changed_files": list(ctx.changed_files) if ctx.changed_files is not None else None,
        "changes_digest": setting.changes_digest if setting is not None else None,
        "base": [snapshot.get("head"), snapshot.get("prefix")] if snapshot else None,
        "execution_mode": setting.execution_mode if setting is not None else None,
    }
    payload = {
        "code": code_digest(),
        "kind": [raw.get("type"), grader.version],
        "spec": raw,
        "time_limit": ctx.time_limit,
        "run": run,
        "inputs": own,
    }
    return text_digest(canonical_json(payload))


@dataclass(frozen=True)
class Earlier:
    """A stored grading whose scored results a cell's graders may reuse (a receipt's)."""

    cell_id: str
    attempt: int
    graded_at: str | None
    # grader key -> where its result was (index) and the result
    results: Mapping[str, tuple[int, Mapping[str, Any]]]
    graders_dir: Path  # the attempt's folder of graders that ran a process
    run_ref: str  # its run folder, relative to the output directory
    # grader index -> where a result it reused came from (its own reused_grades)
    origins: Mapping[int, Mapping[str, Any]]


def earlier_of(out: Path, receipt: Receipt | None) -> Earlier | None:
    """What a receipt's grading offers for reuse, None when nothing (graded before grader
    keys were recorded, or not graded)."""
    if receipt is None:
        return None
    # a result that is no object is left out of `graders`: the lists then differ in length
    # and no index is trusted
    keys, results = receipt.grader_keys, receipt.graders
    cell_id, attempt = receipt.cell_id, receipt.attempt
    if keys is None or len(keys) != len(results) or attempt is None:
        return None
    found = {
        key: (index, result)
        for index, (key, result) in enumerate(zip(keys, results, strict=True))
        if key is not None and result.get("status") == "scored"
    }
    if not found:
        return None
    origins: dict[int, Mapping[str, Any]] = {}
    for entry in receipt.reused_grades:
        grader_id = entry.get("grader_id")
        index = grader_id.rsplit(":", 1)[-1] if isinstance(grader_id, str) else ""
        if index.isdigit():
            origins[int(index)] = entry
    rdir = store.run_dir(out, cell_id, attempt)
    return Earlier(
        cell_id=cell_id,
        attempt=attempt,
        graded_at=receipt.graded_at,
        results=found,
        graders_dir=rdir.parent / GRADERS_DIR,
        run_ref=os.path.relpath(rdir, out),
        origins=origins,
    )


def _moved(path: Any, old: str, new: str) -> Any:
    """A path relative to the output directory, moved from one folder to another."""
    if isinstance(path, str) and (path == old or path.startswith(old + "/")):
        return new + path[len(old) :]
    return path


def reuse(
    earlier: Earlier, key: str, kind: str, index: int, ctx: GradeContext
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored result of a grader with this key, as this cell's grader `kind:index`, and
    the `reused_grades` entry that says where it came from. The folder its process left
    (logs, a judge's run) is copied into this attempt's, so the cell keeps its own; OSError or
    RecursionError when it cannot be (what the process left there), and the caller grades
    it again."""
    source_index, stored = earlier.results[key]
    result = copy.deepcopy(dict(stored))
    result["grader_id"] = f"{kind}:{index}"
    result["cell_id"] = ctx.cell_id
    result["output_digest"] = ctx.output_digest
    setting = ctx.setting
    out = setting.out if setting is not None else None
    source = earlier.graders_dir / f"{kind}-{source_index}"
    if setting is not None and out is not None:
        target = setting.graders_dir / f"{kind}-{index}"
        old, new = os.path.relpath(source, out), os.path.relpath(target, out)
        if target != source and os.path.isdir(source) and not os.path.islink(source):
            try:
                store.copy_folder(source, target)
            except (OSError, RecursionError):
                shutil.rmtree(target, ignore_errors=True)  # no half copy for its grading
                raise
        if isinstance(result.get("logs"), dict):
            result["logs"] = {name: _moved(path, old, new) for name, path in result["logs"].items()}
        run_ref = os.path.relpath(setting.run_dir, out)
        refs = result.get("output_refs")
        if isinstance(refs, list):
            result["output_refs"] = [ctx.output_ref] + [
                _moved(ref, earlier.run_ref, run_ref) for ref in refs[1:]
            ]
    origin = earlier.origins.get(source_index)
    graded_at = origin.get("graded_at") if origin is not None else earlier.graded_at
    entry = {
        "grader_id": result["grader_id"],
        "cell_id": earlier.cell_id,
        "attempt": earlier.attempt,
        "source_grader_id": f"{kind}:{source_index}",
        "graded_at": graded_at,
    }
    return result, entry
