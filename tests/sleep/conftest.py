"""Helpers for sleep tests: real SQLite stores, the hashing embedder, controlled times."""

from __future__ import annotations

import time

from tests.backend import rows, run_all

from tideline import Memory

DAY = 86_400.0


def age(mem: Memory, ids: list[int], days: float) -> None:
    """Pretend the memories were last used ``days`` ago (written straight into the store)."""
    back = time.time() - days * DAY
    run_all(mem, [("UPDATE memories SET last_access = ?, recorded_at = CASE "
                   "WHEN recorded_at < ? THEN recorded_at ELSE ? END WHERE id = ?",
                   (back, back, back, i)) for i in ids])


def statuses(mem: Memory) -> dict[int, str]:
    return {int(i): str(s) for i, s in rows(mem, "SELECT id, status FROM memories")}


def co_recall(mem: Memory) -> dict[tuple[int, int], float]:
    return {(int(a), int(b)): float(w) for a, b, w in rows(
        mem, "SELECT src, dst, weight FROM edges WHERE type = 'co_recall'")}
