"""The store: the only package that talks to a database driver.

:func:`open_store` builds the backend a caller asked for: the embedded SQLite store
(:mod:`tideline.store.sqlite`, the default) in the store directory, or PostgreSQL
(:mod:`tideline.store.postgres`) for a ``postgresql://`` URL. The protocols below are
what each consumer needs from a backend; both backends implement them.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from tideline.errors import BackendUnavailable
from tideline.store.base import ArchiveLoader, ArchiveSnapshot, ArchiveStore, Store

if TYPE_CHECKING:
    from tideline.store.agent import AgentReader
    from tideline.store.gate import GateView

__all__ = ["ArchiveLoader", "ArchiveSnapshot", "ArchiveStore", "Store", "backend_of",
           "open_agent_reader", "open_store", "peek_gate", "peek_meta"]

_POSTGRES_SCHEMES = ("postgresql", "postgres")
_POSTGRES_EXTRA = ("PostgreSQL needs the postgres extra: "
                   "pip install 'tideline-memory[postgres]' ({})")


def backend_of(database: str | None) -> str:
    """The backend a database URL names: ``sqlite`` for None/empty, else ``postgresql``.

    Raises:
        BackendUnavailable: the URL names a backend Tideline has no code for.
    """
    if not database:
        return "sqlite"
    scheme = database.split("://", 1)[0].lower() if "://" in database else ""
    if scheme in _POSTGRES_SCHEMES:
        return "postgresql"
    raise BackendUnavailable(
        f"no {scheme or database!r} backend in this Tideline: a database URL is "
        "postgresql://…; without one the store directory holds a SQLite store")


def _postgres() -> ModuleType:
    """The PostgreSQL backend, imported on first use (it needs the driver)."""
    try:
        from tideline.store import postgres
    except ImportError as exc:
        raise BackendUnavailable(_POSTGRES_EXTRA.format(exc)) from exc
    return postgres


def peek_meta(directory: Path, key: str, *, database: str | None = None) -> str | None:
    """One ``db_meta`` value of a store without opening it for writing (None when there is
    no store yet, or it cannot be read): light, no migration, no numpy.

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks.
    """
    if backend_of(database) == "postgresql":
        value: str | None = _postgres().peek_database_meta(str(database), key)
        return value
    from tideline.store.sqlite.connection import peek_meta as sqlite_peek

    return sqlite_peek(directory, key)


def peek_gate(directory: Path, namespace: str, *,
              database: str | None = None) -> GateView | None:
    """What the sleep gate sees (the change marker now and the last sleep's), read without
    opening the store for writing; None when there is no store yet or it predates sleep.

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks.
    """
    if backend_of(database) == "postgresql":
        view: GateView | None = _postgres().peek_database_gate(str(database), namespace)
        return view
    from tideline.store.sqlite.gate import peek_gate as sqlite_peek

    return sqlite_peek(directory, namespace)


def open_store(
    directory: Path, namespace: str, marker: str, *, database: str | None = None,
    busy_timeout_ms: int = 5_000, retries: int = 6, check_marker: bool = True,
    pool_size: int = 4, read_url: str | None = None, read_wait_ms: int = 500,
) -> Store:
    """Open the store of one namespace: SQLite in ``directory``, or the database at a URL.

    Args:
        directory: the store directory (the SQLite file, or a PostgreSQL store's local
            state: caches, sleep state, backups of nothing authoritative).
        namespace: which fully separate memory to use.
        marker: the embedder marker the caller will write with.
        database: a ``postgresql://`` URL, or None for the embedded SQLite store.
        busy_timeout_ms: how long one attempt waits for a lock.
        retries: extra attempts after a busy timeout.
        check_marker: refuse a store built with another embedder.
        pool_size: PostgreSQL: most connections this process keeps open.
        read_url: PostgreSQL: where read-only verbs may read (a standby).
        read_wait_ms: PostgreSQL: how long a read waits for a standby to replay this
            process's newest write before it reads the primary.

    Returns:
        The opened store.

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks (PostgreSQL
            needs ``pip install 'tideline-memory[postgres]'``).
        EmbedderMismatch: the store was built with another embedder.
        StoreError: the database cannot be opened (busy, corrupt, too new).
    """
    if backend_of(database) == "postgresql":
        store: Store = _postgres().open_postgres(
            str(database), directory, namespace, marker, retries=retries,
            lock_timeout_ms=busy_timeout_ms, check_marker=check_marker, pool_size=pool_size,
            read_url=read_url, read_wait_ms=read_wait_ms)
        return store
    from tideline.store.sqlite.store import SQLiteStore

    return SQLiteStore(directory, namespace, marker, busy_timeout_ms=busy_timeout_ms,
                       retries=retries, check_marker=check_marker)


def open_agent_reader(home: Path, namespace: str, *, database: str | None = None,
                      read_url: str | None = None) -> AgentReader:
    """The agent reads of one namespace without the embedder (creates/migrates the store
    if needed): the SQLite file in ``home``, or the PostgreSQL database at a ``database``
    URL (``read_url``: where its read-only verbs may read, a standby).

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks.
        StoreCorrupt: the file is not a Tideline database.
        SchemaTooNew: written by a newer Tideline.
    """
    from tideline.store.agent import AgentReader

    if backend_of(database) == "postgresql":
        try:
            from tideline.store.postgres.connection import Database as PostgresDatabase
        except ImportError as exc:
            raise BackendUnavailable(_POSTGRES_EXTRA.format(exc)) from exc
        return AgentReader(PostgresDatabase(str(database), home, read_url=read_url), namespace)
    from tideline.store.sqlite.connection import Database as SQLiteDatabase

    return AgentReader(SQLiteDatabase(home), namespace)
