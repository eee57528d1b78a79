"""How much of a turn speaks to the listener rather than of its speaker.

In a chat between two people, what a person did or has is told by that person, in the
first person ("I joined a gym last week", "we went camping"); the other's reply
mostly speaks to them ("Your group sounds awesome!", "You're doing something amazing").
Such a reply shares the topic's words and meaning with a later question about it, yet
holds no fact of its own. Recall lowers a turn's relevance by ``listener_discount``
times the share of its person pronouns that are second person.

The pronouns are English ones: in a turn without any of them (another language, or
no pronoun at all) the share is 0 and nothing changes.
"""

from __future__ import annotations

import functools
import re

__all__ = ["listener_share"]

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_SPEAKER = frozenset({
    "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself",
    "we", "we're", "we've", "we'd", "we'll", "us", "our", "ours", "ourselves",
})
_LISTENER = frozenset({
    "you", "you're", "you've", "you'd", "you'll", "your", "yours", "yourself",
    "yourselves", "ya", "y'all",
})


# Pure in the text; the same candidate turns come back query after query.
@functools.lru_cache(maxsize=8192)
def listener_share(text: str) -> float:
    """Share (0–1) of the first- and second-person pronouns of ``text`` that are second person.

    Args:
        text: a turn's text.

    Returns:
        0 for a turn that speaks only of its speaker (or has no such pronoun), 1 for
        one that only speaks to the listener.
    """
    speaker = listener = 0
    for word in _WORD.findall(text.casefold().replace("\u2019", "'")):
        if word in _SPEAKER:
            speaker += 1
        elif word in _LISTENER:
            listener += 1
    total = speaker + listener
    return listener / total if total else 0.0
