"""What the sleep gate sees of a store, whichever backend read it: a value, no SQL.

Each backend reads it without opening the store for writing
(:func:`tideline.store.peek_gate`); an opened store reads it too
(:meth:`tideline.store.consolidation.state.SleepView.gate`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GateView"]


@dataclass(frozen=True)
class GateView:
    """What the gate sees: the store's marker now and the one stored by the last sleep."""

    marker: str
    stored: str | None
    last_sleep: float | None

    def unchanged(self, refresh_after_s: float, now: float) -> bool:
        """True when nothing changed since the last sleep and it is recent enough."""
        return (self.stored is not None and self.stored == self.marker
                and self.last_sleep is not None and now - self.last_sleep < refresh_after_s)
