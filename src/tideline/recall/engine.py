"""The recall path: lexical + vector candidates → fusion → graph spread → abstain?

The engine runs the stages in order; each lives in its own module: gathering the
candidates (:mod:`tideline.recall.gather`), scoring one candidate
(:mod:`tideline.recall.scoring`), the graph spread and cluster routing
(:mod:`tideline.recall.graph`), the turn rules of a conversation
(:mod:`tideline.recall.turn_rules`) and the packet's items
(:mod:`tideline.recall.packet`).

The packet abstains when nothing is trustworthy: the best cosine is under the
embedder's abstention floor and no candidate covers enough of the query's
keywords. Graph spread then adds neighbours of the strongest hits over typed
edges (``related``, ``co_recall``, ``contradicts``), hop by hop.

When the embedder is unavailable (or the store has none) recall degrades instead of
failing: the vector side and cluster routing are skipped, every similarity is 0,
the full-text side, the graph and date windows answer, and the packet carries
``degraded="lexical"``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tideline import text as lexical
from tideline.config import Config
from tideline.embed.base import Embedder
from tideline.embed.guard import EmbedGuard
from tideline.models import Edge, MemoryRecord, RecallPacket, Turn, iso
from tideline.recall import focus, graph, morph, scoring, sentences, trust, when
from tideline.recall import updates as corrections
from tideline.recall.ahead import Later, beside, later
from tideline.recall.candidates import Candidates
from tideline.recall.gather import Gatherer
from tideline.recall.packet import item as packet_item
from tideline.recall.people import SpeakerDirectory
from tideline.recall.routing import ClusterRouter
from tideline.recall.terms import Queries, QueryTerms
from tideline.recall.turn_rules import TurnRules
from tideline.store.base import Store, VectorSearch
from tideline.store.rows import memory_index_text, turn_index_text

__all__ = ["RecallEngine"]


class RecallEngine:
    """Runs recall for one store."""

    def __init__(
        self, store: Store, embedder: Embedder, vectors: VectorSearch, config: Config,
        *, guard: EmbedGuard | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.guard = guard or EmbedGuard(embedder)
        self.vectors = vectors
        self.config = config
        self._router = ClusterRouter(store, embedder.dim, config.sleep)
        self._people = SpeakerDirectory(store)
        self._names = focus.NameVectors(self.guard)
        self._terms = QueryTerms(store, config)
        self._gather = Gatherer(store, embedder, vectors, config)
        self._turns = TurnRules(store, embedder.dim, config, self._people)

    def recall(
        self,
        query: str,
        *,
        scopes: Sequence[str],
        scope: str,
        limit: int,
        kind: str | None = None,
        since: float | None = None,
        until: float | None = None,
        include_turns: bool = True,
        include_memories: bool = True,
        abstain: bool = True,
        query_vector: np.ndarray | None = None,
        on_hits: Callable[[RecallPacket], None] | None = None,
    ) -> RecallPacket:
        """Recall memories (and raw turns) for ``query`` in ``scopes``.

        Args:
            query: validated query text.
            scopes: scopes to search (the current project and ``global``).
            scope: the current project, reported back in the packet.
            limit: maximum items.
            kind: only memories of this kind (turns are left out when set).
            since: only items whose event (or record) time is at or after this epoch.
            until: only items at or before this epoch.
            include_turns: also search raw conversation turns.
            include_memories: search memories.
            abstain: return no items when nothing is trustworthy.
            query_vector: a precomputed query embedding (benchmarks).
            on_hits: called with the packet before it is returned (journaling).

        Returns:
            The packet, best first.
        """
        t0 = time.perf_counter()
        tune = self.config.recall
        # One and a half times the limit: three times cost a long history (limit 50 on
        # ~500 long turns) a third more scoring, and twice a quarter more, for no change
        # in its ranking to rank 50 (issue 29, LongMemEval dev, 1.2x to 3x measured).
        k = max(tune.candidates, limit + limit // 2)
        terms = lexical.query_terms(query)
        window = when.find_window(query) if since is None and until is None else None
        spaces = [s for s, wanted in (("m", include_memories),
                                      ("t", include_turns and kind is None)) if wanted]
        # The reads that need nothing of each other start now, beside the rest on a
        # database server (see tideline.recall.ahead).
        parallel = self.store.parallel_reads()
        routed = (self._router.ahead(parallel)
                  if include_memories and self._router.wanted() else None)
        side = functools.partial(self._full_text, query, terms, spaces, scopes, k, kind,
                                 since, until, parallel)
        # The full-text side needs no vector: it runs in a worker while this thread
        # embeds the query (the embedder computes outside the interpreter's lock), unless
        # another thread could not read now (this one holds a write transaction).
        alone = getattr(self.store, "reads_beside", None)
        apart = query_vector is None and (parallel or (alone is not None and alone()))
        text_side = beside(side) if apart else None
        e0 = time.perf_counter()
        qv = self.guard.query(query) if query_vector is None else query_vector
        embed_ms = (time.perf_counter() - e0) * 1000 if query_vector is None else 0.0
        found = text_side.get() if text_side is not None else side()
        if found.empty_memories:
            routed = None
        expressions, lex = found.queries, found.lex
        keyword, named, early = found.keyword, found.named, found.early
        degraded = qv is None
        if qv is None:  # no vector side: a zero query makes every similarity 0
            qv = np.zeros(self.embedder.dim, dtype=np.float32)
            routed = None
        vec: dict[str, Later[dict[int, float]]] = {
            space: later(functools.partial(self._gather.nearest, space, scopes, qv, k),
                         parallel=parallel) if expressions[space] is not None
            else Later(dict, None) for space in spaces}
        now = time.time()

        cands: Candidates = {}
        memories: dict[int, MemoryRecord] = {}
        turns: dict[int, Turn] = {}
        linked: Later[list[Edge]] | None = None
        covered: set[int] = set()
        if include_memories:
            memories, linked = self._gather.memories(qv, lex["m"], scopes, kind, since, until,
                                                     cands, vec["m"], parallel)
            covered = set(memories)  # before the graph spread adds the memories it reaches
        if include_turns and kind is None:
            names = (self._names.of(named)
                     if self._turns.singles_out(named, scopes) and not degraded else None)
            aim = focus.focus_vector(qv, names or [], tune.name_focus)
            turns = self._gather.turns(qv, lex["t"], scopes, k, since, until, cands, vec["t"],
                                       aim)
            if window is not None:
                self._gather.window_turns(qv, window, scopes, k, turns, cands)
            if tune.sentence_share > 0 and not degraded:
                sentences.rank(self.store, cands.values(), turns, qv, aim,
                               tune.sentence_share, self.embedder.dim)

        profile = self.embedder.profile
        dated: set[tuple[str, int]] = set()
        dated_trust = False
        # Sessions where someone talks to an assistant: there a question is a request
        # that tells what its asker wants, not small talk (see _asked).
        assisted = frozenset((t.scope, t.session) for t in turns.values()
                             if t.role == "assistant")
        for cand in cands.values():
            if cand.type == "memory":
                cand.keyword = keyword["m"](memory_index_text(memories[cand.key]))
            elif (seen := early.get(cand.key)) is not None:
                cand.keyword = seen
            else:
                t = turns[cand.key]
                cand.keyword = keyword["t"](turn_index_text(t.speaker, t.text))
            cand.score = scoring.relevance(cand, profile.floor, tune)
            if cand.type == "memory":
                cand.score *= scoring.salience(memories[cand.key], now, self.config)
            else:
                cand.asked = self._turns.asked(turns[cand.key], assisted)
                cand.score *= cand.asked
            if window is not None and scoring.in_window(cand, window, memories, turns,
                                                         tune.when_after_days):
                cand.score += tune.when_boost
                dated.add((cand.type, cand.key))
                # The named date is evidence of its own: an item from then that is
                # related to the query and holds some of its words is trusted.
                dated_trust = dated_trust or (cand.similarity >= profile.floor
                                              and cand.keyword >= tune.when_trust > 0)

        if include_memories:
            graph.spread(self.store, self.config, profile.floor, self.embedder.dim, qv, cands,
                         memories, scopes, kind, since, until, now, linked)

        best_sim = max((c.similarity for c in cands.values()), default=0.0)
        best_kw = max((c.keyword for c in cands.values() if c.lexical_rank is not None),
                      default=0.0)
        margin = scoring.margin_z([c.similarity for c in cands.values() if c.source == "vector"
                            or c.similarity > 0])
        vouch = trust.vouching_similarity(
            ((c.similarity, c.hub, turns[c.key].text if c.type == "turn" else None)
             for c in cands.values()),
            tune.turn_hubness if tune.trust_hubness else 0.0, tune.trust_question_share)
        trusted = (vouch >= profile.abstain or margin >= profile.margin
                   or (bool(terms) and best_kw >= tune.keyword_trust) or dated_trust)
        if routed is not None:
            graph.route(self._router, self.config, profile.floor, qv, cands, memories, scopes,
                        kind, since, until, now, routed)
        if turns:
            lifted: dict[int, int] = {}
            around = self._turns.neighbours(qv, cands, turns, scopes, since, until, assisted,
                                            lifted)
            self._turns.favour_named(named, cands, turns, scopes)
            self._turns.discount_listener(cands, turns)
            self._turns.lift_answers(cands, turns, around)
            if tune.keep_sources:
                self._turns.keep_sources(cands, lifted)
            self._turns.discount_roles(query, cands, turns)
            self._turns.diversify(query, cands, turns)
            self._turns.later_first(cands, turns)
        ranked = sorted(cands.values(), key=lambda c: -c.score)
        ranked = [c for c in ranked if (c.similarity >= profile.floor or c.keyword > 0
                                        or c.source == "graph" or (c.type, c.key) in dated)
                  and scoring.confidence(c.score) >= scoring.SHOWN_CONFIDENCE]
        abstained = not trusted
        chosen = [] if (abstained and abstain) else ranked[:limit]
        items = tuple(packet_item(c, memories, turns, now, self.config) for c in chosen)
        known = (covered, linked.get()) if linked is not None else None
        # The newer statement of two first.
        items = corrections.apply(items, self.store, known=known)
        t2 = time.perf_counter()
        packet = RecallPacket(
            query=query, scope=scope, items=items, abstained=abstained,
            # What the engine adds to the embedding (its full-text side ran beside it).
            latency_ms=(t2 - t0) * 1000, embed_ms=embed_ms, engine_ms=(t2 - t0) * 1000 - embed_ms,
            best_similarity=best_sim, considered=len(cands),
            signals={"margin_z": round(margin, 4), "best_keyword": round(best_kw, 4)},
            filters={"kind": kind, "since": iso(since), "until": iso(until),
                     "date_window": [iso(window.start), iso(window.end)] if window else None,
                     "scopes": list(scopes)},
            degraded="lexical" if degraded else None,
        )
        if on_hits is not None:
            on_hits(packet)
        return packet

    def _full_text(
        self, query: str, terms: list[str], spaces: list[str], scopes: Sequence[str], k: int,
        kind: str | None, since: float | None, until: float | None, parallel: bool,
    ) -> _FullText:
        """The full-text side of a recall: the terms' statistics per space, the word and
        substring searches, the people the query names, and in process the lexical turn
        hits' rows, vectors and text features (none of it needs the query vector)."""
        weights: dict[str, list[float]] = {}
        forms: dict[str, dict[str, tuple[str, ...]]] = {}
        expressions: dict[str, Queries | None] = {}
        empty_memories = False
        for space in spaces:
            seen = self._terms.analyse(space, query, terms)
            # An empty table (no memories in a store of imported turns) is not searched:
            # neither its full text nor its vectors, nor the clusters of its rows.
            weights[space], forms[space] = seen.weights, seen.forms
            expressions[space] = None if seen.empty else seen.queries
            empty_memories = empty_memories or (seen.empty and space == "m")
        lex = {space: self._gather.lexical(
                   expressions[space], "memories" if space == "m" else "turns", scopes,
                   self._gather.lexical_k(k), kind if space == "m" else None, since, until,
                   parallel)
               for space in spaces}
        keyword = {space: morph.Coverage(terms, weights[space] if terms else None, forms[space])
                   for space in spaces}
        named: set[str] = set()
        early: dict[int, float] = {}
        if "t" in spaces:
            named = self._turns.named(query, scopes)
            if not parallel:
                # In process, the lexical hits' rows and vectors (both kept by the store)
                # and what is read of their texts (the keywords here, the question and
                # listener shares, kept by text) are ready before the vector side; on a
                # server they would cost statements of their own, which the candidates'
                # reads of every row make anyway.
                ahead = self.store.get_turns(list(lex["t"]))
                self.store.turn_vectors(list(ahead.values()), self.embedder.dim)
                self._turns.prepare(ahead.values())
                early = {tid: keyword["t"](turn_index_text(t.speaker, t.text))
                         for tid, t in ahead.items()}
        return _FullText(weights, forms, expressions, lex, keyword, named, early,
                         empty_memories)



@dataclass(frozen=True)
class _FullText:
    """What the full-text side of a recall found (:meth:`RecallEngine._full_text`)."""

    weights: dict[str, list[float]]
    forms: dict[str, dict[str, tuple[str, ...]]]
    queries: dict[str, Queries | None]
    lex: dict[str, dict[int, int]]  # the lexical hits' ranks per space
    keyword: dict[str, morph.Coverage]
    named: set[str]
    early: dict[int, float]  # the lexical turn hits' keyword coverage (in process)
    empty_memories: bool
