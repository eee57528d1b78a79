"""What the shared views and the consumers of a store need from a backend, as protocols.

Backend-neutral and light (no driver, no numpy). The SQLite store
(:mod:`tideline.store.sqlite`) and the PostgreSQL store implement them structurally;
nothing outside ``store/`` names a backend's class, and nothing outside ``store/``
touches :attr:`ViewHost.db`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from tideline.store.dialect import Dialect

if TYPE_CHECKING:
    import numpy as np

    from tideline.embed.base import Vectors
    from tideline.models import LexicalQuery, MemoryRecord, Turn

__all__ = ["Connection", "Database", "ViewHost", "WriteRows"]


class Connection(Protocol):
    """A connection inside a read or a write transaction."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any:
        """Run one statement; the cursor offers ``fetchone``, ``fetchall``, ``rowcount``
        and iteration."""

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]], /) -> Any:
        """Run one statement per parameter set (``rowcount``: summed)."""


class Database(Protocol):
    """A backend's database object (``store.db``, used inside ``store/`` only)."""

    @property
    def dialect(self) -> Dialect:
        """The SQL fragments that differ between backends."""

    def read(self) -> AbstractContextManager[Any]:
        """A connection for reads (a :class:`Connection`)."""

    def write(self) -> AbstractContextManager[Any]:
        """One write transaction (a :class:`Connection`); nested use joins it.

        Raises:
            StoreBusy: still locked / conflicting after the retries.
            StoreError: any other database failure.
        """

    def get_meta(self, key: str) -> str | None:
        """One ``db_meta`` value."""

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value."""

    def schema_version(self) -> int:
        """The number of migrations applied."""

    def close(self) -> None:
        """Release the connection (or pool)."""


class ViewHost(Protocol):
    """What a per-topic view over one namespace (sleep, agent, self-model, dream,
    report) needs from the opened store."""

    @property
    def db(self) -> Database:
        """The database object."""

    @property
    def namespace(self) -> str:
        """The namespace the views read and write."""

    def space(self, kind: str, scope: str) -> str:
        """Name of a vector space (``m``/``t`` of one scope)."""

    def log_event(self, c: Any, kind: str, data: dict[str, Any],
                  memory_id: int | None = None, now: float | None = None) -> int:
        """Append one journal event (inside ``c`` if given); returns its id."""

    def events(self, *, kinds: Sequence[str] | None = None, limit: int = 50,
               since: float | None = None) -> list[dict[str, Any]]:
        """Journal entries, newest first."""


class WriteRows(Protocol):
    """What the write path (gate, revise, raw turns) needs: rows inside the caller's
    short transaction (``c``), the idempotency keys, the journal and word search."""

    @property
    def namespace(self) -> str:
        """The namespace written to."""

    def transaction(self) -> AbstractContextManager[Any]:
        """One short write transaction (nested use joins it).

        Raises:
            StoreBusy: still locked / conflicting after the retries.
            StoreError: any other database failure.
        """

    def write_key(self, key: str, *,
                  since: float | None = None) -> tuple[int, str, float, int | None] | None:
        """The stored outcome of an idempotency key, if seen (at or after ``since``)."""

    def record_write_key(
        self, c: Any, key: str, mid: int, decision: str, similarity: float,
        nearest: int | None, now: float, *, refresh: bool = False,
    ) -> None:
        """Remember the outcome of an idempotency key (``refresh``: replace an older one)."""

    def insert_memory(self, c: Any, rec: MemoryRecord, vector: np.ndarray | None) -> int:
        """Insert a memory with its index rows (and vector, or mark it pending)."""

    def update_memory(self, c: Any, rec: MemoryRecord) -> None:
        """Write back every mutable field of ``rec`` and refresh its index rows."""

    def set_status(self, c: Any, mid: int, status: str, now: float) -> None:
        """Change a memory's status and bump its version."""

    def get_memory(self, mid: int, c: Any = None) -> MemoryRecord:
        """One memory (raises NotFound)."""

    def get_memories(self, ids: Iterable[int], c: Any = None) -> dict[int, MemoryRecord]:
        """Memories by id (missing ids left out)."""

    def add_edge(self, c: Any, src: int, dst: int, etype: str, weight: float,
                 now: float) -> None:
        """Create or strengthen a typed edge."""

    def copy_edges(self, c: Any, old: int, new: int, types: Sequence[str], now: float) -> None:
        """Give a new version the associative edges of the one it supersedes."""

    def log_event(self, c: Any, kind: str, data: dict[str, Any],
                  memory_id: int | None = None, now: float | None = None) -> int:
        """Append one journal event (inside ``c`` if given); returns its id."""

    def search_memories(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        kind: str | None = None, since: float | None = None, until: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[int, float]]:
        """Memory ids best first for a lexical query."""

    def existing_turn_keys(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The id of each (source, message id) pair already stored."""

    def insert_turns(self, c: Any, turns: Sequence[Turn],
                     vectors: Sequence[np.ndarray | None]) -> list[int]:
        """Insert raw turns in order (0 for one stored already)."""

    def previous_turn(self, session: str, turn_index: int) -> Turn | None:
        """The turn just before ``turn_index`` in a session, if stored."""

    def vectors_pending(self) -> bool:
        """Whether some row may lack its vector (cheap)."""

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored without a vector (``filled``, ``left``)."""
