"""Sleep step ``vectors``: embed the memories and turns stored while the embedder was down.

Runs first, so that the clusters and backfill of the same sleep see the new
vectors. With the embedder still unavailable it fills nothing and says so; with
the ``none`` embedder (a full-text only store) there is nothing to fill.
"""

from __future__ import annotations

from typing import Any

from tideline.sleep.context import SleepContext

__all__ = ["run"]


def run(ctx: SleepContext) -> dict[str, Any]:
    """Fill pending vectors.

    Returns:
        Metrics: ``filled``, ``left`` and the embedder's state (ok, down, none).
    """
    guard = ctx.rt.guard
    if guard.full_text_only:
        return {"filled": 0, "left": 0, "embedder": "none"}
    if not ctx.rt.store.vectors_pending():
        return {"filled": 0, "left": 0, "embedder": "down" if guard.down else "ok"}
    result = ctx.rt.store.fill_pending(guard.passages)
    return {**result, "embedder": "down" if guard.down else "ok"}
