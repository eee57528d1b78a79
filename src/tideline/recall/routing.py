"""Query routing through embedding clusters: the nearest clusters and their neighbours.

Sleep builds soft clusters per scope and an adjacency matrix (how many memories
two clusters share). A query is routed to its ``route_clusters`` nearest
centroids in the visible scopes and from there to their ``route_adjacent`` most
adjacent clusters; the most typical members of those clusters become extra
candidates (source ``graph``). This reaches memories the ANN top-k missed and
memories one topic over, as the seed's soft-clustering query routing does.

Centroids are cached per process and reloaded when sleep records a new
``clusters.version``; a store that never slept routes nothing. The version is read
once per recall (:meth:`ClusterRouter.refresh`), which the recall starts beside its
other reads on a database server; a store that reads it in a statement the recall
sends anyway (``state_seen``: PostgreSQL's document-frequency count) is asked for
that value instead, so routing sends nothing until it has clusters to route to. The
value is read from the database in every recall either way, so a sleep on another
host is seen by the next recall on this one.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Container, Sequence

import numpy as np

from tideline.config import SleepTuning
from tideline.models import MemoryRecord
from tideline.recall.ahead import Later, later
from tideline.store.base import Store
from tideline.store.consolidation import ConsolidationStore

__all__ = ["ClusterRouter"]


class ClusterRouter:
    """Finds routed candidates for a query vector.

    Args:
        store: the store.
        dim: vector dimension.
        tuning: the sleep settings (``route_*``).
    """

    def __init__(self, store: Store, dim: int, tuning: SleepTuning) -> None:
        self.cons = ConsolidationStore(store)
        self.store = store
        self.dim = dim
        self.tuning = tuning
        self._lock = threading.Lock()
        self._version: str | None = None
        self._ids = np.zeros(0, dtype=np.int64)
        self._scopes: list[str] = []
        self._matrix = np.zeros((0, dim), dtype=np.float32)

    def wanted(self) -> bool:
        """Whether routing is switched on (``route_clusters`` and ``route_members``)."""
        return self.tuning.route_clusters > 0 and self.tuning.route_members > 0

    def ahead(self, parallel: bool) -> Later[bool]:
        """What :meth:`refresh` will return for the recall starting now: from the
        store's reads of this recall where it offers them (``state_seen``), else read
        beside the recall (see :mod:`tideline.recall.ahead`)."""
        if getattr(self.store, "state_seen", None) is not None:
            return Later(functools.partial(self.refresh, since=time.monotonic()), None)
        return later(self.refresh, parallel=parallel)

    def refresh(self, since: float | None = None) -> bool:
        """Read the clusters' version and reload the centroids if sleep changed them;
        returns whether there is anything to route to.

        Args:
            since: the recall's start (``time.monotonic()``): a version the store read
                in a statement sent since then is taken instead of a read of its own.
        """
        seen = getattr(self.store, "state_seen", None)
        found, version = (seen("clusters.version", since) if seen is not None
                          and since is not None else (False, None))
        if not found:
            version = self.cons.get_state("clusters.version")
        if version is None:
            return False
        with self._lock:
            if version != self._version:
                rows = self.cons.centroids(None)
                self._ids = np.asarray([r[0] for r in rows], dtype=np.int64)
                self._scopes = [r[1] for r in rows]
                self._matrix = (np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
                                .reshape(len(rows), self.dim) if rows
                                else np.zeros((0, self.dim), dtype=np.float32))
                self._version = version
        return len(self._ids) > 0

    def route(self, qv: np.ndarray, scopes: Sequence[str], known: Container[int], *,
              ready: bool | None = None) -> list[tuple[MemoryRecord, float]]:
        """Members of the query's nearest and adjacent clusters, with their cosine.

        Args:
            qv: the normalised query vector.
            scopes: the visible scopes.
            known: memory ids already among the candidates (left out).
            ready: what :meth:`refresh` returned for this query already (None: call it).

        Returns:
            (record, cosine to the query) of live members in ``scopes``, best first.
        """
        if not self.wanted() or not (self.refresh() if ready is None else ready):
            return []
        allowed = set(scopes)
        mask = np.asarray([s in allowed for s in self._scopes], dtype=bool)
        if not mask.any() or self._matrix.shape[1] != qv.shape[0]:
            return []
        t = self.tuning
        ids = self._ids[mask]
        sims = self._matrix[mask] @ qv.astype(np.float32)
        nearest = [int(ids[i]) for i in np.argsort(-sims)[: t.route_clusters]]
        clusters = nearest + self.cons.adjacent(nearest, t.route_adjacent)
        per = max(1, t.route_members // len(clusters))
        members = list(dict.fromkeys(m for m in self.cons.members_of_each(clusters, per)
                                     if m not in known))
        recs = self.cons.memories(members)
        live = [r for r in recs.values() if r.scope in allowed and r.status != "superseded"]
        out: list[tuple[MemoryRecord, float]] = []
        by_scope: dict[str, list[MemoryRecord]] = {}
        for r in live:
            by_scope.setdefault(r.scope, []).append(r)
        for scope, group in by_scope.items():
            blobs = [row for batch in self.cons.vector_blobs(scope, [r.id for r in group])
                     for row in batch]
            vecs = {k: np.frombuffer(b, dtype=np.float32) for k, b in blobs}
            for r in group:
                v = vecs.get(r.id)
                if v is not None and v.shape[0] == qv.shape[0]:
                    out.append((r, float(v @ qv)))
        out.sort(key=lambda x: -x[1])
        return out
