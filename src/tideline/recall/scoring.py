"""Scoring one candidate, and the packet-level signals read from all of them.

::

    semantic  = clip((cos − floor) / (1 − floor), 0, 1)
    keyword   = share of the query's keywords found verbatim in the text
    lexical   = 1 / (1 + bm25 rank)                     (0 when not a lexical hit)
    relevance = semantic + keyword_boost · keyword + lexical_weight · lexical
    score     = relevance · salience,  salience from weight and retention (memories)

An item's confidence is ``1 − exp(−2.5 · score)``; the margin (how far the best
cosine stands out of its pack) is one of the abstention's signals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tideline.config import Config, RecallTuning
from tideline.dynamics import retention
from tideline.models import MemoryRecord, Turn
from tideline.recall import when
from tideline.recall.candidates import Candidate

__all__ = ["SHOWN_CONFIDENCE", "confidence", "in_window", "margin_z", "relevance", "salience"]

#: The least confidence an item is listed with. Below 1 % (shown as 0.00 or 0.01) an
#: item is filler — a cluster neighbour or a vector at the floor that fills the limit —
#: not something the query found.
SHOWN_CONFIDENCE = 0.01


def relevance(cand: Candidate, floor: float, tune: RecallTuning) -> float:
    """A candidate's relevance: its semantic, keyword and lexical evidence (module doc).

    Args:
        cand: the candidate (its ``focus`` replaces its similarity when set).
        floor: the embedder's similarity floor.
        tune: the recall settings.

    Returns:
        The relevance, before salience and the turn rules.
    """
    sim = cand.similarity if cand.focus is None else cand.focus
    sim -= tune.turn_hubness * cand.hub
    semantic = min(1.0, max(0.0, (sim - floor) / max(1e-6, 1.0 - floor)))
    lexical_part = 0.0 if cand.lexical_rank is None else 1.0 / (1.0 + cand.lexical_rank)
    return semantic + tune.keyword_boost * cand.keyword + tune.lexical_weight * lexical_part


def salience(rec: MemoryRecord, now: float, config: Config) -> float:
    """A memory's salience: its weight and retention, a dormant one lowered.

    Args:
        rec: the memory.
        now: the recall's time (epoch seconds).
        config: the store's configuration (recall and dynamics settings).

    Returns:
        The factor the memory's relevance is multiplied by.
    """
    tune = config.recall
    ret = retention(rec, now, config.dynamics)
    if rec.status == "semantic":
        ret = max(ret, 0.5)
    dormant = config.dynamics.dormant_rank_factor if rec.status == "dormant" else 1.0
    return dormant * (1.0 - tune.weight_share + tune.weight_share * rec.weight) * (
        1.0 - tune.retention_share + tune.retention_share * ret
    )


def in_window(cand: Candidate, window: when.Window, memories: dict[int, MemoryRecord],
              turns: dict[int, Turn], after_days: float) -> bool:
    """Whether an item dates from the window (a turn, or an undated memory, up to
    ``after_days`` after it: what is told of a day is often told later).

    Args:
        cand: the candidate.
        window: the date window the query names.
        memories: the candidate memories by id.
        turns: the candidate turns by id.
        after_days: days after the window still counted (``when_after_days``).

    Returns:
        True when the item dates from the window.
    """
    after = after_days * 86_400
    if cand.type == "memory":
        rec = memories[cand.key]
        if rec.event_time is not None:
            return bool(window.start <= rec.event_time < window.end)
        return bool(window.start <= rec.recorded_at < window.end + after)
    t = turns[cand.key]
    ts = t.timestamp if t.timestamp is not None else t.recorded_at
    return bool(window.start <= ts < window.end + after)


def margin_z(sims: Sequence[float], pack: int = 40, minimum: int = 20) -> float:
    """How far the best similarity stands out of the pack, in standard deviations.

    An anisotropic embedder gives every text a high cosine to everything; what marks
    a real match is a best hit clearly above the query's own background. Needs a
    pack of at least ``minimum`` candidates (else 0: no evidence either way).

    Args:
        sims: the candidates' similarities.
        pack: how many after the best make the background.
        minimum: the fewest candidates that tell anything.

    Returns:
        The best similarity's distance above the pack's mean, in standard deviations.
    """
    if len(sims) < minimum:
        return 0.0
    ranked = sorted(sims, reverse=True)[: pack + 1]
    rest = np.asarray(ranked[1:], dtype=np.float64)
    spread = float(rest.std())
    return float((ranked[0] - rest.mean()) / spread) if spread > 1e-9 else 0.0


def confidence(score: float) -> float:
    """An item's confidence (0–1) from its score.

    Args:
        score: the candidate's final score.

    Returns:
        ``1 − exp(−2.5 · score)``, rounded to four places.
    """
    return round(1.0 - math.exp(-2.5 * max(0.0, score)), 4)
