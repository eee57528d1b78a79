"""Rows as records, for every backend: column lists, row → record, what the indexes see.

Backend-neutral and light (no numpy, no driver): the shared views, the SQLite store and
the PostgreSQL store select the same columns in the same order and build records here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tideline.models import MemoryRecord, Turn
from tideline.times import MAX_TS, MIN_TS, clamped_time, stored_time

if TYPE_CHECKING:
    from tideline.store.database import Database

__all__ = [
    "MEMORY_COLUMNS",
    "BackendRows",
    "PENDING_FLAG",
    "TURN_COLUMNS",
    "TURN_EMBED_SQL",
    "TIME_COLUMNS",
    "embedding_jobs",
    "json_list",
    "mark_pending",
    "memory_from_row",
    "memory_index_text",
    "turn_from_row",
    "turn_index_text",
    "turn_windows",
]

#: (table, column, nullable) of every stored time a row carries: what ``doctor`` checks
#: for times that are not real instants, on both backends.
TIME_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("memories", "event_time", True),
    ("memories", "recorded_at", False),
    ("memories", "updated_at", False),
    ("memories", "last_access", False),
    ("turns", "ts", True),
    ("turns", "recorded_at", False),
)

#: The columns of ``memories`` that :func:`memory_from_row` reads, in its order.
MEMORY_COLUMNS = (
    "id, scope, kind, gesture, context, cognition_direction, tags, entities_role, "
    "related_entities, source_links, importance, emotional, recurrence, unresolved, weight, "
    "strength, stability, reinforcements, last_access, status, version, supersedes, "
    "event_time, recorded_at, updated_at"
)

#: The columns of ``turns`` that :func:`turn_from_row` reads, in its order.
TURN_COLUMNS = (
    "id, session, turn_index, speaker, role, text, ts, source, message_id, scope, recorded_at"
)

#: The ``db_meta`` key set while some row waits for its vector.
PENDING_FLAG = "vectors_pending"

#: Every turn with the turn before it in its session (what a turn's vector is made of).
TURN_EMBED_SQL = (
    "SELECT t.id, t.namespace, t.scope, t.speaker, t.text, p.speaker, p.text FROM turns t "
    "LEFT JOIN turns p ON p.namespace = t.namespace AND p.session = t.session "
    "AND p.turn_index = t.turn_index - 1"
)


class _Executes(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


class BackendRows:
    """What the shared row code (:mod:`tideline.store.memories`, :mod:`tideline.store.turns`)
    reads from the backend's store it is a base of.

    Attributes:
        db: the backend's database object.
        namespace: the namespace the rows belong to.
        _no_index: prefix that keeps a column's index out of a plan (SQLite's unary
            ``+``, so the primary key or the full-text match drives the query); empty
            on PostgreSQL, which has no such operator for text.
        _tiebreak: what follows an ORDER BY so that ties come back in one order
            (PostgreSQL's heap order moves with every update; SQLite's plan order is
            kept as it was).
        _chunk: most ids in one ``IN (…)`` list.
    """

    db: Database
    namespace: str
    _no_index = ""
    _tiebreak = ""
    _chunk = 900


def mark_pending(c: _Executes) -> None:
    """Note, inside the writer's transaction, that a row was stored without its vector
    (the embedder was unavailable; the store's pending fill adds it later)."""
    c.execute("INSERT INTO db_meta(key, value) VALUES (?, '1') "
              "ON CONFLICT(key) DO UPDATE SET value = '1'", (PENDING_FLAG,))


def json_list(values: Iterable[Any]) -> str:
    """A list as the JSON text stored in a TEXT column (non-ASCII kept as is)."""
    return json.dumps(list(values), ensure_ascii=False)


def _jtuple(raw: str) -> tuple[Any, ...]:
    return () if raw == "[]" else tuple(json.loads(raw))


def memory_from_row(row: Sequence[Any]) -> MemoryRecord:
    """Build a record from a row selected with :data:`MEMORY_COLUMNS`."""
    return MemoryRecord(
        id=row[0], scope=row[1], kind=row[2], gesture=row[3], context=row[4],
        cognition_direction=row[5], tags=_jtuple(row[6]), entities_role=row[7],
        related_entities=_jtuple(row[8]), source_links=_jtuple(row[9]),
        importance=row[10], emotional=row[11], recurrence=row[12], unresolved=row[13],
        weight=row[14], strength=row[15], stability=row[16], reinforcements=row[17],
        last_access=clamped_time(row[18]), status=row[19], version=row[20],
        supersedes=row[21], event_time=stored_time(row[22]),
        recorded_at=clamped_time(row[23]), updated_at=clamped_time(row[24]),
    )


def turn_from_row(row: Sequence[Any]) -> Turn:
    """Build a turn from a row selected with :data:`TURN_COLUMNS`."""
    # A recall builds a hundred or more turns: a time read back as a float in range
    # (nearly all of them) is taken as it is, what stored_time and clamped_time return.
    spoken, recorded = row[6], row[10]
    return Turn(
        id=row[0], session=row[1], turn_index=row[2], speaker=row[3], role=row[4], text=row[5],
        timestamp=(spoken if type(spoken) is float and MIN_TS <= spoken <= MAX_TS
                   else stored_time(spoken)),
        source=row[7], message_id=row[8], scope=row[9],
        recorded_at=(recorded if type(recorded) is float and MIN_TS <= recorded <= MAX_TS
                     else clamped_time(recorded)),
    )


def memory_index_text(rec: MemoryRecord) -> str:
    """What the full-text index sees of a memory."""
    parts = [rec.gesture, rec.context, rec.cognition_direction, " ".join(rec.tags),
             rec.entities_role, " ".join(rec.related_entities)]
    return "\n".join(p for p in parts if p)


def turn_index_text(speaker: str, text: str) -> str:
    """What the full-text index sees of a raw turn (the speaker's name included)."""
    return f"{speaker}: {text}"


def turn_windows(hits: Sequence[Turn],
                 radius: int | Sequence[int]) -> list[tuple[str, int, int]]:
    """(session, first index, last index) of the places within ``radius`` of each hit:
    one radius for every hit, or one per hit (``neighbour_turns``).

    Raises:
        ValueError: a radius per hit, but not as many radii as hits.
    """
    radii = [radius] * len(hits) if isinstance(radius, int) else list(radius)
    if len(radii) != len(hits):
        raise ValueError(f"{len(radii)} radii for {len(hits)} hits")
    return [(t.session, t.turn_index - r, t.turn_index + r)
            for t, r in zip(hits, radii, strict=True)]


def embedding_jobs(
    memory_rows: Iterable[Sequence[Any]], turn_rows: Iterable[Sequence[Any]]
) -> list[tuple[str, int, str, str | None]]:
    """(space, key, text to embed, previous turn's text) for memory rows
    (:data:`MEMORY_COLUMNS` + namespace) and turn rows (:data:`TURN_EMBED_SQL`): what
    doctor and reembed both feed :func:`~tideline.store.turn_embedding.embed_jobs`."""
    jobs: list[tuple[str, int, str, str | None]] = []
    for row in memory_rows:
        rec = memory_from_row(row[:-1])
        jobs.append((f"m:{row[-1]}:{rec.scope}", rec.id, rec.text, None))
    jobs.extend((f"t:{ns}:{scope}", tid, turn_index_text(sp, tx),
                 turn_index_text(psp, ptx) if ptx else None)
                for tid, ns, scope, sp, tx, psp, ptx in turn_rows)
    return jobs
