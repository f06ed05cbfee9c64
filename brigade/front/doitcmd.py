"""`brigade doit ...`: doit's own command line over brigade's tasks, loaded by brigade.

Plain `doit` imports a dodo before it says which command runs, and gives it
only its variables (`get_var`). `brigade doit` runs doit through its public
API instead: `DoitMain` with brigade's own task loader (a `TaskLoader2`) and
doit's commands, each told to the loader before it loads the tasks. So it
knows the command, its task names, `-n` and `-a` when it builds the tasks:

- a task name that names nothing (`nosuchtask`, a pattern matching no cell,
  `doit list cell:*`) exits 2 with the closest names, and so does a bad option
  (`--bogus-flag`, `-n abc`: doit says 3, "error before task execution");
- `-n N` is the cap of seat runs in flight (plain doit: `jobs=N`); `-a` runs
  the selected cells again as new attempts (plain doit: `always=1`);
- `-r NAME` reports through that doit reporter from inside brigade's, which
  keeps the lock, the progress on stderr and the exit code;
- `forget`: a cell's task is forgotten in the output directory, the truth
  (forgotten.json): the next run that selects it runs it as a new attempt,
  while deleting `.doit.db` still re-runs nothing that is finished;
- `list` and `info` take no lock (plain doit takes it for every command).

Nothing here is registered with doit: installing brigade changes no doit
command of another project.
"""

from __future__ import annotations

import re
import runpy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from doit.cmd_base import NamespaceTaskLoader
from doit.cmd_forget import Forget as DoitForget
from doit.cmd_run import Run as DoitRun
from doit.cmdparse import CmdParseError
from doit.doit_cmd import DoitMain

from brigade.core.taxonomy import EXIT_UNUSABLE
from brigade.core.terminal import printable
from brigade.engine.names import cell_task_name
from brigade.front import tasks
from brigade.front.reporter import CACHE_PLUGINS, make_reporter
from brigade.outdir import forgotten, lock

DODO_FILE = "dodo.py"  # doit's default dodo, read for the manifest it names


def command_line_variables(args: Sequence[str]) -> dict[str, str]:
    """The `NAME=VALUE` arguments of a doit command line, as doit reads them (an argument
    that does not start with `-` and holds a `=`)."""
    found: dict[str, str] = {}
    for arg in args:
        if arg[:1] != "-" and "=" in arg:
            name, value = arg.split("=", 1)
            found[name] = value
    return found


class BrigadeLoader(NamespaceTaskLoader):
    """doit's tasks for brigade's variables, built once the command is known."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        super().__init__()
        self.variables = dict(variables)
        self.invocation = tasks.Invocation(command="run")
        self.namespace: dict[str, Any] | None = None
        self.loaded: tasks.Loaded | None = None

    def announce(self, invocation: tasks.Invocation) -> None:
        """The command about to load the tasks (each command says so first)."""
        self.invocation = invocation

    def load_doit_config(self) -> dict[str, Any]:
        """Build the namespace (under the lock for a command that writes) and its config;
        the manifest is `manifest=`, else the one the project's dodo.py here names."""
        default = None
        if "manifest" not in self.variables and Path(DODO_FILE).is_file():
            default = named_manifest(Path(DODO_FILE).absolute())
        loaded = tasks.load_namespace(self.variables, self.invocation, default_manifest=default)
        self.loaded = loaded
        self.namespace = loaded.namespace
        config: dict[str, Any] = loaded.namespace["DOIT_CONFIG"]
        return config


def named_manifest(dodo: Path) -> str | None:
    """The manifest a project's dodo names (`battery("...")`, relative to its folder), read
    by running the dodo while brigade.dodo builds nothing; None when it names none."""
    tasks.asked_manifests = []
    try:
        runpy.run_path(str(dodo), run_name="dodo")
        named = [manifest for manifest in tasks.asked_manifests if manifest]
    finally:
        tasks.asked_manifests = None
    return str(dodo.parent / named[-1]) if named else None


def _told(cls: type[Any]) -> type[Any]:
    """A doit command that tells brigade's loader what it is before loading the tasks."""

    def execute(self: Any, params: Mapping[str, Any], args: Sequence[str]) -> Any:
        loader = getattr(self, "loader", None)
        if isinstance(loader, BrigadeLoader):
            jobs = params.get("num_process") if "num_process" in params else None
            loader.announce(
                tasks.Invocation(
                    command=self.get_name(),
                    args=tuple(str(arg) for arg in args),
                    jobs=int(jobs) if jobs else None,
                    always=bool(params.get("always")) if "always" in params else False,
                )
            )
        return cls.execute(self, params, args)

    return type(cls.__name__, (cls,), {"execute": execute, "__doc__": cls.__doc__})


def short_error(err: CmdParseError) -> str:
    """doit's parse error in one line, without the list of every option it knows."""
    text = " ".join(str(err).split())
    unknown = _NOT_RECOGNIZED.search(text)
    if unknown:
        return f"option {unknown.group(1)} not recognized"
    return text


_NOT_RECOGNIZED = re.compile(r"option (\S+) not recognized")


class _BadOptionsExit2:
    """A command whose bad options exit 2, as a bad invocation of brigade does."""

    name: str

    def parse_execute(self, in_args: list[str]) -> int:
        try:
            return int(super().parse_execute(in_args) or 0)  # type: ignore[misc]
        except CmdParseError as err:
            sys.stderr.write(
                printable(
                    f"ERROR: {short_error(err)} (brigade doit help {self.name} lists the options)\n"
                )
            )
            return EXIT_UNUSABLE


class Run(_BadOptionsExit2, DoitRun):
    """doit's `run` over brigade's tasks."""

    name = "run"
    loader: BrigadeLoader

    def _execute(
        self,
        outfile: Any,
        verbosity: Any = None,
        always: bool = False,
        continue_: bool = False,
        reporter: Any = "console",
        num_process: int = 0,
        par_type: str = "process",
        single: bool = False,
        auto_delayed_regex: bool = False,
        force_verbosity: bool = False,
        failure_verbosity: int = 0,
        pdb: bool = False,
    ) -> Any:
        """doit's run (its own signature: doit passes the options by name)."""
        if num_process and par_type == "process":
            sys.stderr.write(
                "brigade: doit -P process: brigade runs the seats in threads of doit's own "
                "process; drop -P process (-n N alone runs N seats at once)\n"
            )
            lock.discard_refused()
            return EXIT_UNUSABLE
        loaded = getattr(self.loader, "loaded", None)
        if isinstance(reporter, str) and loaded is not None and reporter in self.reporters:
            # `-r NAME`: that reporter reports as it does, from inside brigade's
            reporter = make_reporter(
                loaded.engine, inner=self.reporters[reporter], fresh_db=loaded.fresh_db
            )
        return super()._execute(
            outfile,
            verbosity=verbosity,
            always=always,
            continue_=continue_,
            reporter=reporter,
            num_process=num_process,
            par_type=par_type,
            single=single,
            auto_delayed_regex=auto_delayed_regex,
            force_verbosity=force_verbosity,
            failure_verbosity=failure_verbosity,
            pdb=pdb,
        )


class Forget(_BadOptionsExit2, DoitForget):
    """doit's `forget`; a forgotten cell also runs again as a new attempt (recorded in the
    output directory: forgotten.json)."""

    sel_tasks: list[str] | None
    sel_default_tasks: bool
    loader: BrigadeLoader

    name = "forget"
    doc_purpose = (
        "clear successful run status from internal DB (brigade: a forgotten cell runs "
        "again as a new attempt, recorded in the output directory)"
    )

    def _execute(self, forget_sub: bool, forget_disable_default: bool, forget_all: bool) -> Any:
        loaded = getattr(self.loader, "loaded", None)
        if loaded is None:  # (another loader than brigade's: doit's own forget)
            return super()._execute(forget_sub, forget_disable_default, forget_all)
        cells = loaded.engine.choice.by_names
        session = loaded.session
        if cells:
            forgotten.record(session.inputs.out, cells, session.scan.recorded)
            where = session.inputs.out / forgotten.FORGOTTEN_FILE
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
            # doit's "every default task" (brigade's tasks name none: all of them)
            forget_all = forget_all or not forget_disable_default
        return super()._execute(forget_sub, forget_disable_default, forget_all)


FORGET_ALL_NOTE = (
    "doit forget without cell names clears only doit's cache: the output directory is the "
    "truth, so finished cells stay finished (name cells to run them again: brigade doit "
    "forget cell:CASE:SEAT:TRIAL, or a pattern such as 'cell:CASE:*')"
)


class BrigadeMain(DoitMain):
    """doit's main over brigade's loader: doit's commands, `run` and `forget` brigade's."""

    BIN_NAME = "brigade doit"  # how doit's help and messages name the program

    def get_cmds(self) -> Any:
        """doit's commands, each telling the loader what it is before loading the tasks."""
        commands = super().get_cmds()
        commands["run"] = Run
        commands["forget"] = Forget
        for name in list(commands):
            commands[name] = _told(commands.get_plugin(name))
        return commands


def run_doit(args: Sequence[str]) -> int:
    """`brigade doit ARGS`: doit's command line over brigade's tasks; its exit code."""
    main = BrigadeMain(
        BrigadeLoader(command_line_variables(args)),
        config_filenames=(),
        extra_config=CACHE_PLUGINS,
    )
    try:
        code = main.run(list(args))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return int(code or 0)
