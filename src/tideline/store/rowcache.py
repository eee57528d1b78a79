"""A bounded cache of rows that do not change once written, for the recall path.

Every recall reads the rows and vectors of the hundred-odd turns it ranks, and a long-lived
process (the MCP server, the warm prompt hook) reads the same turns again and again. Raw
turns are texture: stored whole and never edited or deleted, so a turn row read once
stays true for the life of the database. A turn's *vector* can change (``reembed``); the
vector cache of a backend drops the keys its change log names (see
:meth:`tideline.store.sqlite.store.SQLiteStore.turn_vectors`).

The cache is least-recently-used and bounded by a row count; it is safe to share between
the threads of one process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["TURN_ROWS", "TURN_VECTORS", "RowCache"]

#: Turn rows kept per store (about 1 KB each).
TURN_ROWS = 20_000
#: Turn vectors kept per store (1.5 KB each at 384 dimensions).
TURN_VECTORS = 20_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RowCache(Generic[K, V]):
    """At most ``capacity`` values by key, the least recently used dropped first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity = capacity
        self._rows: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def take(self, keys: Iterable[K]) -> tuple[dict[K, V], list[K]]:
        """The cached values of ``keys`` and, in order, the keys not cached."""
        found: dict[K, V] = {}
        missing: list[K] = []
        with self._lock:
            for key in keys:
                value = self._rows.get(key)
                if value is None:
                    missing.append(key)
                else:
                    self._rows.move_to_end(key)
                    found[key] = value
        return found, missing

    def put(self, items: Iterable[tuple[K, V]]) -> None:
        """Keep these values (the oldest ones go once the cache is full)."""
        if self.capacity == 0:
            return
        with self._lock:
            for key, value in items:
                self._rows[key] = value
                self._rows.move_to_end(key)
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)

    def drop(self, keys: Iterable[K]) -> None:
        """Forget these keys (absent ones are ignored)."""
        with self._lock:
            for key in keys:
                self._rows.pop(key, None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._rows.clear()
