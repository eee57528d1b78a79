"""SQL of sleep: its state and lock, the gate, and the reads and writes of every step.

Only the store package talks to SQLite; the steps in :mod:`tideline.sleep` plan
in Python and hand their changes to the methods here, which apply them in short
``BEGIN IMMEDIATE`` transactions. Updates of memories re-check each row's
``version`` (a row changed meanwhile by a write, reflect or revise is left
alone and counted as a conflict), and nothing here ever deletes a memory.

This package imports nothing heavy at load time: :func:`peek_gate` is what the
``tideline sleep`` command calls before it decides whether to open the store
at all, and that check must stay far below the cost of loading numpy.

One module per concept, each a view over the namespace sharing :class:`SleepView`
(state, gate, lock): :mod:`.memories` (dynamics, weights, links), :mod:`.plasticity`
(recall traces, co_recall edges), :mod:`.topics` (keywords, topic clusters),
:mod:`.clusters` (embedding clusters, attention by cluster), :mod:`.entities`,
:mod:`.backfill` (raw turns, retention snapshots). :class:`ConsolidationStore` is all
of them at once, plus the recall journal that spans them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tideline.store.consolidation.backfill import BackfillRows
from tideline.store.consolidation.clusters import ClusterRows
from tideline.store.consolidation.entities import EntityRows
from tideline.store.consolidation.memories import MemoryRows
from tideline.store.consolidation.plasticity import PlasticityRows
from tideline.store.consolidation.state import LockHolder, SleepView
from tideline.store.consolidation.topics import TopicRows
from tideline.store.events import append_event

__all__ = ["ConsolidationStore", "LockHolder", "SleepView"]


class ConsolidationStore(MemoryRows, PlasticityRows, TopicRows, ClusterRows, EntityRows,
                         BackfillRows):
    """The sleep-side SQL of one namespace.

    Args:
        store: the opened store.
    """

    # -- journal ------------------------------------------------------------------------

    def log(self, kind: str, data: dict[str, Any], now: float) -> int:
        """Append one event; returns its id."""
        with self.db.write() as c:
            return append_event(c, self.ns, kind, data, now=now)

    def record_recall(
        self, data: dict[str, Any], hits: Sequence[tuple[int, float, float]], tier: str,
        now: float,
    ) -> int:
        """Journal one recall in one short transaction: its ``recall`` event, and for each
        hit (memory id, similarity, score; best first) an ``attention_log`` row (with the
        memory's home cluster) and an ``eligibility`` row (for co-recall edges).

        Its commit does not wait for the log to reach the disk (what SQLite's
        ``synchronous = NORMAL`` does for every commit): a crash of the machine, or of
        the PostgreSQL server, may lose the journal of the last fraction of a second of
        recalls; nothing else, and nothing is left half-written.

        Returns:
            The recall event's id.
        """
        with self.db.write() as c:
            if self.db.dialect.relaxed_commit:
                c.execute(self.db.dialect.relaxed_commit)
            recall_id = append_event(c, self.ns, "recall", data, now=now)
            home = self.primary_clusters(c, [mid for mid, _, _ in hits])
            c.executemany(
                "INSERT INTO attention_log(namespace, memory_id, cluster, similarity, tier, ts) "
                "VALUES (?,?,?,?,?,?)",
                [(self.ns, mid, home.get(mid), sim, tier, now) for mid, sim, _ in hits])
            c.executemany(
                "INSERT INTO eligibility(namespace, recall_id, memory_id, rank, score, ts) "
                "VALUES (?,?,?,?,?,?)",
                [(self.ns, recall_id, mid, rank, score, now)
                 for rank, (mid, _, score) in enumerate(hits)])
        return recall_id
