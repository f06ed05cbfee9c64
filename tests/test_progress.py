"""Progress on stderr: a live line on a terminal, a plain line per cell without one (a summary
line per 30 s past a rate), none with quiet; the resume line, the counts on Ctrl-C, the
final line. Tested for what is said (lines, counts), never for timing: durations are
masked, and the unit tests drive a fake clock."""

from __future__ import annotations

import io
import os
import pty
import re
import signal
import subprocess
import sys
from collections import Counter

from conftest import DODO, Project, wait_for

from brigade.engine.progress import Progress, duration

# a duration as progress prints one: `3.1 s`, `1m05s`, `2h03m`
TIME = re.compile(r"\b\d+\.\d s\b|\b\d+m\d\ds\b|\b\d+h\d\dm\b")


def masked(text: str) -> str:
    return TIME.sub("<t>", text)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(tty: bool = False, **options: object) -> tuple[Progress, io.StringIO, Clock]:
    stream, clock = io.StringIO(), Clock()
    shown = Progress(stream, total=5, tty=tty, clock=clock, **options)  # type: ignore[arg-type]
    return shown, stream, clock


def test_durations_are_short() -> None:
    assert [duration(s) for s in (3.14, 59.94, 65, 3599, 7380)] == [
        "3.1 s",
        "59.9 s",
        "1m05s",
        "59m59s",
        "2h03m",
    ]


def test_a_line_per_cell_without_a_terminal() -> None:
    shown, stream, clock = progress()
    shown.found_done(Counter({"accepted": 2}))
    shown.begin(done=2, to_run=3, resumed=True)
    shown.start("b:s:1")
    clock.now += 4
    shown.finish("rejected", "b:s:1", 3.14)
    shown.finish(None, "c:s:1", None)
    shown.note("seat s: a warning")
    shown.stop()
    assert stream.getvalue() == (
        "brigade: 2 of 5 cells done, 3 to run\n"
        "brigade: [3/5] b:s:1 rejected 3.1 s\n"
        "brigade: [4/5] c:s:1 missing\n"
        "brigade: seat s: a warning\n"
    )
    assert shown.counts_line() == "4 of 5 cells (accepted 2, missing 1, rejected 1)"


def test_past_the_rate_a_summary_line_per_window() -> None:
    shown, stream, clock = progress(rate=2)
    shown.begin(done=0, to_run=5, resumed=False)
    for index in range(4):
        shown.start(f"c{index}:s:1")
    for index in range(3):
        clock.now += 1
        shown.finish("accepted", f"c{index}:s:1", 1.0)
    shown.tick()  # within the window: nothing
    clock.now += 30
    shown.tick()  # the window ended with a cell held back
    clock.now += 1
    shown.finish("accepted", "c3:s:1", 1.0)  # a new window: a line of its own
    shown.stop()
    assert masked(stream.getvalue()) == (
        "brigade: [1/5] c0:s:1 accepted <t>\n"
        "brigade: [2/5] c1:s:1 accepted <t>\n"
        "brigade: [3/5] accepted 3 · <t> elapsed · ETA <t> · 1 running\n"
        "brigade: [4/5] c3:s:1 accepted <t>\n"
    )


def test_quiet_says_nothing_but_notes() -> None:
    shown, stream, clock = progress(quiet=True)
    shown.begin(done=1, to_run=4, resumed=True)
    shown.finish("accepted", "a:s:1", 1.0)
    shown.note("a warning")
    shown.stop()
    assert stream.getvalue() == "brigade: a warning\n"
    assert shown.counts_line() == "1 of 5 cells (accepted 1)"


def test_the_live_line_on_a_terminal() -> None:
    shown, stream, clock = progress(tty=True)
    shown.found_done(Counter({"accepted": 1}))
    shown.begin(done=1, to_run=4, resumed=True)
    for name in ("a:s:1", "b:s:1", "c:s:1", "d:s:1"):
        shown.start(name)
    clock.now += 10
    shown.finish("rejected", "a:s:1", 9.0)
    assert shown.live_line() == (
        "[2/5] accepted 1 · rejected 1 · 10.0 s · ETA 30.0 s · running b:s:1, c:s:1, d:s:1"
    )
    shown.start("e:s:1")
    assert shown.live_line().endswith("running b:s:1, c:s:1, d:s:1 +1")
    shown.note("a warning")  # above the live line, which is drawn again
    shown.stop()
    text = stream.getvalue()
    assert text.startswith("brigade: 1 of 5 cells done, 4 to run\n\r\x1b[K[1/5] accepted 1 · ")
    assert "\r\x1b[Kbrigade: a warning\n\r\x1b[K[2/5]" in text
    assert text.endswith("\r\x1b[K")


# -- end to end -------------------------------------------------------------------------


def run_on_terminal(project: Project, *args: str) -> tuple[int, str]:
    """Run doit with stderr on a pseudo-terminal; return its exit code and what it printed."""
    leader, follower = pty.openpty()
    argv = [sys.executable, "-m", "doit", "-f", str(DODO), *args, *project.variables()]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=follower, env=project.env())
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the terminal closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


MIXED = [
    {"id": "a", "prompt": "answer: x", "graders": [{"type": "exit_status"}]},
    {"id": "b", "prompt": "exit: 1"},
]


def test_progress_line_on_a_terminal(project: Project) -> None:
    project.write_manifest(MIXED)
    code, printed = run_on_terminal(project)
    assert code == 1
    assert "\r\x1b[K[0/2] " in printed
    assert "[2/2] accepted 1 · execution_error 1 · " in printed
    assert "running a:agent:1" in printed
    report = project.out / "report" / "index.html"
    final = printed.split("\r\x1b[K")[-1].rstrip("\r\n")
    assert masked(final) == (
        f"brigade: 2 cells: accepted 1, execution_error 1 -> rejected (exit 1); <t>; "
        f"report: {report}"
    )


def test_a_line_per_cell_and_the_final_line_in_ci(project: Project) -> None:
    project.write_manifest(MIXED, trials=2)
    done = project.doit()
    report = project.out / "report" / "index.html"
    assert done.returncode == 1
    assert masked(done.stderr) == (
        "brigade: seat agent: read-only run, but the exec adapter cannot enforce it; the seat "
        "may still change the workspace (the seat's acknowledge_read_only: true silences this)\n"
        "brigade: [1/4] a:agent:1 accepted <t>\n"
        "brigade: [2/4] a:agent:2 accepted <t>\n"
        "brigade: [3/4] b:agent:1 execution_error <t>\n"
        "brigade: [4/4] b:agent:2 execution_error <t>\n"
        f"brigade: 4 cells: accepted 2, execution_error 2 -> rejected (exit 1); <t>; "
        f"report: {report}\n"
    )
    # a resume says what is done and what is left; a no-op says only the final line
    project.write_manifest([*MIXED, {"id": "c", "prompt": "tempfail: upstream 502"}], trials=2)
    resumed = project.doit()
    assert resumed.returncode == 3
    assert masked(resumed.stderr) == (
        "brigade: 4 of 6 cells done, 2 to run\n"
        "brigade: seat agent: read-only run, but the exec adapter cannot enforce it; the seat "
        "may still change the workspace (the seat's acknowledge_read_only: true silences this)\n"
        "brigade: [5/6] c:agent:1 adapter_error <t>\n"
        "brigade: [6/6] c:agent:2 adapter_error <t>\n"
        "brigade: 6 cells: accepted 2, execution_error 2, adapter_error 2; measurement "
        "failures 2 (provider_5xx 2) -> measurement_failure (exit 3); <t>; "
        f"report: {report}\n"
    )
    noop = project.run()
    assert noop.returncode == 3
    assert masked(noop.stderr) == (
        "brigade: 6 cells: accepted 2, execution_error 2, adapter_error 2; measurement "
        "failures 2 (provider_5xx 2) -> measurement_failure (exit 3); <t>; "
        f"report: {report}\n"
        "brigade: 2 cells with apparatus faults kept; re-run them with --retry-transient "
        "(doit: retry_transient=1)\n"
    )


def test_quiet_and_the_rate(project: Project) -> None:
    project.write_manifest(MIXED, trials=2)
    quiet = project.run("--quiet")
    assert [line for line in quiet.stderr.splitlines() if "[" in line] == []
    assert quiet.stderr.splitlines()[-1].startswith("brigade: 4 cells: ")
    project.write_manifest(MIXED, trials=3)
    rated = project.doit("quiet=0", "progress_rate=1")
    lines = masked(rated.stderr).splitlines()
    # one cell line in the first 30 s, then the rest in the closing summary line
    assert lines[2:4] == [
        "brigade: [5/6] a:agent:3 accepted <t>",
        "brigade: [6/6] accepted 3 · execution_error 3 · <t> elapsed",
    ]
    assert project.doit("quiet=yes").stderr.count("\n") == 1


def test_ctrl_c_prints_the_counts_so_far(project: Project) -> None:
    release = project.root / "release"
    project.write_manifest(
        [
            {"id": "a", "prompt": "answer: x"},
            {"id": "b", "prompt": f"block: {release}"},
            {"id": "c", "prompt": "answer: y"},
        ]
    )
    proc = project.doit_popen()
    wait_for(lambda: project.launches() == 2, what="the second cell running")
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT
    assert masked(err.splitlines()[-1]) == (
        "brigade: interrupted after 1 of 3 cells (unscored 1) in <t>; cells left running "
        "re-run on the next run"
    )


def test_the_final_line_names_the_report_from_the_folder_doit_was_run_in(
    project: Project,
) -> None:
    """`doit -k` from a subfolder of the project runs in the dodo's folder; the report
    the final line names is still found from the folder the user typed it in."""
    project.write_manifest(MIXED)
    (project.root / "dodo.py").write_text(
        'from brigade.dodo import battery\nglobals().update(battery("manifest.yaml"))\n'
    )
    sub = project.root / "sub"
    sub.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "doit", "-k"],
        cwd=sub,
        capture_output=True,
        text=True,
        env=project.env(),
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    final = done.stderr.splitlines()[-1]
    shown = final.rpartition("; report: ")[2]
    assert (sub / shown).resolve() == project.root / ".brigade/evals/t/report/index.html"
    assert (sub / shown).is_file(), final
