"""`brigade init`: brigade in the user's own repository (a dodo, an example battery, make).

Writes a three-line `dodo.py`, an example manifest and roster under
`evals/` (an offline seat, so the first `doit` runs anywhere), and
`brigade.mk`, the Makefile snippet (a `Makefile` including it when the
project has none). It never overwrites: when any of its files exists, it
writes none and names the file (exit 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from brigade.errors import InputError

MANIFEST = "evals/manifest.yaml"
DODO = '''"""`doit` brings the evaluation battery up to date (brigade: README.md, docs)."""
from brigade.dodo import battery
globals().update(battery("{manifest}"))
'''
EXAMPLE_MANIFEST = """\
# An example battery: edit the cases, then add seats of the agents you use to roster.yaml
# (cli: claude, codex, cursor, gemini, ...). `doit` brings every cell up to date.
schema: brigade.eval_manifest.v1
name: example
trials: 1
seats: [echo]
roster: roster.yaml
cases:
  - id: greet
    prompt: "Reply with the last word of this prompt only: hello"
    graders:
      - {type: exact_output, expected: hello}
"""
EXAMPLE_ROSTER = """\
# The seats a manifest may name. "echo" runs offline: it answers with the prompt's last word.
# {python} is the interpreter running brigade.
schema: brigade.roster.v1
timeout_seconds: 60
seats:
  echo:
    cli: "exec:{python} -c \\"import sys; print(sys.stdin.read().split()[-1])\\""
    acknowledge_read_only: true
"""
SNIPPET = """\
# brigade (written by brigade init): `make eval` brings the battery up to date.
# make turns any failing recipe into its own exit 2, which to brigade means "could not
# start"; so brigade's own exit code goes to $(BRIGADE_STATUS) first: 0 clean, 1 a seat's
# real failure, 3 a measurement failure, 2 could not start (a CI job reads it there).
DOIT           ?= doit
BRIGADE_VARS   ?=
BRIGADE_STATUS ?= .brigade/make-status

.PHONY: eval
eval:
\t@mkdir -p $(dir $(BRIGADE_STATUS))
\t@$(DOIT) $(BRIGADE_VARS); code=$$?; echo $$code > $(BRIGADE_STATUS); exit $$code
"""
MAKEFILE = "include brigade.mk\n"


@dataclass(frozen=True)
class Written:
    """What `brigade init` wrote, and the line to add to an existing Makefile (or None)."""

    files: tuple[Path, ...]
    include_line: str | None


def init_project(folder: Path) -> Written:
    """Write the files of a new brigade project into `folder`; InputError (nothing written)
    when any of them exists."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder (brigade init FOLDER)")
    files = {
        folder / "dodo.py": DODO.format(manifest=MANIFEST),
        folder / MANIFEST: EXAMPLE_MANIFEST,
        folder / "evals" / "roster.yaml": EXAMPLE_ROSTER,
        folder / "brigade.mk": SNIPPET,
    }
    makefile = folder / "Makefile"
    has_makefile = os.path.lexists(makefile)
    if not has_makefile:
        files[makefile] = MAKEFILE
    for path in files:
        if os.path.lexists(path):
            raise InputError(
                f"{path}: exists; brigade init never overwrites a file (move it away, or add "
                "what it would write by hand: README.md, In your own repository)"
            )
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: created here or not at all (a file or link appearing meanwhile is kept)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        written.append(path)
    return Written(tuple(written), None if not has_makefile else "include brigade.mk")
