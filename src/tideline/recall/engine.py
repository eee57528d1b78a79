"""The recall path: lexical + vector candidates → fusion → graph spread → abstain?

Scoring of one candidate (memory or raw turn)::

    semantic  = clip((cos − floor) / (1 − floor), 0, 1)
    keyword   = share of the query's keywords found verbatim in the text
    lexical   = 1 / (1 + bm25 rank)                     (0 when not a lexical hit)
    relevance = semantic + keyword_boost · keyword + lexical_weight · lexical
    score     = relevance · salience,  salience from weight and retention (memories)

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
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from tideline import text as lexical
from tideline.config import Config
from tideline.dynamics import retention
from tideline.embed.base import Embedder
from tideline.embed.guard import EmbedGuard
from tideline.models import Edge, LexicalQuery, MemoryRecord, RecallItem, RecallPacket, Turn, iso
from tideline.recall import (
    across,
    answers,
    asking,
    diversity,
    focus,
    lifts,
    listener,
    morph,
    restated,
    roles,
    sentences,
    trust,
    when,
)
from tideline.recall import updates as corrections
from tideline.recall.ahead import Later, later
from tideline.recall.people import SpeakerDirectory, named_people
from tideline.recall.routing import ClusterRouter
from tideline.recall.terms import Queries, QueryTerms
from tideline.store.base import Store, VectorSearch
from tideline.store.rows import memory_index_text, turn_index_text

__all__ = ["Candidate", "RecallEngine"]

GRAPH_EDGES = ("related", "co_recall", "contradicts")
#: What the first candidates' edge read brings: the graph's edges and the corrections'.
READ_EDGES = (*GRAPH_EDGES, corrections.EDGE)
#: Read the edges of up to this many first candidates beside their records (well under
#: the stores' id-list chunk, so none is cut off).
_EDGES_AHEAD = 400


@dataclass
class Candidate:
    """A memory or turn under consideration, with the evidence gathered for it."""

    type: Literal["memory", "turn"]
    key: int
    source: str
    similarity: float = 0.0
    lexical_rank: int | None = None
    keyword: float = 0.0
    score: float = 0.0
    hub: float = 0.0
    asked: float = 1.0  # the question discount's factor (1 for a turn that only tells)
    focus: float | None = None  # cosine to the query without its names (recall/focus.py)


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
        qv = self.guard.query(query) if query_vector is None else query_vector
        degraded = qv is None
        if qv is None:  # no vector side: a zero query makes every similarity 0
            qv = np.zeros(self.embedder.dim, dtype=np.float32)
        t1 = time.perf_counter()
        tune = self.config.recall
        # One and a half times the limit: three times cost a long history (limit 50 on
        # ~500 long turns) a third more scoring, and twice a quarter more, for no change
        # in its ranking to rank 50 (issue 29, LongMemEval dev, 1.2x to 3x measured).
        k = max(tune.candidates, limit + limit // 2)
        terms = lexical.query_terms(query)
        window = when.find_window(query) if since is None and until is None else None
        weights: dict[str, list[float]] = {}
        expressions: dict[str, Queries | None] = {}
        spaces = [s for s, wanted in (("m", include_memories),
                                      ("t", include_turns and kind is None)) if wanted]
        # The reads that need nothing of each other start now, beside the rest on a
        # database server (see tideline.recall.ahead).
        parallel = self.store.parallel_reads()
        vec = {space: later(functools.partial(self._nearest, space, scopes, qv, k),
                            parallel=parallel) for space in spaces}
        routed = (self._router.ahead(parallel)
                  if include_memories and not degraded and self._router.wanted() else None)
        forms: dict[str, dict[str, tuple[str, ...]]] = {}
        for space in spaces:
            seen = self._terms.analyse(space, query, terms)
            # An empty table (no memories in a store of imported turns) is not searched:
            # neither its full text nor its vectors, nor the clusters of its rows.
            weights[space], forms[space] = seen.weights, seen.forms
            expressions[space] = None if seen.empty else seen.queries
            if seen.empty:
                vec[space] = Later(dict, None)
                if space == "m":
                    routed = None
        now = time.time()

        cands: dict[tuple[str, int], Candidate] = {}
        memories: dict[int, MemoryRecord] = {}
        turns: dict[int, Turn] = {}
        linked: Later[list[Edge]] | None = None
        covered: set[int] = set()
        named: set[str] = set()
        if include_memories:
            memories, linked = self._memory_candidates(qv, expressions["m"], scopes, k, kind, since,
                                               until, cands, vec["m"], parallel)
            covered = set(memories)  # before the graph spread adds the memories it reaches
        if include_turns and kind is None:
            named = self._named(query, scopes)
            names = (self._names.of(named) if self._singles_out(named, scopes) and not degraded
                     else None)
            aim = focus.focus_vector(qv, names or [], tune.name_focus)
            turns = self._turn_candidates(qv, expressions["t"], scopes, k, since, until, cands,
                                          vec["t"], parallel, aim)
            if window is not None:
                self._turns_of_window(qv, window, scopes, k, turns, cands)
            if tune.sentence_share > 0 and not degraded:
                sentences.rank(self.store, cands.values(), turns, qv, aim,
                               tune.sentence_share, self.embedder.dim)

        profile = self.embedder.profile
        dated: set[tuple[str, int]] = set()
        dated_trust = False
        keyword = {space: morph.Coverage(terms, weights[space] if terms else None, forms[space])
                   for space in spaces}
        # Sessions where someone talks to an assistant: there a question is a request
        # that tells what its asker wants, not small talk (see _asked).
        assisted = frozenset((t.scope, t.session) for t in turns.values()
                             if t.role == "assistant")
        for cand in cands.values():
            if cand.type == "memory":
                text = memory_index_text(memories[cand.key])
            else:
                t = turns[cand.key]
                text = turn_index_text(t.speaker, t.text)
            cand.keyword = keyword[cand.type[0]](text)
            cand.score = self._relevance(cand, profile.floor)
            if cand.type == "memory":
                cand.score *= self._salience(memories[cand.key], now)
            else:
                cand.asked = self._asked(turns[cand.key], assisted)
                cand.score *= cand.asked
            if window is not None and self._in_window(cand, window, memories, turns):
                cand.score += tune.when_boost
                dated.add((cand.type, cand.key))
                # The named date is evidence of its own: an item from then that is
                # related to the query and holds some of its words is trusted.
                dated_trust = dated_trust or (cand.similarity >= profile.floor
                                              and cand.keyword >= tune.when_trust > 0)

        if include_memories:
            self._spread(qv, cands, memories, scopes, kind, since, until, now, linked)

        best_sim = max((c.similarity for c in cands.values()), default=0.0)
        best_kw = max((c.keyword for c in cands.values() if c.lexical_rank is not None),
                      default=0.0)
        margin = _margin_z([c.similarity for c in cands.values() if c.source == "vector"
                            or c.similarity > 0])
        vouch = trust.vouching_similarity(
            ((c.similarity, c.hub, turns[c.key].text if c.type == "turn" else None)
             for c in cands.values()),
            tune.turn_hubness if tune.trust_hubness else 0.0, tune.trust_question_share)
        trusted = (vouch >= profile.abstain or margin >= profile.margin
                   or (bool(terms) and best_kw >= tune.keyword_trust) or dated_trust)
        if routed is not None:
            self._route(qv, cands, memories, scopes, kind, since, until, now, routed)
        if turns:
            lifted: dict[int, int] = {}
            around = self._turn_neighbours(qv, cands, turns, scopes, since, until, assisted,
                                           lifted)
            self._favour_named(named, cands, turns, scopes)
            self._discount_listener(cands, turns)
            self._lift_answers(cands, turns, around)
            if tune.keep_sources:
                self._keep_sources(cands, lifted)
            self._discount_roles(query, cands, turns)
            self._diversify(query, cands, turns)
            self._later_first(cands, turns)
        ranked = sorted(cands.values(), key=lambda c: -c.score)
        ranked = [c for c in ranked if (c.similarity >= profile.floor or c.keyword > 0
                                        or c.source == "graph" or (c.type, c.key) in dated)
                  and _confidence(c.score) >= SHOWN_CONFIDENCE]
        abstained = not trusted
        chosen = [] if (abstained and abstain) else ranked[:limit]
        items = tuple(self._item(c, memories, turns, now) for c in chosen)
        known = (covered, linked.get()) if linked is not None else None
        # The newer statement of two first.
        items = corrections.apply(items, self.store, known=known)
        t2 = time.perf_counter()
        packet = RecallPacket(
            query=query, scope=scope, items=items, abstained=abstained,
            latency_ms=(t2 - t0) * 1000, embed_ms=(t1 - t0) * 1000, engine_ms=(t2 - t1) * 1000,
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

    # -- candidates -----------------------------------------------------------------------

    def _memory_candidates(
        self, qv: np.ndarray, terms: Queries | None, scopes: Sequence[str], k: int,
        kind: str | None, since: float | None, until: float | None,
        cands: dict[tuple[str, int], Candidate], found: Later[dict[int, float]],
        parallel: bool,
    ) -> tuple[dict[int, MemoryRecord], Later[list[Edge]] | None]:
        """The memory candidates, and on a server the graph edges of every one of them,
        read beside their records (the graph spread's first hop takes its seeds' edges
        from them instead of a read of its own)."""
        lex = self._lexical(terms, "memories", scopes, self._lexical_k(k), kind, since, until,
                            parallel)
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
            and _in_time(r.event_time or r.recorded_at, since, until)
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

    def _turn_candidates(
        self, qv: np.ndarray, terms: Queries | None, scopes: Sequence[str], k: int,
        since: float | None, until: float | None, cands: dict[tuple[str, int], Candidate],
        found: Later[dict[int, float]], parallel: bool, aim: np.ndarray | None = None,
    ) -> dict[int, Turn]:
        """Turn candidates: vector and lexical hits, and with ``aim`` (the query without
        its names, :mod:`tideline.recall.focus`) the nearest turns to it, ranked by it."""
        lex = self._lexical(terms, "turns", scopes, self._lexical_k(k), None, since, until,
                            parallel)
        vec = dict(found.get())
        aimed = self._nearest("t", scopes, aim, k) if aim is not None else {}
        turns = {
            tid: t for tid, t in self.store.get_turns([*vec, *aimed, *lex]).items()
            if _in_time(t.timestamp or t.recorded_at, since, until)
        }
        # Hubness and the focus need every candidate's vector; else only lexical-only ones.
        wanted = (list(turns.values()) if self.config.recall.turn_hubness > 0 or aim is not None
                  else [turns[t] for t in lex if t in turns and t not in vec])
        vectors = self.store.turn_vectors(wanted, self.embedder.dim) if wanted else {}
        # ndarray.dot: the same float32 dot as "@" (one BLAS call, the same bits), without
        # the matmul dispatch, which cost more than the dot itself; ~100 per recall here.
        for tid, v in vectors.items():
            vec.setdefault(tid, float(v.dot(qv)))
        hubs = self._hubs(turns, vectors)
        aims = (focus.blend({t: vec[t] for t in vectors}, {t: float(v.dot(aim))
                                                            for t, v in vectors.items()})
                if aim is not None else {})
        for tid in turns:
            source = "lexical" if tid in lex else "vector"
            cands[("turn", tid)] = Candidate("turn", tid, source, similarity=vec.get(tid, 0.0),
                                             lexical_rank=lex.get(tid), hub=hubs.get(tid, 0.0),
                                             focus=aims.get(tid))
        return turns

    def _nearest(self, space: str, scopes: Sequence[str], qv: np.ndarray,
                 k: int) -> dict[int, float]:
        return self.vectors.search(space, scopes, qv, k) if qv.any() else {}

    def _hubs(self, turns: dict[int, Turn], vectors: dict[int, np.ndarray]) -> dict[int, float]:
        """How much nearer than usual each turn sits to its space's centroid.

        Generic turns ("haha true", "NADIA!!! 🎉") sit near every query in embedding space
        (hubness); their similarity is discounted by ``turn_hubness`` times this excess
        when ranking (abstention still sees the raw cosine).
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

    def _turn_neighbours(
        self, qv: np.ndarray, cands: dict[tuple[str, int], Candidate], turns: dict[int, Turn],
        scopes: Sequence[str], since: float | None, until: float | None,
        assisted: frozenset[tuple[str, str]] = frozenset(),
        lifted: dict[int, int] | None = None,
    ) -> list[Turn]:
        """Bring in the turns just before and after the best turn hits (after the trust check).

        In a conversation the answer often sits next to the turn that matched: the reply
        to a question, the sentence after "guess what". A neighbour scores a share
        (``neighbour_factor``) of its hit's score, unless it already scores more itself;
        it comes in as a ``graph`` item (an edge of the session's order). The share is
        of the hit's score before the question discount (the reply answers what the
        question asked), capped at the hit's own score, times the neighbour's own
        question discount: a neighbour that only asks back ("What got you into it?")
        holds no more answer than any other question turn. The best ``across_hits``
        hits are read two places wide in the same statement, and carry across the other
        speaker's question (:mod:`tideline.recall.across`). Returns the turns read around the hits.
        """
        tune = self.config.recall
        # The first few hits are also read two places wide, for the carry across a
        # question (recall/across.py), in the same statement.
        wide = tune.across_hits if tune.across_question > 0 else 0
        best = sorted((c for c in cands.values() if c.type == "turn"),
                      key=lambda c: -c.score)[:max(tune.neighbour_hits, wide)]
        if not best:
            return []
        hits = [turns[c.key] for c in best]
        radii = [2 if i < wide else 1 for i in range(len(hits))]
        around = [t for t in self.store.neighbour_turns(hits, radius=radii) if t.scope in scopes
                  and _in_time(t.timestamp or t.recorded_at, since, until)]
        new = [t for t in around if t.id not in turns]
        sims = self.store.turn_vectors(new, self.embedder.dim) if new else {}
        by_place = {(t.scope, t.session, t.turn_index): t for t in around}
        strong = [(hit, c.score) for c, hit in zip(best[:wide], hits, strict=False)]
        for cand, hit in zip(best[:tune.neighbour_hits], hits, strict=False):
            score = min(cand.score / max(cand.asked, 1e-6) * tune.neighbour_factor, cand.score)
            for offset in (-1, 1):
                n = by_place.get((hit.scope, hit.session, hit.turn_index + offset))
                if n is not None and self._lift_turn(qv, cands, turns, sims, n, score,
                                                     assisted) and lifted is not None:
                    lifted[n.id] = hit.id
        carried = across.carried_scores(strong, by_place, tune.across_question)
        if carried:
            by_id = {t.id: t for t in by_place.values()}
            for tid, value in carried.items():
                t = by_id[tid]
                if self._lift_turn(qv, cands, turns, sims, t, value, assisted) and (
                        lifted is not None):
                    # The hit two places away in the session, the strongest if two.
                    lifted[tid] = max(((h, v) for h, v in strong if h.scope == t.scope
                                       and h.session == t.session
                                       and abs(h.turn_index - t.turn_index) == 2),
                                      key=lambda hv: hv[1])[0].id
        return around

    def _lift_turn(
        self, qv: np.ndarray, cands: dict[tuple[str, int], Candidate], turns: dict[int, Turn],
        sims: dict[int, np.ndarray], t: Turn, score: float,
        assisted: frozenset[tuple[str, str]] = frozenset(),
    ) -> bool:
        """Raise turn ``t`` to ``score`` times its own question discount (the neighbour
        rule, the carry across a question); a turn not yet a candidate comes in as a
        ``graph`` item, its similarity read from ``sims``. Returns whether the lift set
        its score."""
        known = cands.get(("turn", t.id))
        if known is None:
            asked = self._asked(t, assisted)
            turns[t.id] = t
            vec = sims.get(t.id)
            cands[("turn", t.id)] = Candidate(
                "turn", t.id, "graph", similarity=float(vec @ qv) if vec is not None else 0.0,
                score=score * asked, asked=asked)
            return True
        if known.score < score * known.asked:
            known.score = score * known.asked
            return True
        return False

    def _asked(self, t: Turn, assisted: frozenset[tuple[str, str]] = frozenset()) -> float:
        """The question discount's factor of a turn (1 for a turn that only tells).

        A user's question to an assistant (a turn of role ``user`` in a session where
        an assistant speaks, ``assisted``) is 1 as well when ``request_tells`` is set:
        "Can you suggest protein sources that go well with quinoa?" is a request that
        tells what its asker eats, where "What got you into running?" between two
        people only asks back.
        """
        text = t.text
        if (self.config.recall.request_tells and t.role == "user"
                and (t.scope, t.session) in assisted):
            return 1.0
        share = self.config.recall.question_discount
        return 1.0 - share * asking.question_share(text) if share > 0 else 1.0

    def _discount_listener(self, cands: dict[tuple[str, int], Candidate],
                           turns: dict[int, Turn]) -> None:
        """Lower each turn's final score by ``listener_discount`` times the share of its
        person pronouns that speak to the listener (:mod:`tideline.recall.listener`).

        Last, after the neighbours and the speaker boost: "Wow, your group sounds
        awesome!" holds no fact of its speaker whichever way it came in, while the
        reply it pulled in as a neighbour keeps the share of its undiscounted score.
        """
        share = self.config.recall.listener_discount
        if share <= 0:
            return
        for cand in cands.values():
            if cand.type == "turn":
                cand.score *= 1.0 - share * listener.listener_share(turns[cand.key].text)

    def _lift_answers(self, cands: dict[tuple[str, int], Candidate], turns: dict[int, Turn],
                      around: list[Turn]) -> None:
        """Lift each turn that answers the other speaker's question by ``answer_lift``
        times that question's share (:mod:`tideline.recall.answers`); last, like the
        listener discount, and only where the turn before was read anyway."""
        factors = answers.answer_factors(turns.values(), [*turns.values(), *around],
                                         self.config.recall.answer_lift)
        for tid, factor in factors.items():
            if (cand := cands.get(("turn", tid))) is not None:
                cand.score *= factor

    def _discount_roles(self, query: str, cands: dict[tuple[str, int], Candidate],
                        turns: dict[int, Turn]) -> None:
        """Lower the assistant's turns by ``assistant_discount`` for a question of the
        asker's own (:mod:`tideline.recall.roles`); last, so a lifted neighbour too."""
        share = self.config.recall.assistant_discount
        if share <= 0 or not roles.asks_of_self(query):
            return
        for cand in cands.values():
            if cand.type == "turn" and turns[cand.key].role == "assistant":
                cand.score *= 1.0 - share

    def _diversify(self, query: str, cands: dict[tuple[str, int], Candidate],
                   turns: dict[int, Turn]) -> None:
        """For a question across time, lower each turn by ``session_decay`` per better
        turn of its session (:mod:`tideline.recall.diversity`); last of all."""
        decay = self.config.recall.session_decay
        if decay >= 1 or not diversity.asks_across(query):
            return
        ranked = sorted((c for c in cands.values() if c.type == "turn"), key=lambda c: -c.score)
        factors = diversity.session_factors(
            [(turns[c.key].scope, turns[c.key].session) for c in ranked], decay)
        for cand, factor in zip(ranked, factors, strict=True):
            cand.score *= factor

    def _later_first(self, cands: dict[tuple[str, int], Candidate],
                     turns: dict[int, Turn]) -> None:
        """Of two turns telling the same thing, the later one first
        (:mod:`tideline.recall.restated`); last of all."""
        tune = self.config.recall
        if tune.update_ratio <= 0:
            return
        ranked = sorted((c for c in cands.values() if c.type == "turn"), key=lambda c: -c.score)
        told = [restated.Told(c.key, c.score, (turns[c.key].scope,
                                                turns[c.key].speaker or turns[c.key].role),
                              turns[c.key].session,
                              turns[c.key].timestamp or turns[c.key].recorded_at, c.keyword)
                for c in ranked[:10]]
        for key, score in restated.later_first(told, ratio=tune.update_ratio,
                                               coverage=tune.update_coverage).items():
            cands[("turn", key)].score = score

    @staticmethod
    def _keep_sources(cands: dict[tuple[str, int], Candidate], lifted: dict[int, int]) -> None:
        """No lifted neighbour above the hit it came from (:mod:`tideline.recall.lifts`)."""
        scores = {tid: c.score for (typ, tid), c in cands.items() if typ == "turn"
                  and (tid in lifted or tid in lifted.values())}
        for tid in lifts.keep_sources(scores, lifted):
            cands[("turn", tid)].score = scores[tid]

    def _named(self, query: str, scopes: Sequence[str]) -> set[str]:
        """The known people (speakers of ``scopes``, ``known_persons``) the query names."""
        speakers = self._people.people(scopes)
        return named_people(query, speakers | set(self.config.known_persons))

    def _singles_out(self, named: set[str], scopes: Sequence[str]) -> bool:
        """Whether the query names some of the scopes' speakers but not all of them."""
        return bool(named) and bool(self._people.people(scopes) - named)

    def _favour_named(
        self, named: set[str], cands: dict[tuple[str, int], Candidate], turns: dict[int, Turn],
        scopes: Sequence[str],
    ) -> None:
        """Add ``speaker_boost`` to the turns of the people the query names.

        Only when it names some but not all of the scopes' speakers: "What does
        Melanie do to destress?" is answered by Melanie's turns; "What do Jon and Gina
        have in common?" favours no one.
        """
        boost = self.config.recall.speaker_boost
        if boost <= 0:
            return
        if not self._singles_out(named, scopes):
            return
        for cand in cands.values():
            if cand.type == "turn" and turns[cand.key].speaker in named:
                cand.score += boost

    def _turns_of_window(
        self, qv: np.ndarray, window: when.Window, scopes: Sequence[str], k: int,
        turns: dict[int, Turn], cands: dict[tuple[str, int], Candidate],
    ) -> None:
        """Add the turns spoken in a date window the query names, nearest by meaning first.

        Their words may share nothing with the question ("She's here!! born 11 June"),
        and the date is what ties them to it.
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
        hubs = self._hubs(chosen, {tid: vectors[tid] for tid in chosen})
        for sim, tid in near[: max(1, k // 4)]:
            turns[tid] = by_id[tid]
            cands[("turn", tid)] = Candidate("turn", tid, "vector", similarity=sim,
                                             hub=hubs.get(tid, 0.0))

    def _in_window(
        self, cand: Candidate, window: when.Window, memories: dict[int, MemoryRecord],
        turns: dict[int, Turn],
    ) -> bool:
        """Whether an item dates from the window (a turn, or an undated memory, up to
        ``when_after_days`` after it: what is told of a day is often told later)."""
        after = self.config.recall.when_after_days * 86_400
        if cand.type == "memory":
            rec = memories[cand.key]
            if rec.event_time is not None:
                return bool(window.start <= rec.event_time < window.end)
            return bool(window.start <= rec.recorded_at < window.end + after)
        t = turns[cand.key]
        ts = t.timestamp if t.timestamp is not None else t.recorded_at
        return bool(window.start <= ts < window.end + after)

    def _lexical_k(self, k: int) -> int:
        """Lexical candidates per table: fewer than vector ones, the keyword boost ranks them."""
        return max(20, k // 2)

    def _lexical(
        self, terms: Queries | None, table: str, scopes: Sequence[str], k: int,
        kind: str | None, since: float | None, until: float | None, parallel: bool,
    ) -> dict[int, int]:
        """Rank position (0 = best) of each lexical hit, word and substring indexes merged
        (the two searches run beside each other on a server; none for ``terms`` None)."""
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

    # -- scoring --------------------------------------------------------------------------

    def _relevance(self, cand: Candidate, floor: float) -> float:
        tune = self.config.recall
        sim = cand.similarity if cand.focus is None else cand.focus
        sim -= tune.turn_hubness * cand.hub
        semantic = min(1.0, max(0.0, (sim - floor) / max(1e-6, 1.0 - floor)))
        lexical_part = 0.0 if cand.lexical_rank is None else 1.0 / (1.0 + cand.lexical_rank)
        return semantic + tune.keyword_boost * cand.keyword + tune.lexical_weight * lexical_part

    def _salience(self, rec: MemoryRecord, now: float) -> float:
        tune = self.config.recall
        ret = retention(rec, now, self.config.dynamics)
        if rec.status == "semantic":
            ret = max(ret, 0.5)
        dormant = self.config.dynamics.dormant_rank_factor if rec.status == "dormant" else 1.0
        return dormant * (1.0 - tune.weight_share + tune.weight_share * rec.weight) * (
            1.0 - tune.retention_share + tune.retention_share * ret
        )

    def _route(
        self, qv: np.ndarray, cands: dict[tuple[str, int], Candidate],
        memories: dict[int, MemoryRecord], scopes: Sequence[str], kind: str | None,
        since: float | None, until: float | None, now: float, ready: Later[bool],
    ) -> None:
        """Add members of the query's nearest and adjacent clusters (after the trust check)."""
        floor = self.embedder.profile.floor
        known = {key for typ, key in cands if typ == "memory"}
        for rec, sim in self._router.route(qv, scopes, known, ready=ready.get()):
            if (sim < floor or (kind is not None and rec.kind != kind)
                    or not _in_time(rec.event_time or rec.recorded_at, since, until)):
                continue
            cand = Candidate("memory", rec.id, "graph", similarity=sim)
            cand.score = (self._relevance(cand, floor) * self._salience(rec, now)
                          * self.config.sleep.route_factor)
            memories[rec.id] = rec
            cands[("memory", rec.id)] = cand

    def _spread(
        self, qv: np.ndarray, cands: dict[tuple[str, int], Candidate],
        memories: dict[int, MemoryRecord], scopes: Sequence[str], kind: str | None,
        since: float | None, until: float | None, now: float,
        linked: Later[list[Edge]] | None = None,
    ) -> None:
        """Add neighbours of the strongest memory hits over typed edges (multi-hop;
        ``linked``: the edges of every first candidate, read already)."""
        tune = self.config.recall
        seeds = sorted((c for c in cands.values() if c.type == "memory"),
                       key=lambda c: -c.score)[: tune.graph_seeds]
        frontier = {c.key: c.score for c in seeds if c.score > 0}
        visited = set(frontier)
        allowed = set(scopes)
        for hop in range(1, tune.graph_hops + 1):
            if not frontier:
                return
            if hop == 1 and linked is not None:  # the seeds are among those candidates
                edges = [e for e in linked.get() if e.type in GRAPH_EDGES
                         and (e.src in frontier or e.dst in frontier)]
            else:
                edges = self.store.edges_of(list(frontier), GRAPH_EDGES)
            reached: dict[int, float] = {}
            cap: dict[int, float] = {}
            for e in edges:
                for a, b in ((e.src, e.dst), (e.dst, e.src)):
                    if a in frontier and b not in frontier:
                        value = frontier[a] * e.weight * (tune.graph_decay ** hop)
                        reached[b] = max(reached.get(b, 0.0), value)
                        cap[b] = max(cap.get(b, 0.0), frontier[a])
            new_ids = [m for m in reached if ("memory", m) not in cands]
            recs = self.store.get_memories(new_ids)
            vecs = self.store.memory_vectors(list(recs.values()), self.embedder.dim)
            next_frontier: dict[int, float] = {}
            floor = self.embedder.profile.floor
            for mid, value in reached.items():
                existing = cands.get(("memory", mid))
                if existing is not None:
                    if existing.similarity < floor and existing.keyword == 0:
                        # Only a weak vector candidate (in a small store every memory is
                        # one): the edge is the real evidence, so it counts as found by
                        # the graph, and the walk goes on from it.
                        existing.source = "graph"
                        existing.score = max(existing.score,
                                             value * self._salience(memories[mid], now))
                    else:  # a boost, but a neighbour never overtakes what led to it
                        existing.score = max(existing.score,
                                             min(existing.score + 0.25 * value, cap[mid]))
                    if mid not in visited:
                        next_frontier[mid] = value
                    continue
                rec = recs.get(mid)
                if (rec is None or rec.scope not in allowed or rec.status == "superseded"
                        or (kind is not None and rec.kind != kind)
                        or not _in_time(rec.event_time or rec.recorded_at, since, until)):
                    continue
                sim = float(vecs[mid] @ qv) if mid in vecs else 0.0
                memories[mid] = rec
                cands[("memory", mid)] = Candidate(
                    "memory", mid, "graph", similarity=sim,
                    score=value * self._salience(rec, now),
                )
                next_frontier[mid] = value
            frontier = next_frontier
            visited.update(frontier)

    # -- output ---------------------------------------------------------------------------

    def _item(
        self, cand: Candidate, memories: dict[int, MemoryRecord], turns: dict[int, Turn],
        now: float,
    ) -> RecallItem:
        confidence = _confidence(cand.score)
        if cand.type == "memory":
            rec = memories[cand.key]
            return RecallItem(
                type="memory", id=rec.id, text=rec.text, confidence=confidence,
                source=cand.source, scope=rec.scope, kind=rec.kind,
                similarity=round(cand.similarity, 4), score=round(cand.score, 4),
                event_time=iso(rec.event_time), recorded_at=iso(rec.recorded_at),
                source_links=rec.source_links, tags=rec.tags, weight=rec.weight,
                retention=round(retention(rec, now, self.config.dynamics), 4),
                status=rec.status,
            )
        t = turns[cand.key]
        spoken = iso(t.timestamp)
        return RecallItem(
            type="turn", id=t.message_id, text=t.text, confidence=confidence,
            source=cand.source, scope=t.scope, kind="turn",
            similarity=round(cand.similarity, 4), score=round(cand.score, 4),
            event_time=spoken, recorded_at=iso(t.recorded_at),
            turn_id=t.id, message_id=t.message_id, session=t.session,
            turn_index=t.turn_index, speaker=t.speaker, role=t.role,
            timestamp=spoken,
        )


def _margin_z(sims: Sequence[float], pack: int = 40, minimum: int = 20) -> float:
    """How far the best similarity stands out of the pack, in standard deviations.

    An anisotropic embedder gives every text a high cosine to everything; what marks
    a real match is a best hit clearly above the query's own background. Needs a
    pack of at least ``minimum`` candidates (else 0: no evidence either way).
    """
    if len(sims) < minimum:
        return 0.0
    ranked = sorted(sims, reverse=True)[: pack + 1]
    rest = np.asarray(ranked[1:], dtype=np.float64)
    spread = float(rest.std())
    return float((ranked[0] - rest.mean()) / spread) if spread > 1e-9 else 0.0


def _in_time(ts: float | None, since: float | None, until: float | None) -> bool:
    if ts is None:
        return since is None and until is None
    if since is not None and ts < since:
        return False
    return not (until is not None and ts > until)


#: The least confidence an item is listed with. Below 1 % (shown as 0.00 or 0.01) an
#: item is filler — a cluster neighbour or a vector at the floor that fills the limit —
#: not something the query found.
SHOWN_CONFIDENCE = 0.01


def _confidence(score: float) -> float:
    """An item's confidence (0–1) from its score."""
    return round(1.0 - math.exp(-2.5 * max(0.0, score)), 4)
