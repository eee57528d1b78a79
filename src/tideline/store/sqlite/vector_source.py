"""The vectors of one space of a SQLite store, read as the ANN index's source.

The ``vectors`` table holds each row's embedding as a blob, and ``vector_log`` every
add and delete with a growing ``seq``; :class:`SpaceSource` reads both for one space,
which is what :class:`~tideline.store.sqlite.vector_index.VectorIndex` replays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tideline.store.sql import padded, placeholders
from tideline.store.sqlite.connection import Database

__all__ = ["SpaceSource"]


class SpaceSource:
    """The vectors of one space (``m:<ns>:<scope>`` or ``t:<ns>:<scope>``) as a VectorSource."""

    def __init__(self, db: Database, space: str, dim: int) -> None:
        self.db = db
        self.space = space
        self.dim = dim

    def vector_seq(self) -> int:
        """Newest change-log sequence number of this space."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT max(seq) FROM vector_log WHERE space = ?", (self.space,)
            ).fetchone()
        return int(row[0] or 0)

    def vector_changes(self, since: int) -> list[tuple[int, int, bool]]:
        """Changes after ``since``, oldest first."""
        with self.db.read() as c:
            rows = c.execute(
                "SELECT seq, key, present FROM vector_log WHERE space = ? AND seq > ? ORDER BY seq",
                (self.space, since),
            ).fetchall()
        return [(int(s), int(k), bool(p)) for s, k, p in rows]

    def vectors_for(self, keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Current vectors of the given keys (missing keys are left out)."""
        found_keys: list[int] = []
        blobs: list[bytes] = []
        with self.db.read() as c:
            for start in range(0, len(keys), 900):
                chunk = padded(keys[start:start + 900], 900)
                rows = c.execute(
                    f"SELECT key, v FROM vectors WHERE space = ? AND key IN ({placeholders(len(chunk))})",  # noqa: E501
                    (self.space, *chunk),
                ).fetchall()
                for key, blob in rows:
                    found_keys.append(int(key))
                    blobs.append(blob)
        return self._pack(found_keys, blobs)

    def iter_all_vectors(self, batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every current vector of the space, in batches."""
        last = -1
        while True:
            with self.db.read() as c:
                rows = c.execute(
                    "SELECT key, v FROM vectors WHERE space = ? AND key > ? ORDER BY key LIMIT ?",
                    (self.space, last, batch),
                ).fetchall()
            if not rows:
                return
            last = int(rows[-1][0])
            yield self._pack([int(r[0]) for r in rows], [r[1] for r in rows])

    def vector_count(self) -> int:
        """How many vectors the space holds (kept by triggers, schema 7)."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT n FROM vector_counts WHERE space = ?", (self.space,)
            ).fetchone()
        return int(row[0]) if row else 0

    def _pack(self, keys: list[int], blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        if not keys:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(keys), self.dim)
        return np.asarray(keys, dtype=np.int64), matrix
