"""What the PostgreSQL store's helper modules need of it, as a protocol.

``maintenance`` (doctor, reembed), the archive's PostgreSQL side (``dump``) and the
recall statements (``recall``) work on an opened
:class:`~tideline.store.postgres.store.PostgresStore` and are called by it; they name
this protocol instead of the class, so the store imports them and not the other way
round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tideline.store.base import ViewHost
from tideline.store.postgres.connection import Database

if TYPE_CHECKING:
    import numpy as np

    from tideline.embed.base import Vectors
    from tideline.models import MemoryRecord

__all__ = ["PostgresHost"]


class PostgresHost(ViewHost, Protocol):
    """An opened PostgreSQL store, as its helper modules see it: what every view sees
    (the namespace, its vector spaces, the journal) on its pool of connections, and the
    hooks that write a row's derived rows (lexical index rows, vector) inside a
    transaction ``c``."""

    _chunk: int

    @property
    def db(self) -> Database:
        """The store's pool of connections."""

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored while the embedder was down."""

    def _index_memory(self, c: Any, mid: int, rec: MemoryRecord, *,
                      namespace: str | None = None) -> None:
        """Write a memory's lexical index row (``namespace``: the memory's own)."""

    def _index_turn(self, c: Any, tid: int, speaker: str, text: str, *,
                    namespace: str | None = None) -> None:
        """Write a turn's lexical index row (``namespace``: the turn's own)."""

    def _put_vector(self, c: Any, space: str, key: int, vector: np.ndarray) -> None:
        """Store one row's vector."""
