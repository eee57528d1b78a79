"""Whether a store directory holds a store, may become one, or lost its database.

SQLite creates an empty database for any path it is given, so a database file
that was truncated to 0 bytes or deleted would silently come back as an empty
store, and a foreign SQLite file would be switched to WAL and filled with our
tables. Before the database is opened for writing this module decides:

* the database file holds a Tideline schema → open it;
* it holds a schema of something else → :class:`~tideline.errors.StoreCorrupt`,
  the file untouched;
* it is missing, empty (0 bytes) or without tables, while the directory shows
  that a store lived there (the marker file, backups, vector index files, a
  non-empty WAL) → :class:`~tideline.errors.StoreCorrupt` naming the backups;
* it is missing or empty in a new or empty directory → a new store is created;
* it is missing in a directory holding other files → :class:`~tideline.errors.NotFound`
  (a store is created only in a new or empty directory).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path

from tideline.errors import NotFound, StoreCorrupt

__all__ = ["MARKER", "check_schema", "check_vacant", "restore_hint", "write_marker"]

#: Written beside the database once it holds a schema: evidence that a store lived here.
MARKER = ".tideline-store"
# Entries a new store directory may already hold: what Tideline itself creates before
# the schema exists, and the identity file a user may write first.
_HARMLESS = {"backups", "index", "SOUL.md"}


def _backups(directory: Path) -> list[Path]:
    """Backup files, newest first."""
    folder = directory / "backups"
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("*.db") if p.is_file()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def restore_hint(directory: Path, db_file: str) -> str:
    """How to restore: the newest backups and the command, or that there are none."""
    found = _backups(directory)
    if not found:
        return f"No backups in {directory / 'backups'}"
    names = ", ".join(p.name for p in found[:5]) + (" …" if len(found) > 5 else "")
    return (f"Restore from a backup ({len(found)} in {directory / 'backups'}, newest first: "
            f"{names}): move the damaged file aside, then `cp {found[0]} "
            f"{directory / db_file}`")


def _evidence(directory: Path, db_file: str, *, wal: bool) -> list[str]:
    signs: list[str] = []
    if (directory / MARKER).exists():
        signs.append(f"the marker {MARKER}")
    count = len(_backups(directory))
    if count:
        signs.append(f"{count} backup(s)")
    index = directory / "index"
    if index.is_dir() and any(index.iterdir()):
        signs.append("vector index files")
    log = directory / f"{db_file}-wal"
    if wal and log.is_file() and log.stat().st_size > 0:
        signs.append(f"a non-empty {log.name}")
    return signs


def _foreign_entries(directory: Path, db_file: str) -> list[str]:
    if not directory.is_dir():
        return []
    ours = {db_file, f"{db_file}-wal", f"{db_file}-shm", f"{db_file}-journal", *_HARMLESS}
    return sorted(p.name for p in directory.iterdir()
                  if p.name not in ours and not p.name.startswith("."))


def check_vacant(directory: Path, db_file: str, state: str, *, wal: bool = True) -> None:
    """Allow creating a store where the database is ``state`` (missing, empty…), or refuse.

    Args:
        directory: the store directory.
        db_file: the database file name.
        state: how the database looks, for the message (``missing``, ``empty (0 bytes)``).
        wal: count a non-empty WAL as evidence (not while another process may be
            creating the schema: its first transaction is in that WAL).

    Raises:
        StoreCorrupt: the directory shows that a store lived here (its database is lost).
        NotFound: the directory holds other files; no store is created there.
    """
    signs = _evidence(directory, db_file, wal=wal)
    if signs:
        raise StoreCorrupt(
            f"the database {directory / db_file} is {state}, but {directory} held a "
            f"Tideline store ({', '.join(signs)}); refusing to start an empty store over "
            f"it. {restore_hint(directory, db_file)}. To start afresh on purpose, move the "
            f"directory aside.")
    others = _foreign_entries(directory, db_file)
    if others:
        shown = ", ".join(others[:5]) + (" …" if len(others) > 5 else "")
        raise NotFound(
            f"no Tideline store in {directory}: it holds other files ({shown}); a new store "
            f"is created only in a new or empty directory")


def check_schema(conn: sqlite3.Connection, directory: Path, db_file: str) -> bool:
    """Decide from the schema whether the file is ours, before anything is written to it.

    Returns:
        True when the file holds no tables yet (a store being created).

    Raises:
        StoreCorrupt: the file is not a database, or the database of something else, or
            empty while the directory shows a store lived here.
        NotFound: empty, in a directory holding other files.
    """
    path = directory / db_file
    try:
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        ours = "db_meta" in tables and conn.execute(
            "SELECT 1 FROM db_meta WHERE key = 'schema_version'").fetchone() is not None
    except sqlite3.DatabaseError as exc:
        raise StoreCorrupt(f"{path} is not a readable SQLite database ({exc}). "
                           f"{restore_hint(directory, db_file)}") from exc
    if ours:
        return False
    if tables:
        shown = ", ".join(sorted(tables)[:8]) + (" …" if len(tables) > 8 else "")
        raise StoreCorrupt(f"{path} is the SQLite database of something else (tables: "
                           f"{shown}); Tideline leaves it untouched. Use another directory.")
    check_vacant(directory, db_file, "without tables", wal=False)
    return True


def write_marker(directory: Path, db_file: str) -> None:
    """Leave the marker that a store lives here (once; best effort on read-only media)."""
    marker = directory / MARKER
    if marker.exists():
        return
    body = {"format": "tideline-store", "database": db_file,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = marker.with_name(f"{MARKER}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(body) + "\n", encoding="utf-8")
        os.replace(tmp, marker)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
