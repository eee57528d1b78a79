"""Sleep step ``dynamics``: use-reinforcement, promotion, dormancy, and a retention snapshot.

Retention itself is never stored: it is ``strength · 2^(−age / half_life)`` at
any moment (see :mod:`tideline.dynamics`). What this step changes is *status*:

* a memory recalled since the last run, at least ``use_spacing_days`` after its
  last access, gets a mild spaced reinforcement (``use_reinforce``) — recalling
  is practice;
* an episode reinforced ``promote_after`` times becomes ``semantic`` (its
  half-life is raised to the semantic floor);
* a memory whose retention fell under ``dormant_below`` becomes ``dormant``:
  ranked lower by recall, left out of injection, never deleted;
* a dormant memory whose retention is back above the floor (it was reinforced)
  is revived.

More demotions than the guard allows stop the demotions (not the rest) until a
forced run. Every run records a retention snapshot for the report.
"""

from __future__ import annotations

import math
from typing import Any

from tideline.dynamics import DAY, reinforce
from tideline.models import MemoryRecord
from tideline.sleep.context import SleepContext, guard

__all__ = ["run", "snapshot"]

_SAMPLE = 50


def run(ctx: SleepContext) -> dict[str, Any]:
    """Apply use-reinforcement and status transitions; record a retention snapshot.

    Returns:
        Metrics: counts of each transition, conflicts, the snapshot's mean, ids samples.
    """
    dyn, now, cons = ctx.dyn, ctx.now, ctx.cons
    cursor = int(cons.get_state("dynamics.attention_cursor") or 0)
    hits = cons.attention_since(cursor)
    last_hit: dict[int, float] = {}
    for _, mid, ts in hits:
        if ts <= now:
            last_hit[mid] = max(last_hit.get(mid, 0.0), ts)
    new_cursor = max((h[0] for h in hits if h[2] <= now), default=cursor)

    changes: list[tuple[int, int, str, float, float, int, float]] = []
    demoted: list[int] = []
    promoted: list[int] = []
    revived: list[int] = []
    used: list[int] = []
    final: list[tuple[str, float]] = []
    for mid, status, strength, stability, count, last_access, version in cons.dynamics_rows():
        rec = MemoryRecord(id=mid, scope="", kind="", gesture="", strength=strength,
                           stability=stability, reinforcements=count, last_access=last_access,
                           status=status, version=version)
        hit = last_hit.get(mid)
        if (hit is not None and dyn.use_reinforce > 0
                and hit - last_access >= dyn.use_spacing_days * DAY):
            rec = reinforce(rec, hit, dyn, amount=dyn.use_reinforce)
            used.append(mid)
        new_status = rec.status
        stab = rec.stability
        if new_status == "episodic" and rec.reinforcements >= dyn.promote_after:
            new_status = "semantic"
        if new_status == "semantic":
            stab = max(stab, dyn.semantic_half_life_days)
        ret = _retention(rec.strength, stab, rec.last_access, now, dyn.episodic_half_life_days)
        if new_status in ("episodic", "semantic") and ret < dyn.dormant_below:
            new_status = "dormant"
        elif new_status == "dormant" and ret >= dyn.dormant_below:
            new_status = "semantic" if rec.reinforcements >= dyn.promote_after else "episodic"
        if new_status != status:
            if new_status == "dormant":
                demoted.append(mid)
            elif status == "dormant":
                revived.append(mid)
            elif new_status == "semantic":
                promoted.append(mid)
        changed = (new_status != status or stab != stability or rec.strength != strength
                   or rec.reinforcements != count or rec.last_access != last_access)
        if changed:
            changes.append((mid, version, new_status, stab, rec.strength, rec.reinforcements,
                            rec.last_access))
        final.append((new_status, ret))

    total = len(final)
    stopped = guard(ctx, len(demoted), total, "make dormant")
    if stopped is not None:
        blocked = set(demoted)
        changes = [c for c in changes if c[0] not in blocked or c[2] != "dormant"]
        demoted = []
    updated = cons.set_dynamics(changes, now) if changes else 0
    if new_cursor != cursor:
        cons.put_state("dynamics.attention_cursor", str(new_cursor))
    snap = snapshot(cons, ctx)
    out: dict[str, Any] = {
        "memories": total, "reinforced_by_use": len(used), "promoted": len(promoted),
        "dormant": len(demoted), "revived": len(revived), "updated": updated,
        "conflicts": len(changes) - updated, "retention_mean": snap["mean"],
        "ids": {"reinforced": used[:_SAMPLE], "promoted": promoted[:_SAMPLE],
                "dormant": demoted[:_SAMPLE], "revived": revived[:_SAMPLE]},
    }
    if stopped is not None:
        out["stopped"] = stopped
    return out


def _retention(strength: float, stability: float, last_access: float, now: float,
               default_hl: float) -> float:
    half_life = stability if stability > 0 else default_hl
    age = max(0.0, now - last_access) / DAY
    return float(strength * math.pow(2.0, -age / half_life))


def snapshot(cons: Any, ctx: SleepContext) -> dict[str, Any]:
    """Record the distribution of retention over live memories (one row per sleep).

    Returns:
        The snapshot: memories, mean, p10/p50/p90, per-status counts and means, a
        10-bin histogram over 0–1.
    """
    import numpy as np

    rows = cons.dynamics_rows()
    dyn = ctx.dyn
    if rows:
        strength = np.array([r[2] for r in rows], dtype=np.float64)
        stab = np.array([r[3] if r[3] > 0 else dyn.episodic_half_life_days for r in rows])
        last = np.array([r[5] for r in rows], dtype=np.float64)
        ret = strength * np.power(2.0, -np.maximum(0.0, ctx.now - last) / DAY / stab)
    else:
        ret = np.zeros(0)
    statuses = [str(r[1]) for r in rows]
    by_status: dict[str, dict[str, float]] = {}
    for st in sorted(set(statuses)):
        mask = np.array([s == st for s in statuses])
        by_status[st] = {"count": int(mask.sum()), "mean": round(float(ret[mask].mean()), 4)}
    hist = np.histogram(np.clip(ret, 0, 1), bins=10, range=(0.0, 1.0))[0] if rows else \
        np.zeros(10, dtype=int)
    snap = {
        "memories": len(rows),
        "mean": round(float(ret.mean()), 4) if rows else 0.0,
        "p10": round(float(np.percentile(ret, 10)), 4) if rows else 0.0,
        "p50": round(float(np.percentile(ret, 50)), 4) if rows else 0.0,
        "p90": round(float(np.percentile(ret, 90)), 4) if rows else 0.0,
        "by_status": by_status,
        "histogram": [int(x) for x in hist],
    }
    cons.add_snapshot(snap, ctx.now)
    return snap
