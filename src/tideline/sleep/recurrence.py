"""Sleep step ``recurrence``: recurrence from current tag frequencies, weights, anti-inflation.

Recurrence (1–5) says how many *other* live memories share at least one tag
with a memory: with the default ``recurrence_steps = (1, 3, 6, 11)``, none → 1,
1–2 → 2, 3–5 → 3, 6–10 → 4, 11 or more → 5. It is set at write time and goes
stale as memories arrive, so every sleep re-scores it (the seed's
``refresh_recurrence``). A memory without tags keeps the recurrence it was
written with. The weight is recomputed (:func:`tideline.models.compute_weight`)
wherever recurrence changed.

Anti-inflation: when the mean weight of the ``inflation_window`` most recently
recorded memories exceeds ``inflation_threshold`` (0.7), their weights are
scaled so that the mean becomes ``inflation_target``; rank order is kept and a
scaled weight stays until the memory's dimensions change again, so a second run
finds nothing to do.
"""

from __future__ import annotations

import json
from typing import Any

from tideline.models import compute_weight
from tideline.sleep.context import SleepContext

__all__ = ["recurrence_from_count", "run"]


def recurrence_from_count(count: int, steps: tuple[int, ...]) -> int:
    """Map "other memories sharing a tag" to the 1–5 recurrence score."""
    return min(5, 1 + sum(1 for s in steps if count >= s))


def run(ctx: SleepContext) -> dict[str, Any]:
    """Refresh recurrence, recompute weights, normalise inflated recent weights.

    Returns:
        Metrics: recurrence changes, weight updates, the inflation check, conflicts.
    """
    t, cons = ctx.tuning, ctx.cons
    rows = cons.weight_rows()
    cap = max(t.recurrence_steps) if t.recurrence_steps else 1
    postings: dict[str, list[int]] = {}
    tags_of: dict[int, list[str]] = {}
    for mid, _v, tags, *_ in rows:
        tl = list(dict.fromkeys(str(x).casefold() for x in json.loads(tags)))
        if tl:
            tags_of[mid] = tl
            for tag in tl:
                postings.setdefault(tag, []).append(mid)

    weight: dict[int, float] = {}
    recur: dict[int, int] = {}
    changed_rec = 0
    for mid, _v, _tags, imp, emo, rec, unres, w, _at in rows:
        weight[mid], recur[mid] = float(w), int(rec)
        mine = tags_of.get(mid)
        if not mine:
            continue
        if any(len(postings[tag]) - 1 >= cap for tag in mine):
            count = cap
        else:
            others: set[int] = set()
            for tag in mine:
                others.update(postings[tag])
            others.discard(mid)
            count = len(others)
        new = recurrence_from_count(count, t.recurrence_steps)
        if new != rec:
            changed_rec += 1
            recur[mid] = new
            weight[mid] = compute_weight(imp, emo, new, unres)

    inflation: dict[str, Any] = {"window": 0, "mean": 0.0, "normalised": False}
    recent = sorted(rows, key=lambda r: (-r[8], -r[0]))[: t.inflation_window]
    if recent:
        mean = sum(weight[r[0]] for r in recent) / len(recent)
        inflation = {"window": len(recent), "mean": round(mean, 4), "normalised": False}
        if mean > t.inflation_threshold and mean > 0:
            factor = t.inflation_target / mean
            for r in recent:
                weight[r[0]] = round(weight[r[0]] * factor, 6)
            inflation.update({"normalised": True, "factor": round(factor, 4),
                              "mean_after": round(t.inflation_target, 4)})

    updates = [(mid, v, recur[mid], weight[mid]) for mid, v, _t, _i, _e, rec, _u, w, _a in rows
               if recur[mid] != rec or abs(weight[mid] - float(w)) > 1e-9]
    updated = cons.set_weights(updates, ctx.now) if updates else 0
    return {"memories": len(rows), "tagged": len(tags_of), "recurrence_changed": changed_rec,
            "weights_updated": updated, "conflicts": len(updates) - updated,
            "inflation": inflation}
