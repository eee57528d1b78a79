"""How much of a turn only asks: the share of its words that sit in questions.

In a conversation a question turn ("Wow! What got you into running?") shares the
topic's words with a later question about that topic, but it holds no answer: the
reply does, and it comes in as the hit's neighbour. Recall lowers a turn's relevance
by ``question_discount`` times this share.
"""

from __future__ import annotations

import functools
import re

__all__ = ["question_share"]

_SENTENCE = re.compile(r"[^.!?？。！]*[.!?？。！]+|[^.!?？。！]+$")
_WORD = re.compile(r"\w+")


# Pure in the text; the same candidate turns come back query after query.
@functools.lru_cache(maxsize=8192)
def question_share(text: str) -> float:
    """Share (0–1) of the words of ``text`` that are in sentences ending with ``?``.

    Args:
        text: a turn's text.

    Returns:
        0 for a statement, 1 for a turn made only of questions.
    """
    if "?" not in text and "？" not in text:  # no question: most long answers
        return 0.0
    # The sentences cut the text without cutting a word (no word holds a full stop),
    # so the words of the whole text are the words of its sentences.
    asked = sum(len(_WORD.findall(sentence)) for sentence in _SENTENCE.findall(text)
                if sentence.rstrip().endswith(("?", "？")))
    total = len(_WORD.findall(text))
    return asked / total if total else 0.0

