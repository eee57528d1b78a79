"""Raw turns of a PostgreSQL store: what differs from the shared turn rows of
:class:`tideline.store.turns.TurnRows` (the session lock the insert takes, the batched
key lookup, the neighbour join)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tideline.models import Turn
from tideline.store.postgres.lock_keys import LOCK_SESSION
from tideline.store.postgres.session import Conn
from tideline.store.rows import TURN_COLUMNS as _TURN_COLUMNS
from tideline.store.rows import turn_from_row

if TYPE_CHECKING:
    from tideline.store.postgres.connection import Database

__all__ = ["TurnRows"]

_CHUNK = 1000


class TurnRows:
    """Turn reads and writes over ``self.db`` for ``self.namespace``."""

    db: Database
    namespace: str

    def existing_turn_keys(
        self, keys: Sequence[tuple[str, str, str]],
    ) -> dict[tuple[str, str, str], int]:
        """The internal id of each (scope, source, message id) triple already stored."""
        out: dict[tuple[str, str, str], int] = {}
        if not keys:
            return out
        with self.db.read() as c:
            for start in range(0, len(keys), _CHUNK):
                chunk = list(keys[start:start + _CHUNK])
                rows = c.execute(
                    "SELECT scope, source, message_id, id FROM turns WHERE namespace = ? AND "
                    "(scope, source, message_id) IN "
                    "(SELECT * FROM unnest(?::text[], ?::text[], ?::text[]))",
                    (self.namespace, [k[0] for k in chunk], [k[1] for k in chunk],
                     [k[2] for k in chunk]),
                ).fetchall()
                for scope, source, mid, tid in rows:
                    out[(str(scope), str(source), str(mid))] = int(tid)
        return out

    def _lock_session(self, c: Conn, session: str) -> None:
        """An advisory lock on the session until commit: concurrent writers of one
        session queue, so its next place stays free until the insert commits."""
        c.lock(LOCK_SESSION, self.namespace, session)

    def _window_rows(self, windows: Sequence[tuple[str, int, int]]) -> list[Turn]:
        """The turns at the places of ``windows`` (see :meth:`TurnRows.neighbour_turns`)."""
        args = ([w[0] for w in windows], [w[1] for w in windows], [w[2] for w in windows],
                self.namespace)
        cols = ", ".join(f"t.{c.strip()}" for c in _TURN_COLUMNS.split(","))
        sql = (f"SELECT DISTINCT {cols} FROM turns t JOIN unnest(?::text[], ?::bigint[], "  # noqa: S608
               "?::bigint[]) AS w(session, lo, hi) ON t.session = w.session "
               "AND t.turn_index BETWEEN w.lo AND w.hi WHERE t.namespace = ?")
        with self.db.read() as c:
            rows = c.execute(sql, args).fetchall()
        return [turn_from_row(r) for r in rows]
