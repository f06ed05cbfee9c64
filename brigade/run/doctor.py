"""Which seats can launch here: the executable each seat resolves to, its version, and how
it is confined (the sandbox, or only what its CLI enforces itself)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from brigade.adapters import adapter_for
from brigade.adapters.base import Adapter, SeatRequest
from brigade.adapters.versions import older_than
from brigade.core.specs import SandboxMode, SeatSpec
from brigade.errors import EnvironmentProblem
from brigade.run import sandbox
from brigade.run.proc import capture, resolve_executable

_versions: dict[tuple[str, ...], str | None] = {}
_versions_lock = threading.Lock()


@dataclass(frozen=True)
class SeatCheck:
    """One seat's launchability."""

    seat: str
    cli: str
    program: str
    executable: str | None
    version: str | None
    read_only_enforcement: str
    sandbox_mode: SandboxMode = "auto"
    network: bool = True
    sandboxed: bool = False  # the sandbox works here and the seat uses it
    adapter: str = ""  # the adapter's name
    min_version: str | None = None  # the oldest version the seat's adapter drives

    @property
    def refused(self) -> bool:
        """Whether the seat requires the sandbox and it cannot run here."""
        return self.sandbox_mode == "required" and not self.sandboxed

    @property
    def outdated(self) -> bool:
        """Whether the CLI is older than the oldest version its adapter drives (its parser
        would refuse brigade's command line: every cell a cli_incompatible fault)."""
        return older_than(self.version, self.min_version)

    @property
    def ok(self) -> bool:
        """Whether the seat can run: its program was found, is not too old for its adapter
        (and a required sandbox works)."""
        return self.executable is not None and not self.refused and not self.outdated


def probe_request(seat: SeatSpec, workspace: Path, writable: bool = False) -> SeatRequest:
    """A request with a placeholder prompt, for looking at how a seat would be launched."""
    return SeatRequest(
        seat=seat,
        prompt="(probe)",
        cwd=workspace,
        run_dir=workspace,
        writable=writable,
        cell_id="0" * 64,
        coordinate="probe:probe:1",
    )


def executable_version(adapter: Adapter, seat: SeatSpec, executable: str | None) -> str | None:
    """The first line the CLI prints for its version (cached per command, per process)."""
    argv = adapter.version_argv(seat)
    if argv is None or executable is None:
        return None
    key = (executable, *argv[1:])
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    code, out, err = capture([executable, *argv[1:]], timeout=30)
    text = (out or err).strip().splitlines()
    version = text[0].strip() if code == 0 and text else None
    with _versions_lock:
        _versions[key] = version
    return version


def check_seat(seat: SeatSpec, workspace: Path) -> SeatCheck:
    """Resolve a seat's program on PATH (or relative to the workspace), ask its version,
    and say whether it runs in the sandbox here."""
    adapter = adapter_for(seat.cli)
    invocation = adapter.invocation(probe_request(seat, workspace))
    env = {**os.environ, **seat.env}
    program = invocation.argv[0]
    executable = resolve_executable(program, workspace, env)
    mode = seat.sandbox.mode
    return SeatCheck(
        seat=seat.name,
        cli=seat.cli,
        program=program,
        executable=executable,
        version=executable_version(adapter, seat, executable),
        read_only_enforcement=invocation.read_only_enforcement,
        sandbox_mode=mode,
        network=seat.network,
        sandboxed=mode != "off" and sandbox.availability().ok,
        adapter=adapter.name,
        min_version=adapter.min_version,
    )


def missing_programs(seats: Iterable[SeatSpec], workspace: Path) -> list[tuple[str, str]]:
    """(seat, program) for each seat whose program cannot be run here (what `check_seat`
    resolves, without asking for versions)."""
    missing = []
    for seat in seats:
        invocation = adapter_for(seat.cli).invocation(probe_request(seat, workspace))
        program = invocation.argv[0]
        if resolve_executable(program, workspace, {**os.environ, **seat.env}) is None:
            missing.append((seat.name, program))
    return missing


def refuse_required(
    seats: Iterable[SeatSpec], *, override: SandboxMode | None = None, what: str = "seat"
) -> None:
    """Refuse (EnvironmentProblem, exit 2) when one of `seats` requires the sandbox and it
    cannot run here; probes the sandbox only when a seat requires it. `what` names the
    seats' role in the message (`judge seat` for the seats of judge graders)."""
    for seat in seats:
        if (override or seat.sandbox.mode) != "required":
            continue
        found = sandbox.availability()
        if not found.ok:
            raise EnvironmentProblem(
                f"{what} {seat.name}: sandbox: required, but the sandbox cannot run here: "
                f"{found.detail} (or run with --sandbox auto / doit sandbox=auto)"
            )


# how a roster silences the read-only warning of a seat it knows about
ACKNOWLEDGE = " (the seat's acknowledge_read_only: true silences this)"


def confinement_notes(
    seats: list[SeatSpec],
    workspace: Path,
    *,
    read_only: bool,
    override: SandboxMode | None = None,
    local: bool = True,
) -> list[str]:
    """Before seats run: refuse a required sandbox that cannot run here, and warn, one line a
    seat, where a read-only run or `network: false` will not be enforced.

    Probes the sandbox (once per process) only when a seat wants it. On a cluster
    (`local=False`) each worker decides for itself, so only seats with the sandbox
    off are warned about. Raises EnvironmentProblem (exit 2) for a required sandbox.
    """
    lines = []
    for seat in seats:
        mode = override or seat.sandbox.mode
        if mode == "off":
            why = "the sandbox is off"
        elif not local:
            continue
        else:
            found = sandbox.availability()
            if found.ok:
                continue
            refuse_required([seat], override=override)
            why = f"the sandbox cannot run here ({found.detail})"
        adapter = adapter_for(seat.cli)
        level = adapter.invocation(probe_request(seat, workspace)).read_only_enforcement
        if read_only and level in ("soft", "none") and not seat.acknowledge_read_only:
            how = "only asks the agent not to write" if level == "soft" else "cannot enforce it"
            if mode == "off":
                lines.append(
                    f"seat {seat.name}: read-only run, but the {adapter.name} adapter {how}; "
                    f"the seat may still change the workspace{ACKNOWLEDGE}"
                )
            else:
                lines.append(
                    f"seat {seat.name}: read-only run, but {why} and the {adapter.name} "
                    f"adapter {how}; the seat may still change the workspace{ACKNOWLEDGE}"
                )
        if not seat.network:
            lines.append(
                f"seat {seat.name}: network: false, but {why}; the seat can still use the network"
            )
    return lines
