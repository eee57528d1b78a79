"""Turns that answer the other person's question.

In a chat, what a person did, has or likes is often told because the other one asked
("What got you into running?" — "My doctor told me to, and I joined a club last
spring"). A turn right after the other speaker's question is therefore, more often
than other turns, one that tells a fact of its speaker; in the LoCoMo dev split, the
turn before an evidence turn is a question turn about 1.5 times as often as the turn
before any other candidate (docs/lab/locomo.md, eighth LoCoMo round).

Recall lifts a turn's final score by ``answer_lift`` times the question share of the
turn just before it in its session (:func:`tideline.recall.asking.question_share`),
when another speaker said it. This is a prior over the turn's place in the dialogue,
not a match with the query: the question turn need not match the query at all (the
neighbour rule already brings in the reply to a question that does). It only ranks:
abstention reads the cosines as before. Only turns whose predecessor recall has read
anyway are lifted — the candidates themselves and the neighbours read beside the best
hits — so it costs no read of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from tideline.models import Turn
from tideline.recall.asking import question_share

__all__ = ["answer_factors"]


def answer_factors(candidates: Iterable[Turn], known: Iterable[Turn],
                   lift: float) -> dict[int, float]:
    """The factor (≥ 1) by which each candidate turn's score is lifted.

    Args:
        candidates: the turns being ranked.
        known: every turn whose text recall holds (candidates and read neighbours);
            a candidate's predecessor is looked up among them.
        lift: the weight (``RecallTuning.answer_lift``); 0 or less lifts nothing.

    Returns:
        Turn id → factor, only for candidates lifted (factor above 1).
    """
    if lift <= 0:
        return {}
    place = {(t.scope, t.session, t.turn_index): t for t in known}
    out: dict[int, float] = {}
    for turn in candidates:
        before = place.get((turn.scope, turn.session, turn.turn_index - 1))
        if before is None or before.speaker == turn.speaker:
            continue
        share = question_share(before.text)
        if share > 0:
            out[turn.id] = 1.0 + lift * share
    return out
