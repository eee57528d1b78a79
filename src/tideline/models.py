"""The values that cross Tideline's boundaries: memories, turns, write results, recall packets.

All are frozen dataclasses with a ``to_dict()`` that gives the JSON shape the
CLI, the MCP server and the hooks share.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tideline.times import iso

__all__ = [
    "LexicalQuery",
    "EDGE_OF_DECISION",
    "EDGE_TYPES",
    "ImportResult",
    "KINDS",
    "STATUSES",
    "Decision",
    "Edge",
    "MemoryRecord",
    "RecallItem",
    "RecallPacket",
    "Turn",
    "WriteResult",
    "compute_weight",
    "derived_turn_id",
    "iso",
]

#: The kinds of memory.
KINDS = (
    "fact",
    "episode",
    "preference",
    "decision",
    "narrative",
    "dream",
    "reflection",
    "procedure",
    "identity",
)
#: A memory's lifecycle states.
STATUSES = ("episodic", "semantic", "superseded", "dormant")
#: The typed edges between memories.
EDGE_TYPES = ("related", "co_recall", "supersedes", "contradicts", "updates")
#: The novelty gate's outcomes.
Decision = Literal["new", "potentiate", "link", "correct"]
#: The edge a gate decision adds from the new memory to its neighbour: a ``link`` is
#: related to it, a ``correct`` updates it (the same statement with another value).
EDGE_OF_DECISION = {"link": "related", "correct": "updates"}

# The seed's weight formula; the coefficients sum to 1, so the raw value lies in 1..5.
WEIGHT_COEFFICIENTS = {
    "importance": 0.35, "emotional": 0.25, "recurrence": 0.25, "unresolved": 0.15,
}


def compute_weight(importance: int, emotional: int, recurrence: int, unresolved: int) -> float:
    """Combine the four 1–5 weights into one salience in 0–1.

    ``weight = (0.35·imp + 0.25·emo + 0.25·rec + 0.15·unres − 1) / 4``.

    Args:
        importance: 1–5.
        emotional: 1–5.
        recurrence: 1–5.
        unresolved: 1–5.

    Returns:
        The normalised weight.
    """
    c = WEIGHT_COEFFICIENTS
    raw = (
        c["importance"] * importance
        + c["emotional"] * emotional
        + c["recurrence"] * recurrence
        + c["unresolved"] * unresolved
    )
    return round((raw - 1.0) / 4.0, 6)




@dataclass(frozen=True)
class MemoryRecord:
    """One structured memory (a narrative, a trace).

    ``gesture`` is what happened (or the plain fact); ``context`` the setting;
    ``cognition_direction`` where thinking went. Times are epoch seconds.
    """

    id: int
    scope: str
    kind: str
    gesture: str
    context: str = ""
    cognition_direction: str = ""
    tags: tuple[str, ...] = ()
    entities_role: str = ""
    related_entities: tuple[str, ...] = ()
    source_links: tuple[int, ...] = ()
    importance: int = 3
    emotional: int = 1
    recurrence: int = 1
    unresolved: int = 1
    weight: float = 0.0
    strength: float = 1.0
    stability: float = 7.0
    reinforcements: int = 0
    last_access: float = 0.0
    status: str = "episodic"
    version: int = 1
    supersedes: int | None = None
    event_time: float | None = None
    recorded_at: float = 0.0
    updated_at: float = 0.0

    @property
    def text(self) -> str:
        """The memory as one readable string (gesture, then setting and direction)."""
        parts = [self.gesture]
        if self.context:
            parts.append(f"Context: {self.context}")
        if self.cognition_direction:
            parts.append(f"Direction: {self.cognition_direction}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with ISO times."""
        out = dataclasses.asdict(self)
        out["tags"] = list(self.tags)
        out["related_entities"] = list(self.related_entities)
        out["source_links"] = list(self.source_links)
        for key in ("last_access", "event_time", "recorded_at", "updated_at"):
            out[key] = iso(out[key])
        out["text"] = self.text
        return out


@dataclass(frozen=True)
class Turn:
    """One raw conversation turn (texture), stored whole and never summarised."""

    id: int
    session: str
    turn_index: int
    speaker: str
    role: str
    text: str
    timestamp: float | None
    source: str
    message_id: str
    scope: str
    recorded_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with ISO times."""
        out = dataclasses.asdict(self)
        out["timestamp"] = iso(self.timestamp)
        out["recorded_at"] = iso(self.recorded_at)
        return out


def derived_turn_id(
    source: str, session: str, speaker: str, timestamp: float | None, text: str,
    occurrence: int = 0, salt: str = "",
) -> str:
    """The message id of a turn that came without one: a hash of what identifies it.

    Never its position, so the same turn imported again (from the same file, a longer
    copy of it, or a resumed import) gets the same id and is skipped. ``occurrence``
    tells genuinely identical turns apart (the same speaker saying the same text at the
    same time in one session, such as two "ok"): the n-th such turn of one file or batch
    has occurrence n. ``salt`` is the caller's idempotency key, when it gave one.

    Changing this formula changes every stored derived id: it needs a migration that
    rewrites them (see ``_m004_turn_identity`` in :mod:`tideline.store.sqlite.schema`).
    """
    body = json.dumps([source, session, speaker, timestamp, text, occurrence, salt],
                      ensure_ascii=False, separators=(",", ":"))
    return "auto-" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True)
class Edge:
    """A typed, weighted link between two memories."""

    src: int
    dst: int
    type: str
    weight: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class WriteResult:
    """What the write path decided.

    Attributes:
        id: the memory that now holds the text (new or potentiated).
        decision: ``new``, ``potentiate``, ``link`` or ``correct`` (a new memory that
            updates ``nearest``: the same statement with another value).
        similarity: cosine to the nearest memory in scope (0 if none).
        nearest: that nearest memory's id, if any.
        replayed: True when the idempotency key had been seen: nothing changed.
        vector_pending: the embedder was unavailable: the memory is stored and found
            by full text; its vector is filled in once the embedder answers again.
        edge: the edge the write added from the new memory to ``nearest`` (``{"type":
            "related" | "updates", "src", "dst"}``), None when it added none.
    """

    id: int
    decision: Decision
    similarity: float = 0.0
    nearest: int | None = None
    replayed: bool = False
    scope: str = "global"
    vector_pending: bool = False
    edge: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RecallItem:
    """One recalled memory or raw turn.

    Attributes:
        type: ``memory`` or ``turn`` (raw texture).
        id: memory id, or for a turn the source's own message id.
        confidence: 0–1, calibrated so that the abstention floor maps near 0.35.
        source: how it was found first: ``lexical``, ``vector`` or ``graph``.
        updates: memories this one updates (the gate took it for their correction:
            the same statement with another value); it ranks above them.
        updated_by: newer memories that update this one.
    """

    type: Literal["memory", "turn"]
    id: int | str
    text: str
    confidence: float
    source: str
    scope: str
    kind: str = ""
    similarity: float = 0.0
    score: float = 0.0
    event_time: str | None = None
    recorded_at: str | None = None
    source_links: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    weight: float = 0.0
    retention: float = 1.0
    status: str = ""
    turn_id: int | None = None
    message_id: str | None = None
    session: str | None = None
    turn_index: int | None = None
    speaker: str | None = None
    role: str | None = None
    timestamp: str | None = None
    updates: tuple[int, ...] = ()
    updated_by: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; turn-only fields are left out of memory items, memory-only
        ones out of turn items."""
        out = dataclasses.asdict(self)
        out["source_links"] = list(self.source_links)
        out["tags"] = list(self.tags)
        out["updates"] = list(self.updates)
        out["updated_by"] = list(self.updated_by)
        if self.type == "memory":
            for key in ("turn_id", "message_id", "session", "turn_index", "speaker", "role",
                        "timestamp"):
                out.pop(key)
        else:
            out.pop("updates")
            out.pop("updated_by")
        return out


@dataclass(frozen=True)
class RecallPacket:
    """The answer to a recall: items best first, or an honest abstention."""

    query: str
    scope: str
    items: tuple[RecallItem, ...]
    abstained: bool
    latency_ms: float
    embed_ms: float = 0.0
    engine_ms: float = 0.0
    best_similarity: float = 0.0
    considered: int = 0
    filters: dict[str, Any] = field(default_factory=dict)
    signals: dict[str, float] = field(default_factory=dict)
    degraded: str | None = None
    """``"lexical"`` when the embedder was unavailable (or the store has none): the
    items come from full text, the graph and dates only; None normally."""
    read_only: bool = False
    """True when no PostgreSQL primary answered (a failover): a standby answered,
    possibly a moment behind, and the recall was not journaled."""

    @property
    def memories(self) -> tuple[RecallItem, ...]:
        """Only the memory items."""
        return tuple(i for i in self.items if i.type == "memory")

    @property
    def texture(self) -> tuple[RecallItem, ...]:
        """Only the raw-turn items."""
        return tuple(i for i in self.items if i.type == "turn")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "query": self.query,
            "scope": self.scope,
            "abstained": self.abstained,
            "items": [i.to_dict() for i in self.items],
            "latency_ms": round(self.latency_ms, 3),
            "embed_ms": round(self.embed_ms, 3),
            "engine_ms": round(self.engine_ms, 3),
            "best_similarity": round(self.best_similarity, 4),
            "considered": self.considered,
            "signals": self.signals,
            "filters": self.filters,
            "degraded": self.degraded,
            **({"read_only": True} if self.read_only else {}),
        }


@dataclass(frozen=True)
class ImportResult:
    """Outcome of importing raw turns.

    Attributes:
        inserted: turns stored by this call.
        skipped: turns that were stored already (same source and message id).
        sessions: distinct sessions in the batch.
        turn_ids: internal ids of the turns this call inserted.
        batch_ids: internal id of every turn of the batch, in order, whether inserted now
            or stored before (what a retried write links to).
    """

    inserted: int
    skipped: int
    sessions: int
    turn_ids: tuple[int, ...] = ()
    batch_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = dataclasses.asdict(self)
        out["turn_ids"] = list(self.turn_ids)
        out["batch_ids"] = list(self.batch_ids)
        return out


@dataclass(frozen=True)
class LexicalQuery:
    """What a full-text search looks for, in words rather than in a backend's syntax.

    The recall engine decides which terms matter (by their document frequencies); each
    backend turns this into its own query language (FTS5 ``MATCH`` on SQLite, a
    ``tsquery`` and ``pg_trgm`` on PostgreSQL) and never sees another's syntax.

    Attributes:
        text: the user's query, as typed.
        drop: terms (casefolded, from :func:`tideline.text.query_terms`) left out
            of the alternatives because they are too common to rank by alone.
        together: terms searched together (ANDed) as one more alternative, so a row
            holding all of a person's names and the topic is still found.
        known: terms the word index holds; the substring search skips them.
    """

    text: str
    drop: frozenset[str] = frozenset()
    together: tuple[str, ...] = ()
    known: frozenset[str] = frozenset()
