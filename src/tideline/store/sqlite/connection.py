"""The SQLite connection: pragmas, short write transactions, migrations, backups.

Every write runs inside ``BEGIN IMMEDIATE`` so that two processes never both
hold a read snapshot and then fight for the write lock (the cause of
"database is locked" under deferred transactions). The busy timeout waits for
the lock; a bounded number of retries with jitter covers the rest. Nothing slow
(an embedding, an LLM call) ever runs inside a transaction.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tideline.errors import SchemaTooNew, StoreCorrupt, StoreError
from tideline.store.dialect import SQLITE, SQLiteDialect
from tideline.store.meta import MetaRows
from tideline.store.sqlite import presence
from tideline.store.sqlite.errors import from_sqlite
from tideline.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["Database", "connect_readonly", "peek_meta", "prune_backups",
           "remove_stale_partials"]

DB_FILE = "tideline.db"


class Database(MetaRows):
    """One connection to the store's SQLite file, safe to share between threads.

    A new store is created only in a new or empty directory; a database that is
    missing or empty where a store lived, or that belongs to something else, is
    refused before anything is written (see :mod:`tideline.store.sqlite.presence`).

    Args:
        directory: the store directory (created if missing).
        busy_timeout_ms: how long one attempt waits for the write lock.
        retries: extra attempts (with jittered back-off) after a busy timeout.

    Raises:
        StoreCorrupt: the database is damaged, foreign, or lost (the message names the
            backups to restore from).
        NotFound: no database, in a directory that holds other files.
        SchemaTooNew: written by a newer Tideline.
    """

    dialect: SQLiteDialect = SQLITE
    """The SQL fragments the shared views ask for (see :mod:`tideline.store.dialect`)."""

    def __init__(self, directory: Path, *, busy_timeout_ms: int = 5_000, retries: int = 6) -> None:
        self.directory = directory
        self.path = directory / DB_FILE
        self.retries = retries
        self._lock = threading.RLock()
        self._depth = 0
        if not self.path.is_file() or self.path.stat().st_size == 0:
            presence.check_vacant(directory, DB_FILE,
                                  "missing" if not self.path.exists() else "empty (0 bytes)")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store directory {directory}: {exc}") from exc
        try:
            self.conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            try:  # before WAL or any table: a file that is not ours stays untouched
                presence.check_schema(self.conn, directory, DB_FILE)
            except BaseException:
                self.conn.close()
                raise
            try:
                (directory / "backups").mkdir(exist_ok=True)
            except OSError as exc:
                self.conn.close()
                raise StoreError(f"cannot create {directory / 'backups'}: {exc}") from exc
            mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"could not switch {self.path} to WAL (got {mode})")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise from_sqlite(exc) from exc
        self.migrated_from = self._migrate()
        presence.write_marker(directory, DB_FILE)

    # -- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A short ``BEGIN IMMEDIATE`` transaction; commits on success, rolls back on error.

        Nested use joins the outer transaction.

        Raises:
            StoreBusy: the write lock could not be had after the retries.
            StoreError: any other database failure (typed by SQLite error name).
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            self._begin()
            self._depth = 1
            try:
                yield self.conn
            except BaseException as exc:
                self._depth = 0
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise from_sqlite(exc) from exc
                raise
            self._depth = 0
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise from_sqlite(exc) from exc

    def _begin(self) -> None:
        for attempt in range(self.retries + 1):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or attempt == self.retries:
                    raise from_sqlite(exc) from exc
                time.sleep(random.uniform(0.01, 0.05) * (2**attempt))  # noqa: S311

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads (one consistent snapshot per statement).

        Raises:
            StoreError: a database failure, typed by SQLite error name.
        """
        with self._lock:
            try:
                yield self.conn
            except sqlite3.Error as exc:
                raise from_sqlite(exc) from exc

    # -- meta, migrations, backups --------------------------------------------------------

    def _has_meta_table(self, c: sqlite3.Connection) -> bool:
        return c.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'db_meta'"
        ).fetchone() is not None

    def _migrate(self) -> int | None:
        try:
            current = self.schema_version()
        except StoreError as exc:
            raise StoreCorrupt(f"{self.path} is not a readable Tideline store: {exc}") from exc
        if current > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{self.path} has schema {current}; this Tideline knows up to {SCHEMA_VERSION}"
            )
        if current == SCHEMA_VERSION:
            return None
        if current > 0:
            self.backup(f"pre-migrate-v{current}")
        for number in range(current, SCHEMA_VERSION):
            with self.write() as db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS db_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )
                row = db.execute(
                    "SELECT value FROM db_meta WHERE key = 'schema_version'"
                ).fetchone()
                if (int(row[0]) if row else 0) != number:
                    continue  # another process migrated meanwhile
                MIGRATIONS[number](db)
                db.execute(
                    "INSERT INTO db_meta(key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(number + 1),),
                )
        return current

    def backup(self, label: str, keep: int | None = None,
               max_bytes: int | None = None) -> Path:
        """Copy the database through SQLite's online backup API into ``backups/``.

        Args:
            label: a word that ends up in the file name.
            keep: if given, keep at most this many backups (of every label, newest first).
            max_bytes: if given (> 0), keep the newest backups only while their sizes add
                up to at most this; the backup just made always stays.

        Returns:
            The backup file.

        Raises:
            StoreFull: the disk filled up during the copy (the partial file is removed).
        """
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{time.time_ns() % 10**9:09d}"
        target = self.directory / "backups" / f"{label}-{stamp}.db"
        tmp = target.with_suffix(".partial")
        remove_stale_partials(target.parent)
        try:
            dest = sqlite3.connect(tmp)
            try:
                with self._lock:
                    self.conn.backup(dest)
            finally:
                dest.close()
            tmp.replace(target)
        except sqlite3.Error as exc:
            _remove_partial(tmp)
            raise from_sqlite(exc) from exc
        except OSError as exc:
            _remove_partial(tmp)
            raise StoreError(f"backup failed: {exc}") from exc
        if keep is not None or max_bytes:
            prune_backups(self.directory / "backups", keep=keep, max_bytes=max_bytes,
                          protect=target)
        return target

    def restore(self, backup: Path) -> None:
        """Replace the live database with a backup file (used by tests and doctor).

        Raises:
            StoreError: the copy failed.
        """
        with self._lock:
            src = sqlite3.connect(backup)
            try:
                src.backup(self.conn)
            except sqlite3.Error as exc:
                raise from_sqlite(exc) from exc
            finally:
                src.close()

    def checkpoint(self) -> None:
        """Fold the WAL back into the database file (cheap when idle)."""
        with self.read() as db:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        """Close the connection."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def copy_file(self, target: Path) -> None:
        """Copy the raw database file (after a checkpoint) — for export tooling."""
        self.checkpoint()
        shutil.copyfile(self.path, target)


#: Suffixes of a backup being written: the copy and the files SQLite keeps beside it.
PARTIAL_SUFFIXES = (".partial", ".partial-journal", ".partial-wal", ".partial-shm")
#: A partial backup untouched this long was left by a failed or killed backup (one being
#: written is touched with every page it copies), and is removed by the next backup.
STALE_PARTIAL_S = 15 * 60


def _remove_partial(tmp: Path) -> None:
    """Remove a failed backup's copy and every file SQLite made beside it.

    A copy that failed on a full disk leaves its rollback journal (``….partial-journal``)
    as well as the copy: neither is a database, and both hold the space the disk lacks.
    """
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            tmp.with_name(tmp.name + suffix).unlink(missing_ok=True)


def remove_stale_partials(folder: Path, *, older_than: float = STALE_PARTIAL_S,
                          now: float | None = None) -> list[Path]:
    """Remove what failed or killed backups left behind in ``folder``; returns it.

    Only files named like a backup in progress (:data:`PARTIAL_SUFFIXES`) and untouched
    for ``older_than`` seconds: another process's backup may be writing a fresh one.
    """
    if not folder.is_dir():
        return []
    now = time.time() if now is None else now
    removed: list[Path] = []
    for path in folder.iterdir():
        if not path.name.endswith(PARTIAL_SUFFIXES):
            continue
        with contextlib.suppress(OSError):
            if path.is_file() and now - path.stat().st_mtime >= older_than:
                path.unlink()
                removed.append(path)
    return removed


def prune_backups(folder: Path, *, keep: int | None, max_bytes: int | None,
                  protect: Path | None = None) -> list[Path]:
    """Delete the oldest backups beyond a count and a total size; returns what was deleted.

    Backups of every label count (sleep, pre-migration, manual). Newest first, a backup
    stays while fewer than ``keep`` are kept and the kept ones add up to at most
    ``max_bytes`` (None or 0: no size bound); ``protect`` (the one just made) always stays.
    """
    found = [p for p in folder.glob("*.db") if p.is_file()]
    found.sort(key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)
    if protect is not None and protect in found:
        found.remove(protect)
        found.insert(0, protect)
    kept = 0
    total = 0
    removed: list[Path] = []
    for path in found:
        size = path.stat().st_size
        fits = (keep is None or kept < keep) and (not max_bytes or total + size <= max_bytes)
        if path == protect or fits:
            kept += 1
            total += size
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def connect_readonly(directory: Path) -> sqlite3.Connection | None:
    """A read-only connection to a store's database, or None when there is none yet.

    For light paths (hooks, the sleep gate) that must not migrate, write or load numpy.

    Raises:
        sqlite3.Error: the file exists but cannot be opened.
    """
    path = directory / DB_FILE
    if not path.exists():
        return None
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)


def peek_meta(directory: Path, key: str) -> str | None:
    """Read one ``db_meta`` value without opening the store for writing (None if absent)."""
    try:
        conn = connect_readonly(directory)
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT value FROM db_meta WHERE key = ?", (key,)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])
