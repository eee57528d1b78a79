"""Trace dynamics: how retention decays and how reinforcement slows the decay.

Retention of a memory ``t`` seconds after its last access is
``strength · 2^(−t / half_life)``. Each reinforcement resets strength to 1 and
multiplies the half-life (stability) by a factor that grows with the spacing of
the reinforcement: a repeat right after the last one adds little, a repeat after
a whole half-life adds the full ``stability_growth``. Enough reinforcements
promote an episode to semantic memory, whose half-life starts at least at the
semantic floor. Decay never deletes: below ``dormant_below`` a memory is marked
dormant (ranked lower, left out of injection) until it is used again.
"""

from __future__ import annotations

import dataclasses
import math

from tideline.config import Dynamics
from tideline.models import MemoryRecord

__all__ = ["DAY", "reinforce", "retention", "weaken"]

#: Seconds in a day: retention and half-lives are counted in days.
DAY = 86_400.0


def retention(rec: MemoryRecord, now: float, dyn: Dynamics | None = None) -> float:
    """Current retention of a memory in 0–1.

    Args:
        rec: the memory.
        now: epoch seconds.
        dyn: dynamics settings (only used for its defaults when stability is unset).

    Returns:
        ``strength · 2^(−age / half_life)``.
    """
    half_life = rec.stability if rec.stability > 0 else (dyn or Dynamics()).episodic_half_life_days
    age_days = max(0.0, now - rec.last_access) / DAY
    return float(rec.strength * math.pow(2.0, -age_days / half_life))


def reinforce(rec: MemoryRecord, now: float, dyn: Dynamics, *, amount: float = 1.0) -> MemoryRecord:
    """Return ``rec`` after one spaced reinforcement (potentiation, positive reward, use).

    Args:
        rec: the memory.
        now: epoch seconds.
        dyn: dynamics settings.
        amount: 0–1; a fraction of a full reinforcement (e.g. a mild reward).

    Returns:
        The updated record (the caller persists it).
    """
    spacing = min(1.0, max(0.0, now - rec.last_access) / DAY / max(rec.stability, 1e-6))
    growth = 1.0 + (dyn.stability_growth - 1.0) * (0.15 + 0.85 * spacing) * amount
    stability = min(dyn.max_half_life_days, rec.stability * growth)
    count = rec.reinforcements + 1
    status = rec.status
    if status == "dormant":
        status = "semantic" if count >= dyn.promote_after else "episodic"
    if status == "episodic" and count >= dyn.promote_after:
        status = "semantic"
    if status == "semantic":
        stability = max(stability, dyn.semantic_half_life_days)
    strength = min(1.0, max(retention(rec, now), 0.0) + amount)
    return dataclasses.replace(
        rec, stability=stability, reinforcements=count, strength=strength, last_access=now,
        status=status, version=rec.version + 1, updated_at=now,
    )


def weaken(rec: MemoryRecord, now: float, dyn: Dynamics, *, amount: float) -> MemoryRecord:
    """Return ``rec`` after negative feedback: strength and stability shrink, never below a floor.

    Args:
        rec: the memory.
        now: epoch seconds.
        dyn: dynamics settings.
        amount: 0–1, how strongly to weaken.
    """
    stability = max(0.5, rec.stability * (1.0 - 0.5 * amount))
    strength = max(0.0, retention(rec, now, dyn) * (1.0 - 0.6 * amount))
    return dataclasses.replace(
        rec, stability=stability, strength=strength, last_access=now,
        version=rec.version + 1, updated_at=now,
    )
