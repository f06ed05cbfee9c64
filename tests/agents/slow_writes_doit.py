"""The real `doit`, with brigade's atomic writes slowed down so a kill can land inside one.

Usage: python slow_writes_doit.py [doit arguments]. Every atomic write
(brigade.fs.write_at, under every writer brigade has) pauses $SLOW_WRITE_SECONDS
(default 0.02) after creating its temp file (still empty) and again before
renaming it (complete), and doit's own DB dump pauses halfway through, so the
reliability tests' kill -9 often hits a write in progress. With
$HALF_DUMP_MARKER set, the DB dump instead creates that file halfway through and
waits there for a minute (a kill is sure to land in it). The variables are
removed from the environment so seats do not inherit them.
Nothing else changes: doit's own main runs the dodo as usual.
"""

import os
import runpy
import sys
import time
from types import ModuleType
from typing import Any

import doit.dependency

import brigade.fs

DELAY = float(os.environ.pop("SLOW_WRITE_SECONDS", "0.02"))
HALF_DUMP_MARKER = os.environ.pop("HALF_DUMP_MARKER", None)


class _SlowOs(ModuleType):
    """The os module as brigade.fs sees it: fdopen (temp created, empty) and replace
    (temp complete) pause."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:  # a temp file just created (reads pass through)
            time.sleep(DELAY)
        return os.fdopen(fd, mode, *args, **kwargs)

    @staticmethod
    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        time.sleep(DELAY)
        os.replace(src, dst, **kwargs)


def _slow_dump(self: Any) -> None:
    """doit's JsonDB.dump, with a pause after writing the first half."""
    data = self.codec.encode(self._db)
    with open(self.name, "w") as handle:
        handle.write(data[: len(data) // 2])
        handle.flush()
        if HALF_DUMP_MARKER:
            open(HALF_DUMP_MARKER, "w").close()
            time.sleep(60)
        time.sleep(DELAY * 3)
        handle.write(data[len(data) // 2 :])


brigade.fs.os = _SlowOs("os")  # type: ignore[assignment]
doit.dependency.JsonDB.dump = _slow_dump  # type: ignore[method-assign]
sys.argv = ["doit", *sys.argv[1:]]
runpy.run_module("doit", run_name="__main__", alter_sys=True)
