"""Journaling of recalls: the event, the attention log and co-recall eligibility.

Every recall appends one ``recall`` event (latency, abstention, best confidence);
every memory hit goes to ``attention_log`` (memory, its home embedding cluster,
similarity, time, tier) and to
``eligibility`` (rank and score), from which sleep later learns ``co_recall``
edges. All of it is one short write transaction after the recall has finished;
a store that journals a recall its own way (``record_recall``: PostgreSQL writes
the same rows in one round trip) does it, else the shared view.
"""

from __future__ import annotations

import time

from tideline.errors import PrimaryUnavailable
from tideline.models import RecallPacket
from tideline.store.base import ViewHost
from tideline.store.consolidation import ConsolidationStore

__all__ = ["MAX_HITS", "MIN_CONFIDENCE", "RecallJournal"]

#: Only recalled memories this confident count as attention and co-recall…
MIN_CONFIDENCE = 0.35
#: …and at most this many per recall.
MAX_HITS = 10


class RecallJournal:
    """Records one recall's outcome for the report, attention heatmap and plasticity."""

    def __init__(self, store: ViewHost, tier: str) -> None:
        self.store = store
        self.tier = tier

    def record(self, packet: RecallPacket) -> None:
        """Write the event, attention rows and eligibility rows for ``packet``."""
        now = time.time()
        # Only what recall stood behind counts as attention and as co-recall: weak
        # candidates listed beside an abstention must not teach associations.
        hits = [] if packet.abstained else [
            i for i in packet.items if i.type == "memory" and i.confidence >= MIN_CONFIDENCE
        ][:MAX_HITS]
        data = {
            "latency_ms": round(packet.latency_ms, 3),
            "engine_ms": round(packet.engine_ms, 3),
            "abstained": packet.abstained,
            "items": len(packet.items),
            "top_confidence": packet.items[0].confidence if packet.items else 0.0,
            "best_similarity": round(packet.best_similarity, 4),
            "scope": packet.scope,
            "tier": self.tier,
        }
        if packet.degraded:
            data["degraded"] = packet.degraded
        rows = [(int(i.id), i.similarity, i.score) for i in hits]
        own = getattr(self.store, "record_recall", None)
        try:
            if own is not None:
                own(data, rows, self.tier, now)
            else:
                ConsolidationStore(self.store).record_recall(data, rows, self.tier, now)
        except PrimaryUnavailable:
            # A failover: the recall answered from a standby; its journal rows are lost,
            # which only thins the attention statistics (the packet says read_only).
            return
