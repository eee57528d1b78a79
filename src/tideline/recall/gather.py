"""Gathering a recall's candidates: vector and lexical hits of memories and turns.

Each table (memories, turns) is searched twice, by meaning (the vector index) and by
words (the full-text index, word and substring forms merged); a lexical hit that the
vector search did not return gets its cosine from its stored vector. Turns also get
their hubness (how generic they are), the query's aim without its names
(:mod:`tideline.recall.focus`), and the turns spoken in a date window the query names.
On a database server the reads that need nothing of each other run beside each other
(:mod:`tideline.recall.ahead`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from tideline.config import Config
from tideline.embed.base import Embedder
from tideline.models import Edge, LexicalQuery, MemoryRecord, Turn
from tideline.recall import focus, when
from tideline.recall.ahead import Later, later
from tideline.recall.candidates import Candidate, Candidates, in_time
from tideline.recall.graph import READ_EDGES
from tideline.recall.terms import Queries
from tideline.store.base import Store, VectorSearch

__all__ = ["Gatherer"]

#: Read the edges of up to this many first candidates beside their records (well under
#: the stores' id-list chunk, so none is cut off).
_EDGES_AHEAD = 400


class Gatherer:
    """Finds the candidates of one store's recalls."""

    def __init__(self, store: Store, embedder: Embedder, vectors: VectorSearch,
                 config: Config) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = vectors
        self.config = config

    def memories(
        self, qv: np.ndarray, lex: dict[int, int], scopes: Sequence[str],
        kind: str | None, since: float | None, until: float | None,
        cands: Candidates, found: Later[dict[int, float]],
        parallel: bool,
    ) -> tuple[dict[int, MemoryRecord], Later[list[Edge]] | None]:
        """The memory candidates, and on a server the graph edges of every one of them,
        read beside their records (the graph spread's first hop takes its seeds' edges
        from them instead of a read of its own).

        Args:
            qv: the query vector.
            lex: the lexical hits' ranks (:meth:`lexical`).
            scopes: the scopes searched.
            kind: only memories of this kind.
            since: only memories at or after this epoch.
            until: only memories at or before this epoch.
            cands: the candidates, added to.
            found: the vector search's hits (started ahead).
            parallel: whether reads may run beside each other.

        Returns:
            The live candidate memories by id, and their edges when read ahead.
        """
        vec = dict(found.get())
        ids = list(dict.fromkeys([*vec, *lex]))
        only_lexical = [m for m in lex if m not in vec]
        ahead = parallel and 0 < len(ids) <= _EDGES_AHEAD
        # A server that reads the three in one statement (recall_rows) saves two.
        together = getattr(self.store, "recall_rows", None) if ahead else None
        if together is not None:
            recs, edges, got = together(ids, READ_EDGES, only_lexical, scopes,
                                        self.embedder.dim)
            linked: Later[list[Edge]] | None = Later(lambda: edges, None)
            near = Later(lambda: got, None) if only_lexical else None
        else:
            linked = (later(functools.partial(self.store.edges_of, ids, READ_EDGES),
                            parallel=True) if ahead else None)
            near = (later(functools.partial(self.store.memory_vectors_in, only_lexical, scopes,
                                            self.embedder.dim), parallel=True)
                    if parallel and only_lexical else None)
            recs = self.store.get_memories(ids)
        live = {
            mid: r for mid, r in recs.items()
            if r.status != "superseded" and (kind is None or r.kind == kind)
            and in_time(r.event_time or r.recorded_at, since, until)
        }
        missing = [live[m] for m in lex if m in live and m not in vec]
        if missing and near is not None:  # read beside the records, in each one's scope
            got = near.get()
            for r in missing:
                if (v := got.get((r.scope, r.id))) is not None:
                    vec[r.id] = float(v @ qv)
        elif missing:
            for mid, v in self.store.memory_vectors(missing, self.embedder.dim).items():
                vec[mid] = float(v @ qv)
        for mid in live:
            cands[("memory", mid)] = Candidate(
                "memory", mid, "lexical" if mid in lex else "vector",
                similarity=vec.get(mid, 0.0), lexical_rank=lex.get(mid),
            )
        return live, linked

    def turns(
        self, qv: np.ndarray, lex: dict[int, int], scopes: Sequence[str], k: int,
        since: float | None, until: float | None, cands: Candidates,
        found: Later[dict[int, float]], aim: np.ndarray | None = None,
    ) -> dict[int, Turn]:
        """Turn candidates: vector and lexical hits, and with ``aim`` (the query without
        its names, :mod:`tideline.recall.focus`) the nearest turns to it, ranked by it.

        Args:
            qv: the query vector.
            lex: the lexical hits' ranks (:meth:`lexical`).
            scopes: the scopes searched.
            k: vector candidates per table (the aimed search's).
            since: only turns at or after this epoch.
            until: only turns at or before this epoch.
            cands: the candidates, added to.
            found: the vector search's hits (started ahead).
            aim: the focus vector, or None.

        Returns:
            The candidate turns by id.
        """
        vec = dict(found.get())
        aimed = self.nearest("t", scopes, aim, k) if aim is not None else {}
        turns = {
            tid: t for tid, t in self.store.get_turns([*vec, *aimed, *lex]).items()
            if in_time(t.timestamp or t.recorded_at, since, until)
        }
        # Hubness and the focus need every candidate's vector; else only lexical-only ones.
        wanted = (list(turns.values()) if self.config.recall.turn_hubness > 0 or aim is not None
                  else [turns[t] for t in lex if t in turns and t not in vec])
        vectors = self.store.turn_vectors(wanted, self.embedder.dim) if wanted else {}
        # ndarray.dot: the same float32 dot as "@" (one BLAS call, the same bits), without
        # the matmul dispatch, which cost more than the dot itself; ~100 per recall here.
        for tid, v in vectors.items():
            vec.setdefault(tid, float(v.dot(qv)))
        hubs = self.hubs(turns, vectors)
        aims = (focus.blend({t: vec[t] for t in vectors}, {t: float(v.dot(aim))
                                                            for t, v in vectors.items()})
                if aim is not None else {})
        for tid in turns:
            source = "lexical" if tid in lex else "vector"
            cands[("turn", tid)] = Candidate("turn", tid, source, similarity=vec.get(tid, 0.0),
                                             lexical_rank=lex.get(tid), hub=hubs.get(tid, 0.0),
                                             focus=aims.get(tid))
        return turns

    def window_turns(
        self, qv: np.ndarray, window: when.Window, scopes: Sequence[str], k: int,
        turns: dict[int, Turn], cands: Candidates,
    ) -> None:
        """Add the turns spoken in a date window the query names, nearest by meaning first.

        Their words may share nothing with the question ("She's here!! born 11 June"),
        and the date is what ties them to it.

        Args:
            qv: the query vector.
            window: the date window.
            scopes: the scopes searched.
            k: vector candidates per table (a quarter of them are added).
            turns: the candidate turns by id, added to.
            cands: the candidates, added to.
        """
        tune = self.config.recall
        end = window.end + tune.when_after_days * 86_400
        spoken = [t for t in self.store.turns_between(scopes, window.start, end,
                                                      tune.when_turns) if t.id not in turns]
        if not spoken:
            return
        vectors = self.store.turn_vectors(spoken, self.embedder.dim)
        near = sorted(((float(v @ qv), tid) for tid, v in vectors.items()), reverse=True)
        by_id = {t.id: t for t in spoken}
        chosen = {tid: by_id[tid] for _, tid in near[: max(1, k // 4)]}
        hubs = self.hubs(chosen, {tid: vectors[tid] for tid in chosen})
        for sim, tid in near[: max(1, k // 4)]:
            turns[tid] = by_id[tid]
            cands[("turn", tid)] = Candidate("turn", tid, "vector", similarity=sim,
                                             hub=hubs.get(tid, 0.0))

    def nearest(self, space: str, scopes: Sequence[str], qv: np.ndarray,
                k: int) -> dict[int, float]:
        """The ``k`` nearest items of ``space`` (``"m"``, ``"t"``) by cosine, none for a
        zero query (no embedder).

        Args:
            space: ``"m"`` (memories) or ``"t"`` (turns).
            scopes: the scopes searched.
            qv: the query vector.
            k: how many.

        Returns:
            Cosine by id.
        """
        return self.vectors.search(space, scopes, qv, k) if qv.any() else {}

    def hubs(self, turns: dict[int, Turn], vectors: dict[int, np.ndarray]) -> dict[int, float]:
        """How much nearer than usual each turn sits to its space's centroid.

        Generic turns ("haha true", "NADIA!!! 🎉") sit near every query in embedding space
        (hubness); their similarity is discounted by ``turn_hubness`` times this excess
        when ranking (abstention still sees the raw cosine).

        Args:
            turns: the turns by id.
            vectors: their vectors by id.

        Returns:
            The excess by id (none when ``turn_hubness`` is off or a scope is too small).
        """
        if self.config.recall.turn_hubness <= 0 or not vectors:
            return {}
        centroids: dict[str, tuple[np.ndarray, float] | None] = {}
        out: dict[int, float] = {}
        for tid, v in vectors.items():
            scope = turns[tid].scope
            if scope not in centroids:
                centroids[scope] = self.vectors.centroid("t", scope)
            found = centroids[scope]
            if found is not None:
                out[tid] = float(v.dot(found[0])) - found[1]
        return out

    @staticmethod
    def lexical_k(k: int) -> int:
        """Lexical candidates per table: fewer than vector ones, the keyword boost ranks them.

        Args:
            k: vector candidates per table.

        Returns:
            Lexical candidates per table.
        """
        return max(20, k // 2)

    def lexical(
        self, terms: Queries | None, table: str, scopes: Sequence[str], k: int,
        kind: str | None, since: float | None, until: float | None, parallel: bool,
    ) -> dict[int, int]:
        """Rank position (0 = best) of each lexical hit, word and substring indexes merged
        (the two searches run beside each other on a server; none for ``terms`` None).

        Args:
            terms: the word and substring queries, or None.
            table: ``"memories"`` or ``"turns"``.
            scopes: the scopes searched.
            k: hits per search.
            kind: only memories of this kind.
            since: only items at or after this epoch.
            until: only items at or before this epoch.
            parallel: whether the two searches may run beside each other.

        Returns:
            The best rank of each hit by id.
        """
        if terms is None:
            return {}
        def search(substrings: bool, q: LexicalQuery) -> list[tuple[int, float]]:
            if table == "memories":
                return self.store.search_memories(q, substrings=substrings, scopes=scopes,
                                                  limit=k, kind=kind, since=since, until=until)
            return self.store.search_turns(q, substrings=substrings, scopes=scopes,
                                           limit=k, since=since, until=until)

        inside = later(lambda: search(True, terms[1]), parallel=parallel)
        ranks: dict[int, int] = {}
        for rows in (search(False, terms[0]), inside.get()):
            for pos, (key, _bm25) in enumerate(rows):
                ranks[key] = min(ranks.get(key, pos), pos)
        return ranks
