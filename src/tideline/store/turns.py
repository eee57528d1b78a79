"""Reads of the raw turns of one namespace, for every backend (portable SQL).

Each backend's store inherits :class:`TurnRows` and keeps what differs: inserting turns
(a session's next place is read under SQLite's single writer, under an advisory lock on
PostgreSQL), the (source, message id) lookup and the neighbour query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tideline.models import Turn
from tideline.store.rows import TURN_COLUMNS, BackendRows, turn_from_row
from tideline.store.view import placeholders

__all__ = ["TurnRows"]


class TurnRows(BackendRows):
    """Turn reads over ``self.db`` for ``self.namespace`` (a base of each backend's store)."""

    def previous_turn(self, session: str, turn_index: int) -> Turn | None:
        """The turn just before ``turn_index`` in a session, if stored."""
        found = self.session_turns(session, around=turn_index - 1, radius=0, limit=1)
        return found[0] if found else None

    def next_turn_index(self, session: str) -> int:
        """The next free turn index in a session, as of now (a hint: see ``insert_turns``)."""
        with self.db.read() as c:
            row = c.execute(
                "SELECT max(turn_index) FROM turns WHERE namespace = ? AND session = ?",
                (self.namespace, session),
            ).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def get_turns(self, ids: Iterable[int]) -> dict[int, Turn]:
        """Turns by internal id."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, Turn] = {}
        with self.db.read() as c:
            for start in range(0, len(wanted), self._chunk):
                chunk = wanted[start:start + self._chunk]
                rows = c.execute(
                    f"SELECT {TURN_COLUMNS} FROM turns WHERE {self._no_index}namespace = ? "
                    f"AND id IN ({placeholders(len(chunk))})",
                    (self.namespace, *chunk),
                ).fetchall()
                for row in rows:
                    t = turn_from_row(row)
                    out[t.id] = t
        return out

    def speakers_since(self, after_id: int) -> tuple[int, list[tuple[str, str]]]:
        """The newest turn id and the distinct (scope, speaker) pairs of turns after
        ``after_id`` (turn ids only grow, so a caller can keep a running set)."""
        with self.db.read() as c:
            last = c.execute("SELECT max(id) FROM turns").fetchone()[0]
            if last is None or int(last) <= after_id:
                return after_id, []
            rows = c.execute(
                "SELECT DISTINCT scope, speaker FROM turns WHERE id > ? AND namespace = ?",
                (after_id, self.namespace)).fetchall()
        return int(last), [(str(a), str(b)) for a, b in rows]

    def turns_between(
        self, scopes: Sequence[str], start: float, end: float, limit: int
    ) -> list[Turn]:
        """Turns of ``scopes`` spoken in ``[start, end)`` (by their timestamp), oldest first."""
        sql = (f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? "
               f"AND scope IN ({placeholders(len(scopes))}) AND ts >= ? AND ts < ? "
               f"ORDER BY ts{self._tiebreak} LIMIT ?")
        with self.db.read() as c:
            rows = c.execute(sql, (self.namespace, *scopes, start, end, limit)).fetchall()
        return [turn_from_row(r) for r in rows]

    def session_turns(
        self, session: str, *, around: int | None = None, radius: int = 3, limit: int = 200,
        scopes: Sequence[str] | None = None,
    ) -> list[Turn]:
        """Turns of one session in order, optionally only those near a turn index.

        ``scopes`` keeps only turns of those scopes (a session name is not unique across
        projects); None reads every scope (internal callers that place a turn themselves).
        """
        sql = f"SELECT {TURN_COLUMNS} FROM turns WHERE namespace = ? AND session = ?"
        args: list[Any] = [self.namespace, session]
        if scopes is not None:
            sql += f" AND scope IN ({placeholders(len(scopes))})"
            args.extend(scopes)
        if around is not None:
            sql += " AND turn_index BETWEEN ? AND ?"
            args += [around - radius, around + radius]
        sql += " ORDER BY turn_index LIMIT ?"
        with self.db.read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [turn_from_row(r) for r in rows]
