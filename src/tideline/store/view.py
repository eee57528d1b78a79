"""The base of every per-topic SQL helper over one namespace of a store (no heavy imports:
the lean ``tideline sleep`` path uses it); the SQL text helpers are in
:mod:`tideline.store.sql`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tideline.store.base import ViewHost

__all__ = ["NamespaceView"]

class NamespaceView:
    """Portable SQL over one namespace of an opened store (any backend).

    Args:
        store: the opened store.
    """

    def __init__(self, store: ViewHost) -> None:
        self.store = store
        self.db = store.db
        self.ns = store.namespace
