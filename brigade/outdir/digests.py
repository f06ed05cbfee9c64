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
starts while the run makes its list of files, and reads its jobs once its stdin ends,
from a file of the run's: for each job its folder (open in the run and passed down),
where its answers go (another file of the run's) and how many files, then their names
and limits a few thousand at a time (`Job.write`). For each job in order it writes what
it found (`digest_all`) and then one byte to stdout: the run waits for that byte (until a
deadline), and a helper that died leaves it waiting for nothing (its stdout ends).
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from brigade import fs

# an answer: the stat of the open file, and the sha256 (hex) of the bytes read from it
Answer = tuple[os.stat_result, str]
# a file to read: its name in the job's folder, and at most how many bytes (None: all)
Wanted = tuple[str, int | None]

# what the helper writes of each file: its size (-1: it could not be read), mtime_ns,
# ctime_ns and inode as four signed 64-bit numbers; then the 32 bytes of each sha256
_NUMBERS = 4
_ITEM = 8 * _NUMBERS
_DIGEST = 32
_REGULAR = 0o100000  # S_IFREG
# files the run lists to the helper at a time (its list never held whole)
_CHUNK = 4096


@dataclass(frozen=True)
class Job:
    """Files of one open folder to digest, held compactly (a 100,000-cell run lists two
    hundred thousand): the i-th is `name(keys[i], tags[i])`, read up to `limits[i]`
    bytes (-1: no limit), and its answer is looked up by its key and tag (a cell id and
    the attempt whose final.txt it is)."""

    folder_fd: int
    keys: Sequence[str]
    tags: array[int]
    limits: array[int]
    name: Callable[[str, int], str]

    def wanted(self, start: int, stop: int) -> list[Wanted]:
        """The names and limits of the files from `start` to `stop`."""
        keys, tags, limits, name = self.keys, self.tags, self.limits, self.name
        return [
            (name(keys[at], tags[at]), limits[at] if limits[at] >= 0 else None)
            for at in range(start, min(stop, len(keys)))
        ]

    def write(self, out_fd: int, handle: BinaryIO) -> None:
        """The job as the helper reads it (`read_job`): its folder, where its answers go
        and how many files, then their names and limits a chunk at a time."""
        marshal.dump((self.folder_fd, out_fd, len(self.keys)), handle)
        for start in range(0, len(self.keys), _CHUNK):
            marshal.dump(self.wanted(start, start + _CHUNK), handle)


@dataclass(frozen=True)
class Answers:
    """A job's answers: the folder its files are in (st_dev, st_ino of the open folder),
    and what the helper wrote of each (`digest_all`), looked up by key and tag."""

    folder: tuple[int, int]
    places: Mapping[str, int] = field(default_factory=dict)  # key -> its place
    tags: array[int] = field(default_factory=lambda: array("q"))
    data: bytes = b""

    def of(self, fd: int | None) -> Answers:
        """These answers when `fd` is the folder they are of, else none."""
        if fd is None or not self.places:
            return NONE
        info = os.fstat(fd)
        return self if (info.st_dev, info.st_ino) == self.folder else NONE

    def get(self, key: str, tag: int = 0) -> Answer | None:
        """The answer for a file (None: not wanted with that tag, or the helper could not
        read it)."""
        at = self.places.get(key)
        if at is None or self.tags[at] != tag:
            return None
        size, mtime, ctime, inode = struct.unpack_from("=4q", self.data, _ITEM * at)
        if size < 0:
            return None
        inode = inode if inode >= 0 else inode + (1 << 64)
        info = os.stat_result(
            (_REGULAR, inode, 0, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime, ctime)
        )  # what the caches key on: size, mtime_ns, ctime_ns, inode (the rest 0)
        digest_at = _ITEM * len(self.tags) + _DIGEST * at
        return info, self.data[digest_at : digest_at + _DIGEST].hex()

    def __bool__(self) -> bool:
        return bool(self.places)


NONE = Answers((-1, -1))


def folder_of(fd: int) -> tuple[int, int]:
    """(st_dev, st_ino) of an open folder."""
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def digest_all(folder_fd: int, wanted: Sequence[Wanted]) -> tuple[bytes, bytes]:
    """What the helper writes of the wanted files, in order: four numbers of each, and the
    digest of each (see `decode`)."""
    numbers = array("q")
    found = bytearray()
    missing = bytes(_DIGEST)
    for name, limit in wanted:
        try:
            info, digest = fs.digest_stat(name, limit, dir_fd=folder_fd)
        except OSError:
            info = None
        # a file past its limit was digested in part: that digest must answer nothing
        if info is None or (limit is not None and info.st_size > limit):
            numbers.extend((-1, 0, 0, 0))
            found += missing
            continue
        inode = info.st_ino if info.st_ino < 1 << 63 else info.st_ino - (1 << 64)
        numbers.extend((info.st_size, info.st_mtime_ns, info.st_ctime_ns, inode))
        found += bytes.fromhex(digest)
    return numbers.tobytes(), bytes(found)


def decode(folder: tuple[int, int], job: Job, data: bytes) -> Answers:
    """A job's answers from what its helper wrote (the numbers of every file, then every
    digest); none at all when that is not an answer for each of its files."""
    count = len(job.keys)
    if len(data) != count * (_ITEM + _DIGEST):
        return NONE
    return Answers(folder, {key: at for at, key in enumerate(job.keys)}, job.tags, data)


def main(jobs_fd: int) -> None:
    """The helper: once its stdin ends, the jobs from `jobs_fd`; each job's answers to its
    file (the numbers of every file, then every digest), then a byte to stdout."""
    sys.stdin.buffer.read()
    with os.fdopen(jobs_fd, "rb", closefd=False) as jobs:
        index = 0
        while True:
            try:
                folder_fd, out_fd, count = marshal.load(jobs)
            except EOFError:
                return
            numbers, found = bytearray(), bytearray()
            for _ in range(0, count, _CHUNK):
                chunk_numbers, chunk_digests = digest_all(folder_fd, marshal.load(jobs))
                numbers += chunk_numbers
                found += chunk_digests
            _write_all(out_fd, numbers)
            _write_all(out_fd, found)
            os.write(1, bytes((index & 0x7F,)))
            index += 1


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
