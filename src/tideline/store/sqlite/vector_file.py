"""The saved file of a :class:`~tideline.store.sqlite.vector_index.VectorIndex`: one
self-describing container per (index, marker, dim, change-log position).

Files are named ``<name>.<tag>.<seq>.vix`` where ``tag`` is a digest of (marker, dim).
The payload is followed by a JSON header (kind, marker, dim, seq, count, payload
length and CRC-32) and a fixed trailer with the header's own CRC and a magic number,
so index, seq, marker, dim and count can never disagree, even when two processes save
at the same moment: each writes a private temporary file and ``os.replace``-s it into
place. Only the newest two files are kept. Files are opened with ``O_NOFOLLOW`` and
must be regular files.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import stat
import struct
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tideline.store.sqlite.vector_stores import (
    HNSW_DTYPE,
    CorruptFile,
    ExactStore,
    HnswStore,
    IndexStore,
)

__all__ = ["SUFFIX", "file_name", "is_regular_file", "prune", "read_file", "saved_files",
           "unlink_quietly", "write_file"]

_FORMAT = 1
_MAGIC = b"TDLVIX01"
_TRAILER = struct.Struct("<QI8s")  # header length, header CRC-32, magic
_MAX_HEADER = 1 << 20
#: The ending of every saved index file.
SUFFIX = ".vix"
_KEEP_FILES = 2
_STALE_TMP_SECONDS = 3600.0
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


def is_regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (not followed through a symlink)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)


def unlink_quietly(path: Path) -> None:
    """Remove ``path``; a file already gone or not removable is left as it is."""
    with contextlib.suppress(OSError):
        os.unlink(path)


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap]:
    """Map a regular file read-only without following symlinks."""
    if not is_regular_file(path):
        raise CorruptFile("not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY)
    except OSError as exc:
        raise CorruptFile(f"cannot open: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size < _TRAILER.size:
            raise CorruptFile("file too small")
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    try:
        yield mm
    finally:
        mm.close()


def _crc(views: Iterator[memoryview] | Sequence[memoryview]) -> int:
    crc = 0
    step = 1 << 24
    for view in views:
        for start in range(0, len(view), step):
            crc = zlib.crc32(view[start : start + step], crc)
    return crc


def file_name(name: str, tag: str, seq: int) -> str:
    """The file name of index ``name`` for ``tag`` at change-log position ``seq``."""
    return f"{name}.{tag}.{seq}{SUFFIX}"


def saved_files(directory: Path, name: str) -> list[tuple[int, str, Path]]:
    """``(seq, tag, path)`` of every saved file of index ``name``, newest first."""
    found: list[tuple[int, str, Path]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    prefix = name + "."
    for entry in entries:
        fname = entry.name
        if not (fname.startswith(prefix) and fname.endswith(SUFFIX)):
            continue
        parts = fname[len(prefix) : -len(SUFFIX)].split(".")
        if len(parts) != 2 or not parts[1].isdigit():
            continue
        found.append((int(parts[1]), parts[0], Path(entry.path)))
    found.sort(key=lambda item: item[0], reverse=True)
    return found


def read_file(
    path: Path, *, marker: str, dim: int, expansion_add: int, expansion_search: int,
) -> tuple[IndexStore, int]:
    """The store saved in ``path`` and the change-log position it reflects.

    Raises:
        CorruptFile: the file is not a valid container written for ``marker`` and ``dim``.
    """
    with _mapped(path) as mm:
        size = len(mm)
        header_len, header_crc, magic = _TRAILER.unpack_from(mm, size - _TRAILER.size)
        if magic != _MAGIC:
            raise CorruptFile("bad magic")
        if header_len > min(_MAX_HEADER, size - _TRAILER.size):
            raise CorruptFile("bad header length")
        header_end = size - _TRAILER.size
        raw = mm[header_end - header_len : header_end]
        if zlib.crc32(raw) != header_crc:
            raise CorruptFile("header checksum mismatch")
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptFile("unreadable header") from exc
        if not isinstance(header, dict) or header.get("format") != _FORMAT:
            raise CorruptFile("unknown format")
        if header.get("marker") != marker or header.get("dim") != dim:
            raise CorruptFile("written for another marker or dim")
        payload_len = header.get("payload_len")
        count = header.get("count")
        seq = header.get("seq")
        if (
            not (
                isinstance(payload_len, int) and isinstance(count, int) and isinstance(seq, int)
            )
            or payload_len + header_len != header_end
        ):
            raise CorruptFile("inconsistent header")
        view = memoryview(mm)
        try:
            payload = view[:payload_len]
            try:
                if _crc([payload]) != header.get("payload_crc"):
                    raise CorruptFile("payload checksum mismatch")
                store: IndexStore
                if header.get("kind") == "exact":
                    store = ExactStore.from_buffer(payload, dim, count)
                elif header.get("kind") == "hnsw":
                    store = HnswStore.from_buffer(
                        payload, header, expansion_add, expansion_search
                    )
                else:
                    raise CorruptFile("unknown index kind")
            finally:
                payload.release()
        finally:
            view.release()
    return store, seq


def write_file(
    directory: Path, name: str, tag: str, store: IndexStore, seq: int, *, marker: str,
    dim: int, connectivity: int,
) -> None:
    """Save ``store`` as the file of ``seq``: written to a private temporary file, then
    ``os.replace``-d into place, so a reader never sees a half-written file."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        if isinstance(store, ExactStore):
            with os.fdopen(fd, "wb") as fh:
                parts = list(store.payload())
                for part in parts:
                    fh.write(part)
                payload_len = sum(len(p) for p in parts)
                crc = _crc(parts)
                _write_trailer(fh, store, seq, payload_len, crc, marker=marker, dim=dim,
                               connectivity=connectivity)
        else:
            os.close(fd)
            store.index.save(os.fspath(tmp))
            fd2 = os.open(tmp, os.O_RDWR | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY)
            with os.fdopen(fd2, "r+b") as fh:
                payload_len = os.fstat(fh.fileno()).st_size
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    view = memoryview(mm)
                    try:
                        crc = _crc([view])
                    finally:
                        view.release()
                fh.seek(payload_len)
                _write_trailer(fh, store, seq, payload_len, crc, marker=marker, dim=dim,
                               connectivity=connectivity)
        os.replace(tmp, directory / file_name(name, tag, seq))
    except BaseException:
        unlink_quietly(tmp)
        raise


def _write_trailer(
    fh: Any, store: IndexStore, seq: int, payload_len: int, crc: int, *, marker: str, dim: int,
    connectivity: int,
) -> None:
    header = {
        "format": _FORMAT,
        "kind": store.kind,
        "marker": marker,
        "dim": dim,
        "seq": seq,
        "count": len(store),
        "payload_len": payload_len,
        "payload_crc": crc,
        "dtype": HNSW_DTYPE if store.kind == "hnsw" else "f32",
        "connectivity": connectivity,
        "saved_at": time.time(),
    }
    raw = json.dumps(header, sort_keys=True).encode("utf-8")
    fh.write(raw)
    fh.write(_TRAILER.pack(len(raw), zlib.crc32(raw), _MAGIC))
    fh.flush()
    os.fsync(fh.fileno())


def prune(directory: Path, name: str, tag: str) -> None:
    """Keep the newest two files of ``tag`` (marker/dim); drop older foreign ones and stale
    temporary files."""
    files = saved_files(directory, name)
    mine = [item for item in files if item[1] == tag]
    newest = mine[0][0] if mine else 0
    kept = {path.name for _, _, path in mine[:_KEEP_FILES]}
    for seq, file_tag, path in files:
        if path.name in kept:
            continue
        if file_tag == tag or seq < newest:
            unlink_quietly(path)
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if entry.name.startswith(f".{name}.") and entry.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TMP_SECONDS:
                        os.unlink(entry.path)
