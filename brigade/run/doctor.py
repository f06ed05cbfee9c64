"""Which seats can launch here: the executable each seat resolves to and its version."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from brigade.adapters import adapter_for
from brigade.adapters.base import Adapter, SeatRequest
from brigade.core.specs import SeatSpec
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

    @property
    def ok(self) -> bool:
        """Whether the seat's program was found."""
        return self.executable is not None


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
    """Resolve a seat's program on PATH (or relative to the workspace) and ask its version."""
    adapter = adapter_for(seat.cli)
    invocation = adapter.invocation(probe_request(seat, workspace))
    env = {**os.environ, **seat.env}
    program = invocation.argv[0]
    executable = resolve_executable(program, workspace, env)
    return SeatCheck(
        seat=seat.name,
        cli=seat.cli,
        program=program,
        executable=executable,
        version=executable_version(adapter, seat, executable),
        read_only_enforcement=invocation.read_only_enforcement,
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


def read_only_warnings(seats: list[SeatSpec], workspace: Path) -> list[str]:
    """One line per seat that cannot enforce a read-only run by itself."""
    lines = []
    for seat in seats:
        adapter = adapter_for(seat.cli)
        level = adapter.invocation(probe_request(seat, workspace)).read_only_enforcement
        if level in ("soft", "none"):
            how = "only asks the agent not to write" if level == "soft" else "cannot enforce it"
            lines.append(
                f"seat {seat.name}: read-only run, but the {adapter.name} adapter {how}; "
                "the seat may still change the workspace"
            )
    return lines
