"""Sleep step ``backfill``: source_links for memories written without them.

For a live memory with empty ``source_links``, the candidates are the raw turns
of the same scope within ``backfill_window_hours`` of the memory's event time
(or record time), the ``backfill_candidates`` closest in time. Each is scored
by vector cosine and by lexical overlap (the share of the memory's keywords
found in the turn)::

    match = max(cos, (cos + lexical) / 2)

and up to ``backfill_links`` turns whose match reaches the embedder profile's
``related`` threshold are linked, best first. Only empty link lists are ever
filled (a version-checked update), so the step never overwrites what a writer
chose. Cursors keep it incremental: a memory already examined is only
re-examined against turns imported since.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from tideline.models import MemoryRecord
from tideline.sleep.context import SleepContext
from tideline.sleep.keywords import extract, memory_text

if TYPE_CHECKING:
    import numpy as np

__all__ = ["run"]

_LEXICAL_TOP = 12


def run(ctx: SleepContext) -> dict[str, Any]:
    """Link unlinked memories to the raw turns they most likely came from.

    Returns:
        Metrics: memories examined and linked, links written, conflicts.
    """
    import numpy as np

    cons, t = ctx.cons, ctx.tuning
    mem_cursor = int(cons.get_state("backfill.memory_cursor") or 0)
    turn_cursor = int(cons.get_state("backfill.turn_cursor") or 0)
    max_turn = cons.max_turn_id()
    unlinked = cons.unlinked()
    fresh = [m for m in unlinked if m.id > mem_cursor]
    stale = [m for m in unlinked if m.id <= mem_cursor] if max_turn > turn_cursor else []
    threshold = ctx.rt.embedder.profile.related
    window = t.backfill_window_hours * 3600.0
    dim = ctx.rt.embedder.dim
    updates: list[tuple[int, int, list[int]]] = []
    examined = 0
    by_scope: dict[str, list[tuple[MemoryRecord, int]]] = {}
    for m in fresh:
        by_scope.setdefault(m.scope, []).append((m, 0))
    for m in stale:
        by_scope.setdefault(m.scope, []).append((m, turn_cursor))
    for scope, items in by_scope.items():
        if max_turn == 0:
            break
        whens = [_when(m) for m, _ in items]
        turns = cons.turn_times(scope, min(whens) - window, max(whens) + window)
        if not turns:
            continue
        tids = [x[0] for x in turns]
        times = [x[1] for x in turns]
        tvec = _matrix(cons.turn_vector_blobs(scope, tids), tids, dim)
        mvec_rows = [r for batch in cons.vector_blobs(scope, [m.id for m, _ in items])
                     for r in batch]
        mvec = dict(zip([k for k, _ in mvec_rows],
                        _matrix(mvec_rows, [k for k, _ in mvec_rows], dim), strict=True))
        for (m, after), when in zip(items, whens, strict=True):
            examined += 1
            v = mvec.get(m.id)
            if v is None:
                continue
            lo = bisect.bisect_left(times, when - window)
            hi = bisect.bisect_right(times, when + window)
            cand = [i for i in range(lo, hi) if tids[i] > after]
            if not cand:
                continue
            if len(cand) > t.backfill_candidates:
                cand.sort(key=lambda i: abs(times[i] - when))
                cand = cand[: t.backfill_candidates]
            idx = np.asarray(cand)
            cos = tvec[idx] @ v
            order = np.argsort(-cos, kind="stable")[:_LEXICAL_TOP]
            words = list(extract(memory_text(m.gesture, m.context, m.cognition_direction)))
            scored: list[tuple[float, int]] = []
            for o in order:
                i = int(idx[o])
                c = float(cos[o])
                text = turns[i][2].casefold()
                lex = sum(1 for w in words if w in text) / len(words) if words else 0.0
                match = max(c, (c + lex) / 2)
                if match >= threshold:
                    scored.append((match, tids[i]))
            scored.sort(key=lambda s: (-s[0], s[1]))
            links = [tid for _, tid in scored[: t.backfill_links]]
            if links:
                updates.append((m.id, m.version, links))
    updated = cons.set_source_links(updates, ctx.now) if updates else 0
    new_mem_cursor = max((m.id for m in unlinked), default=mem_cursor)
    cons.put_state("backfill.memory_cursor", str(max(mem_cursor, new_mem_cursor)))
    cons.put_state("backfill.turn_cursor", str(max_turn))
    return {"unlinked": len(unlinked), "examined": examined, "linked": updated,
            "links": sum(len(u[2]) for u in updates),
            "conflicts": len(updates) - updated,
            "sample": [{"memory": u[0], "turns": u[2]} for u in updates[:10]]}


def _when(m: MemoryRecord) -> float:
    return m.event_time if m.event_time is not None else m.recorded_at


def _matrix(rows: list[tuple[int, bytes]], order: list[int], dim: int) -> np.ndarray:
    """Normalised vectors in ``order`` (zeros for a missing one)."""
    import numpy as np

    found = dict(rows)
    out = np.zeros((len(order), dim), dtype=np.float32)
    for i, key in enumerate(order):
        blob = found.get(key)
        if blob is not None:
            out[i] = np.frombuffer(blob, dtype=np.float32)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out
