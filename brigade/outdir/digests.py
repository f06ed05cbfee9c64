"""Digests of many files read beside a run, by a helper process, for a copied output
directory.

A cold resume (a directory restored from a CI cache, copied, untarred: every stat new)
vouches for each cell's final.txt and each exported file again by its bytes: tens of
thousands of small reads. A helper reads and digests them on another core while the run
reads the receipts (`run/ahead` starts it, `scan` and `export` take its answers).

An answer only ever confirms: a file whose answer is missing, or whose digest is not the
one a cache recorded, is read again by the run itself, so the helper can make a run do
more work but never take a changed file for an unchanged one. Each answer is the stat of
the file the helper opened and the digest of the bytes it read from that very open
(`fs.digest_stat`: no-follow, a regular file only, at most a limit of bytes), what the
run would have found reading it itself a moment earlier.

The helper (`main`, run as `python -I -S -c ...` with this package's folder on its path)
starts while the run makes its list of files, and reads its jobs once its stdin ends: a
list of `(folder_fd, out_fd, [(name, limit), ...])` in a file of the run's, the folders
open in the run and passed down. For each job in order it writes what it found of each
file to `out_fd` (another file of the run's; `digest_all`) and then one byte to stdout:
the run waits for that byte (until a deadline), and a helper that died leaves it waiting
for nothing (its stdout ends).
"""

from __future__ import annotations

import marshal
import os
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from brigade import fs

# an answer: the stat of the open file, and the sha256 (hex) of the bytes read from it
Answer = tuple[os.stat_result, str]
# a file to read: its name in the job's folder, and at most how many bytes (None: all)
Wanted = tuple[str, int | None]


# what the helper writes of each file: its size (-1: it could not be read), mtime_ns,
# ctime_ns and inode as four signed 64-bit numbers, and the 32 bytes of its sha256
_NUMBERS = 4
_DIGEST = 32
_REGULAR = 0o100000  # S_IFREG


@dataclass(frozen=True)
class Answers:
    """A job's answers: the folder its names are in (st_dev, st_ino of the open folder)
    and what the helper wrote of each wanted file, in the order wanted."""

    folder: tuple[int, int]
    names: Mapping[str, int] = field(default_factory=dict)  # name -> its place
    numbers: array[int] = field(default_factory=lambda: array("q"))
    digests: bytes = b""

    def of(self, fd: int | None) -> Answers:
        """These answers when `fd` is the folder they are of, else none."""
        if fd is None or not self.names:
            return NONE
        info = os.fstat(fd)
        return self if (info.st_dev, info.st_ino) == self.folder else NONE

    def get(self, name: str) -> Answer | None:
        """The answer for a file (None: not wanted, or the helper could not read it)."""
        at = self.names.get(name)
        if at is None:
            return None
        size, mtime, ctime, inode = self.numbers[_NUMBERS * at : _NUMBERS * at + _NUMBERS]
        if size < 0:
            return None
        inode = inode if inode >= 0 else inode + (1 << 64)
        info = os.stat_result(
            (_REGULAR, inode, 0, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime, ctime)
        )  # what the caches key on: size, mtime_ns, ctime_ns, inode (the rest 0)
        return info, self.digests[_DIGEST * at : _DIGEST * at + _DIGEST].hex()

    def __bool__(self) -> bool:
        return bool(self.names)


NONE = Answers((-1, -1))


def folder_of(fd: int) -> tuple[int, int]:
    """(st_dev, st_ino) of an open folder."""
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def digest_all(folder_fd: int, wanted: Sequence[Wanted]) -> bytes:
    """What the helper writes of the wanted files, in order (see `decode`)."""
    numbers = array("q")
    found = bytearray()
    missing = bytes(_DIGEST)
    for name, limit in wanted:
        try:
            info, digest = fs.digest_stat(name, limit, dir_fd=folder_fd)
        except OSError:
            numbers.extend((-1, 0, 0, 0))
            found += missing
            continue
        inode = info.st_ino if info.st_ino < 1 << 63 else info.st_ino - (1 << 64)
        numbers.extend((info.st_size, info.st_mtime_ns, info.st_ctime_ns, inode))
        found += bytes.fromhex(digest)
    return numbers.tobytes() + bytes(found)


def decode(folder: tuple[int, int], wanted: Sequence[Wanted], data: bytes) -> Answers:
    """A job's answers from what its helper wrote (`digest_all`); none at all when that is
    not an answer for each wanted file."""
    count = len(wanted)
    if len(data) != count * (8 * _NUMBERS + _DIGEST):
        return NONE
    numbers = array("q")
    numbers.frombytes(data[: 8 * _NUMBERS * count])
    names = {name: at for at, (name, _) in enumerate(wanted)}
    return Answers(folder, names, numbers, data[8 * _NUMBERS * count :])


def main(jobs_fd: int) -> None:
    """The helper: once its stdin ends, the jobs from `jobs_fd`; each job's answers to its
    file, then a byte to stdout."""
    sys.stdin.buffer.read()
    jobs = marshal.loads(os.pread(jobs_fd, os.fstat(jobs_fd).st_size, 0))
    for index, (folder_fd, out_fd, wanted) in enumerate(jobs):
        data = digest_all(folder_fd, wanted)
        view = memoryview(data)
        while view:
            view = view[os.write(out_fd, view) :]
        os.write(1, bytes((index & 0x7F,)))
