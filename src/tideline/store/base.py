"""What the shared views and the consumers of a store need from a backend, as protocols.

Backend-neutral and light (no driver, no numpy). The SQLite store
(:mod:`tideline.store.sqlite`) and the PostgreSQL store implement them structurally;
nothing outside ``store/`` names a backend's class, and nothing outside ``store/``
touches :attr:`ViewHost.db`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tideline.store.database import Database

if TYPE_CHECKING:
    import numpy as np

    from tideline.embed.base import Embedder, Vectors
    from tideline.models import Edge, LexicalQuery, MemoryRecord, Turn
    from tideline.store.agent import AgentReader

__all__ = ["ArchiveLoader", "ArchiveSnapshot", "ArchiveStore", "GatedWrite", "Store",
           "VectorSearch", "ViewHost", "WriteRows"]


@dataclass(frozen=True)
class GatedWrite:
    """What one write the novelty gate judged leaves in the store (see
    :meth:`WriteRows.record_gated`).

    Attributes:
        rec: the new memory (``new``, ``link``), or the potentiated one as merged (its id).
        vector: the new memory's embedding (None: its vector is pending).
        decision: ``new``, ``link`` (an edge to ``nearest``) or ``potentiate``.
        similarity: cosine to ``nearest`` (the link's weight, rounded to 4 places).
        nearest: the gate's neighbour, if any.
        key: the idempotency key.
        refresh_key: replace an older outcome of the key (a derived key).
        event: the journal entry's data (kind ``write``).
        now: the write's time.
    """

    rec: MemoryRecord
    vector: np.ndarray | None
    decision: str
    similarity: float
    nearest: int | None
    key: str
    refresh_key: bool
    event: dict[str, Any]
    now: float


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
               since: float | None = None, before: int | None = None) -> list[dict[str, Any]]:
        """Journal entries, newest first (``before``: only those of a smaller id)."""

    def acquire_sleep_lock(self, holder: str) -> bool | None:
        """Take the backend's own one-at-a-time sleep lock of this namespace for ``holder``.

        Returns:
            True when taken (or held by ``holder`` already), False when another session
            holds it, None when the backend has no lock of its own (SQLite: one file on
            one host, where the lease row in ``sleep_state`` serialises sleeps).

        Raises:
            BackendUnavailable: the database server cannot be reached.
        """

    def release_sleep_lock(self, holder: str) -> None:
        """Drop the backend's sleep lock if ``holder`` holds it (nothing without one)."""


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

    @property
    def key_with_gate(self) -> bool:
        """Whether the key is read with the gate's search (:meth:`keyed_nearest_live`,
        after the embedding) rather than first."""

    def keyed_nearest_live(
        self, vectors: VectorSearch, scope: str, vector: np.ndarray, k: int, key: str, *,
        since: float | None = None,
    ) -> tuple[tuple[int, str, float, int | None] | None, tuple[int | None, float]]:
        """The key's stored outcome and, without one, the gate's neighbour and cosine."""

    def commit_reads(
        self, c: Any, key: str, *, since: float | None, lock: Sequence[int],
    ) -> tuple[tuple[int, str, float, int | None] | None, dict[int, MemoryRecord]]:
        """Inside ``c``: the key's stored outcome (held until commit) and, without one,
        the memories ``lock`` (locked until commit where the backend locks rows)."""

    def insert_memory(self, c: Any, rec: MemoryRecord, vector: np.ndarray | None) -> int:
        """Insert a memory with its index rows (and vector, or mark it pending)."""

    def record_gated(self, c: Any, write: GatedWrite) -> int:
        """Store what the gate decided, inside ``c``: the new memory (its index rows, vector
        and a link's edge) or the potentiated one, the key's outcome and the journal
        entry; returns the memory's id."""

    @property
    def gated_at_once(self) -> bool:
        """Whether a gated write outside a transaction is cheaper as
        :meth:`record_gated_at_once` than as a transaction of reads and rows."""

    def gate_target(self, mid: int) -> tuple[MemoryRecord | None, Any]:
        """The memory the gate would potentiate, read now without a lock, and a token of
        its state that :meth:`record_gated_at_once` checks (``(None, None)``: none)."""

    def record_gated_at_once(
        self, write: GatedWrite, *, since: float | None, target: tuple[int, Any] | None,
    ) -> tuple[tuple[int, str, float, int | None] | None, int | None]:
        """Store what the gate decided in a transaction of its own, if the key's outcome
        is not stored (at or after ``since``) and ``target`` (id, token) is unchanged:
        (stored outcome, None) for a replay, (None, id) when written, (None, None) when
        ``target`` changed and nothing was written."""

    def nearest_live(self, vectors: VectorSearch, scope: str, vector: np.ndarray,
                     k: int) -> tuple[int | None, float]:
        """The gate's neighbour: the nearest of the ``k`` nearest memories of ``scope``
        not superseded, and its cosine (``(None, 0.0)``: none)."""

    def bulk_load(self, expected: int = 0) -> AbstractContextManager[Any]:
        """One write transaction for a large load (of about ``expected`` rows) through
        :meth:`insert_memories`.

        Raises:
            StoreBusy: still locked / conflicting after the retries.
            StoreError: any other database failure (nothing of the load is kept).
        """

    def insert_memories(self, c: Any, recs: Sequence[MemoryRecord],
                        vectors: Sequence[np.ndarray | None]) -> list[int]:
        """Insert many memories with their index rows and vectors; their new ids."""

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

    def existing_turn_keys(
        self, keys: Sequence[tuple[str, str, str]],
    ) -> dict[tuple[str, str, str], int]:
        """The id of each (scope, source, message id) triple already stored."""

    def insert_turns(self, c: Any, turns: Sequence[Turn],
                     vectors: Sequence[np.ndarray | None]) -> list[int]:
        """Insert raw turns in order (0 for one stored already)."""

    def put_sentence_vectors(self, c: Any, scope: str, tid: int, matrix: np.ndarray) -> None:
        """Store the sentence vectors of one turn (``recall/sentences.py``) inside ``c``."""

    def previous_turn(self, session: str, turn_index: int) -> Turn | None:
        """The turn just before ``turn_index`` in a session, if stored."""

    def next_turn_index(self, session: str) -> int:
        """The index the next turn of a session gets."""

    def vectors_pending(self) -> bool:
        """Whether some row may lack its vector (cheap)."""

    def fill_pending(
        self, embed: Callable[[Sequence[str]], Vectors | None], *, limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed rows stored without a vector (``filled``, ``left``)."""


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
    #: The transaction's connection (portable SQL), for an import's look-ups.
    c: Any
    #: Tables whose rows already in the store win over an archived row with their key.
    keep_existing: frozenset[str]

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

    def archive_loader(self, dim: int, expected: Mapping[str, int] | None = None,
                       ) -> AbstractContextManager[ArchiveLoader]:
        """One write transaction that loads archived rows (``expected``: about how many
        per table, so a backend can plan the load)."""


class VectorSearch(Protocol):
    """A backend's vector search over one namespace (``store.vector_spaces(...)``): the
    local ANN index files on SQLite, pgvector HNSW on PostgreSQL."""

    def search(self, kind: str, scopes: Sequence[str], query: np.ndarray,
               k: int) -> dict[int, float]:
        """The ``k`` nearest keys of memories (``m``) or turns (``t``) in ``scopes``,
        with their cosine similarity."""

    def centroid(self, kind: str, scope: str) -> tuple[np.ndarray, float] | None:
        """The mean vector of one space and its mean cosine to it (None when empty)."""

    def rebuild_all(self) -> dict[str, int]:
        """Rebuild every index from the stored vectors; returns the size per space."""

    def warm(self) -> dict[str, int]:
        """Bring what a search reads into memory before the first search needs it;
        returns what was loaded (vectors per space on SQLite, index pages on
        PostgreSQL)."""

    def close(self) -> None:
        """Persist what is derived and release it."""


class Store(ViewHost, WriteRows, ArchiveStore, Protocol):
    """Everything the facade, the recall path, sleep, dream, injection, the importers and
    the report need from an opened store; both backends implement it, and
    :func:`tideline.store.open_store` returns it."""

    backend: str
    directory: Path
    marker: str

    @property
    def agent(self) -> AgentReader:
        """The reads (and small writes) of injection, hooks and importers."""

    def close(self) -> None:
        """Release the connection (or pool) and any sleep lock held."""

    def backup(self, label: str, *, keep: int | None = None,
               max_bytes: int | None = None) -> Path | None:
        """A backup file of the database (None where the server keeps the backups).

        Raises:
            StoreFull: the disk filled up during the copy.
            StoreError: the copy failed.
        """

    def describe(self) -> dict[str, Any]:
        """Where the data lives: backend, database, schema version, size."""

    def parallel_reads(self) -> bool:
        """Whether a read from another thread may run beside this thread's reads now and
        see the same data (a database server, and this thread inside no transaction)."""

    def statements_sent(self) -> int | None:
        """Statements sent to the database server so far by this process (None: in
        process, nothing is sent)."""

    def doctor(self, embedder: Embedder, vectors: Any, *, repair: bool,
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Check integrity and, with ``repair``, rebuild what is derived (``vectors``: the
        store's own :meth:`vector_spaces`)."""

    def reembed(self, new: Embedder, *,
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Re-embed every row with ``new`` and switch the marker at once.

        Raises:
            EmbedderError: the new embedder failed (the store is unchanged).
        """

    def vector_spaces(self, dim: int, marker: str) -> VectorSearch:
        """The vector search over this namespace."""

    def delete_memory(self, c: Any, mid: int) -> MemoryRecord:
        """Delete one memory with its index rows, vector and edges (``forget``)."""

    def list_memories(
        self, *, scopes: Sequence[str] | None = None, kind: str | None = None,
        status: Sequence[str] | None = None, order: str = "recorded_at DESC", limit: int = 50,
        min_weight: float | None = None,
    ) -> list[MemoryRecord]:
        """Memories by filter, in ``order``."""

    def memory_vectors(self, recs: Sequence[MemoryRecord], dim: int) -> dict[int, np.ndarray]:
        """The stored vectors of memories (by id; missing ones left out)."""

    def turn_vectors(self, turns: Sequence[Turn], dim: int) -> dict[int, np.ndarray]:
        """The stored vectors of raw turns (by id; missing ones left out)."""

    def sentence_vectors(self, turns: Sequence[Turn], dim: int) -> dict[int, np.ndarray]:
        """The stored sentence vectors of raw turns (by id: a (sentences, dim) matrix;
        turns stored without them left out)."""

    def memory_vectors_in(self, ids: Sequence[int], scopes: Sequence[str],
                          dim: int) -> dict[tuple[str, int], np.ndarray]:
        """The stored vectors of memories whose records are not read yet, looked up in
        the space of each of ``scopes``: (scope, memory id) → vector."""

    def document_frequencies(self, kind: str,
                             tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many memories (``m``) or turns (``t``) hold each token, and the total."""

    def edges_of(self, ids: Sequence[int], types: Sequence[str] | None = None) -> list[Edge]:
        """Edges touching the ids."""

    def search_turns(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        since: float | None = None, until: float | None = None,
    ) -> list[tuple[int, float]]:
        """Raw-turn ids best first for a lexical query."""

    def get_turns(self, ids: Iterable[int]) -> dict[int, Turn]:
        """Raw turns by id (missing ids left out)."""

    def speakers_since(self, after_id: int) -> tuple[int, list[tuple[str, str]]]:
        """The newest turn id and the (scope, speaker) pairs of turns after ``after_id``."""

    def neighbour_turns(self, hits: Sequence[Turn],
                        radius: int | Sequence[int] = 1) -> list[Turn]:
        """The turns around each hit in its session (``radius``: one for every hit, or
        one per hit)."""

    def turns_between(self, scopes: Sequence[str], start: float, end: float,
                      limit: int) -> list[Turn]:
        """Turns of ``scopes`` stamped in ``[start, end]``."""

    def session_turns(
        self, session: str, *, around: int | None = None, radius: int = 3, limit: int = 200,
        scopes: Sequence[str] | None = None,
    ) -> list[Turn]:
        """The turns of one session (around one index)."""

    def scopes(self) -> list[str]:
        """Scopes with data."""

    def stats(self, scopes: Sequence[str] | None = None) -> dict[str, Any]:
        """Counts (of ``scopes`` only, if given)."""
