"""Passage vectors of raw turns: a long turn is found by its best passage, not diluted whole.

A user's request to an assistant often carries an aside ("I'm looking for recipes for
ripe tomatoes… By the way, I just replaced my old kitchen faucet"). One vector for the
whole turn averages the two, so a question about the faucet meets a blur of recipes.
With ``sentence_share`` above 0 (the default), an import splits each turn that a
:class:`Passages` plan selects (by default a user's turns in sessions where an assistant
speaks) into passages of a few sentences, embeds each (``"speaker: passage"``, as the
turn itself is embedded) when there are two or more, and recall ranks a turn candidate
by a blend of its usual (context) similarity and its best passage's::

    rank_sim = (1 − sentence_share) · turn_sim + sentence_share · (best_passage_sim + lift)

``lift`` shifts the best-passage cosines so their mean over the query's candidates
matches the turn cosines' (a short passage's cosines sit on another level than a whole
turn's), so the keyword and lexical evidence and the boosts keep their weight; the
abstention decision still reads the plain turn cosine. The turn is what is returned.

Splitting uses ``sentencex`` (rule-based, ~300 languages, the CJK full stops ``。！？``
included); fragments of fewer than :data:`MIN_WORDS` words ("Wow!", "lol") join their
neighbour, and consecutive sentences join into passages of at most ``passage_words``
words (:func:`group`). Measured on both dev sets: docs/lab/recall-generalisation.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tideline.models import Turn
from tideline.recall.candidates import Candidate

if TYPE_CHECKING:
    from tideline.config import RecallTuning
    from tideline.store.base import Store

__all__ = ["MAX_SENTENCES", "MIN_WORDS", "Passages", "group", "lifted_blend", "rank",
           "sentence_cap", "split"]

#: A fragment with fewer words than this joins the sentence before it (or after it).
MIN_WORDS = 3
#: At most this many sentence vectors per turn: the rest joins the last one.
MAX_SENTENCES = 16
#: pgvector stores at most this many dimensions in one ``vector`` (a turn's sentence
#: vectors are one row).
_MAX_DIMS = 16_000

_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _weight(text: str) -> int:
    """Words of ``text``; a CJK character counts as half a word (no spaces between words)."""
    cjk = len(_CJK.findall(text))
    return len(_WORD.findall(_CJK.sub(" ", text))) + cjk // 2


def sentence_cap(dim: int) -> int:
    """How many sentence vectors of ``dim`` dimensions one turn keeps at most."""
    return max(1, min(MAX_SENTENCES, _MAX_DIMS // max(1, dim)))


@functools.lru_cache(maxsize=4096)
def split(text: str, cap: int = MAX_SENTENCES) -> tuple[str, ...]:
    """The sentences of a turn's text, short fragments joined to their neighbours.

    Args:
        text: a turn's text.
        cap: at most this many sentences; the rest joins the last one.

    Returns:
        The sentences, in order; one element when the text is a single sentence.
    """
    from sentencex import segment  # a compiled splitter, loaded on the first split

    parts = [p.strip() for p in segment("en", text) if p.strip()]
    out: list[str] = []
    for part in parts:
        if out and (_weight(part) < MIN_WORDS or _weight(out[-1]) < MIN_WORDS):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    cap = max(1, cap)
    if len(out) > cap:
        out[cap - 1:] = [" ".join(out[cap - 1:])]
    return tuple(out) if out else (text,)


def group(sentences: Sequence[str], words: int) -> tuple[str, ...]:
    """Consecutive sentences joined into passages of at most ``words`` words.

    A sentence joins the passage before it while the two together stay within
    ``words``; a sentence longer than that is a passage of its own. ``words`` ≤ 0 keeps
    every sentence apart.

    Args:
        sentences: a turn's sentences (:func:`split`), in order.
        words: the most words of a passage (a CJK character counts half).

    Returns:
        The passages, in order (every word of ``sentences`` once).
    """
    out: list[str] = []
    size = 0
    for sentence in sentences:
        weight = _weight(sentence)
        if out and words > 0 and size + weight <= words:
            out[-1] = f"{out[-1]} {sentence}"
            size += weight
        else:
            out.append(sentence)
            size = weight
    return tuple(out)


@dataclass(frozen=True)
class Passages:
    """Which turns get passage vectors at import, and how they are cut.

    Attributes:
        words: the most words of a passage (:func:`group`; 0: single sentences).
        roles: the roles whose turns are split; a turn of any other role keeps its
            turn vector only.
        assisted: only turns of a session where an assistant speaks are split.
    """

    words: int
    roles: frozenset[str]
    assisted: bool = False

    @classmethod
    def of(cls, tuning: RecallTuning) -> Passages | None:
        """The plan of a recall tuning, or None when best-passage ranking is off.

        Args:
            tuning: the recall settings (``sentence_share``, ``passage_words``,
                ``passage_assistant``, ``passage_assisted``).

        Returns:
            The plan, or None with ``sentence_share`` ≤ 0 (no passage is embedded).
        """
        if tuning.sentence_share <= 0:
            return None
        roles = {"user", "assistant"} if tuning.passage_assistant else {"user"}
        return cls(words=max(0, tuning.passage_words), roles=frozenset(roles),
                   assisted=tuning.passage_assisted)

    def of_turn(self, text: str, role: str, cap: int = MAX_SENTENCES,
                assisted: bool = True) -> tuple[str, ...]:
        """The passages of one turn that get vectors of their own.

        Args:
            text: the turn's text.
            role: the turn's role.
            cap: at most this many passages (:func:`sentence_cap`).
            assisted: whether an assistant speaks in the turn's session.

        Returns:
            The passages, or an empty tuple when the turn is not split (its role, or
            a session without an assistant when the plan asks for one) or is a single
            passage (its turn vector already is its passage's).
        """
        if role not in self.roles or (self.assisted and not assisted):
            return ()
        got = group(split(text, MAX_SENTENCES * 4), self.words)
        cap = max(1, cap)
        if len(got) > cap:
            got = (*got[:cap - 1], " ".join(got[cap - 1:]))
        return got if len(got) > 1 else ()


def rank(store: Store, cands: Iterable[Candidate], turns: Mapping[int, Turn],
         query: np.ndarray, aim: np.ndarray | None, share: float, dim: int) -> None:
    """Set the similarity each turn candidate is ranked by (``Candidate.focus``) to the
    blend of its turn similarity and its best sentence's (see the module docstring).

    With ``aim`` (the query without its names, :mod:`tideline.recall.focus`) a
    sentence's similarity is the mean of its cosines to the query and to ``aim``, as a
    turn's is blended there. Turns stored without sentence vectors keep theirs.

    Args:
        store: where the sentence vectors are read.
        cands: every candidate (memories are left alone).
        turns: the candidate turns by id.
        query: the query vector.
        aim: the focus vector, or None.
        share: the best sentence's share (``sentence_share``).
        dim: the embedder's dimension.
    """
    mine = [c for c in cands if c.type == "turn" and c.key in turns]
    if share <= 0 or not mine:
        return
    matrices = store.sentence_vectors([turns[c.key] for c in mine], dim)
    if not matrices:
        return
    best: dict[int, float] = {}
    for tid, matrix in matrices.items():
        sims = matrix @ query
        if aim is not None:
            sims = 0.5 * (sims + matrix @ aim)
        best[tid] = float(np.max(sims))
    base = {c.key: c.similarity if c.focus is None else c.focus for c in mine}
    ranked = lifted_blend(base, best, share)
    for c in mine:
        c.focus = ranked[c.key]


def lifted_blend(turn: Mapping[int, float], best: Mapping[int, float],
                 share: float) -> dict[int, float]:
    """``(1 − share) · turn + share · (best + lift)`` per key, ``lift`` matching the means.

    Args:
        turn: each candidate's turn (context) similarity.
        best: each candidate's best-sentence similarity (keys missing here keep ``turn``).
        share: the best sentence's share (``sentence_share``).

    Returns:
        The similarity each key of ``turn`` is ranked by.
    """
    keys = [k for k in best if k in turn]
    if not keys or share <= 0:
        return dict(turn)
    lift = float(np.mean([turn[k] for k in keys]) - np.mean([best[k] for k in keys]))
    return {k: ((1.0 - share) * v + share * (best[k] + lift)) if k in best else v
            for k, v in turn.items()}
