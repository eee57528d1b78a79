"""Temporary files that a killed process cannot leave behind.

An export is written to a temporary file and moved into place; a migration writes the
whole store to a scratch archive first. Killed half way (``kill -9``, a crash, a full
disk), a named temporary file stays: a full copy of the store outside its folder, out
of reach of ``forget`` and of the backup accounting. So:

- **Unnamed first.** On Linux the file is opened with ``O_TMPFILE``: it has no name until
  it is complete, and the kernel frees it when the process ends, however it ends. A
  finished export is then linked under a temporary name and renamed over the target (a
  window of two system calls).
- **Named, with its owner, otherwise.** Where ``O_TMPFILE`` is missing (another OS,
  a file system without it, no ``/proc``), the name carries the writer's process id,
  and every later write into that directory removes the files whose writer is gone
  (:func:`sweep`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Scratch", "named", "open_scratch", "sweep"]

# ".<name>.<pid>-<12 hex>.tmp": an export's temporary file (see named());
# ".tideline-migrate.<pid>-<12 hex>.jsonl": a migration's scratch archive.
_LEFTOVER = re.compile(r"^\..+\.(?P<pid>\d{1,10})-[0-9a-f]{12}\.(?:tmp|jsonl)$")
_PROC_FD = Path("/proc/self/fd")


def named(directory: Path, stem: str, suffix: str = "tmp") -> Path:
    """A fresh temporary name in ``directory`` that says which process owns it."""
    return directory / f".{stem}.{os.getpid()}-{secrets.token_hex(6)}.{suffix}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a pid at all: not ours to judge
    return True


def sweep(directory: Path) -> int:
    """Remove the temporary files of writers that are gone from ``directory``.

    Only names this module makes are touched, only regular files, only when the process
    named in them no longer runs. Returns how many were removed; never raises.
    """
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        m = _LEFTOVER.match(entry.name)
        if m is None or _alive(int(m["pid"])):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed += 1
    return removed


class Scratch:
    """One temporary file being written: its descriptor, and a name once it has one.

    Attributes:
        fd: the open descriptor (read and write).
        path: its name, or None while it is an unnamed ``O_TMPFILE``.
        directory: where it lives.
    """

    def __init__(self, fd: int, path: Path | None, directory: Path) -> None:
        self.fd = fd
        self.path = path
        self.directory = directory

    def readable(self) -> Path:
        """A path that opens this very file for reading (``/proc/self/fd/N`` if unnamed)."""
        return self.path if self.path is not None else _PROC_FD / str(self.fd)

    def publish(self, target: Path) -> None:
        """Give the file ``target``'s name in one rename (replacing what is there).

        Raises:
            OSError: the link or the rename failed (the file stays unnamed or is removed).
        """
        if self.path is None:
            tmp = named(self.directory, target.name)
            # linkat(…, AT_SYMLINK_FOLLOW) on the descriptor's /proc link: os.link does
            # that only when given a directory descriptor (else it calls link(2), which
            # would link the magic link itself and fail across devices).
            proc = os.open(_PROC_FD, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.link(str(self.fd), tmp, src_dir_fd=proc, follow_symlinks=True)
            finally:
                os.close(proc)
            self.path = tmp
        os.replace(self.path, target)
        self.path = None

    def discard(self) -> None:
        """Remove the named file, if it has a name (an unnamed one goes with its fd)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None


def _unnamed(directory: Path) -> int | None:
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not _PROC_FD.is_dir():
        return None
    try:
        return os.open(directory, flag | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP):
            return None
        raise


@contextlib.contextmanager
def open_scratch(directory: Path, stem: str, suffix: str = "tmp") -> Iterator[Scratch]:
    """A temporary file in ``directory`` that is gone when the block ends, or when the
    process dies, unless it was :meth:`Scratch.publish`-ed.

    Leftovers of dead writers in ``directory`` are swept first.

    Raises:
        OSError: the file cannot be created.
    """
    sweep(directory)
    fd = _unnamed(directory)
    path: Path | None = None
    if fd is None:
        path = named(directory, stem, suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o600)
    scratch = Scratch(fd, path, directory)
    try:
        yield scratch
    finally:
        scratch.discard()
        with contextlib.suppress(OSError):
            os.close(fd)
