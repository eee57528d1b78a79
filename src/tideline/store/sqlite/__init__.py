"""The SQLite backend: one file per store directory, FTS5 for words and substrings,
vectors as blobs with a local ANN index (see :mod:`tideline.store.sqlite.vector_index`).

:class:`SQLiteStore` is imported lazily: the light paths (hooks, the sleep gate) use
:mod:`tideline.store.sqlite.connection` without paying for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tideline.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tideline.store.sqlite import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
