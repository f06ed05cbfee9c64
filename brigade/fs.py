"""Files where a seat may have been first: regular-file, no-follow, bounded reads, and
atomic writes that never follow a link.

Any file of the output directory (and of a worktree, a grader's folder, the cache)
may have been planted by a process brigade ran: a FIFO would block an open forever, a
device never ends, a symlink reads or writes a file elsewhere, a folder stands where a
file goes. Every read and write brigade does there goes through this module.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from brigade.core import jsontext

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFile(OSError):
    """A path that is not a regular file where one is read (a FIFO, a device, a socket, a
    folder, a symlink): read as if it were missing."""


def open_regular(path: Path | str, *, follow: bool = False, dir_fd: int | None = None) -> int:
    """A read-only descriptor of a regular file, never opening anything else.

    No symlink followed (the last component; `follow=True` for the user's own input
    files, which may well be links), no blocking open, and anything but a regular
    file refused (`NotRegularFile`, an OSError like a missing file; a folder is
    IsADirectoryError). `dir_fd`: `path` is relative to that open folder."""
    return _open_checked(path, follow, dir_fd)[0]


def _open_checked(path: Path | str, follow: bool, dir_fd: int | None) -> tuple[int, int]:
    """(descriptor, size by its stat) of a regular file (see open_regular), blocking."""
    fd, info = _open_stat(path, dir_fd, follow=follow, blocking=True)
    return fd, info.st_size


def read_regular(
    path: Path | str,
    limit: int | None = None,
    *,
    follow: bool = False,
    dir_fd: int | None = None,
) -> bytes:
    """A regular file's bytes (at most `limit`, then one more to tell it holds more);
    OSError when it is missing, unreadable or not a regular file (`open_regular`).
    `dir_fd`: `path` is relative to that open folder (only the path's own part is
    resolved: a cold resume reads a few files per cell)."""
    fd, size = _open_checked(path, follow, dir_fd)
    try:
        # os.read on the descriptor itself, sized by the stat taken when it was opened:
        # no buffered file object, no second stat and no extra read for the end
        size += 1
        want = size if limit is None else min(size, limit + 1)
        data = os.read(fd, want)
        if len(data) < want and want < 1 << 30:  # (a read of a GB may come back short)
            return data  # the whole file
        return _read_on(fd, data, limit)  # it grew since its stat: read on
    finally:
        os.close(fd)


def _open_stat(
    path: Path | str, dir_fd: int | None, *, follow: bool = False, blocking: bool = False
) -> tuple[int, os.stat_result]:
    """(descriptor, its stat) of a regular file, opened without waiting on a FIFO and
    without following a symlink (`follow`: at the last component, for the user's own
    input files): the stat is the open file's, taken before anything is read. Anything
    but a regular file is refused (`NotRegularFile`; a folder is IsADirectoryError) and
    nothing is left open. `blocking`: the descriptor's O_NONBLOCK cleared."""
    try:
        fd = os.open(path, _READ & ~os.O_NOFOLLOW if follow else _READ, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, "a symlink, not a regular file", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({kind})", str(path))
        if blocking:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_stat(
    path: Path | str, limit: int | None = None, *, dir_fd: int | None = None
) -> tuple[os.stat_result, bytes]:
    """A regular file's stat and bytes from one open (no-follow; at most `limit` bytes, then
    one more): the stat is taken from the descriptor before the bytes are read, so it is
    a cache's key for them. OSError as `read_regular`. For many files of a copied folder,
    whose stats are all new: one path lookup per file instead of a stat and an open."""
    fd, info = _open_stat(path, dir_fd)
    try:
        # (O_NONBLOCK, which kept the open from waiting on a FIFO, means nothing to a
        # regular file's reads on Linux: left set, two system calls less per file; a
        # file system that answered EAGAIN would cost its caller a miss, never a byte)
        want = info.st_size + 1 if limit is None else min(info.st_size, limit) + 1
        data = os.read(fd, want)
        if len(data) < want and want < 1 << 30:
            return info, data  # the whole file
        return info, _read_on(fd, data, limit)
    finally:
        os.close(fd)


# what digest_stat reads at a time
_PIECE = 1 << 20


def digest_stat(
    path: Path | str, limit: int | None = None, *, dir_fd: int | None = None
) -> tuple[os.stat_result, str]:
    """A regular file's stat and the sha256 (hex) of its bytes from one open (no-follow, as
    `read_stat`; at most `limit` bytes, then one more), read a piece at a time: a file of
    any size costs a megabyte of memory and a small one a single read. OSError as
    `read_regular`."""
    fd, info = _open_stat(path, dir_fd)
    try:
        digest = hashlib.sha256()
        # a byte more than its stat says, and a file that grew is read on to its end; under
        # a limit, no more than a byte over the smaller of its stat's size and the limit
        total, end = 0, info.st_size + 1 if limit is None else min(info.st_size, limit) + 1
        while True:
            if total >= end and limit is None:
                end += _PIECE
            want = min(end - total, _PIECE)
            chunk = os.read(fd, want) if want > 0 else b""
            digest.update(chunk)
            total += len(chunk)
            if len(chunk) < want or want == 0:  # its end, or as much as may be read
                return info, digest.hexdigest()
    finally:
        os.close(fd)


def _read_on(fd: int, data: bytes, limit: int | None) -> bytes:
    """The rest of a file after its first `data` (it grew since its stat, or a read of a GB
    came back short), up to `limit` and one byte more."""
    chunks = [data]
    total = len(data)
    while limit is None or total <= limit:
        chunk = os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_end(path: Path | str, limit: int) -> tuple[bytes, int]:
    """The last `limit` bytes of a regular file and its whole size by its stat (only the end
    is read: a log of any size costs `limit`); OSError as `read_regular`."""
    fd, size = _open_checked(path, False, None)
    try:
        if size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        chunks: list[bytes] = []
        left = min(size, limit)
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), size
    finally:
        os.close(fd)


def read_json(
    path: Path | str,
    *,
    limit: int | None = jsontext.MAX_BYTES,
    max_depth: int | None = jsontext.MAX_DEPTH,
) -> Any:
    """The JSON document of a regular file: OSError when it cannot be read as one
    (`read_regular`), `jsontext.BadJSON` (one line) when it is not JSON brigade reads."""
    return jsontext.parse(read_regular(path, limit), limit=limit, max_depth=max_depth)


def load_json(path: Path | str) -> Any | None:
    """`read_json`, or None when the file is missing, unreadable, not a regular file or not
    JSON brigade reads."""
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def open_folder(path: Path | str) -> int:
    """A descriptor of a folder, never through a symlink at its last component (ELOOP or
    ENOTDIR, an OSError, when one is there)."""
    return os.open(path, _FOLDER)


def folder_in(root: Path | str, parts: Sequence[str]) -> int:
    """A descriptor of `root/parts...`, made as needed, no component ever a followed link:
    a write under it lands under `root` whatever was planted on the way."""
    fd = open_folder(root)
    try:
        for part in parts:
            if part in ("", ".", "..") or "/" in part:
                raise OSError(errno.EINVAL, "not a plain folder name", part)
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def temp_name(name: str) -> str:
    """The name of an atomic write's temp file for `name` (`.<name>.<8 characters>.tmp`)."""
    return f".{name}.{secrets.token_hex(4)}.tmp"


def write_at(folder: int, name: str, data: bytes | BinaryIO, *, durable: bool = True) -> None:
    """Write `name` in the open folder atomically (`data`: bytes, or a file read to its
    end): a new temp file there (never a followed link), fsynced when `durable`, renamed
    over `name` (a link there is replaced, not followed). The temp file never survives a
    failure."""
    while True:
        tmp = temp_name(name)
        try:
            fd = os.open(tmp, _CREATE, 0o666, dir_fd=folder)  # the umask applies
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                shutil.copyfileobj(data, handle)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder)
        except OSError:
            pass
        raise


def atomic_write(
    path: Path, data: bytes | BinaryIO, *, durable: bool = True, sync_dir: bool = True
) -> None:
    """Write `path` atomically through its folder (made when missing): `write_at`, then
    the folder fsynced when `durable` and `sync_dir`.

    The folder is taken as given (an output directory may well be a link the user
    made); under a folder a process could have changed, open it with `folder_in` and
    use `write_at`, or clear what it planted first (`run/seat.clear_planted`)."""
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            write_at(folder, path.name, data, durable=durable)
        except OSError as exc:  # named by the path written, not the temp file's name
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        if durable and sync_dir:
            try:
                os.fsync(folder)
            except OSError:
                pass
    finally:
        os.close(folder)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _searchable(folder: int) -> None:
    """Give the owner back a folder's permissions (a process may have taken them away), so
    what is in it can be listed and removed; left as it is when that is not allowed."""
    mode = stat.S_IMODE(os.fstat(folder).st_mode)
    if mode & 0o700 != 0o700:
        try:
            os.fchmod(folder, mode | 0o700)
        except OSError:
            pass


def remove_tree(path: Path | str) -> None:
    """Remove a folder and all in it however deep it nests, never following a link; OSError
    when something cannot be removed. A process can nest folders deeper than any path
    may be long, or than `shutil.rmtree` recurses (it raises RecursionError, whatever
    `ignore_errors` says): every folder inside is moved up to be a child of `path` first,
    so no path is longer than two names and two folders are open at a time."""
    top = os.open(path, _FOLDER)
    moved = 0
    try:
        _searchable(top)
        while True:
            with os.scandir(top) as listed:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listed]
            folders = [name for name, is_dir in entries if is_dir]
            for name, is_dir in entries:
                if not is_dir:
                    os.unlink(name, dir_fd=top)
            if not folders:
                break
            for name in folders:
                inner = os.open(name, _FOLDER, dir_fd=top)
                try:
                    _searchable(inner)
                    with os.scandir(inner) as listed:
                        children = [(e.name, e.is_dir(follow_symlinks=False)) for e in listed]
                    for child, is_dir in children:
                        if not is_dir:
                            os.unlink(child, dir_fd=inner)
                            continue
                        while True:  # up beside `name`, under a name not taken
                            moved += 1
                            try:
                                os.rename(child, f".rm-{moved}", src_dir_fd=inner, dst_dir_fd=top)
                                break
                            except OSError as exc:
                                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                                    raise
                finally:
                    os.close(inner)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def remove(path: Path | str) -> bool:
    """Remove whatever is at `path` without following it (a link goes, never its target; a
    folder goes with all in it, however deep, links inside unfollowed). True when
    something was there."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        remove_tree(path)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return True


def fresh_file(path: Path | str) -> int:
    """A write descriptor of a new, empty regular file at `path`, whatever was there (a
    file, a link, a folder, a FIFO) removed first, never followed or written through."""
    for _ in range(3):
        remove(path)
        try:
            return os.open(path, _CREATE, 0o666)
        except FileExistsError:  # made again between the removal and the creation
            continue
    return os.open(path, _CREATE, 0o666)
