"""What the SQLite store's maintenance modules need of it, as a protocol.

``doctor``, ``reembed``, the pending-vector fill and the archive's SQLite side work on
an opened :class:`~tideline.store.sqlite.store.SQLiteStore` and are called by it; they
name this protocol instead of the class, so the store imports them and not the other
way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from tideline.store.sqlite.connection import Database

if TYPE_CHECKING:
    import numpy as np

    from tideline.models import MemoryRecord

__all__ = ["SQLiteHost"]


class SQLiteHost(Protocol):
    """An opened SQLite store, as its maintenance modules see it: the database, the
    journal, and the hooks that write a row's derived rows (full text, vector) inside a
    transaction ``c``."""

    _chunk: int

    @property
    def db(self) -> Database:
        """The store's SQLite database object."""

    def log_event(self, c: Any, kind: str, data: dict[str, Any],
                  memory_id: int | None = None, now: float | None = None) -> int:
        """Append one journal event (inside ``c`` if given); returns its id."""

    def _index_memory(self, c: Any, mid: int, rec: MemoryRecord) -> None:
        """(Re)write a memory's full-text rows."""

    def _index_turn(self, c: Any, tid: int, speaker: str, text: str) -> None:
        """Write a new turn's full-text rows."""

    def _put_vector(self, c: Any, space: str, key: int, vector: np.ndarray) -> None:
        """Store one row's vector and log the change."""

    def _drop_vector(self, c: Any, space: str, key: int) -> None:
        """Delete one row's vector, logging the change."""
