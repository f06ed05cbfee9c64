"""A helper process that digests a copied output directory's files beside the run.

A resume of a copied or restored output directory (every stat new) vouches for every
graded cell's final.txt and every exported cell file again by its bytes. When the scan
finds its cells folder copied it asks for its final.txt files (`Ahead.start`); the
exported cell files are asked for with them, and one helper (`outdir/digests.main`)
reads both on another core while this process reads the receipts. The scan takes its
answers for final.txt, the export of a run that changed nothing its own. An answer only
ever confirms a digest a cache recorded (outdir/digests): a helper that is slow, dies or
answers nonsense costs the run the reads it would have done anyway.

Started only with a second core to run on, and by the runs that finish an output
directory (`engine/session.open_session`).
"""

from __future__ import annotations

import os
import select
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from brigade.core import jsontext
from brigade.core.plan import Plan
from brigade.outdir import digests, store
from brigade.run import proc

# the helper: this package's own code on its path, nothing of the environment's
_PROGRAM = (
    "import sys; sys.path.insert(0, {root!r}); from brigade.outdir.digests import main; "
    "main({jobs})"
)
# how long a helper may take before the run reads the files itself: far more than it needs
_GRACE_SECONDS = 5.0
_SECONDS_PER_FILE = 0.002


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Ahead:
    """The helper of one run: started at most once, its answers taken in the order asked."""

    def __init__(self, out: Path, plan: Plan) -> None:
        self.out = out
        self.plan = plan
        self._child: Any = None
        self._files: list[IO[bytes]] = []  # where the helper writes each job's answers
        self._jobs: list[tuple[tuple[int, int], digests.Job]] = []
        self._done = 0  # jobs the helper has answered (the bytes it wrote to its stdout)
        self._deadline = 0.0
        self._taken: set[int] = set()  # jobs whose answers were taken

    def start(
        self, cells_fd: int, wanted: Callable[[], digests.Job]
    ) -> Callable[[], digests.Answers]:
        """Start the helper on files of the open cells folder (`wanted`, made while it
        starts) and on the exported cell files; the wait for the cells folder's answers."""
        if self._child is not None or not sys.executable or _cores() < 2:
            return lambda: digests.NONE
        export_fd = _open_folder(self.out / store.EXPORT_DIR / store.CELLS_DIR)
        try:
            given = tempfile.TemporaryFile()  # the jobs, once they are made
            answers: list[IO[bytes]] = [tempfile.TemporaryFile() for _ in range(2)]
            self._files = [*answers, given]
            folders = [cells_fd] if export_fd is None else [cells_fd, export_fd]
            passed = [*folders, given.fileno(), *(handle.fileno() for handle in answers)]
            root = str(Path(digests.__file__).resolve().parents[2])
            program = _PROGRAM.format(root=root, jobs=given.fileno())
            self._child = proc.start_helper([sys.executable, "-I", "-S", "-c", program], passed)
            # what to read is made while the helper starts; the end of its stdin tells it
            # to read them (nothing waits on a helper that does not)
            jobs = [wanted()]
            if export_fd is not None:
                ids = [cell.cell_id for cell in self.plan.cells]
                none = array("q", bytes(8 * len(ids)))
                limits = array("q", [jsontext.MAX_BYTES]) * len(ids)
                jobs.append(digests.Job(export_fd, ids, none, limits, _exported))
            for job, handle in zip(jobs, answers, strict=False):
                self._jobs.append((digests.folder_of(job.folder_fd), job))
                job.write(handle.fileno(), given)
            given.flush()
            given.seek(0)  # (the helper reads from where this file is: one description)
            files = sum(len(job.keys) for job in jobs)
            self._deadline = time.monotonic() + _GRACE_SECONDS + files * _SECONDS_PER_FILE
            self._child.stdin.close()
        except (OSError, ValueError, OverflowError):  # (no helper, or it ended: read here)
            self.close()
        except BaseException:
            self.close()
            raise
        finally:
            if export_fd is not None:
                os.close(export_fd)
        return lambda: self.answers(0)

    def answers(self, job: int) -> digests.Answers:
        """A job's answers, once the helper has written them (none when it was not started,
        ended without them, or took too long: then it is stopped). Taken once: the run
        holds them as long as it needs them, and no longer."""
        if self._child is None or job >= len(self._jobs) or job in self._taken:
            return digests.NONE
        self._taken.add(job)
        if not self._wait(job):
            return digests.NONE
        folder, wanted = self._jobs[job]
        answers = self._files[job]
        data = os.pread(answers.fileno(), os.fstat(answers.fileno()).st_size, 0)
        return digests.decode(folder, wanted, data)

    def export_answers(self) -> digests.Answers:
        """The answers for the exported cell files (none when they were not asked for)."""
        return self.answers(1)

    def _wait(self, job: int) -> bool:
        """Whether the helper has answered `job` (waiting for it until the deadline)."""
        stdout = self._child.stdout
        while self._done <= job:
            left = self._deadline - time.monotonic()
            if left <= 0:
                self.close()
                return False
            try:
                ready, _, _ = select.select([stdout], [], [], left)
                chunk = os.read(stdout.fileno(), 64) if ready else None
            except (OSError, ValueError):
                return False
            if chunk == b"":
                return False  # it ended without answering
            self._done += len(chunk or b"")
        return True

    def close(self) -> None:
        """Stop the helper if it still runs, and let go of its files."""
        child, self._child = self._child, None
        if child is not None:
            if child.poll() is None:
                child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
        for handle in self._files:
            handle.close()
        self._files = []


def _exported(cell_id: str, _: int) -> str:
    """An exported cell file's name in the export's cells folder."""
    return f"{cell_id}.json"


def _open_folder(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
