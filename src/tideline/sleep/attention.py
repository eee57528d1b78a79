"""Attention: which embedding clusters recall lights up, and which are deserts.

Every recall hit lands in ``attention_log`` (memory, cluster, similarity, tier,
time) — mechanical bookkeeping, not self-report. The heatmap counts the hits of
a window per cluster and per day. A hit counts for its memory's *current* home
cluster (clusters are rebuilt), falling back to the cluster logged at recall
time. "Lit" clusters are the most hit; "deserts" are clusters of some size that
no recall reached in the window — possible blind spots. The sleep step only
back-fills the cluster of hits logged before the first clustering and reports
the heatmap's summary. Before sleep has built any cluster the hits are grouped by tag
instead (``by_tag``), so there is one heatmap for every surface (the report, the CLI,
the MCP tool).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tideline.models import iso
from tideline.sleep.context import SleepContext
from tideline.store.consolidation import ConsolidationStore
from tideline.store.reporting import ReportStore

__all__ = ["heatmap", "run"]

DAY = 86_400.0


def heatmap(
    cons: ConsolidationStore, *, scopes: Sequence[str] | None, days: int = 30,
    now: float | None = None, top: int = 10, desert_min_size: int = 3, grid_clusters: int = 25,
) -> dict[str, Any]:
    """The attention heatmap as a JSON-ready dict.

    Args:
        cons: the sleep-side store.
        scopes: only clusters (and hits on memories) of these scopes; None for all.
        days: the window, ending now.
        now: the end of the window (default: the current time).
        top: how many lit clusters and deserts to list.
        desert_min_size: clusters smaller than this are never called deserts.
        grid_clusters: rows of the clusters × days grid (the most hit first).

    Returns:
        ``window_days``, ``since``, ``until``, ``total_hits``, ``unclustered_hits``,
        ``clusters`` (every cluster with ``hits``, ``share``, ``heat`` 0–1,
        ``mean_similarity``, ``last_hit``), ``lit``, ``deserts`` and ``grid``
        (``days`` as ISO dates, ``rows`` of ``{"cluster", "label", "counts"}``); while
        there is no cluster yet, also ``by_tag`` (``lit`` and ``deserts`` tags with
        ``hits`` and ``memories``, hits ``by_tier``, the most recalled ``memories``, see
        :meth:`tideline.store.reporting.ReportStore.attention_by_tag`).
    """
    end = time.time() if now is None else now
    day0 = datetime.fromtimestamp(end, tz=UTC).date() - timedelta(days=days - 1)
    since = datetime(day0.year, day0.month, day0.day, tzinfo=UTC).timestamp()
    clusters = cons.emb_clusters(scopes)
    rows = cons.attention_by_cluster_day(since, scopes)
    known = {c["id"]: c for c in clusters}
    hits: dict[int, int] = {}
    sims: dict[int, float] = {}
    last: dict[int, float] = {}
    grid: dict[int, list[int]] = {}
    total = unclustered = 0
    for cl, day, n, sim, ts in rows:
        total += n
        if cl is None or cl not in known:
            unclustered += n
            continue
        hits[cl] = hits.get(cl, 0) + n
        sims[cl] = sims.get(cl, 0.0) + sim * n
        last[cl] = max(last.get(cl, 0.0), ts)
        if 0 <= day < days:
            grid.setdefault(cl, [0] * days)[day] += n
    peak = max(hits.values(), default=0)
    out_clusters = []
    for c in clusters:
        h = hits.get(c["id"], 0)
        out_clusters.append({
            "id": c["id"], "scope": c["scope"], "label": c["label"], "keywords": c["keywords"],
            "size": c["size"], "hits": h, "share": round(h / total, 4) if total else 0.0,
            "heat": round(h / peak, 4) if peak else 0.0,
            "mean_similarity": round(sims[c["id"]] / h, 4) if h else None,
            "last_hit": iso(last.get(c["id"])),
        })
    lit = sorted((c for c in out_clusters if c["hits"]), key=lambda c: (-c["hits"], c["id"]))
    deserts = sorted((c for c in out_clusters if not c["hits"] and c["size"] >= desert_min_size),
                     key=lambda c: (-c["size"], c["id"]))
    grid_rows = [{"cluster": c["id"], "label": c["label"], "scope": c["scope"],
                  "counts": grid.get(c["id"], [0] * days)} for c in lit[:grid_clusters]]
    out: dict[str, Any] = {
        "window_days": days, "since": iso(since), "until": iso(end), "total_hits": total,
        "unclustered_hits": unclustered, "clusters_total": len(out_clusters),
        "lit_count": len(lit), "desert_count": len(deserts),
        "clusters": out_clusters, "lit": lit[:top], "deserts": deserts[:top],
        "grid": {"days": [(day0 + timedelta(days=i)).isoformat() for i in range(days)],
                 "rows": grid_rows},
    }
    if not out_clusters:
        out["by_tag"] = ReportStore(cons.store).attention_by_tag(scopes, since, limit=top)
    return out


def run(ctx: SleepContext) -> dict[str, Any]:
    """Give early hits their cluster and summarise the heatmap.

    Returns:
        Metrics: rows back-filled, hits in the window, lit clusters, deserts.
    """
    filled = ctx.cons.fill_attention_clusters()
    h = heatmap(ctx.cons, scopes=None, days=ctx.tuning.attention_days, now=ctx.now, top=5)
    return {"backfilled": filled, "hits": h["total_hits"], "clusters": h["clusters_total"],
            "lit": h["lit_count"], "deserts": h["desert_count"],
            "top": [{"id": c["id"], "label": c["label"], "hits": c["hits"]} for c in h["lit"]]}
