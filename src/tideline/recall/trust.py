"""Which candidates may vouch for a query by their cosine (the abstention check).

Recall abstains when nothing is trustworthy; one way a packet earns trust is a
candidate whose cosine to the query reaches the embedder's abstention bar. Two kinds of
raw turn reach that bar for almost any question and say nothing about whether the store
knows the answer:

* a turn that only asks ("Wow! What did you get?", "Cool! What did it look like?"):
  question-shaped queries sit near question-shaped turns, whatever they ask about;
* a generic turn that sits near everything (hubness: "Thanks!", "You rock!").

So the cosine that decides trust is a turn's raw cosine less ``turn_hubness`` times
how much nearer than usual it sits to its space's centroid (only lowered: a turn
farther than usual gains nothing, so no turn vouches more than its raw cosine, on any
embedder), and only from turns of which at most ``trust_question_share`` of the words
sit in questions. Memories, and the keyword, margin and date evidence, are judged as
before; the packet still reports the plain best cosine. The rule can only abstain
more than the raw cosines would.
"""

from __future__ import annotations

from collections.abc import Iterable

from tideline.recall import asking

__all__ = ["vouching_similarity"]


def vouching_similarity(
    rows: Iterable[tuple[float, float, str | None]], hubness: float, question_share: float,
) -> float:
    """The best cosine among the candidates that may vouch for the query.

    Args:
        rows: ``(cosine, hubness excess, turn text)`` of each candidate; the text is None
            for a memory (which always vouches by its plain cosine).
        hubness: how much of a turn's hubness excess (when positive) comes off its
            cosine (0: none).
        question_share: a turn with more of its words in questions than this does not
            vouch (1 or more: every turn does).

    Returns:
        The best such cosine, 0 when there is none.
    """
    best = 0.0
    for cosine, hub, text in rows:
        if text is None:
            best = max(best, cosine)
        elif question_share >= 1 or asking.question_share(text) <= question_share:
            best = max(best, cosine - hubness * max(0.0, hub))
    return best
