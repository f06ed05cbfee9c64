"""End to end, each written as the attack: a hostile seat aims brigade's reads of the
files it holds open (issue 27). Runs the real `brigade`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project
from test_hostile_files import MODES, finished, seat_script

# the seat's stdout and stderr are brigade's files, but the seat holds them open for
# writing: it can make them 16 GiB (sparse) without writing a byte
SPARSE_LOGS = """\
os.ftruncate(1, 16 << 30)
os.ftruncate(2, 16 << 30)
print("done", flush=True)
"""


@pytest.mark.parametrize("mode", MODES)
def test_sparse_16_gib_stdout_and_stderr_are_read_bounded(project: Project, mode: str) -> None:
    import resource

    project.write_roster({"agent": seat_script(project, "sparse.py", SPARSE_LOGS, mode)})
    project.write_manifest(
        [{"id": "a", "prompt": "p"}], graders=[{"type": "regex_output", "pattern": "."}]
    )
    finished(project)
    receipt = project.receipt("a:agent:1")
    assert receipt["state"] in {"accepted", "rejected"}
    json.loads((Path(receipt["run_dir"]) / "run.json").read_text())
    # brigade never held the logs in memory (children's peak resident size, KiB)
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 2 << 20


def test_a_dask_worker_ships_at_most_what_the_coordinator_reads_of_the_logs(
    tmp_path: Path,
) -> None:
    """The worker packs its run folder for the coordinator: sparse 16 GiB logs are shipped
    cut to the read limit, never loaded whole."""
    from brigade.run import cluster, seat

    rdir = tmp_path / "run"
    rdir.mkdir()
    for name in (seat.STDOUT, seat.STDERR):
        with open(rdir / name, "wb") as handle:
            handle.truncate(16 << 30)
    (rdir / "final.txt").write_text("answer\n")
    packed = cluster._pack(rdir)
    assert len(packed[seat.STDOUT]) == len(packed[seat.STDERR]) == seat.LOG_READ_LIMIT
    assert packed["final.txt"] == b"answer\n"


def test_making_a_worktree_removable_never_follows_a_link_to_a_folder_elsewhere(
    tmp_path: Path,
) -> None:
    """A worktree's folders get their owner's write bit back before removal; a link there
    to a folder elsewhere (read-only) is left as it is, the folder it names untouched."""
    from brigade.run import worktree

    victim = tmp_path / "victim"
    victim.mkdir(mode=0o500)
    root = tmp_path / "wt"
    (root / "sub").mkdir(parents=True)
    (root / "sub").chmod(0o500)
    (root / "link").symlink_to(victim)
    worktree._writable_again(root)
    assert (root / "sub").stat().st_mode & 0o700 == 0o700
    assert victim.stat().st_mode & 0o777 == 0o500
    victim.chmod(0o700)
