"""Reads of the raw turns of one namespace, for every backend (portable SQL).

Each backend's store inherits :class:`TurnRows` and keeps what differs: how a session is
held while its next place is read (:meth:`TurnRows._lock_session`: SQLite's single
writer holds it already, PostgreSQL takes an advisory lock), the (source, message id)
lookup and the neighbour query.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tideline.models import Turn
from tideline.store.rowcache import TURN_ROWS, RowCache
from tideline.store.rows import (
    TURN_COLUMNS,
    BackendRows,
    mark_pending,
    turn_from_row,
    turn_windows,
)
from tideline.store.sql import padded, placeholders

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TurnRows"]


class TurnRows(BackendRows):
    """Turn rows over ``self.db`` for ``self.namespace`` (a base of each backend's store)."""

    if TYPE_CHECKING:  # defined by each backend's store (space: by NamespaceRows)
        def space(self, kind: str, scope: str) -> str: ...

        def _put_vector(self, c: Any, space: str, key: int, vector: np.ndarray) -> None: ...

        def _index_turn(self, c: Any, tid: int, speaker: str, text: str) -> None: ...

    @abstractmethod
    def _lock_session(self, c: Any, session: str) -> None:
        """Hold ``session`` until the caller's transaction ends, so that its next place
        read now stays free until the insert commits."""

    def insert_turns(
        self, c: Any, turns: Sequence[Turn], vectors: Sequence[np.ndarray | None],
    ) -> list[int]:
        """Insert raw turns in order inside the caller's write transaction.

        Each new turn takes the next free index of its session, read inside this
        transaction once the session is held (:meth:`_lock_session`): indexes stay
        contiguous and unique per session under concurrent writers and after a resumed
        import; the ``turn_index`` the turn carries is ignored. A turn whose (scope,
        source, message id) is stored already is skipped and takes no index.

        Returns:
            The new internal id of each turn, 0 for one that was stored already.
        """
        places: dict[str, int] = {}
        out: list[int] = []
        for turn, vector in zip(turns, vectors, strict=True):
            if turn.session not in places:
                self._lock_session(c, turn.session)
                row = c.execute(
                    "SELECT max(turn_index) FROM turns WHERE namespace = ? AND session = ?",
                    (self.namespace, turn.session),
                ).fetchone()
                places[turn.session] = 0 if row[0] is None else int(row[0]) + 1
            # Only the (scope, source, message id) conflict means "stored already"; a clash on
            # the session's place would be a bug and must raise, not drop the turn.
            found = c.execute(
                "INSERT INTO turns(namespace, scope, session, turn_index, speaker, role, "
                "text, ts, source, message_id, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(namespace, scope, source, message_id) DO NOTHING RETURNING id",
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

    @abstractmethod
    def _window_rows(self, windows: Sequence[tuple[str, int, int]]) -> list[Turn]:
        """The turns at the places (session, first index, last index) of ``windows``
        (each turn once)."""

    # A turn row never changes once stored (raw turns are only ever inserted, and keep
    # their session and place), so a long-lived process reads each one once: by id, and
    # by place for the neighbour windows.

    @functools.cached_property
    def _turn_rows(self) -> RowCache[int, Turn]:
        return RowCache(TURN_ROWS)

    @functools.cached_property
    def _turn_places(self) -> RowCache[tuple[str, int], int]:
        return RowCache(TURN_ROWS)

    def _keep_turns(self, turns: Sequence[Turn]) -> None:
        self._turn_rows.put((t.id, t) for t in turns)
        self._turn_places.put(((t.session, t.turn_index), t.id) for t in turns)

    def get_turns(self, ids: Iterable[int]) -> dict[int, Turn]:
        """Turns by internal id, in the order of their ids."""
        out, wanted = self._turn_rows.take(dict.fromkeys(int(i) for i in ids))
        if wanted:
            read: list[Turn] = []
            with self.db.read() as c:
                for start in range(0, len(wanted), self._chunk):
                    chunk = padded(wanted[start:start + self._chunk], self._chunk)
                    rows = c.execute(
                        f"SELECT {TURN_COLUMNS} FROM turns WHERE {self._no_index}namespace = ? "
                        f"AND id IN ({placeholders(len(chunk))})",
                        (self.namespace, *chunk),
                    ).fetchall()
                    read.extend(map(turn_from_row, rows))
            self._keep_turns(read)
            out.update((t.id, t) for t in read)
        return {tid: out[tid] for tid in sorted(out)}

    def neighbour_turns(self, hits: Sequence[Turn],
                        radius: int | Sequence[int] = 1) -> list[Turn]:
        """The turns within ``radius`` places of each hit in its own session (hits
        included; one radius for every hit, or one per hit), in the order of their ids.

        A window whose every place holds a turn read before is answered from memory; the
        rest are read (a place past a session's last turn may be filled later, so only
        places known to hold a turn are trusted)."""
        if not hits:
            return []
        out: dict[int, Turn] = {}
        unknown: list[tuple[str, int, int]] = []
        for window in turn_windows(hits, radius):
            found = self._known_window(window)
            if found is None:
                unknown.append(window)
            else:
                out.update((t.id, t) for t in found)
        if unknown:
            read = self._window_rows(unknown)
            self._keep_turns(read)
            out.update((t.id, t) for t in read)
        return [out[tid] for tid in sorted(out)]

    def _known_window(self, window: tuple[str, int, int]) -> list[Turn] | None:
        """The turns of a window if every one of its places is known to hold one (a
        session's places start at 0), else None."""
        session, first, last = window
        places, unknown = self._turn_places.take(
            (session, i) for i in range(max(first, 0), last + 1))
        if unknown:
            return None
        turns, missing = self._turn_rows.take(places.values())
        return None if missing else list(turns.values())

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

    # Sentence vectors (recall/sentences.py) live in the vectors table too, in a space of
    # their own kind ("s"), one row per turn: the turn's sentence vectors concatenated.
    # No index is built over them (they are read by key for candidates only), and on
    # PostgreSQL a row of n > 1 sentences has n times the dimension, so the HNSW index of
    # the turn and memory vectors (one partial index per dimension) never holds them.

    def put_sentence_vectors(self, c: Any, scope: str, tid: int, matrix: np.ndarray) -> None:
        """Store the sentence vectors of turn ``tid`` (rows of ``matrix``) inside ``c``."""
        self._put_vector(c, self.space("s", scope), tid, matrix.reshape(-1))

    def sentence_vectors(self, turns: Sequence[Turn], dim: int) -> dict[int, np.ndarray]:
        """The stored sentence vectors of turns (turn id → (sentences, dim) matrix); turns
        stored without them are left out."""
        import numpy as np

        by_space: dict[str, list[int]] = {}
        for t in turns:
            by_space.setdefault(self.space("s", t.scope), []).append(t.id)
        out: dict[int, np.ndarray] = {}
        with self.db.read() as c:
            for space, keys in by_space.items():
                for start in range(0, len(keys), self._chunk):
                    chunk = padded(keys[start:start + self._chunk], self._chunk)
                    rows = c.execute(
                        f"SELECT key, v FROM vectors WHERE space = ? "
                        f"AND key IN ({placeholders(len(chunk))})", (space, *chunk)).fetchall()
                    for key, blob in rows:
                        arr = np.frombuffer(bytes(blob), dtype=np.float32)
                        if dim and arr.size and arr.size % dim == 0:
                            out[int(key)] = arr.reshape(-1, dim)
        return out
