"""How much of a turn speaks to the listener rather than of its speaker.

In a chat between two people, what a person did or has is told by that person, in the
first person ("I joined a gym last week", "we went camping"); the other's reply
mostly speaks to them ("Your group sounds awesome!", "You're doing something amazing").
Such a reply shares the topic's words and meaning with a later question about it, yet
holds no fact of its own. Recall lowers a turn's relevance by ``listener_discount``
times the share of its person pronouns that are second person.

The pronouns are English, German and Chinese ones (German's "ihr" and "Sie", which
also mean "her", "their" and "they", are left out); in a turn without any of them
(another language, or no pronoun at all) the share is 0 and nothing changes. The weight
was chosen on English chats only (docs/lab/locomo.md, seventh LoCoMo round).
"""

from __future__ import annotations

import functools
import re

__all__ = ["listener_share"]

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[我你您]")
_CACHED_CHARS = 2_000  # a longer text is read by its opening this many characters
_SPEAKER = frozenset({
    "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself",
    "we", "we're", "we've", "we'd", "we'll", "us", "our", "ours", "ourselves",
    "ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines",
    "wir", "uns", "unser", "unsere", "unseren", "unserem", "unserer", "unseres",
    "我",
})
_LISTENER = frozenset({
    "you", "you're", "you've", "you'd", "you'll", "your", "yours", "yourself",
    "yourselves", "ya", "y'all",
    "du", "dich", "dir", "dein", "deine", "deinen", "deinem", "deiner", "deines",
    "euch", "euer", "eure", "euren", "eurem", "eurer", "eures",
    "你", "您",
})


def listener_share(text: str) -> float:
    """Share (0–1) of the first- and second-person pronouns of ``text`` that are second person.

    Args:
        text: a turn's text.

    Returns:
        0 for a turn that speaks only of its speaker (or has no such pronoun), 1 for
        one that only speaks to the listener.
    """
    # Pure in the text, and the same candidate turns come back query after query. A
    # longer turn (an assistant's answer of thousands of characters) is read by its
    # opening _CACHED_CHARS: its share is sampled there, at a bounded cost per recall.
    return _cached_share(text[:_CACHED_CHARS])


@functools.lru_cache(maxsize=8192)
def _cached_share(text: str) -> float:
    return _share(text)


def _share(text: str) -> float:
    speaker, listener = _counts(text.casefold().replace("\u2019", "'"))
    total = speaker + listener
    return listener / total if total else 0.0


#: ASCII letters and the apostrophe stay, every other byte becomes a space.
_LETTERS = bytes(cp if chr(cp).islower() and cp < 128 or cp == 0x27 else 0x20
                 for cp in range(256))


def _counts(folded: str) -> tuple[int, int]:
    """How many of ``_WORD.findall(folded)`` are in ``_SPEAKER`` and in ``_LISTENER``.

    An ASCII text is cut by a byte table and ``split`` (a long answer in a few µs,
    where the pattern walks every character), unless an apostrophe stands where the
    pattern would cut otherwise ("'quoted'", "rock'n'roll").
    """
    if not folded.isascii():
        return _count(_WORD.findall(folded))
    cut = folded.encode("ascii").translate(_LETTERS).decode("ascii")
    return _count(cut.split() if _inner_apostrophes(cut) else _WORD.findall(cut))


def _inner_apostrophes(cut: str) -> bool:
    """Whether every apostrophe of ``cut`` (letters, ``'`` and spaces) sits between two
    letters, one to a word, as in "you're": then its words are its pieces."""
    at = cut.find("'")
    while at != -1:
        if at == 0 or at + 1 == len(cut) or cut[at - 1] in " '" or cut[at + 1] in " '":
            return False
        after = cut.find("'", at + 1)
        if after != -1 and cut.find(" ", at + 1, after) == -1:  # two in one word
            return False
        at = after
    return True


#: Every person pronoun of either kind (the two sets share no word).
_PERSON = _SPEAKER | _LISTENER


def _count(words: list[str]) -> tuple[int, int]:
    # One pass in C over the words keeps the pronouns (a few in hundreds of words),
    # the second counts the speaker's among those few.
    person = list(filter(_PERSON.__contains__, words))
    speaker = sum(map(_SPEAKER.__contains__, person))
    return speaker, len(person) - speaker
