"""Loading a battery's inputs: a manifest and the roster it names."""

from __future__ import annotations

from pathlib import Path

from brigade.core.specs import Manifest, Roster
from brigade.errors import InputError
from brigade.inputs.manifest import load_manifest
from brigade.inputs.roster import load_roster

DEFAULT_ROSTER = "roster.yaml"
# where the original `brigade model trial` found its roster in a workspace
WORKSPACE_ROSTER = Path(".brigade") / "roster.toml"


def roster_path(
    manifest_path: Path, manifest: Manifest, explicit: Path | None, workspace: Path | None = None
) -> Path:
    """--roster, else the manifest's `roster` key, else roster.yaml beside the manifest,
    else (when there is none) the original tool's .brigade/roster.toml in the workspace."""
    if explicit is not None:
        return explicit
    if manifest.roster is not None:
        return manifest_path.parent / manifest.roster
    beside = manifest_path.parent / DEFAULT_ROSTER
    if workspace is not None and not beside.exists():
        fallback = workspace / WORKSPACE_ROSTER
        if fallback.is_file():
            return fallback
    return beside


def load_inputs(
    manifest_path: Path, explicit_roster: Path | None, workspace: Path | None = None
) -> tuple[Manifest, Roster, str]:
    """Load and validate the manifest and its roster (`workspace`: default the current folder)."""
    manifest = load_manifest(manifest_path)
    workspace = workspace if workspace is not None else Path.cwd()
    path = roster_path(manifest_path, manifest, explicit_roster, workspace)
    label = str(path)
    if explicit_roster is None and not path.exists():
        how = (
            f"its `roster` key names {manifest.roster!r}"
            if manifest.roster
            else (
                f"there is no {DEFAULT_ROSTER} beside it and no {WORKSPACE_ROSTER} "
                f"in the workspace {workspace}"
            )
        )
        raise InputError(
            f"{manifest_path}: no roster found ({how}); pass --roster (doit: roster=PATH)"
        )
    return manifest, load_roster(path, label), label
