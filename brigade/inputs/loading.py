"""Loading a battery's inputs: a manifest and the roster it names."""

from __future__ import annotations

from pathlib import Path

from brigade.core.specs import Manifest, Roster
from brigade.errors import InputError
from brigade.inputs.manifest import load_manifest
from brigade.inputs.roster import load_roster

DEFAULT_ROSTER = "roster.yaml"


def roster_path(manifest_path: Path, manifest: Manifest, explicit: Path | None) -> Path:
    """--roster, else the manifest's `roster` key, else roster.yaml beside the manifest."""
    if explicit is not None:
        return explicit
    if manifest.roster is not None:
        return manifest_path.parent / manifest.roster
    return manifest_path.parent / DEFAULT_ROSTER


def load_inputs(manifest_path: Path, explicit_roster: Path | None) -> tuple[Manifest, Roster, str]:
    """Load and validate the manifest and its roster."""
    manifest = load_manifest(manifest_path)
    path = roster_path(manifest_path, manifest, explicit_roster)
    label = str(path)
    if explicit_roster is None and not path.exists():
        how = (
            f"its `roster` key names {manifest.roster!r}"
            if manifest.roster
            else (f"there is no {DEFAULT_ROSTER} beside it")
        )
        raise InputError(
            f"{manifest_path}: no roster found ({how}); pass --roster (doit: roster=PATH)"
        )
    return manifest, load_roster(path, label), label
