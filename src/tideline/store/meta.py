"""The ``db_meta`` key/value rows every backend's database object shares (portable SQL)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

__all__ = ["MetaRows"]


class MetaRows:
    """``get_meta``, ``set_meta`` and ``schema_version`` over the database's own
    ``read()`` / ``write()`` (a base of each backend's database object, which says how
    to tell whether ``db_meta`` exists yet)."""

    if TYPE_CHECKING:  # defined by each backend's database object
        def read(self) -> AbstractContextManager[Any]: ...

        def write(self) -> AbstractContextManager[Any]: ...

        def _has_meta_table(self, c: Any) -> bool: ...

    def get_meta(self, key: str) -> str | None:
        """Read one ``db_meta`` value."""
        with self.read() as db:
            row = db.execute("SELECT value FROM db_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``db_meta`` value."""
        with self.write() as db:
            db.execute(
                "INSERT INTO db_meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def schema_version(self) -> int:
        """The number of migrations applied to this database (0 before the first)."""
        with self.read() as db:
            if not self._has_meta_table(db):
                return 0
            row = db.execute("SELECT value FROM db_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0
