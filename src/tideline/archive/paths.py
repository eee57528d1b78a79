"""Writing files safely: never through a symlink, never outside the target, atomically.

A path is made absolute without resolving it (resolving would follow the very links
that must be refused); then every existing component is checked with ``lstat``. A file
is written next to its final name with ``O_EXCL | O_NOFOLLOW``, fsynced and moved into
place with :func:`os.replace`, so a reader sees the old file or the whole new one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tideline.errors import InvalidInput, StoreFull, UnsafePath
from tideline.write.validate import clean_paths

__all__ = ["atomic_file", "inside", "one_path", "safe_dir", "safe_target"]


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


def safe_target(path: Path) -> Path:
    """The absolute path of a file to (re)write, checked.

    Raises:
        UnsafePath: the path or one of its parents is a symlink.
        InvalidInput: the parent directory is missing, or the path is a directory.
    """
    target = _absolute(path)
    _refuse_links(target)
    if not target.parent.is_dir():
        raise InvalidInput(f"directory {target.parent} does not exist")
    if target.is_dir():
        raise InvalidInput(f"{target} is a directory")
    return target


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

    On any error the temporary file is removed and ``target`` is left as it was.

    Raises:
        UnsafePath: ``target`` is (or has become) a symlink.
        StoreFull: the disk filled up (``target`` is kept as it was).
        InvalidInput: the file cannot be written (permissions).
    """
    _refuse_links(target)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise InvalidInput(f"cannot write in {target.parent}: {exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        _refuse_links(target)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreFull(f"disk full while writing {target}; the old file is kept") from None
        if isinstance(exc, OSError):
            raise InvalidInput(f"cannot write {target}: {exc}") from None
        raise
    with contextlib.suppress(OSError):
        dirfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
