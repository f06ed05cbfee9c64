"""Export projected receipts, plan and summary; check that nothing secret leaked.

An export goes only into a folder brigade may call its own: the output directory's
`export/`, a new or empty folder, or one that holds brigade's export marker
(MARKER_FILE) from an earlier export. There it writes and deletes only the files
it names itself (plan.json, summary.json, cells/<cell id>.json), never through a
symbolic link, and never into the output directory's own files.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.core import jsontext
from brigade.core.identity import CELL_SCHEMA, text_digest
from brigade.core.plan import PLAN_SCHEMA, Plan, judge_env_values
from brigade.core.projection import (
    BINARY_HEAD,
    PLAN_ROLES,
    RECEIPT_ROLES,
    SUMMARY_ROLES,
    Leak,
    Roles,
    Secrets,
    credential_values,
    find_leaks_in_json,
    find_leaks_in_text,
    make_secrets,
    project_plan,
    project_receipt,
    project_summary,
)
from brigade.core.receipts import ReceiptView
from brigade.errors import EnvironmentProblem, InputError
from brigade.inputs import schemas
from brigade.outdir import caches, digests, legacy, store
from brigade.outdir.results import current_views


@dataclass(frozen=True)
class ExportResult:
    """Where the export went and what the leak check found."""

    dest: Path
    files: int
    leaks: tuple[Leak, ...]


@functools.cache
def machine_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(home folders, names at the top of the file system) of this machine: any absolute
    path under one of those names is a path of this machine, and never exported."""
    homes = {os.path.expanduser("~"), "/root"}
    for parent in ("/home", "/Users"):
        try:
            with os.scandir(parent) as entries:
                homes.update(entry.path for entry in entries if entry.is_dir())
        except OSError:
            continue
    try:
        roots = os.listdir("/")
    except OSError:
        roots = []
    return tuple(sorted(homes)), tuple(sorted(roots))


def secrets_for(out: Path, plan: Plan, workspace: Path | None = None) -> Secrets:
    """Prompts, absolute paths of this machine, seat env values of a plan, and the values of
    the credential-like variables of this process's environment (seats inherit it).

    The export's and the report's states are keyed on these secrets (`Secrets.digest`):
    a credential set, changed or gone since they were written makes both be projected
    and checked again, so none is left holding a value it did not know was secret.
    """
    context = plan.context or {}
    paths = [(str(out.absolute()), ".")]
    if workspace is not None:
        paths.append((str(workspace.absolute()), "<workspace>"))
    for key, stand_in in (
        ("workspace", "<workspace>"),
        ("manifest", "<manifest-dir>"),
        ("roster", "<roster-dir>"),
    ):
        if key in context:
            value = context[key] if key == "workspace" else os.path.dirname(context[key])
            paths.append((value, stand_in))
    homes, roots = machine_paths()
    env_values = {value for cell in plan.cells for value in cell.seat.env.values()}
    seen: set[int] = set()  # cells share their graders tuple, or hold equal ones
    for cell in plan.cells:
        if id(cell.graders) not in seen:
            seen.add(id(cell.graders))
            env_values.update(judge_env_values(cell.graders))
    env_values.update(credential_values(os.environ, plan.secret_env))
    return make_secrets(
        prompts={cell.prompt for cell in plan.cells},
        paths=paths,
        env_values=env_values,
        homes=homes,
        roots=roots,
    )


MARKER_FILE = ".brigade-export.json"
MARKER_SCHEMA = "brigade.export.v1"
_CELL_FILE = re.compile(r"^[0-9a-f]{64}\.json$")


def _claim(out: Path, dest: Path, default: bool) -> None:
    """Refuse a destination brigade may not write (InputError / EnvironmentProblem, exit 2);
    a symbolic link planted as the output directory's own export folder is removed."""
    for folder in (dest, dest / store.CELLS_DIR):
        if folder.is_symlink():
            if not default:
                raise EnvironmentProblem(
                    f"{folder}: the export folder is a symbolic link; brigade never writes "
                    "through one (name the real folder)"
                )
            folder.unlink()  # its target is left as it is
    if default:
        return
    real_out, real_dest = out.resolve(), dest.resolve()
    if real_dest == real_out or real_out in real_dest.parents:
        raise InputError(
            f"--to {dest}: inside the output directory {out}; omit --to for its own "
            f"export ({out / store.EXPORT_DIR}) or name a folder outside it"
        )
    if dest.exists() and not dest.is_dir():
        raise EnvironmentProblem(f"{dest}: the export destination is not a folder")
    if (dest / MARKER_FILE).is_file() or not dest.exists() or not any(dest.iterdir()):
        return
    raise EnvironmentProblem(
        f"{dest}: not empty, and not an export brigade wrote (it has no {MARKER_FILE}); "
        "export into a new or empty folder"
    )


def _mark(dest: Path) -> None:
    """Say the folder is brigade's export (written once)."""
    if not (dest / MARKER_FILE).is_file():
        marker = {
            "schema": MARKER_SCHEMA,
            "files": ["plan.json", "summary.json", "cells/<cell_id>.json"],
        }
        store.write_json(dest / MARKER_FILE, marker, MARKER_SCHEMA, sync_dir=False)


EXPORT_STATE = ".export-state"  # a cache folder: one sidecar per export destination


def _state(out: Path, dest: Path, key: str) -> caches.Sidecar:
    """What the last export to `dest` wrote and checked: relative name -> the stamp of its
    source, while the file's stat is unchanged (so an unchanged cell costs one stat).
    Kept beside the output directory's other bookkeeping, not in the export; the
    output directory's own export is named for its place in it (a move is no change)."""
    named = store.EXPORT_DIR if dest == out / store.EXPORT_DIR else str(dest)
    path = out / EXPORT_STATE / f"{text_digest(named)[7:23]}.json"
    return caches.Sidecar(path, caches.cache_key(key))


def _write(
    path: Path, doc: dict[str, Any], schema_tag: str | None, *, compact: bool = False
) -> None:
    data = store.dumps(doc, compact=compact)
    try:
        if fs.read_regular(path, len(data)) == data:
            return  # the same bytes: left as they are (its mtime stays)
    except OSError:
        pass  # not there yet (or not a file brigade reads: replaced)
    if schema_tag is not None:
        schemas.check_output(store.sampled(doc) if compact else doc, schema_tag)
    # a derived file: atomic, but not worth an fsync per cell
    store.atomic_write_bytes(path, data, durable=False)


# the export state's entry vouching for the output directory's plan.json (a source, not
# a file of the export): its value is the digest of plan.json's bytes
_PLAN_SOURCE = "source:plan.json"


def _plan_stamp(out: Path, state: caches.Sidecar) -> str:
    """`plan <digest of plan.json>`: from the state while plan.json's stat, or its bytes,
    are as recorded."""
    path = out / store.PLAN_FILE
    recorded = state.recall(_PLAN_SOURCE, path)
    if type(recorded) is str:
        return f"plan {recorded}"
    info = caches.stat_of(path)  # before plan.json is read
    try:
        digest = caches.content_digest(fs.read_regular(path))
    except OSError:
        return "plan none"
    state.record(_PLAN_SOURCE, info, digest, digest)
    return f"plan {digest}"


def _summary_stamp(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return "summary none"
    rest = {key: value for key, value in summary.items() if key != "generated_at"}
    return "summary " + text_digest(json.dumps(rest, sort_keys=True))


def _projection_key(out: Path, secrets: Secrets) -> str:
    return text_digest(json.dumps({"version": 4, "secrets": movable_digest(secrets, out)}))


def movable_digest(secrets: Secrets, out: Path) -> str:
    """`secrets.digest` with the output directory's own path left out: the states of the
    export and the report stay valid when the output directory moves (what was projected
    there is relative to it), and `moved_secrets` checks their files for the new path."""
    own = os.path.normpath(str(out.absolute()))
    # in an order of their own: the secrets list paths longest first, so the output
    # directory's place among them (not only its text) would change with its new length
    paths = tuple(
        sorted(
            (path, stand_in) if path != own else ("", stand_in) for path, stand_in in secrets.paths
        )
    )
    return dataclasses.replace(secrets, paths=paths).digest


def moved_secrets(state: caches.Sidecar, out: Path) -> Secrets | None:
    """When the files a state vouches for were checked at another path of the output
    directory: the secret their check did not know (this path), to look for in each before
    it is vouched for here; None when they were checked here. The state records this path."""
    here = os.path.normpath(str(out.absolute()))
    recorded = state.meta.get("root")
    if recorded != here:
        state.meta["root"] = here
        state.changed = True
    if recorded is None or recorded == here or not state.entries:
        return None
    return make_secrets((), [(here, ".")], ())


_BINARY_BYTES = BINARY_HEAD.encode()
# what html.escape writes (`&amp;` `&lt;` `&gt;` `&quot;` `&#x27;`): decoded, each is one
# character of `_ESCAPED`
_ESCAPED = frozenset("&<>\"'")
# an `&` html.unescape could read as another entity: not one of those five, and followed by
# what may start a character reference (`#` and a digit or x) or an entity's name (anything
# but tab, newline, form feed, space, `<`, `&`, `#` and `;`). Script's `&&` and `a & b` are
# none, so a page of them is still answered from its bytes.
_OTHER_ENTITY = re.compile(rb"&(?!(?:amp|lt|gt|quot|#x27);)(?:#[0-9xX]|[^\t\n\f <&#;])")


def _only_escapes(data: bytes, moved: Secrets) -> bool:
    """No entity of the bytes but html.escape's five, and no path holds what they stand
    for: unescaping makes no path that the bytes do not hold already."""
    if any(_ESCAPED.intersection(path) for path, _ in moved.paths):
        return False
    return _OTHER_ENTITY.search(data) is None


def clean_here(data: bytes, label: str, moved: Secrets | None, *, markup: bool = False) -> bool:
    """Whether a file checked clean at the output directory's earlier path holds nothing
    of its path here (`moved_secrets`; always, when it did not move)."""
    if moved is None:
        return True
    # the same question of the bytes first, when they can answer it: no entity to decode
    # but those html.escape writes (which make none of a path's characters, when it has
    # none of &<>"'), and paths whose bytes are their text's (no replacement character)
    if (
        not (markup and b"&" in data and not _only_escapes(data, moved))
        and _BINARY_BYTES not in data
        and all("\ufffd" not in path for path, _ in moved.paths)
        and not any(path.encode("utf-8", "surrogatepass") in data for path, _ in moved.paths)
    ):
        return True
    text = data.decode("utf-8", "replace")
    if markup:
        text = html.unescape(text)
    # what the check finds with nothing but known paths for secrets is one of them, whole,
    # or a binary hunk: a text holding neither is clean without it (every file of a moved
    # directory is asked this)
    if BINARY_HEAD not in text and not any(path in text for path, _ in moved.paths):
        return True
    return not find_leaks_in_text(label, text, moved)


def export(
    out: Path,
    plan: Plan,
    dest: Path | None = None,
    workspace: Path | None = None,
    views: Mapping[str, ReceiptView | None] | None = None,
    summary_unchanged: bool = False,
    secrets: Secrets | None = None,
    ahead: Callable[[], digests.Answers] | None = None,
) -> ExportResult:
    """Write the projection of the current plan's results to `dest` and check it for leaks.

    Only cells whose receipt changed since the last export (by the stamp of its
    view) are projected again, from their full receipt; every file in `dest`
    that is new or changed since it was last checked is checked (so a file
    planted there is always caught). `ahead`: the wait for a helper's digests of the
    exported cell files (run/ahead), taken for a copied export that did not move.
    """
    out = out.absolute()
    own = out / store.EXPORT_DIR
    dest = (dest or own).absolute()
    _claim(out, dest, dest == own)
    secrets = secrets if secrets is not None else secrets_for(out, plan, workspace)
    state = _state(out, dest, _projection_key(out, secrets))
    moved = moved_secrets(state, out)
    views = views if views is not None else current_views(out, plan)
    written: dict[str, str] = {}  # relative name -> stamp
    plan_stamp = _plan_stamp(out, state)
    recorded = state.recall(store.SUMMARY_FILE, dest / store.SUMMARY_FILE)
    if summary_unchanged and type(recorded) is str:
        summary_stamp = recorded  # exported from this very summary, untouched since
        summary = None
    else:
        summary = store.read_own_json(out / store.SUMMARY_FILE)
        summary = summary if isinstance(summary, dict) else None
        summary_stamp = _summary_stamp(summary)
    sources: list[tuple[str, str | None, Callable[[], Any], Callable[..., Any], str]] = [
        (
            store.PLAN_FILE,
            PLAN_SCHEMA,
            lambda: store.read_own_json(out / store.PLAN_FILE),
            project_plan,
            plan_stamp,
        ),
        # the summary was validated when written and its projection only rewrites
        # strings; validating its long value lists twice per run is not worth it.
        # Its stamp ignores generated_at: unchanged results are not exported again.
        (store.SUMMARY_FILE, None, lambda: summary, project_summary, summary_stamp),
    ]
    verified: set[str] = set()  # unchanged since an earlier export checked them

    def here(label: str) -> Callable[[bytes], bool] | None:
        # checked at another path of the output directory: the bytes read to vouch for a
        # file are also searched for this path (one read of each file)
        return None if moved is None else lambda data: clean_here(data, label, moved)

    dest_name = dest.name

    for name, tag, load, project, stamp in sources:
        target = dest / name
        if state.recall(name, target, check=here(f"{dest.name}/{name}")) == stamp:
            written[name] = stamp
            verified.add(name)
            continue
        doc = load()
        if isinstance(doc, dict):
            if doc.get("schema") == legacy.ORIGINAL_PLAN_SCHEMA:
                tag = None  # the original tool's plan.json: no schema of ours to hold it to
            # plan and summary grow with the plan: compact, validated by sample
            _write(target, project(doc, secrets), tag, compact=True)
            written[name] = stamp
    cells_text = f"{dest}/{store.CELLS_DIR}"
    out_text = str(out)
    with store.opened_folder(cells_text) as cells_fd:
        # an export folder the state has not seen (copied, restored): every stat misses
        eager = cells_fd is not None and state.copied(store.CELLS_DIR, os.fstat(cells_fd))
        known = ahead().of(cells_fd) if ahead is not None and eager and moved is None else None
        for cell_id, view in views.items():
            if view is None:
                continue
            name = f"{store.CELLS_DIR}/{cell_id}.json"
            stamp = view.stamp()
            exported = f"{cell_id}.json"
            if (
                cells_fd is not None
                and state.recall(
                    name,
                    exported,
                    cells_fd,
                    None if moved is None else here(f"{dest_name}/{name}"),
                    eager=eager,
                    known=known.get(cell_id) if known else None,
                )
                == stamp
            ):
                written[name] = stamp
                verified.add(name)
                continue
            # what is exported: the whole receipt (its stamp from the bytes it came from)
            full, read = store.read_cell(out, cell_id)
            if full is None or read is None:
                continue
            stamp = read.stamp()
            target = Path(f"{cells_text}/{cell_id}.json")
            _write(target, project_receipt(full.document, out_text, secrets), CELL_SCHEMA)
            written[name] = stamp
    _mark(dest)
    written[MARKER_FILE] = "marker"
    leaks = _check_changed(dest, secrets, state, written, verified, moved)
    if not leaks:
        state.save()
    # the marker is bookkeeping, not one of the files exported
    return ExportResult(dest=dest, files=len(written) - 1, leaks=tuple(leaks))


def _check_changed(
    dest: Path,
    secrets: Secrets,
    state: caches.Sidecar,
    written: dict[str, str],
    verified: set[str],
    moved: Secrets | None = None,
) -> list[Leak]:
    """Check every file in dest that was not checked, unchanged, by an earlier export.

    The export mirrors the current plan: projected receipts of other cells go,
    and so do temp files an interrupted export left behind.
    """
    leaks: list[Leak] = []
    base = str(dest)
    listed: set[str] = set()
    for root, _, names in os.walk(base):
        folder = os.path.relpath(root, base)
        prefix = "" if folder == "." else f"{folder}/"
        relatives = [prefix + name for name in names]
        listed.update(relatives)
        # (a set difference: the export of a big plan is mostly verified files)
        for relative in sorted(set(relatives) - verified):
            name = relative[len(prefix) :]
            path = os.path.join(root, name)
            if store.is_temp_name(name) and os.path.isfile(path) and not os.path.islink(path):
                os.unlink(path)  # left by an interrupted export (the lock is ours)
                listed.discard(relative)
                continue
            if folder == store.CELLS_DIR and _CELL_FILE.match(name) and relative not in written:
                if not os.path.islink(path) and os.path.isfile(path):
                    os.unlink(path)
                    listed.discard(relative)
                    continue
            stamp = written.get(relative, "unknown")
            info = caches.stat_of(path)  # before the check reads it
            label = f"{dest.name}/{relative}"
            if moved is None and state.fresh(relative, info) == stamp:
                continue
            try:
                data = fs.read_regular(path)
            except OSError:
                state.forget(relative)
                continue
            if (
                state.fresh(relative, info) == stamp
                or state.same_content(relative, info, data) == stamp
            ) and clean_here(data, label, moved):
                continue  # the very bytes checked before (a copied, restored or moved export)
            found = check_data(data, label, secrets, roles_of(relative))
            leaks.extend(found)
            if found:
                state.forget(relative)
            else:
                state.record(relative, info, stamp, caches.content_digest(data))
    state.keep_only(listed | {_PLAN_SOURCE})  # files gone from the export
    return sorted(leaks, key=str)


def roles_of(relative: str) -> Roles | None:
    """The roles of the strings of an exported file brigade writes (None: any other file)."""
    if relative == store.PLAN_FILE:
        return PLAN_ROLES
    if relative == store.SUMMARY_FILE:
        return SUMMARY_ROLES
    folder, _, name = relative.partition("/")
    if folder == store.CELLS_DIR and "/" not in name and name.endswith(".json"):
        return RECEIPT_ROLES
    return None


def check_file(path: Path, label: str, secrets: Secrets, roles: Roles | None = None) -> list[Leak]:
    """The leaks in one exported file (JSON by path, with its roles when brigade wrote it;
    anything else as text)."""
    try:
        data = store.read_regular(path)
    except OSError:
        return []
    return check_data(data, label, secrets, roles)


def check_data(data: bytes, label: str, secrets: Secrets, roles: Roles | None = None) -> list[Leak]:
    """The leaks in the bytes of one exported file (see check_file)."""
    text = data.decode("utf-8", "replace")
    try:
        doc = jsontext.parse(text, limit=None)
    except ValueError:
        return find_leaks_in_text(label, text, secrets)
    return find_leaks_in_json(label, doc, secrets, roles)


def check(dest: Path, secrets: Secrets) -> list[Leak]:
    """Every leak in every file under `dest` (no incremental state)."""
    leaks: list[Leak] = []
    for root, _, names in os.walk(dest):
        for name in sorted(names):
            path = Path(root) / name
            relative = path.relative_to(dest).as_posix()
            leaks.extend(check_file(path, f"{dest.name}/{relative}", secrets, roles_of(relative)))
    return leaks
