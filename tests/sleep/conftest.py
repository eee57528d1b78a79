"""Helpers for sleep tests: real SQLite stores, the hashing embedder, controlled times."""

from __future__ import annotations

import time

from tideline import Memory

DAY = 86_400.0


def age(mem: Memory, ids: list[int], days: float) -> None:
    """Pretend the memories were last used ``days`` ago (written straight into SQLite)."""
    back = time.time() - days * DAY
    with mem.store.db.write() as c:
        c.executemany("UPDATE memories SET last_access = ?, recorded_at = min(recorded_at, ?) "
                      "WHERE id = ?", [(back, back, i) for i in ids])


def statuses(mem: Memory) -> dict[int, str]:
    with mem.store.db.read() as c:
        return {int(i): str(s) for i, s in c.execute("SELECT id, status FROM memories")}


def co_recall(mem: Memory) -> dict[tuple[int, int], float]:
    with mem.store.db.read() as c:
        return {(int(a), int(b)): float(w) for a, b, w in c.execute(
            "SELECT src, dst, weight FROM edges WHERE type = 'co_recall'")}
