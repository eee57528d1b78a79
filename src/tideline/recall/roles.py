"""Whose words a question asks about: the asker's own, or the assistant's.

In a history between a user and an assistant, a question put to the memory in the
first person ("How long have I been in my current role?", "Where did I attend my
cousin's wedding?") asks what the user told: the user's own turns hold it, and the
assistant's turns only echo it ("Congratulations on fixing the kitchen shelves!")
amid long answers that share the topic's words. A question that also speaks to the
assistant ("Can you remind me of the designer you recommended?") may be answered
by the assistant's turns, and favours no one.

Recall lowers the score of every turn whose role is ``assistant`` by
``assistant_discount`` when the query speaks of its asker only. Roles, not
speaker names: a chat between two people imported with the role ``user`` for both
(a group chat, a transcript) is never touched.
"""

from __future__ import annotations

import re

__all__ = ["asks_of_self"]

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_SELF = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself"})
_OTHER = frozenset({"you", "you're", "you've", "you'd", "you'll", "your", "yours",
                    "yourself", "we", "we're", "we've", "we'd", "we'll", "us", "our", "ours"})


def asks_of_self(query: str) -> bool:
    """Whether ``query`` speaks of its asker (first person singular) and not to or with
    the one it asks (no "you", no "we": "what did we decide", "what you said").

    Args:
        query: the recall query.

    Returns:
        True for "How often do I see my therapist?", False for "Can you remind me
        what you suggested?" and for a question in the third person.
    """
    words = set(_WORD.findall(query.casefold().replace("\u2019", "'")))
    return bool(words & _SELF) and not words & _OTHER
