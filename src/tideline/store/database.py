"""A backend's database object and its connections, as protocols.

The lowest layer of the store's shared code: the views in portable SQL
(:mod:`tideline.store.agent`, :mod:`tideline.store.consolidation`, …) and the
protocols of :mod:`tideline.store.base` build on these two, and each backend's
``connection.py`` implements them. Light: no driver, no numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from tideline.store.dialect import Dialect

__all__ = ["Connection", "Database"]


class Connection(Protocol):
    """A connection inside a read or a write transaction."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any:
        """Run one statement; the cursor offers ``fetchone``, ``fetchall``, ``rowcount``
        and iteration."""

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]], /) -> Any:
        """Run one statement per parameter set (``rowcount``: summed)."""


class Database(Protocol):
    """A backend's database object (``store.db``, used inside ``store/`` only)."""

    @property
    def dialect(self) -> Dialect:
        """The SQL fragments that differ between backends."""

    def read(self) -> AbstractContextManager[Any]:
        """A connection for reads (a :class:`Connection`)."""

    def write(self) -> AbstractContextManager[Any]:
        """One write transaction (a :class:`Connection`); nested use joins it.

        Raises:
            StoreBusy: still locked / conflicting after the retries.
            StoreError: any other database failure.
        """

    def get_meta(self, key: str) -> str | None:
        """One ``db_meta`` value."""

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value."""

    def schema_version(self) -> int:
        """The number of migrations applied."""

    def close(self) -> None:
        """Release the connection (or pool)."""
