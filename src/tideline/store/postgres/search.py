"""PostgreSQL's lexical search over one namespace: the word and substring indexes
(``tsvector`` and ``pg_trgm`` rows of :mod:`tideline.store.postgres.lexical`), their
document frequencies, and the hints the frequency statement leaves for the recall that
sent it (whether the namespace is alone in a table, the clusters' version).

A base of :class:`~tideline.store.postgres.store.PostgresStore`, like the shared row
code of :class:`~tideline.store.namespace.NamespaceRows`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tideline.models import LexicalQuery
from tideline.store.namespace import DF_CACHE_MIN as _DF_CACHE_MIN
from tideline.store.namespace import DF_CACHE_SIZE as _DF_CACHE_SIZE
from tideline.store.postgres import lexical as pg_lexical

if TYPE_CHECKING:
    from tideline.store.postgres.connection import Database

__all__ = ["HINT_SECONDS", "LexicalSearch"]

#: How long what a statement read on the side still answers for (seconds): the
#: namespace's share of a table here (see ``_alone``), and in the store the pending
#: flag and the gate target a write read.
HINT_SECONDS = 1.0
#: A namespace holding at least this share of a lexical table's rows is tested on each
#: match instead of in the GIN index scan (see ``_alone``).
_NAMESPACE_SHARE = 0.5
#: The share of ``{table}``'s rows whose namespace is the parameter, from the planner's
#: statistics (NULL before the table was analysed or when the namespace is not among
#: its most common values).
_SHARE_SQL = ("SELECT f.freq FROM pg_stats s CROSS JOIN LATERAL unnest("
              "s.most_common_vals::text::text[], s.most_common_freqs) AS f(val, freq) "
              "WHERE s.schemaname = ANY(current_schemas(false)) AND s.tablename = '{table}' "
              "AND s.attname = 'namespace' AND f.val = ? LIMIT 1")
#: The sleep-state key cluster routing reads on every recall (see ``state_seen``).
_CLUSTERS_VERSION = "clusters.version"


class LexicalSearch:
    """Word and substring search of one namespace's memories and turns on PostgreSQL.

    Attributes:
        _alone_seen: per table kind, (when, alone, share) as the last frequency
            statement read them (see :meth:`_alone`).
        _seen: sleep-state values as statements read them (see :meth:`state_seen`).
    """

    _alone_seen: dict[str, tuple[float, bool, float]]
    _seen: dict[str, tuple[float, str | None]]
    _seen_lock: threading.Lock
    _df_caches: dict[str, tuple[int, float, dict[str, int]]]

    if TYPE_CHECKING:  # defined by the store (and the shared row code it inherits)
        db: Database
        namespace: str

        def _filters(self, *, scopes: Sequence[str] | None, kind: str | None = None,
                     alias: str = "", since: float | None = None,
                     until: float | None = None) -> tuple[list[str], list[Any]]: ...

        def _df_cache_for(self, kind: str, total: int) -> dict[str, int]: ...

    def search_memories(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        kind: str | None = None, since: float | None = None, until: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[int, float]]:
        """(memory id, score) best first: the word index, or with ``substrings`` the
        identifier/substring index (see :mod:`tideline.store.postgres.lexical`)."""
        search = pg_lexical.plan(query, substrings=substrings)
        return self._search_memories(search, scopes=scopes, limit=limit, kind=kind,
                                     since=since, until=until,
                                     include_superseded=include_superseded)

    def search_turns(
        self, query: LexicalQuery, *, substrings: bool, scopes: Sequence[str], limit: int,
        since: float | None = None, until: float | None = None,
    ) -> list[tuple[int, float]]:
        """(turn id, score) best first on the word or the substring index of raw turns."""
        search = pg_lexical.plan(query, substrings=substrings)
        return self._search_turns(search, scopes=scopes, limit=limit, since=since, until=until)

    @staticmethod
    def _match(search: pg_lexical.Search) -> tuple[str, list[Any], str, list[Any]]:
        """(score expression, its parameters, condition, its parameters) over ``l``."""
        if search.tsquery is not None:
            return ("ts_rank(l.words, ?::tsquery)", [search.tsquery], "l.words @@ ?::tsquery",
                    [search.tsquery])
        likes = " + ".join(["(CASE WHEN l.subs LIKE ? THEN 1 ELSE 0 END)"] * len(search.patterns))
        cond = " OR ".join(["l.subs LIKE ?"] * len(search.patterns))
        return f"({likes})", [*search.patterns], f"({cond})", [*search.patterns]

    def _ranked(self, search: pg_lexical.Search, lex: str, rows: str, where: list[str],
                args: Sequence[Any], limit: int) -> tuple[str, list[Any]]:
        """The statement and parameters for the matches of ``lex`` in this namespace best
        first, each kept if its row of ``rows`` (alias ``x``) passes ``where``
        (parameters ``args``), at most ``limit``.

        The namespace is a column of the lexical tables and the first column of their
        GIN indexes, so the index scan itself reads only this namespace's postings (or,
        when the table holds no other namespace's rows, see :meth:`_alone`, the index
        without it; when the namespace holds most of the table's rows, the index without
        it and the namespace tested on each match): the matches are those of this
        namespace alone, ranked there (their number is
        bounded by the engine's posting budget), and only then each is looked up by
        primary key, best first, until ``limit`` pass the scope and other filters. The
        ``LIMIT 1`` keeps the lookup a nested-loop probe: joined plainly, the planner
        hashed the whole namespace's rows (a sequential scan of every memory) for each
        search.
        """
        score, score_args, cond, cond_args = self._match(search)
        alone, share = self._alone(lex[0])
        if alone:
            mine, ns = "", []
        elif share >= _NAMESPACE_SHARE:
            # Kept out of the index scan (an expression the index does not hold): the
            # row is read anyway for its rank, and then tested.
            mine, ns = "l.namespace || '' = ? AND ", [self.namespace]
        else:
            mine, ns = "l.namespace = ? AND ", [self.namespace]
        sql = (f"SELECT h.id, h.r FROM (SELECT l.id, {score} AS r FROM {lex} l "  # noqa: S608
               f"WHERE {mine}{cond} ORDER BY r DESC, l.id DESC) AS h CROSS JOIN LATERAL "
               f"(SELECT 1 FROM {rows} x WHERE x.id = h.id AND {' AND '.join(where)} "
               "LIMIT 1) AS kept ORDER BY h.r DESC, h.id DESC LIMIT ?")
        return sql, [*score_args, *ns, *cond_args, *args, limit]

    def _search_memories(self, search: pg_lexical.Search, *, scopes: Sequence[str], limit: int,
                         kind: str | None, since: float | None, until: float | None,
                         include_superseded: bool) -> list[tuple[int, float]]:
        if search.empty or not scopes:
            return []
        where, args = self._filters(scopes=scopes, kind=kind, alias="x", since=since,
                                    until=until)
        if not include_superseded:
            where.append("x.status != 'superseded'")
        sql, params = self._ranked(search, "memories_lex", "memories", where, args, limit)
        with self.db.read() as c:
            rows = c.execute(sql, params).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def _search_turns(self, search: pg_lexical.Search, *, scopes: Sequence[str], limit: int,
                      since: float | None, until: float | None) -> list[tuple[int, float]]:
        if search.empty or not scopes:
            return []
        where = ["x.namespace = ?", "x.scope = ANY(?)"]
        args: list[Any] = [self.namespace, list(scopes)]
        if since is not None:
            where.append("coalesce(x.ts, x.recorded_at) >= ?")
            args.append(since)
        if until is not None:
            where.append("coalesce(x.ts, x.recorded_at) <= ?")
            args.append(until)
        sql, params = self._ranked(search, "turns_lex", "turns", where, args, limit)
        with self.db.read() as c:
            rows = c.execute(sql, params).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def document_frequencies(self, kind: str, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many rows of this namespace's memories (``m``) or turns (``t``) hold each
        index token.

        Counted inside the namespace (the lexical tables' indexes start with it), so
        one namespace's weights and cost do not move with another's rows. Large counts
        are cached per process as on SQLite (dropped when the row count moved by over
        1 % or after five minutes).

        Returns:
            Document frequency per token (missing tokens are 0) and the namespace's
            highest row id as an estimate of its row count (as on SQLite; one index
            lookup).
        """
        wanted = list(dict.fromkeys(tokens))
        lexemes: dict[str, str | None] = {}
        for token in wanted:
            words = pg_lexical.tokens(token)
            lexemes[token] = pg_lexical._lexeme(words[0]) if len(words) == 1 else None
        # One statement counts every token the cache lacks and reads the row count (one
        # round trip per token was most of this call's time); the cache is checked
        # against that count after, and counted again only when it went stale.
        guess = self._df_caches.get(kind)
        known = guess[2] if guess is not None else {}
        total, counted = self._count_tokens(
            kind, {t: q for t in wanted if t not in known and (q := lexemes[t])})
        cache = self._df_cache_for(kind, total)
        if cache is not known:
            stale = {t: q for t in wanted if t in known and t not in counted
                     and (q := lexemes[t])}
            if stale:
                counted |= self._count_tokens(kind, stale)[1]
        out: dict[str, int] = {}
        for token in wanted:
            hit = cache.get(token)
            if hit is None:
                hit = counted.get(token, 0)
                if hit >= _DF_CACHE_MIN and len(cache) < _DF_CACHE_SIZE:
                    cache[token] = hit
            out[token] = hit
        return out, total

    def _count_tokens(self, kind: str, queries: dict[str, str]) -> tuple[int, dict[str, int]]:
        """The namespace's highest row id in memories (``m``) or turns (``t``) and its
        rows holding each token (``queries``: token → its one-lexeme ``tsquery``), in one
        statement.

        When the lexical table holds no other namespace's rows (its lowest and highest
        namespace, two lookups of its b-tree, are this one), each token is counted
        without the namespace condition: the same count in the same snapshot, without
        walking the namespace's posting list inside the GIN scan (up to a millisecond a
        token at 100k rows). The statement also reports that, for :meth:`_alone`.
        """
        lex = "memories_lex" if kind == "m" else "turns_lex"
        sql = (f"SELECT top.n, c.token, c.hits, top.cv, top.alone, top.share FROM (SELECT "  # noqa: S608
               f"coalesce(max(id), 0) AS n, (SELECT value FROM sleep_state WHERE namespace = "
               f"? AND key = '{_CLUSTERS_VERSION}') AS cv, coalesce((SELECT min(namespace) "
               f"FROM {lex}) = ? AND (SELECT max(namespace) FROM {lex}) = ?, false) AS alone, "
               f"({_SHARE_SQL.format(table=lex)}) AS share "
               f"FROM {lex} WHERE namespace = ?) AS top LEFT JOIN LATERAL (SELECT q.token, "
               f"CASE WHEN top.alone THEN (SELECT count(*) FROM {lex} WHERE words @@ "
               f"q.lexeme::tsquery) ELSE (SELECT count(*) FROM {lex} WHERE namespace = ? AND "
               "words @@ q.lexeme::tsquery) END AS hits FROM unnest(?::text[], ?::text[]) "
               "AS q(token, lexeme)) AS c ON true")
        ns = self.namespace
        sent = time.monotonic()
        with self.db.read() as c:
            rows = c.execute(sql, (ns, ns, ns, ns, ns, ns, list(queries),
                                   list(queries.values()))).fetchall()
        if rows:
            self._saw(_CLUSTERS_VERSION, sent, None if rows[0][3] is None else str(rows[0][3]))
            self._alone_seen[kind] = (sent, bool(rows[0][4]), float(rows[0][5] or 0.0))
        total = int(rows[0][0]) if rows else 0
        return total, {str(r[1]): int(r[2]) for r in rows if r[1] is not None}

    def _alone(self, kind: str) -> tuple[bool, float]:
        """Whether a statement of the last second found this namespace alone in the
        lexical table of ``kind`` (every recall counts its tokens right before it
        searches), and the share of the table's rows the planner's statistics give it
        (0: not known). Alone, a search scans the GIN index without the namespace: the
        same rows, since the probe of each match keeps this namespace's only.

        With the namespace in the index condition, the GIN scan walks the namespace's
        whole posting list to intersect it with the words': at 1M rows 340 pages and
        about 21 ms a search, whatever the words (docs/lab/postgres-recall.md). Where the
        namespace holds most of the rows (:data:`_NAMESPACE_SHARE`), testing each
        match's namespace costs less."""
        sent, alone, share = self._alone_seen.get(kind, (-math.inf, False, 0.0))
        if time.monotonic() - sent >= HINT_SECONDS:
            return False, 0.0
        return alone, share

    def _saw(self, key: str, sent: float, value: str | None) -> None:
        with self._seen_lock:
            if sent >= self._seen.get(key, (-math.inf, None))[0]:
                self._seen[key] = (sent, value)

    def state_seen(self, key: str, since: float) -> tuple[bool, str | None]:
        """A sleep-state value (only ``clusters.version``) as a statement sent at or after
        ``since`` (``time.monotonic()``) read it, if one did.

        The document-frequency statement every recall with terms sends reads the
        clusters' version too, so cluster routing needs no read of its own: the value
        is as fresh as a read of its own at the start of the recall would be, on every
        host (another host's sleep is seen by the next statement that reads it).

        Returns:
            (whether such a read was made, the value it read).
        """
        with self._seen_lock:
            sent, value = self._seen.get(key, (-math.inf, None))
        return (sent >= since, value if sent >= since else None)
