"""Sleep step ``plasticity``: commit co-recall eligibility into weighted ``co_recall`` edges.

Recall leaves one eligibility row per memory hit (recall id, rank, score, time).
Sleep turns them into directed edge updates with an STDP-like rule — order and
timing matter:

* **within one recall**, for hits ranked ``r_i < r_j`` (top ``stdp_pair_top``)::

      base      = stdp_rate · s_i · s_j · exp(−(r_j − r_i − 1) / stdp_rank_tau)
      Δw(i → j) = base · stdp_forward        (earlier-ranked → later-ranked)
      Δw(j → i) = base · stdp_backward       (weaker)

* **across recalls** of the same scope less than ``stdp_window_s`` apart (at
  most ``stdp_cross_recalls`` back), the top ``stdp_cross_top`` hits of the
  earlier recall A and the later recall B::

      base      = stdp_rate · stdp_cross_rate · s_a · s_b · exp(−Δt / stdp_time_tau_s)
      Δw(a → b) = base · stdp_forward ;  Δw(b → a) = base · stdp_backward

* **reward** (a third factor): ``reflect`` events within ``reward_window_s``
  after a recall modulate its updates by ``m = 1 + reward_gain · r̄`` where
  ``r̄`` is the mean reward the pair's two memories got (clipped to −1..1). A
  negative ``m`` weakens an existing edge.

Only hits that "fired": scores at least ``stdp_min_score`` and at least
``stdp_relative_min`` × the recall's best score (weak tail hits do not wire
together). Scores are clipped to 0–1. Summed updates are applied with soft bounds,
``w ← 1 − (1 − w)·e^(−Δ)`` for Δ > 0 and ``w ← w·e^(Δ)`` for Δ < 0, after every
co_recall weight has decayed by ``2^(−days / edge_half_life_days)`` since the
last commit. Edges under ``edge_prune_below`` are deleted (only ``co_recall``
edges; memories are never touched). Committed eligibility is cleared, except
rows younger than one window, which stay as earlier partners for the next
sleep's cross-recall pairs (they are never committed twice).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tideline.dynamics import DAY
from tideline.sleep.context import SleepContext, guard

__all__ = ["Recall", "learn", "run"]


@dataclass
class Recall:
    """One recall's hits as eligibility: ``items`` are (rank, memory id, score) by rank."""

    id: int
    ts: float
    scope: str | None
    new: bool
    items: list[tuple[int, int, float]] = field(default_factory=list)


def run(ctx: SleepContext) -> dict[str, Any]:
    """Decay co_recall edges, commit eligibility, prune, clear consumed rows.

    Returns:
        Metrics: recalls and pairs committed, edges written and pruned, decay factor.
    """
    t, cons, now = ctx.tuning, ctx.cons, ctx.now
    cursor = int(cons.get_state("plasticity.cursor") or 0)
    decayed_at = float(cons.get_state("plasticity.decayed_at") or now)
    days = max(0.0, now - decayed_at) / DAY
    decay = math.pow(2.0, -days / t.edge_half_life_days) if t.edge_half_life_days > 0 else 1.0

    rows = [r for r in cons.eligibility() if r[5] <= now]
    recalls: dict[int, Recall] = {}
    for row_id, recall_id, mid, rank, score, ts, scope in rows:
        rc = recalls.get(recall_id)
        if rc is None:
            rc = recalls[recall_id] = Recall(recall_id, ts, scope, new=False)
        rc.new = rc.new or row_id > cursor
        rc.items.append((rank, mid, score))
    ordered = sorted(recalls.values(), key=lambda r: (r.ts, r.id))
    for rc in ordered:
        rc.items.sort()
    since = min((r.ts for r in ordered), default=now)
    reflects = cons.reflects_since(since)
    delta, stats = learn(ordered, reflects, t)

    current = cons.edge_weights(delta) if delta else {}
    weights: dict[tuple[int, int], float] = {}
    strengthened = weakened = 0
    for pair, d in delta.items():
        w0 = current.get(pair, 0.0) * decay
        if d > 0:
            w = 1.0 - (1.0 - w0) * math.exp(-d)
            strengthened += 1
        elif pair in current:
            w = w0 * math.exp(d)
            weakened += 1
        else:
            continue
        weights[pair] = round(w, 6)

    total = cons.co_recall_count()
    prunable = cons.prunable_after(decay, t.edge_prune_below)
    stopped = guard(ctx, prunable, total, "prune co_recall edges:")
    consumed = max((r[0] for r in rows), default=cursor)
    # A row older than one window before now can never pair with a future recall.
    counts = cons.commit_plasticity(
        decay=decay, weights=weights, prune_below=t.edge_prune_below, prune=stopped is None,
        consumed_upto=max(consumed, cursor), drop_before=now - t.stdp_window_s, now=now,
    )
    out: dict[str, Any] = {
        "recalls": sum(1 for r in ordered if r.new), **stats,
        "strengthened": strengthened, "weakened": weakened, "decay": round(decay, 6),
        "edges_before": total, **counts,
    }
    if stopped is not None:
        out["stopped"] = stopped
    return out


def learn(
    recalls: list[Recall], reflects: list[tuple[float, list[int], float]], t: Any,
) -> tuple[dict[tuple[int, int], float], dict[str, int]]:
    """The summed STDP updates of directed pairs from recalls in time order.

    Args:
        recalls: recalls oldest first; only pairs whose later recall is ``new`` count.
        reflects: (ts, ids, reward) of reflect events, oldest first.
        t: the :class:`~tideline.config.SleepTuning`.

    Returns:
        ``{(src, dst): Δw}`` and counters (pairs within and across recalls, rewarded).
    """
    delta: dict[tuple[int, int], float] = defaultdict(float)
    reflect_ts = [r[0] for r in reflects]
    rewards = {rc.id: _rewards(rc, reflects, reflect_ts, t.reward_window_s) for rc in recalls}
    within = across = rewarded = 0

    def add(a: int, sa: float, ra: float, b: int, sb: float, rb: float, base: float) -> None:
        m = 1.0 + t.reward_gain * max(-1.0, min(1.0, (ra + rb) / 2.0))
        s = min(1.0, max(0.0, sa)) * min(1.0, max(0.0, sb))
        delta[(a, b)] += base * s * m * t.stdp_forward
        delta[(b, a)] += base * s * m * t.stdp_backward

    for idx, rc in enumerate(recalls):
        if not rc.new:
            continue
        mine = _active(rc, t.stdp_pair_top, t)
        rw = rewards[rc.id]
        if rw:
            rewarded += 1
        for i, (ri, mi, si) in enumerate(mine):
            for rj, mj, sj in mine[i + 1:]:
                if mi == mj:
                    continue
                g = math.exp(-(rj - ri - 1) / t.stdp_rank_tau)
                add(mi, si, rw.get(mi, 0.0), mj, sj, rw.get(mj, 0.0), t.stdp_rate * g)
                within += 1
        later = mine[: t.stdp_cross_top]
        for prev in reversed(recalls[max(0, idx - t.stdp_cross_recalls):idx]):
            gap = rc.ts - prev.ts
            if gap > t.stdp_window_s:
                break
            if prev.scope != rc.scope:
                continue
            pw = rewards[prev.id]
            g = math.exp(-max(0.0, gap) / t.stdp_time_tau_s)
            earlier = _active(prev, t.stdp_cross_top, t)
            for _, ma, sa in earlier:
                for _, mb, sb in later:
                    if ma == mb:
                        continue
                    add(ma, sa, pw.get(ma, 0.0), mb, sb, rw.get(mb, 0.0),
                        t.stdp_rate * t.stdp_cross_rate * g)
                    across += 1
    return dict(delta), {"pairs_within": within, "pairs_across": across,
                         "rewarded_recalls": rewarded}


def _active(rc: Recall, top: int, t: Any) -> list[tuple[int, int, float]]:
    """The hits that fired together: top ranks, near enough to the recall's best score."""
    best = max((s for _, _, s in rc.items), default=0.0)
    floor = max(t.stdp_min_score, t.stdp_relative_min * best)
    return [(r, m, s) for r, m, s in rc.items[:top] if s >= floor]


def _rewards(rc: Recall, reflects: list[tuple[float, list[int], float]], times: list[float],
             window: float) -> dict[int, float]:
    """memory id → summed reward of reflects within ``window`` after the recall (clipped)."""
    ids = {m for _, m, _ in rc.items}
    out: dict[int, float] = {}
    lo = bisect.bisect_left(times, rc.ts)
    hi = bisect.bisect_right(times, rc.ts + window)
    for _ts, rids, reward in reflects[lo:hi]:
        for mid in rids:
            if mid in ids:
                out[mid] = max(-1.0, min(1.0, out.get(mid, 0.0) + reward))
    return out
