"""The store: the only package that talks to a database driver.

:class:`Store` is the seam where backends plug in. :class:`~tideline.store.sqlite.SQLiteStore`
is the embedded default; a PostgreSQL backend implements the same protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from tideline.models import Edge, MemoryRecord, Turn

__all__ = ["Store"]


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
