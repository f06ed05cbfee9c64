"""doit commands an installed brigade provides (entry points in the `doit.COMMAND` group).

doit builds its command table before it imports a dodo, and entry points
replace its own commands wherever doit runs in this environment. So every
class here behaves exactly as doit's own unless the dodo is brigade's:

- `run`: a bad option (`--bogus-flag`, `-n abc`) exits 2, as a bad
  invocation of brigade does (doit says 3, "error before task execution");
- `forget`: a cell's task is forgotten in the output directory, the truth
  (forgotten.json): the next run that selects it runs it as a new attempt,
  while deleting `.doit.db` still re-runs nothing that is finished.

Whether the dodo is brigade's is known once it is imported (it sets
`front.tasks.loaded`); a bad option is seen before that, so the dodo file
doit would load is read for an import of brigade.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from doit.cmd_forget import Forget as DoitForget
from doit.cmd_run import Run as DoitRun
from doit.cmdparse import CmdParseError

# doit imports this module for every command it runs in this environment, before any
# dodo: it imports nothing of brigade until a dodo of brigade's is loaded

EXIT_UNUSABLE = 2  # core/taxonomy's: "could not start" (not imported here, see above)

# a dodo that imports brigade (dodo.py here: `from brigade.front.tasks import dodo_namespace`)
_USES_BRIGADE = re.compile(r"^\s*(?:from|import)\s+brigade\b", re.MULTILINE)


def _loader_option(args: Sequence[str], short: str, long: str) -> str | None:
    """The value of a loader option (`-f X`, `-fX`, `--file X`, `--file=X`) in raw args."""
    for index, arg in enumerate(args):
        if arg in (f"-{short}", f"--{long}") and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(f"--{long}="):
            return arg.split("=", 1)[1]
        if arg.startswith(f"-{short}") and len(arg) > 2 and not arg.startswith("--"):
            return arg[2:]
    return None


def dodo_path(opt_vals: Mapping[str, Any], args: Sequence[str]) -> Path:
    """The dodo file doit would load for these loader options (given before the command,
    `opt_vals`) or raw arguments (after it)."""
    dodo = (
        opt_vals.get("dodoFile")
        or _loader_option(args, "f", "file")
        or os.environ.get("DOIT_FILE")
        or "dodo.py"
    )
    folder = opt_vals.get("cwdPath") or _loader_option(args, "d", "dir")
    base = Path(folder) if folder else Path.cwd()
    path = base / dodo
    seek = opt_vals.get("seek_file") or "-k" in args or "--seek-file" in args
    if seek and not path.exists():
        for parent in base.absolute().parents:
            if (parent / dodo).exists():
                return parent / dodo
    return path


def is_brigade_dodo(path: Path) -> bool:
    """Whether a dodo file imports brigade (read up to 64 KiB; False when unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 16)
    except OSError:
        return False
    return bool(_USES_BRIGADE.search(text))


def short_error(err: CmdParseError) -> str:
    """doit's parse error in one line, without the list of every option it knows."""
    text = " ".join(str(err).split())
    unknown = _NOT_RECOGNIZED.search(text)
    if unknown:
        return f"option {unknown.group(1)} not recognized"
    return text


_NOT_RECOGNIZED = re.compile(r"option (\S+) not recognized")


class _BadOptionsExit2:
    """A command whose bad options exit 2 over brigade's dodo (doit's own code is 3)."""

    opt_vals: Mapping[str, Any]
    name: str

    def parse_execute(self, in_args: list[str]) -> int:
        try:
            return int(super().parse_execute(in_args) or 0)  # type: ignore[misc]
        except CmdParseError as err:
            if not is_brigade_dodo(dodo_path(self.opt_vals, in_args)):
                raise  # doit's own: "ERROR: ..." and exit 3
            from brigade.core.terminal import printable

            sys.stderr.write(
                printable(f"ERROR: {short_error(err)} (doit help {self.name} lists the options)\n")
            )
            return EXIT_UNUSABLE


class Run(_BadOptionsExit2, DoitRun):
    """doit's `run`; bad options exit 2 over brigade's dodo."""

    name = "run"


class Forget(_BadOptionsExit2, DoitForget):
    """doit's `forget`; over brigade's dodo a forgotten cell also runs again as a new attempt
    (recorded in the output directory: forgotten.json)."""

    sel_tasks: list[str] | None
    sel_default_tasks: bool

    name = "forget"
    doc_purpose = (
        "clear successful run status from internal DB (brigade: a forgotten cell runs "
        "again as a new attempt, recorded in the output directory)"
    )

    def _execute(self, forget_sub: bool, forget_disable_default: bool, forget_all: bool) -> Any:
        from brigade.front import tasks
        from brigade.front.names import cell_task_name

        loaded = tasks.loaded
        if loaded is None:  # not brigade's dodo
            return super()._execute(forget_sub, forget_disable_default, forget_all)
        from brigade.core.terminal import printable
        from brigade.outdir import forgotten

        cells = loaded.choice.by_names
        session = loaded.session
        if cells:
            forgotten.record(session.out, cells, session.scan.recorded)
            where = session.out / forgotten.FORGOTTEN_FILE
            self.outstream.write(
                printable(
                    f"brigade: {len(cells)} cell(s) forgotten: the next run that selects them "
                    f"runs each as a new attempt (recorded in {where})\n"
                )
            )
            # doit forgets tasks by name: a pattern's cells by theirs
            self.sel_tasks = list(
                dict.fromkeys(
                    [str(name) for name in self.sel_tasks or () if "*" not in name]
                    + [cell_task_name(cell.coordinate) for cell in cells]
                )
            )
        elif forget_all or self.sel_default_tasks:
            sys.stderr.write(printable(f"brigade: {FORGET_ALL_NOTE}\n"))
            # doit's "every default task" (brigade's dodo names none: all of them)
            forget_all = forget_all or not forget_disable_default
        return super()._execute(forget_sub, forget_disable_default, forget_all)


FORGET_ALL_NOTE = (
    "doit forget without cell names clears only doit's cache: the output directory is the "
    "truth, so finished cells stay finished (name cells to run them again: doit forget "
    "cell:CASE:SEAT:TRIAL, or a pattern such as 'cell:CASE:*')"
)
