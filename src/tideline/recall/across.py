"""The same speaker's turn across the other speaker's question.

In a chat a speaker's statement is often carried on after the partner asks a follow-up:
"I went camping last week." — "Oh nice, where?" — "At the lake, with the kids." The
question between them shares little with a later question about the trip, and the
neighbour rule (the turns right next to a hit) reaches the question, not the
continuation: the speaker's second turn sits two places from the first. In the LoCoMo
dev split such a turn (two places from one of the three best hits, its speaker's, with
the other speaker's question between) is an evidence turn of the question about 13 % of
the time, against 4 % when the turn between asks nothing (docs/lab/locomo.md, ninth
LoCoMo round).

So each of the ``across_hits`` best turn hits passes ``across_question`` times its score
to its speaker's own turn two places later or earlier in the session, when the turn
between is another speaker's and asks something (a sentence ending with "?", however
much of the turn that is: "Wow, that's so cool! Where?" follows up as well). A carried
turn keeps its own score when that is higher, and like a neighbour it is discounted
when it only asks back. It never crosses to another speaker's turn, nor over a turn
that asks nothing (a reply that tells is a topic of its own as often as not). It only
ranks: abstention has read the cosines before. The turns two places away are read in
the neighbour rule's one statement (a window of two around those few hits instead of
one), so it costs no read of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tideline.models import Turn
from tideline.recall.asking import question_share

__all__ = ["carried_scores"]

Place = tuple[str, str, int]


def carried_scores(hits: Sequence[tuple[Turn, float]], by_place: Mapping[Place, Turn],
                   weight: float) -> dict[int, float]:
    """The score each hit carries to its speaker's turn across the other's question.

    Args:
        hits: the strong hits with their scores.
        by_place: the turns recall has read, by (scope, session, turn index).
        weight: the share of the hit's score carried (``RecallTuning.across_question``);
            0 or less carries nothing.

    Returns:
        Turn id → the best score carried to it (before the turn's own question
        discount); only turns some hit reaches.
    """
    out: dict[int, float] = {}
    if weight <= 0:
        return out
    for hit, score in hits:
        if not hit.speaker:  # no speaker known: no "same person" to carry to
            continue
        for step in (-1, 1):
            between = by_place.get((hit.scope, hit.session, hit.turn_index + step))
            beyond = by_place.get((hit.scope, hit.session, hit.turn_index + 2 * step))
            if (between is None or beyond is None or between.speaker == hit.speaker
                    or beyond.speaker != hit.speaker or question_share(between.text) <= 0):
                continue
            out[beyond.id] = max(out.get(beyond.id, 0.0), weight * score)
    return out
