"""Packet assembly: a ranked candidate as the item a caller reads."""

from __future__ import annotations

from tideline.config import Config
from tideline.dynamics import retention
from tideline.models import MemoryRecord, RecallItem, Turn, iso
from tideline.recall.candidates import Candidate
from tideline.recall.scoring import confidence

__all__ = ["item"]


def item(cand: Candidate, memories: dict[int, MemoryRecord], turns: dict[int, Turn],
         now: float, config: Config) -> RecallItem:
    """The packet item of a chosen candidate.

    Args:
        cand: the candidate.
        memories: the candidate memories by id.
        turns: the candidate turns by id.
        now: the recall's time (a memory's retention is reported as of it).
        config: the store's configuration.

    Returns:
        The item, with its confidence, score and the record's fields.
    """
    shown = confidence(cand.score)
    if cand.type == "memory":
        rec = memories[cand.key]
        return RecallItem(
            type="memory", id=rec.id, text=rec.text, confidence=shown,
            source=cand.source, scope=rec.scope, kind=rec.kind,
            similarity=round(cand.similarity, 4), score=round(cand.score, 4),
            event_time=iso(rec.event_time), recorded_at=iso(rec.recorded_at),
            source_links=rec.source_links, tags=rec.tags, weight=rec.weight,
            retention=round(retention(rec, now, config.dynamics), 4),
            status=rec.status,
        )
    t = turns[cand.key]
    spoken = iso(t.timestamp)
    return RecallItem(
        type="turn", id=t.message_id, text=t.text, confidence=shown,
        source=cand.source, scope=t.scope, kind="turn",
        similarity=round(cand.similarity, 4), score=round(cand.score, 4),
        event_time=spoken, recorded_at=iso(t.recorded_at),
        turn_id=t.id, message_id=t.message_id, session=t.session,
        turn_index=t.turn_index, speaker=t.speaker, role=t.role,
        timestamp=spoken,
    )
