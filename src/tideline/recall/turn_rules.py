"""The rules of a conversation's turns, applied after the trust check.

A turn is ranked among the turns around it: the turns just before and after a strong
hit come in (the reply to a question, the sentence after "guess what"), a question
counts for less than a turn that tells, a turn that answers the other speaker's
question is lifted, a turn that only speaks to its listener is lowered, the assistant's
turns step back for a question of the asker's own, a question across time spreads over
sessions, and of two turns telling the same thing the later one comes first. Each rule
lives in its own module (``across``, ``asking``, ``answers``, ``listener``, ``roles``,
``diversity``, ``restated``, ``lifts``); this one applies them to a recall's candidates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tideline.config import Config
from tideline.models import Turn
from tideline.recall import (
    across,
    answers,
    asking,
    diversity,
    lifts,
    listener,
    restated,
    roles,
)
from tideline.recall.candidates import Candidate, Candidates, in_time
from tideline.recall.people import SpeakerDirectory, named_people
from tideline.store.base import Store

__all__ = ["TurnRules"]


class TurnRules:
    """Applies the turn rules to one store's recalls."""

    def __init__(self, store: Store, dim: int, config: Config,
                 people: SpeakerDirectory) -> None:
        self.store = store
        self.dim = dim
        self.config = config
        self.people = people

    def prepare(self, turns: Iterable[Turn]) -> None:
        """Read the question share and the listener share of each turn's text ahead
        (both are kept by text, so the rules applied later find them).

        Args:
            turns: turns likely to be candidates (the lexical hits).
        """
        share = self.config.recall.question_discount
        listening = self.config.recall.listener_discount
        for t in turns:
            if share > 0:
                asking.question_share(t.text)
            if listening > 0:
                listener.listener_share(t.text)

    def neighbours(
        self, qv: np.ndarray, cands: Candidates, turns: dict[int, Turn],
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
        speaker's question (:mod:`tideline.recall.across`).

        Args:
            qv: the query vector.
            cands: the candidates, added to and raised.
            turns: the candidate turns by id, added to.
            scopes: the scopes searched.
            since: only turns at or after this epoch.
            until: only turns at or before this epoch.
            assisted: the (scope, session) pairs where an assistant speaks.
            lifted: filled with each lifted turn's source hit, when given.

        Returns:
            The turns read around the hits.
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
                  and in_time(t.timestamp or t.recorded_at, since, until)]
        new = [t for t in around if t.id not in turns]
        sims = self.store.turn_vectors(new, self.dim) if new else {}
        by_place = {(t.scope, t.session, t.turn_index): t for t in around}
        strong = [(hit, c.score) for c, hit in zip(best[:wide], hits, strict=False)]
        for cand, hit in zip(best[:tune.neighbour_hits], hits, strict=False):
            score = min(cand.score / max(cand.asked, 1e-6) * tune.neighbour_factor, cand.score)
            for offset in (-1, 1):
                n = by_place.get((hit.scope, hit.session, hit.turn_index + offset))
                if n is not None and self.lift_turn(qv, cands, turns, sims, n, score,
                                                     assisted) and lifted is not None:
                    lifted[n.id] = hit.id
        carried = across.carried_scores(strong, by_place, tune.across_question)
        if carried:
            by_id = {t.id: t for t in by_place.values()}
            for tid, value in carried.items():
                t = by_id[tid]
                if self.lift_turn(qv, cands, turns, sims, t, value, assisted) and (
                        lifted is not None):
                    # The hit two places away in the session, the strongest if two.
                    lifted[tid] = max(((h, v) for h, v in strong if h.scope == t.scope
                                       and h.session == t.session
                                       and abs(h.turn_index - t.turn_index) == 2),
                                      key=lambda hv: hv[1])[0].id
        return around

    def lift_turn(
        self, qv: np.ndarray, cands: Candidates, turns: dict[int, Turn],
        sims: dict[int, np.ndarray], t: Turn, score: float,
        assisted: frozenset[tuple[str, str]] = frozenset(),
    ) -> bool:
        """Raise turn ``t`` to ``score`` times its own question discount (the neighbour
        rule, the carry across a question); a turn not yet a candidate comes in as a
        ``graph`` item, its similarity read from ``sims``.

        Args:
            qv: the query vector.
            cands: the candidates.
            turns: the candidate turns by id.
            sims: vectors of the turns read around the hits.
            t: the turn to lift.
            score: the score it is lifted to (before its question discount).
            assisted: the (scope, session) pairs where an assistant speaks.

        Returns:
            Whether the lift set its score.
        """
        known = cands.get(("turn", t.id))
        if known is None:
            asked = self.asked(t, assisted)
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

    def asked(self, t: Turn, assisted: frozenset[tuple[str, str]] = frozenset()) -> float:
        """The question discount's factor of a turn (1 for a turn that only tells).

        A user's question to an assistant (a turn of role ``user`` in a session where
        an assistant speaks, ``assisted``) is 1 as well when ``request_tells`` is set:
        "Can you suggest protein sources that go well with quinoa?" is a request that
        tells what its asker eats, where "What got you into running?" between two
        people only asks back.

        Args:
            t: the turn.
            assisted: the (scope, session) pairs where an assistant speaks.

        Returns:
            The factor its score is multiplied by.
        """
        text = t.text
        if (self.config.recall.request_tells and t.role == "user"
                and (t.scope, t.session) in assisted):
            return 1.0
        share = self.config.recall.question_discount
        return 1.0 - share * asking.question_share(text) if share > 0 else 1.0

    def discount_listener(self, cands: Candidates,
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

    def lift_answers(self, cands: Candidates, turns: dict[int, Turn],
                      around: list[Turn]) -> None:
        """Lift each turn that answers the other speaker's question by ``answer_lift``
        times that question's share (:mod:`tideline.recall.answers`); last, like the
        listener discount, and only where the turn before was read anyway."""
        factors = answers.answer_factors(turns.values(), [*turns.values(), *around],
                                         self.config.recall.answer_lift)
        for tid, factor in factors.items():
            if (cand := cands.get(("turn", tid))) is not None:
                cand.score *= factor

    def discount_roles(self, query: str, cands: Candidates,
                        turns: dict[int, Turn]) -> None:
        """Lower the assistant's turns by ``assistant_discount`` for a question of the
        asker's own (:mod:`tideline.recall.roles`); last, so a lifted neighbour too."""
        share = self.config.recall.assistant_discount
        if share <= 0 or not roles.asks_of_self(query):
            return
        for cand in cands.values():
            if cand.type == "turn" and turns[cand.key].role == "assistant":
                cand.score *= 1.0 - share

    def diversify(self, query: str, cands: Candidates,
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

    def later_first(self, cands: Candidates,
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
    def keep_sources(cands: Candidates, lifted: dict[int, int]) -> None:
        """No lifted neighbour above the hit it came from (:mod:`tideline.recall.lifts`)."""
        scores = {tid: c.score for (typ, tid), c in cands.items() if typ == "turn"
                  and (tid in lifted or tid in lifted.values())}
        for tid in lifts.keep_sources(scores, lifted):
            cands[("turn", tid)].score = scores[tid]

    def named(self, query: str, scopes: Sequence[str]) -> set[str]:
        """The known people (speakers of ``scopes``, ``known_persons``) the query names."""
        speakers = self.people.people(scopes)
        return named_people(query, speakers | set(self.config.known_persons))

    def singles_out(self, named: set[str], scopes: Sequence[str]) -> bool:
        """Whether the query names some of the scopes' speakers but not all of them."""
        return bool(named) and bool(self.people.people(scopes) - named)

    def favour_named(
        self, named: set[str], cands: Candidates, turns: dict[int, Turn],
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
        if not self.singles_out(named, scopes):
            return
        for cand in cands.values():
            if cand.type == "turn" and turns[cand.key].speaker in named:
                cand.score += boost
