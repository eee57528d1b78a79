"""The facade's verbs for dream: mixed into :class:`tideline.Memory`."""

from __future__ import annotations

__all__ = ["DreamMixin"]


class DreamMixin:
    """DREAM: LLM consolidation (solidify, comb, wander, dream)."""
