"""Raw turns of a PostgreSQL store: what differs from the shared turn reads of
:class:`tideline.store.turns.TurnRows` (the insert under a session lock, the batched
key lookup, the neighbour join)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tideline.models import Turn
from tideline.store.postgres.connection import LOCK_SESSION, Conn
from tideline.store.rows import TURN_COLUMNS as _TURN_COLUMNS
from tideline.store.rows import mark_pending, turn_from_row

if TYPE_CHECKING:
    from tideline.store.postgres.connection import Database

__all__ = ["TurnRows"]

_CHUNK = 1000


class TurnRows:
    """Turn reads and writes over ``self.db`` for ``self.namespace``."""

    db: Database
    namespace: str

    if TYPE_CHECKING:  # defined by the store
        def space(self, kind: str, scope: str) -> str: ...

        def _put_vector(self, c: Conn, space: str, key: int, vector: np.ndarray) -> None: ...

        def _index_turn(self, c: Conn, tid: int, speaker: str, text: str) -> None: ...

    def existing_turn_keys(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The internal id of each (source, message id) pair that is already stored."""
        out: dict[tuple[str, str], int] = {}
        if not keys:
            return out
        with self.db.read() as c:
            for start in range(0, len(keys), _CHUNK):
                chunk = list(keys[start:start + _CHUNK])
                rows = c.execute(
                    "SELECT source, message_id, id FROM turns WHERE namespace = ? AND "
                    "(source, message_id) IN (SELECT * FROM unnest(?::text[], ?::text[]))",
                    (self.namespace, [k[0] for k in chunk], [k[1] for k in chunk]),
                ).fetchall()
                for source, mid, tid in rows:
                    out[(str(source), str(mid))] = int(tid)
        return out

    def insert_turns(self, c: Conn, turns: Sequence[Turn],
                     vectors: Sequence[np.ndarray | None]) -> list[int]:
        """Insert raw turns in order inside the caller's write transaction.

        Each new turn takes the next free index of its session; the session is locked
        (advisory, until commit) before its last index is read, so concurrent writers
        of one session queue and the indexes stay contiguous and unique. A turn whose
        (source, message id) is stored already is skipped and takes no index.

        Returns:
            The new internal id of each turn, 0 for one that was stored already.
        """
        places: dict[str, int] = {}
        out: list[int] = []
        for turn, vector in zip(turns, vectors, strict=True):
            if turn.session not in places:
                c.lock(LOCK_SESSION, self.namespace, turn.session)
                row = c.execute(
                    "SELECT max(turn_index) FROM turns WHERE namespace = ? AND session = ?",
                    (self.namespace, turn.session),
                ).fetchone()
                places[turn.session] = 0 if row[0] is None else int(row[0]) + 1
            found = c.execute(
                "INSERT INTO turns(namespace, scope, session, turn_index, speaker, role, "
                "text, ts, source, message_id, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(namespace, source, message_id) DO NOTHING RETURNING id",
                (self.namespace, turn.scope, turn.session, places[turn.session], turn.speaker,
                 turn.role, turn.text, turn.timestamp, turn.source, turn.message_id,
                 turn.recorded_at),
            ).fetchone()
            if found is None:
                out.append(0)
                continue
            places[turn.session] += 1
            tid = int(found[0])
            self._index_turn(c, tid, turn.speaker, turn.text)
            if vector is not None:
                self._put_vector(c, self.space("t", turn.scope), tid, vector)
            else:
                mark_pending(c)
            out.append(tid)
        return out

    def neighbour_turns(self, hits: Sequence[Turn], radius: int = 1) -> list[Turn]:
        """The turns within ``radius`` places of each hit in its own session (hits included)."""
        if not hits:
            return []
        args = ([t.session for t in hits], [t.turn_index - radius for t in hits],
                [t.turn_index + radius for t in hits], self.namespace)
        cols = ", ".join(f"t.{c.strip()}" for c in _TURN_COLUMNS.split(","))
        sql = (f"SELECT DISTINCT {cols} FROM turns t JOIN unnest(?::text[], ?::bigint[], "  # noqa: S608
               "?::bigint[]) AS w(session, lo, hi) ON t.session = w.session "
               "AND t.turn_index BETWEEN w.lo AND w.hi WHERE t.namespace = ?")
        with self.db.read() as c:
            rows = c.execute(sql, args).fetchall()
        return [turn_from_row(r) for r in rows]
