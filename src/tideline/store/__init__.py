"""The store: the only package that talks to a database driver.

:class:`Store` is the seam where backends plug in. :class:`~tideline.store.sqlite.SQLiteStore`
is the embedded default; a PostgreSQL backend implements the same protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from tideline.models import Edge, MemoryRecord, Turn

__all__ = ["ArchiveLoader", "ArchiveSnapshot", "ArchiveStore", "Store"]


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

    def lexical_memories(self, expression: str, table: str, **kw: Any) -> list[tuple[int, float]]:
        """Full-text hits over memories."""

    def lexical_turns(self, expression: str, table: str, **kw: Any) -> list[tuple[int, float]]:
        """Full-text hits over raw turns."""

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
