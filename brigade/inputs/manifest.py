"""Manifests: the cases (prompt + graders) of an evaluation and the seats to run them on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from brigade.core.identity import canonical_json, normalize_prompt, sha256_hex, text_digest
from brigade.core.sequential import Rule
from brigade.core.specs import (
    DEFAULT_MODE,
    DEFAULT_SETUP_TIMEOUT_SECONDS,
    Case,
    Manifest,
    SetupSpec,
    WorkspaceSpec,
)
from brigade.core.trials import CONFIDENCE
from brigade.errors import InputError
from brigade.inputs import schemas
from brigade.inputs.documents import decode_utf8, read_regular_file
from brigade.inputs.validated import read_valid_document

MANIFEST_SCHEMA = "brigade.eval_manifest.v1"


def load_manifest(path: Path, label: str | None = None) -> Manifest:
    """Read, validate and resolve a manifest; InputError (exit 2) on any problem."""
    label = label or str(path)
    doc = read_valid_document(path, label, MANIFEST_SCHEMA)
    return manifest_from_document(doc, path, label, validated=True)


def manifest_from_document(
    doc: Any, path: Path, label: str, *, validated: bool = False
) -> Manifest:
    """Validate a parsed manifest document (unless already done) and resolve its cases."""
    if not validated:
        schemas.check_input(doc, MANIFEST_SCHEMA, label)
    base = path.resolve().parent
    default_trials = doc.get("trials", 1)
    problems: list[str] = []  # every problem of the document, listed together
    default_rule = _rule(default_trials, doc, label, "trials", problems)
    default_graders = tuple(doc.get("graders", []))  # one tuple, shared by the cases
    default_workspace = _workspace(doc.get("workspace"), base, f"{label}: workspace", problems)
    default_setup = _setup(doc.get("setup"), base, f"{label}: setup", problems)
    resolved_cases: list[dict[str, Any]] = []
    resolved = False  # whether a case's prompt is other than the document's
    cases: list[Case] = []
    first_index: dict[str, int] = {}
    known_workspaces: dict[str, WorkspaceSpec] = {}
    known_setups: dict[str, SetupSpec] = {}
    for index, raw in enumerate(doc["cases"]):
        case_id = raw["id"]
        if case_id in first_index:
            problems.append(
                f"{label}: cases[{index}].id: duplicate case id {case_id!r} "
                f"(first used at cases[{first_index[case_id]}])"
            )
        first_index.setdefault(case_id, index)
        if "prompt_file" in raw:
            try:
                prompt = _read_prompt_file(
                    base, raw["prompt_file"], f"{label}: cases[{index}].prompt_file"
                )
            except InputError as exc:
                problems.append(str(exc))
                continue
        else:
            prompt = normalize_prompt(raw["prompt"])
        if prompt != raw.get("prompt"):  # a prompt file's text, or line endings made `\n`
            resolved = True
        resolved_cases.append({**raw, "prompt": prompt})
        where = f"{label}: cases[{index}]"
        # cases sharing a workspace or a setup: its paths checked once (a problem is said
        # for every case that has it)
        workspace = default_workspace
        if "workspace" in raw:
            key = canonical_json(raw["workspace"])
            workspace = known_workspaces.get(key) or _workspace(
                raw["workspace"], base, f"{where}.workspace", problems
            )
            if workspace is not None:
                known_workspaces[key] = workspace
        setup = default_setup
        if "setup" in raw:
            key = canonical_json(raw["setup"])
            setup = known_setups.get(key)
            if setup is None:
                said = len(problems)
                setup = _setup(raw["setup"], base, f"{where}.setup", problems)
                if setup is not None and len(problems) == said:
                    known_setups[key] = setup
        if setup is not None and workspace is None:
            problems.append(
                f"{where}: setup needs a workspace of the case's own "
                "(workspace: {repo: PATH, commit: SHA} or {dir: PATH})"
            )
        if "trials" in raw:
            trials = raw["trials"]
            rule = _rule(trials, doc, label, f"cases[{index}].trials", problems)
        else:
            trials, rule = default_trials, default_rule
        cases.append(
            Case(
                id=case_id,
                prompt=prompt,
                # the schema admits 2.0 as an integer; identity needs the int
                trials=rule.min if rule is not None else int(trials),
                graders=tuple(raw["graders"]) if "graders" in raw else default_graders,
                prompt_file=raw.get("prompt_file"),
                workspace=workspace,
                setup=setup,
                rule=rule,
            )
        )
    if problems:
        raise InputError("\n".join(problems))
    digest = manifest_digest(doc)
    return Manifest(
        path=path,
        name=doc["name"],
        seats=tuple(doc["seats"]),
        cases=tuple(cases),
        execution_mode=doc.get("execution", {}).get("mode", DEFAULT_MODE),
        roster=doc.get("roster"),
        digest=digest,
        # what the cells are made of (prompt files read): keys of caches of the expansion;
        # the document's own canonical JSON when every prompt is as written
        content_digest=(
            text_digest(canonical_json({**doc, "cases": resolved_cases}))
            if resolved
            else f"sha256:{digest}"
        ),
        max_cost=float(doc["max_cost"]) if doc.get("max_cost") is not None else None,
    )


def _rule(trials: Any, doc: Any, label: str, where: str, problems: list[str]) -> Rule | None:
    """The adaptive rule of a `trials` object (None for a number); its problems listed."""
    if not isinstance(trials, dict):
        return None
    until = trials["until"]
    low, high = int(trials["min"]), int(trials["max"])
    if low > high:
        problems.append(f"{label}: {where}.min: {low} is more than max {high}")
    decided = until.get("decided")
    if decided is not None:
        for position, seat in enumerate(decided):
            if seat not in doc["seats"]:
                problems.append(
                    f"{label}: {where}.until.decided[{position}]: {seat!r} is not one of the "
                    f"manifest's seats ({', '.join(doc['seats'])})"
                )
    return Rule(
        min=low,
        max=max(low, high),
        ci_width=float(until["ci_width"]) if "ci_width" in until else None,
        decided=(str(decided[0]), str(decided[1])) if decided is not None else None,
        confidence=float(until.get("confidence", CONFIDENCE)),
    )


def manifest_digest(doc: Any) -> str:
    """The original tool's manifest digest: sha256 hex of the canonical JSON of the
    document as loaded (YAML and JSON spellings of one manifest share it).

    "As loaded" is the document as written: a `prompt_file` enters as its name,
    not its text (the prompt text enters each cell's id instead).
    """
    return sha256_hex(canonical_json(doc).encode("utf-8"))


def contained_path(base: Path, relative: str) -> Path | None:
    """`base/relative` resolved, or None when it escapes `base` (absolute, `..`, symlinks)."""
    if Path(relative).is_absolute():
        return None
    root = base.resolve()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        return None
    return target


def _workspace(raw: Any, base: Path, where: str, problems: list[str]) -> WorkspaceSpec | None:
    """A `workspace` entry: a repository (relative to the manifest's folder, or absolute)
    that must exist, or a folder that must exist inside the manifest's folder."""
    if raw is None:
        return None
    if "dir" in raw:
        target = contained_path(base, raw["dir"])
        if target is None:
            problems.append(
                f"{where}.dir: {raw['dir']!r} is outside the manifest's folder; "
                "a workspace folder must live beside the manifest"
            )
            return None
        if not target.is_dir():
            problems.append(f"{where}.dir: {raw['dir']!r} is not a folder")
            return None
        return WorkspaceSpec(kind="dir", path=str(target))
    target = Path(os.path.normpath(base / raw["repo"]))
    if not target.is_dir():
        problems.append(f"{where}.repo: {raw['repo']!r} does not exist (no such folder)")
        return None
    return WorkspaceSpec(kind="repo", path=str(target), revision=raw.get("commit", "HEAD"))


def _setup(raw: Any, base: Path, where: str, problems: list[str]) -> SetupSpec | None:
    """A `setup` entry: its commands, its inputs (inside the manifest's folder, existing)."""
    if raw is None:
        return None
    spec = raw if isinstance(raw, dict) else {"commands": raw}
    commands = tuple(c if isinstance(c, str) else tuple(c) for c in spec["commands"])
    inputs: list[str] = []
    for index, relative in enumerate(spec.get("inputs", [])):
        target = contained_path(base, relative)
        if target is None:
            problems.append(
                f"{where}.inputs[{index}]: {relative!r} is outside the manifest's folder"
            )
        elif not target.exists():
            problems.append(f"{where}.inputs[{index}]: {relative!r} does not exist")
        else:
            inputs.append(str(target))
    return SetupSpec(
        commands=commands,
        inputs=tuple(inputs),
        timeout_seconds=float(spec.get("timeout_seconds", DEFAULT_SETUP_TIMEOUT_SECONDS)),
        network=bool(spec.get("network", True)),
    )


def _read_prompt_file(base: Path, relative: str, where: str) -> str:
    target = contained_path(base, relative)
    if target is None:
        raise InputError(
            f"{where}: {relative!r} is outside the manifest's folder; "
            "prompt files must live beside the manifest"
        )
    try:
        data = read_regular_file(target)
    except FileNotFoundError:
        raise InputError(f"{where}: {relative!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{where}: {relative!r} is a directory") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read {relative!r}: {exc.strerror or exc}") from None
    return normalize_prompt(decode_utf8(data, where))
