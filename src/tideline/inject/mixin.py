"""The facade's verbs for inject: mixed into :class:`tideline.Memory`."""

from __future__ import annotations

__all__ = ["InjectMixin"]


class InjectMixin:
    """Injection tiers T0–T4 and importers (agent integration)."""
