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

from tideline.store.postgres.connection import Database

if TYPE_CHECKING:
    import numpy as np

    from tideline.embed.base import Vectors
    from tideline.models import MemoryRecord

__all__ = ["PostgresHost"]


class PostgresHost(Protocol):
    """An opened PostgreSQL store, as its helper modules see it: the database, the
    namespace, the journal, and the hooks that write a row's derived rows (lexical
    index rows, vector) inside a transaction ``c``."""

    _chunk: int

    @property
    def db(self) -> Database:
        """The store's pool of connections."""

    @property
    def namespace(self) -> str:
        """The namespace the store reads and writes."""

    def space(self, kind: str, scope: str) -> str:
        """Name of the vector space of one kind (``m``/``t``) in one scope."""

    def log_event(self, c: Any, kind: str, data: dict[str, Any],
                  memory_id: int | None = None, now: float | None = None) -> int:
        """Append one journal event (inside ``c`` if given); returns its id."""

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
