"""The graph side of recall: spreading over typed edges, and routing by cluster.

After the trust check the strongest memory hits pass part of their score to their
neighbours over ``related``, ``co_recall`` and ``contradicts`` edges, hop by hop (a
neighbour never overtakes what led to it), and the members of the query's nearest and
adjacent clusters (:mod:`tideline.recall.routing`) come in as ``graph`` items.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tideline.config import Config
from tideline.models import Edge, MemoryRecord
from tideline.recall import updates as corrections
from tideline.recall.ahead import Later
from tideline.recall.candidates import Candidate, Candidates, in_time
from tideline.recall.routing import ClusterRouter
from tideline.recall.scoring import relevance, salience
from tideline.store.base import Store

__all__ = ["GRAPH_EDGES", "READ_EDGES", "route", "spread"]

#: The edge kinds the spread walks: a link, a learned association, a conflict.
GRAPH_EDGES = ("related", "co_recall", "contradicts")
#: What the first candidates' edge read brings: the graph's edges and the corrections'.
READ_EDGES = (*GRAPH_EDGES, corrections.EDGE)


def route(
    router: ClusterRouter, config: Config, floor: float, qv: np.ndarray, cands: Candidates,
    memories: dict[int, MemoryRecord], scopes: Sequence[str], kind: str | None,
    since: float | None, until: float | None, now: float, ready: Later[bool],
) -> None:
    """Add members of the query's nearest and adjacent clusters (after the trust check).

    Args:
        router: the store's cluster router.
        config: the store's configuration.
        floor: the embedder's similarity floor (members under it are left out).
        qv: the query vector.
        cands: the candidates, added to.
        memories: the candidate memories by id, added to.
        scopes: the scopes searched.
        kind: only memories of this kind.
        since: only memories at or after this epoch.
        until: only memories at or before this epoch.
        now: the recall's time.
        ready: the router's freshness, read ahead.
    """
    known = {key for typ, key in cands if typ == "memory"}
    for rec, sim in router.route(qv, scopes, known, ready=ready.get()):
        if (sim < floor or (kind is not None and rec.kind != kind)
                or not in_time(rec.event_time or rec.recorded_at, since, until)):
            continue
        cand = Candidate("memory", rec.id, "graph", similarity=sim)
        cand.score = (relevance(cand, floor, config.recall) * salience(rec, now, config)
                      * config.sleep.route_factor)
        memories[rec.id] = rec
        cands[("memory", rec.id)] = cand


def spread(
    store: Store, config: Config, floor: float, dim: int, qv: np.ndarray, cands: Candidates,
    memories: dict[int, MemoryRecord], scopes: Sequence[str], kind: str | None,
    since: float | None, until: float | None, now: float,
    linked: Later[list[Edge]] | None = None,
) -> None:
    """Add neighbours of the strongest memory hits over typed edges (multi-hop).

    Args:
        store: where edges, records and vectors are read.
        config: the store's configuration.
        floor: the embedder's similarity floor.
        dim: the embedder's dimension.
        qv: the query vector.
        cands: the candidates, added to and raised.
        memories: the candidate memories by id, added to.
        scopes: the scopes searched.
        kind: only memories of this kind.
        since: only memories at or after this epoch.
        until: only memories at or before this epoch.
        now: the recall's time.
        linked: the edges of every first candidate, read already (or None).
    """
    tune = config.recall
    seeds = sorted((c for c in cands.values() if c.type == "memory"),
                   key=lambda c: -c.score)[: tune.graph_seeds]
    frontier = {c.key: c.score for c in seeds if c.score > 0}
    visited = set(frontier)
    allowed = set(scopes)
    for hop in range(1, tune.graph_hops + 1):
        if not frontier:
            return
        if hop == 1 and linked is not None:  # the seeds are among those candidates
            edges = [e for e in linked.get() if e.type in GRAPH_EDGES
                     and (e.src in frontier or e.dst in frontier)]
        else:
            edges = store.edges_of(list(frontier), GRAPH_EDGES)
        reached: dict[int, float] = {}
        cap: dict[int, float] = {}
        for e in edges:
            for a, b in ((e.src, e.dst), (e.dst, e.src)):
                if a in frontier and b not in frontier:
                    value = frontier[a] * e.weight * (tune.graph_decay ** hop)
                    reached[b] = max(reached.get(b, 0.0), value)
                    cap[b] = max(cap.get(b, 0.0), frontier[a])
        new_ids = [m for m in reached if ("memory", m) not in cands]
        recs = store.get_memories(new_ids)
        vecs = store.memory_vectors(list(recs.values()), dim)
        next_frontier: dict[int, float] = {}
        for mid, value in reached.items():
            existing = cands.get(("memory", mid))
            if existing is not None:
                if existing.similarity < floor and existing.keyword == 0:
                    # Only a weak vector candidate (in a small store every memory is
                    # one): the edge is the real evidence, so it counts as found by
                    # the graph, and the walk goes on from it.
                    existing.source = "graph"
                    existing.score = max(existing.score,
                                         value * salience(memories[mid], now, config))
                else:  # a boost, but a neighbour never overtakes what led to it
                    existing.score = max(existing.score,
                                         min(existing.score + 0.25 * value, cap[mid]))
                if mid not in visited:
                    next_frontier[mid] = value
                continue
            rec = recs.get(mid)
            if (rec is None or rec.scope not in allowed or rec.status == "superseded"
                    or (kind is not None and rec.kind != kind)
                    or not in_time(rec.event_time or rec.recorded_at, since, until)):
                continue
            sim = float(vecs[mid] @ qv) if mid in vecs else 0.0
            memories[mid] = rec
            cands[("memory", mid)] = Candidate(
                "memory", mid, "graph", similarity=sim,
                score=value * salience(rec, now, config),
            )
            next_frontier[mid] = value
        frontier = next_frontier
        visited.update(frontier)
