"""Writing files safely: never through a symlink, never outside the target, atomically.

A path is made absolute without resolving it (resolving would follow the very links
that must be refused); then every existing component is checked with ``lstat``, and
what is there must be a regular file (a device, a FIFO or a directory is never
replaced). A file is written next to its final name as an unnamed temporary file (see
:mod:`tideline.archive.scratch`: a killed writer leaves nothing), fsynced and moved into
place with :func:`os.replace`, so a reader sees the old file or the whole new one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tideline.errors import InvalidInput, StoreFull, UnsafePath
from tideline.write.validate import clean_paths

__all__ = ["atomic_file", "inside", "one_path", "open_regular", "safe_dir", "safe_target"]


def one_path(value: object, field: str) -> Path:
    """Exactly one file or directory argument.

    Raises:
        InvalidInput: not one path (a list, an empty or NUL-holding text, another type).
    """
    if isinstance(value, list | tuple):
        raise InvalidInput(f"{field} must be one file path")
    paths = clean_paths(value, field)
    if not paths:
        raise InvalidInput(f"{field} must be one file path")
    return Path(paths[0])


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(os.fspath(path.expanduser())))


def _refuse_links(path: Path) -> None:
    for part in [*reversed(path.parents), path]:
        try:
            mode = os.lstat(part).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UnsafePath(f"cannot inspect {part}: {exc}") from None
        if stat.S_ISLNK(mode):
            raise UnsafePath(f"{part} is a symlink; Tideline does not write through symlinks")


def _not_regular(mode: int) -> str | None:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def safe_target(path: Path) -> Path:
    """The absolute path of a file to (re)write, checked.

    What is there already must be a regular file: a device node, a FIFO, a socket or a
    directory is never replaced (``/dev/full`` stays a device).

    Raises:
        UnsafePath: the path or one of its parents is a symlink.
        InvalidInput: the parent directory is missing, or the path exists and is not a
            regular file.
    """
    target = _absolute(path)
    _refuse_links(target)
    if not target.parent.is_dir():
        raise InvalidInput(f"directory {target.parent} does not exist")
    try:
        kind = _not_regular(os.lstat(target).st_mode)
    except FileNotFoundError:
        kind = None
    except OSError as exc:
        raise InvalidInput(f"cannot inspect {target}: {exc}") from None
    if kind is not None:
        raise InvalidInput(f"{target} is {kind}; Tideline writes only regular files")
    return target


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading, refused unless it is a regular file.

    Opened without blocking (a FIFO with no writer would hang an ordinary ``open``),
    then checked on the open descriptor, so nothing can be swapped in between.

    Raises:
        FileNotFoundError: nothing is there.
        InvalidInput: a directory, a FIFO, a device, a socket.
        OSError: it cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        kind = _not_regular(os.fstat(fd).st_mode)
        if kind is not None:
            raise InvalidInput(f"{path} is {kind}; only a regular file can be read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def safe_dir(path: Path) -> Path:
    """The absolute path of a directory to write into, created if missing, checked.

    Raises:
        UnsafePath: the path or one of its parents is a symlink.
        InvalidInput: the path exists and is not a directory.
    """
    target = _absolute(path)
    _refuse_links(target)
    if target.exists() and not target.is_dir():
        raise InvalidInput(f"{target} exists and is not a directory")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"cannot create {target}: {exc}") from None
    _refuse_links(target)  # nothing swapped in while it was being created
    return target


def inside(root: Path, name: str) -> Path:
    """``root / name`` for a name Tideline made itself, refused if it would leave ``root``.

    Raises:
        UnsafePath: the name has a separator or is a relative component.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise UnsafePath(f"refusing file name {name!r}")
    return root / name


@contextlib.contextmanager
def atomic_file(target: Path) -> Iterator[IO[bytes]]:
    """A binary stream that replaces ``target`` in one step when the block succeeds.

    On any error the temporary file is removed and ``target`` is left as it was; if the
    process is killed, the kernel removes it (see :mod:`tideline.archive.scratch`).

    Raises:
        UnsafePath: ``target`` is (or has become) a symlink.
        StoreFull: the disk filled up (``target`` is kept as it was).
        InvalidInput: the file cannot be written (permissions).
    """
    from tideline.archive.scratch import open_scratch

    _refuse_links(target)
    stack = contextlib.ExitStack()
    try:
        scratch = stack.enter_context(open_scratch(target.parent, target.name))
    except OSError as exc:
        raise InvalidInput(f"cannot write in {target.parent}: {exc}") from None
    with stack:
        try:
            with os.fdopen(scratch.fd, "wb", closefd=False) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            _refuse_links(target)
            safe_target(target)  # nothing but a regular file is replaced, even now
            scratch.publish(target)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StoreFull(f"disk full while writing {target}; the old file is "
                                "kept") from None
            raise InvalidInput(f"cannot write {target}: {exc}") from None
    with contextlib.suppress(OSError):
        dirfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
