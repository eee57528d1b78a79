"""The facade's verbs for sleep: mixed into :class:`tideline.Memory`."""

from __future__ import annotations

__all__ = ["SleepMixin"]


class SleepMixin:
    """Sleep: trace dynamics, learned associations, the script layer and the report."""
