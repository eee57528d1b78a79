"""The store: the only package that talks to a database driver.

:func:`open_store` builds the backend a caller asked for: the embedded SQLite store
(:mod:`tideline.store.sqlite`, the default) in the store directory, or PostgreSQL
(:mod:`tideline.store.postgres`) for a ``postgresql://`` URL. The protocols below are
what each consumer needs from a backend; both backends implement them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from tideline.errors import BackendUnavailable
from tideline.models import Edge, LexicalQuery, MemoryRecord, Turn

if TYPE_CHECKING:
    from tideline.store.consolidation import GateView
    from tideline.store.sqlite.store import SQLiteStore

__all__ = ["ArchiveLoader", "ArchiveSnapshot", "ArchiveStore", "Store", "backend_of",
           "open_store", "peek_gate", "peek_meta"]

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


def peek_meta(directory: Path, key: str, *, database: str | None = None) -> str | None:
    """One ``db_meta`` value of a store without opening it for writing (None when there is
    no store yet, or it cannot be read): light, no migration, no numpy.

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks.
    """
    if backend_of(database) == "postgresql":
        try:
            from tideline.store import postgres
        except ImportError as exc:
            raise BackendUnavailable(_POSTGRES_EXTRA.format(exc)) from exc
        value: str | None = postgres.peek_database_meta(str(database), key)
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
        try:
            from tideline.store import postgres
        except ImportError as exc:
            raise BackendUnavailable(_POSTGRES_EXTRA.format(exc)) from exc
        view: GateView | None = postgres.peek_database_gate(str(database), namespace)
        return view
    from tideline.store.sqlite.gate import peek_gate as sqlite_peek

    return sqlite_peek(directory, namespace)


def open_store(
    directory: Path, namespace: str, marker: str, *, database: str | None = None,
    busy_timeout_ms: int = 5_000, retries: int = 6, check_marker: bool = True,
    pool_size: int = 4,
) -> SQLiteStore:
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

    Returns:
        The opened store.

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks (PostgreSQL
            needs ``pip install 'tideline-memory[postgres]'``).
        EmbedderMismatch: the store was built with another embedder.
        StoreError: the database cannot be opened (busy, corrupt, too new).
    """
    if backend_of(database) == "postgresql":
        try:
            from tideline.store import postgres
        except ImportError as exc:
            raise BackendUnavailable(_POSTGRES_EXTRA.format(exc)) from exc
        # Both backends offer the same methods; the SQLite class stands for the shape
        # until every consumer is typed against the protocols.
        return cast("SQLiteStore", postgres.open_postgres(
            str(database), directory, namespace, marker, retries=retries,
            lock_timeout_ms=busy_timeout_ms, check_marker=check_marker, pool_size=pool_size))
    from tideline.store.sqlite.store import SQLiteStore

    return SQLiteStore(directory, namespace, marker, busy_timeout_ms=busy_timeout_ms,
                       retries=retries, check_marker=check_marker)


class Store(Protocol):
    """What the write path, the recall path and the facade need from a backend."""

    backend: str
    namespace: str
    directory: Path

    def space(self, kind: str, scope: str) -> str:
        """Name of a vector space."""

    def write_key(self, key: str, *,
                  since: float | None = None) -> tuple[int, str, float, int | None] | None:
        """Outcome of an idempotency key seen before."""

    def get_memory(self, mid: int, c: Any = None) -> MemoryRecord:
        """One memory (raises NotFound)."""

    def get_memories(self, ids: Iterable[int], c: Any = None) -> dict[int, MemoryRecord]:
        """Memories by id."""

    def get_turns(self, ids: Iterable[int]) -> dict[int, Turn]:
        """Raw turns by id."""

    def edges_of(self, ids: Sequence[int], types: Sequence[str] | None = None) -> list[Edge]:
        """Edges touching the ids."""

    def search_memories(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        kind: str | None = None, since: float | None = None, until: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[int, float]]:
        """Memory ids best first for a lexical query (the score only orders them);
        ``substrings`` searches the identifier/substring index instead of the word index."""

    def search_turns(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        since: float | None = None, until: float | None = None,
    ) -> list[tuple[int, float]]:
        """Raw-turn ids best first for a lexical query."""

    def events(self, **kw: Any) -> list[dict[str, Any]]:
        """The journal."""

    def stats(self) -> dict[str, Any]:
        """Counts."""

    def scopes(self) -> list[str]:
        """Scopes with data."""

    def transaction(self) -> AbstractContextManager[Any]:
        """A short write transaction."""

    def close(self) -> None:
        """Release the connection."""


class ArchiveSnapshot(Protocol):
    """One consistent read of a store's rows, table by table (for the archive)."""

    def count(self, table: str) -> int:
        """Rows of one table in the snapshot."""

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """The rows of one table in key order, blobs as bytes."""

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value."""


class ArchiveLoader(Protocol):
    """Archived rows into a store inside one transaction."""

    inserted: dict[str, int]
    skipped: dict[str, int]

    def meta(self, key: str) -> str | None:
        """One ``db_meta`` value as the transaction sees it."""

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value."""

    def add(self, table: str, row: Mapping[str, Any]) -> None:
        """Insert one row, or skip it when an identical one is there."""

    def put_vector(self, space: str, key: int, vector: Any) -> None:
        """Store one vector."""

    def is_new(self, space: str, key: int) -> bool:
        """Whether the row behind a vector key was inserted by this load, still without one."""


class ArchiveStore(Protocol):
    """What export, import and migrate need from a backend."""

    def archive_snapshot(self, namespace: str | None) -> AbstractContextManager[ArchiveSnapshot]:
        """A read snapshot of one namespace, or of every one with None."""

    def archive_loader(self, dim: int) -> AbstractContextManager[ArchiveLoader]:
        """One write transaction that loads archived rows."""
