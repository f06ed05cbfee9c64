"""The graders' spec checks of a battery, kept in brigade's cache folder.

What `brigade run` warns of before a grader records grader_error (a spec it
cannot run, a pattern that can take exponential time) depends on the specs and
brigade's code alone: the answers are kept by the specs' digests and
`sources.code_digest`, so an unchanged battery's resume neither checks them
again nor imports the graders and the pattern engine to do so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.inputs import sources
from brigade.inputs.cache import cache_dir, write_cache_entry

# a spec's check: why it would record grader_error (None: it looks runnable), and else
# the warnings about its patterns
Check = tuple[str | None, tuple[str, ...]]

# a cached answer larger than this is not read (a battery's specs' answers are small)
MAX_ENTRY_BYTES = 64 * 1024 * 1024


def spec_checks(specs: Mapping[str, Mapping[str, Any]]) -> dict[str, Check]:
    """The check of each spec, by its key in `specs` (its canonical JSON text)."""
    digests = {key: hashlib.sha256(key.encode("utf-8")).hexdigest() for key in specs}
    material = "\0".join([sources.code_digest(), *sorted(set(digests.values()))])
    entry = cache_dir() / "specs" / f"{hashlib.sha256(material.encode()).hexdigest()}.json"
    answers = _cached(entry, set(digests.values()))
    if answers is None:
        answers = {digests[key]: _check(spec) for key, spec in specs.items()}
        document = {
            name: [problem, list(warnings)] for name, (problem, warnings) in answers.items()
        }
        write_cache_entry(entry, json.dumps(document, sort_keys=True).encode("utf-8"))
    return {key: answers[digests[key]] for key in specs}


def _check(spec: Mapping[str, Any]) -> Check:
    from brigade.run import graders

    problem = graders.spec_problem(spec)
    return problem, () if problem else tuple(graders.pattern_warnings(spec))


def _cached(entry: Path, wanted: set[str]) -> dict[str, Check] | None:
    """The answers a cache entry holds for exactly the `wanted` digests, or None (missing,
    unreadable, or not such answers: checked again)."""
    try:
        document = fs.read_json(entry, limit=MAX_ENTRY_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or set(document) != wanted:
        return None
    answers: dict[str, Check] = {}
    for name, value in document.items():
        if not (isinstance(value, list) and len(value) == 2):
            return None
        problem, warnings = value
        if not (problem is None or isinstance(problem, str)) or not isinstance(warnings, list):
            return None
        if not all(isinstance(line, str) for line in warnings):
            return None
        answers[name] = (problem, tuple(warnings))
    return answers
