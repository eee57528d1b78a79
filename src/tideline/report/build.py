"""Assemble the report: how the memory behaves over time, as one JSON-ready dict.

Sections: ``totals`` (by kind/scope/status), ``growth`` (memories recorded per
day by kind, cumulative), ``gate`` (novelty-gate decisions per day),
``recall`` (count, abstention share, p50/p95 latency, per day), ``feedback``
(reflects and the reflect/recall ratio — warned under 0.1: decay and
promotion then run blind), ``reinforced`` and ``fading`` memories,
``retention`` (the distribution now, one snapshot per sleep, the model curves),
``sleeps``, ``associations`` (strongest co_recall edges), ``attention`` (the
heatmap), ``clusters`` (a 2-D map of the embedding clusters), ``topics``,
``entities``, ``unindexed``, ``hooks`` (hook errors), ``dream`` (token cost of
``dream_call`` events) and ``warnings``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tideline.dynamics import retention
from tideline.models import iso
from tideline.report.corrections import corrections
from tideline.sleep.attention import heatmap
from tideline.store.consolidation import ConsolidationStore
from tideline.store.reporting import ReportStore

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["REFLECT_RATIO_WARN", "build_report", "cluster_map"]

#: Below this share of recalls followed by feedback, the report warns.
REFLECT_RATIO_WARN = 0.1
_TEXT = 140


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _TEXT else text[: _TEXT - 1] + "…"


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo), 3)


def build_report(rt: Runtime, *, days: int = 30, now: float | None = None,
                 scopes: Sequence[str] | None = None) -> dict[str, Any]:
    """Build the report over the last ``days`` days.

    Args:
        rt: the opened memory's parts.
        days: the window of the time series.
        now: the end of the window (default: the clock).
        scopes: the scopes the reader may see (None: the whole namespace). Memories,
            labels, entities and hook errors of other scopes are left out
            (:mod:`tideline.report.scoped`).

    Returns:
        The report (JSON-ready).
    """
    end = time.time() if now is None else now
    day0 = datetime.fromtimestamp(end, tz=UTC).date() - timedelta(days=days - 1)
    since = datetime(day0.year, day0.month, day0.day, tzinfo=UTC).timestamp()
    labels = [(day0 + timedelta(days=i)).isoformat() for i in range(days)]
    rs = ReportStore(rt.store)
    cons = ConsolidationStore(rt.store)
    totals = rt.store.stats(scopes)
    warnings: list[str] = []

    growth = _growth(rs, since, days, labels, scopes)
    gate = _gate(rs, since, days, labels)
    recall = _recall(rs, since, days, labels)
    feedback = _feedback(rs, since, recall["count"])
    if feedback["warning"]:
        warnings.append(feedback["warning"])
    dyn_part = _dynamics(rt, cons, rs, since, end)
    sleeps = _sleeps(rs, since)
    if sleeps["count"] == 0:
        warnings.append("no sleep has run yet: run `tideline sleep` (or install the Stop hook)")
    hooks = rs.events_of("hook_error", since=since, limit=20)
    if scopes is not None:
        from tideline.journal import event_scope

        hooks = [e for e in hooks if event_scope(e, {}) in scopes]
    if hooks:
        warnings.append(f"{len(hooks)} hook error(s) in the window — see hooks.recent")
    stopped = [f"{k}: {v}" for s in sleeps["recent"] for k, v in s.get("stopped", {}).items()]
    if stopped:
        warnings.append("a sleep step stopped itself: " + stopped[0])
    attention = heatmap(cons, scopes=scopes, days=days, now=end, top=10)
    report = {
        "generated_at": iso(end),
        "window": {"days": days, "since": iso(since), "until": iso(end)},
        "store": _where(rt), "namespace": rt.config.namespace,
        "embedder": rt.embedder.marker,
        "totals": totals,
        "growth": growth, "gate": gate, "recall": recall, "feedback": feedback,
        **dyn_part,
        "sleeps": sleeps,
        "associations": _associations(rt, rs, totals),
        "attention": attention,
        "clusters": _cluster_map(cons, attention, scopes),
        "topics": cons.topics(scopes, 15),
        "entities": cons.entity_graph(15),
        "unindexed": {"memories_without_source_links": rs.unlinked_count()},
        "hooks": {"errors": len(hooks),
                  "recent": [{"at": iso(e["ts"]), **e["data"]} for e in hooks[:10]]},
        "dream": rs.token_cost(since) | {"all_time": rs.token_cost(None)},
        "events": rs.event_counts(since),
        "warnings": warnings,
    }
    if scopes is None:
        return report
    from tideline.report.scoped import scoped_report

    named = {i["id"] for part in report["reinforced"].values() for i in part}
    named |= {i["id"] for i in report["fading"]["lowest_retention"]}
    named |= {x for a in report["associations"]["strongest"] for x in (a["src"], a["dst"])}
    named |= {m for n in report["entities"]["nodes"] for m in n.get("memories", [])}
    visible_ids = {mid for mid, rec in rt.store.get_memories(named).items()
                   if rec.scope in scopes}
    return scoped_report(report, scopes, visible_ids)


def _growth(rs: ReportStore, since: float, days: int, labels: list[str],
            scopes: Sequence[str] | None = None) -> dict[str, Any]:
    rows = rs.growth(since, scopes)
    kinds = sorted({k for k, _, _ in rows})
    per: dict[str, list[int]] = {k: [0] * days for k in kinds}
    base: dict[str, int] = dict.fromkeys(kinds, 0)
    for kind, day, n in rows:
        if day < 0:
            base[kind] += n
        elif day < days:
            per[kind][day] += n
    cumulative: dict[str, list[int]] = {}
    for k in kinds:
        run = base[k]
        cumulative[k] = []
        for n in per[k]:
            run += n
            cumulative[k].append(run)
    return {"days": labels, "new_by_kind": per, "cumulative_by_kind": cumulative,
            "before_window": sum(base.values()),
            "new_in_window": sum(sum(v) for v in per.values())}


def _gate(rs: ReportStore, since: float, days: int, labels: list[str]) -> dict[str, Any]:
    series: dict[str, list[int]] = {d: [0] * days
                                    for d in ("new", "link", "correct", "potentiate")}
    for day, dec, n in rs.gate_decisions(since):
        if 0 <= day < days:
            series.setdefault(dec, [0] * days)[day] += n
    totals = {k: sum(v) for k, v in series.items()}
    writes = sum(totals.values())
    return {"days": labels, "series": series, "totals": totals, "writes": writes,
            "shares": {k: round(v / writes, 4) if writes else 0.0 for k, v in totals.items()},
            "corrections": corrections(rs, since)}


def _recall(rs: ReportStore, since: float, days: int, labels: list[str]) -> dict[str, Any]:
    rows = rs.recalls(since)
    lat = [r[1] for r in rows]
    abstained = sum(1 for r in rows if r[2])
    grouped: dict[int, list[tuple[int, float, bool, str]]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    by_day: list[dict[str, Any]] = []
    for d in range(days):
        day_rows = grouped.get(d, [])
        dl = [r[1] for r in day_rows]
        by_day.append({"day": labels[d], "count": len(day_rows),
                       "abstained": sum(1 for r in day_rows if r[2]),
                       "p50_ms": _pct(dl, 0.5), "p95_ms": _pct(dl, 0.95)})
    tiers: dict[str, int] = {}
    for r in rows:
        tiers[r[3]] = tiers.get(r[3], 0) + 1
    return {"count": len(rows), "abstained": abstained,
            "abstention_share": round(abstained / len(rows), 4) if rows else 0.0,
            "p50_ms": _pct(lat, 0.5), "p95_ms": _pct(lat, 0.95),
            "mean_ms": round(statistics.fmean(lat), 3) if lat else None,
            "by_day": by_day, "tiers": tiers}


def _feedback(rs: ReportStore, since: float, recalls: int) -> dict[str, Any]:
    refl = rs.reflects(since)
    ratio = round(len(refl) / recalls, 4) if recalls else None
    warning = None
    if recalls and (ratio or 0.0) < REFLECT_RATIO_WARN:
        warning = (f"reflect/recall ratio is {ratio:.3f} (< {REFLECT_RATIO_WARN}): recalled "
                   "memories are rarely rated, so decay, promotion and learned associations "
                   "run blind — call reflect after using a recall")
    return {"reflects": len(refl), "positive": sum(1 for r in refl if r[2] > 0),
            "negative": sum(1 for r in refl if r[2] < 0), "recalls": recalls,
            "reflect_recall_ratio": ratio, "warning": warning}


def _item(rec: Any, now: float, dyn: Any, **extra: Any) -> dict[str, Any]:
    return {"id": rec.id, "scope": rec.scope, "kind": rec.kind, "status": rec.status,
            "text": _short(rec.gesture), "reinforcements": rec.reinforcements,
            "retention": round(retention(rec, now, dyn), 4),
            "half_life_days": round(rec.stability, 2), "last_access": iso(rec.last_access),
            **extra}


def _dynamics(rt: Runtime, cons: ConsolidationStore, rs: ReportStore, since: float,
              now: float) -> dict[str, Any]:
    import numpy as np

    from tideline.sleep.curve import curves

    dyn = rt.config.dynamics
    rows = cons.dynamics_rows()
    rewarded: dict[int, float] = {}
    for _ts, ids, reward in rs.reflects(since):
        if reward > 0:
            for i in ids:
                rewarded[i] = rewarded.get(i, 0.0) + reward
    potentiated = rs.potentiated(since)
    recent = sorted(set(rewarded) | set(potentiated),
                    key=lambda i: (-(rewarded.get(i, 0.0) + potentiated.get(i, 0)), i))[:10]
    top = rs.most_reinforced(10)
    recs = cons.memories([*recent, *top])
    reinforced = {
        "in_window": [_item(recs[i], now, dyn, rewarded=round(rewarded.get(i, 0.0), 3),
                            potentiated=potentiated.get(i, 0)) for i in recent if i in recs],
        "most_ever": [_item(recs[i], now, dyn) for i in top if i in recs],
    }
    if rows:
        row_ids = np.array([r[0] for r in rows])
        strength = np.array([r[2] for r in rows], dtype=np.float64)
        stab = np.array([r[3] if r[3] > 0 else dyn.episodic_half_life_days for r in rows])
        last = np.array([r[5] for r in rows], dtype=np.float64)
        ret = strength * np.power(2.0, -np.maximum(0.0, now - last) / 86_400.0 / stab)
        status = np.array([r[1] for r in rows])
        live = status != "dormant"
        # Fading means losing what it held: a young store, whose memories all keep most
        # of their retention, has none (it listed every memory).
        order = np.argsort(np.where(live, ret, np.inf), kind="stable")[:10]
        fading_ids = [int(row_ids[i]) for i in order if live[i] and ret[i] < FADING_BELOW]
        hist = np.histogram(np.clip(ret, 0, 1), bins=10, range=(0.0, 1.0))[0].tolist()
        current = {"memories": len(rows), "mean": round(float(ret.mean()), 4),
                   "p10": round(float(np.percentile(ret, 10)), 4),
                   "p50": round(float(np.percentile(ret, 50)), 4),
                   "p90": round(float(np.percentile(ret, 90)), 4),
                   "near_floor": int(((ret < 2 * dyn.dormant_below) & live).sum()),
                   "histogram": [int(x) for x in hist]}
    else:
        fading_ids, current = [], {"memories": 0, "mean": 0.0, "histogram": [0] * 10}
    frecs = cons.memories(fading_ids)
    return {
        "reinforced": reinforced,
        "fading": {"lowest_retention": [_item(frecs[i], now, dyn) for i in fading_ids
                                        if i in frecs],
                   "below": FADING_BELOW,
                   "dormant": int(sum(1 for r in rows if r[1] == "dormant")),
                   "dormant_below": dyn.dormant_below},
        "retention": {"current": current, "snapshots": cons.snapshots(200),
                      "model": {k: v[::4] for k, v in curves(dyn, 120, 0.5).items()}},
    }


#: A live memory is listed as fading once its retention is under this (half lost).
FADING_BELOW = 0.5


def _sleeps(rs: ReportStore, since: float) -> dict[str, Any]:
    events = rs.events_of("sleep", limit=200)
    recent = []
    for e in events[:30]:
        d = e["data"]
        steps = d.get("steps", {})
        recent.append({
            "at": iso(e["ts"]), "ms": d.get("ms"), "only": d.get("only"),
            "forced": d.get("forced"), "errors": d.get("errors", {}),
            "stopped": d.get("stopped", {}),
            "steps_ms": {k: v.get("ms") for k, v in steps.items() if isinstance(v, dict)},
            "co_recall_written": steps.get("plasticity", {}).get("written"),
            "dormant": steps.get("dynamics", {}).get("dormant"),
            "promoted": steps.get("dynamics", {}).get("promoted"),
        })
    return {"count": len(events), "in_window": sum(1 for e in events if e["ts"] >= since),
            "last": recent[0]["at"] if recent else None, "recent": recent}


def _associations(rt: Runtime, rs: ReportStore, totals: dict[str, Any]) -> dict[str, Any]:
    strongest = rs.strongest_associations(12)
    recs = rt.store.get_memories({x for a, b, _ in strongest for x in (a, b)})
    return {"co_recall_edges": int(totals.get("edges", {}).get("co_recall", 0)),
            "strongest": [{"src": a, "dst": b, "weight": round(w, 4),
                           "src_text": _short(recs[a].gesture) if a in recs else "",
                           "dst_text": _short(recs[b].gesture) if b in recs else ""}
                          for a, b, w in strongest]}


def _cluster_map(cons: ConsolidationStore, attention: dict[str, Any],
                 scopes: Sequence[str] | None = None) -> dict[str, Any]:
    """A 2-D PCA projection of the cluster centroids (size and attention per bubble)."""
    import numpy as np

    rows = cons.centroids(scopes)
    info = {c["id"]: c for c in attention["clusters"]}
    if not rows:
        return {"points": []}
    dim = len(rows[0][2]) // 4
    mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
    if len(rows) >= 3:
        from sklearn.decomposition import PCA

        from tideline.quiet import quiet

        with quiet():  # a library's warning is no line for the user's terminal
            xy = PCA(n_components=2, random_state=0).fit_transform(mat)
    else:
        xy = np.array([[float(i), 0.0] for i in range(len(rows))])
    biggest = max((info[r[0]]["size"] for r in rows if r[0] in info), default=1) or 1
    points = []
    for (cid, scope, _), (x, y) in zip(rows, xy.tolist(), strict=True):
        c = info.get(cid, {})
        points.append({"id": cid, "scope": scope, "label": c.get("label", ""),
                       "size": c.get("size", 0), "hits": c.get("hits", 0),
                       "heat": c.get("heat", 0.0), "x": round(x, 4), "y": round(y, 4),
                       "r": round(c.get("size", 0) / biggest, 4)})
    return {"points": points}


def _where(rt: Runtime) -> str:
    """Where the data lives, as the report names it: the SQLite store's directory, or the
    PostgreSQL database (its URL, password masked) — not the local state folder, which
    holds no memories there."""
    if rt.store.backend == "sqlite":
        return str(rt.config.home)
    return str(rt.store.describe()["database"])


def cluster_map(rt: Runtime, *, scopes: list[str] | None, days: int = 30) -> dict[str, Any]:
    """The map of the embedding clusters and the attention grid, without the rest of the
    report (what ``tideline ui``'s map page draws; a page, so it stays cheap).

    Args:
        rt: the memory's parts.
        scopes: only clusters of these scopes (None: every scope).
        days: the attention window, ending now.

    Returns:
        ``{"points": [...], "grid": {"days", "rows"}, "adjacency": [...]}``: the points
        and grid as in :func:`build_report`'s ``clusters`` and ``attention``, and the
        strongest adjacencies between the clusters shown (``a``, ``b``, ``shared``
        members); empty until a sleep has built clusters.
    """
    cons = ConsolidationStore(rt.store)
    if not cons.emb_clusters(scopes):  # before the first sleep: nothing to draw
        return {"points": [], "grid": {"days": [], "rows": []}, "adjacency": []}
    attention = heatmap(cons, scopes=scopes, days=days, top=10)
    points = _cluster_map(cons, attention)["points"]
    if scopes is not None:
        points = [p for p in points if p["scope"] in scopes]
    shown = {p["id"] for p in points}
    pairs = [(a, b, n) for a, b, n in cons.adjacency_rows(sorted(shown)) if b in shown]
    pairs.sort(key=lambda r: (-r[2], r[0], r[1]))
    return {"points": points, "grid": attention["grid"],
            "adjacency": [{"a": a, "b": b, "shared": n} for a, b, n in pairs[:60]]}
