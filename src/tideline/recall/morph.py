"""Word forms of a query's English words: "camped" also finds "camping" and "camps".

The full-text index matches whole words, and a question rarely uses the form the
conversation used ("Where has Melanie camped?" — "we went camping in the forest";
"What has Melanie painted?" — "our latest painting"). Recall widens each English word
of the query to its regular inflections (plural, past, gerund, agent noun), keeping only
the forms that reduce to the same Snowball (Porter 2) stem as the word itself, and
counts a stored text as holding the query's word when it holds any of its forms.

The forms are ordinary words: the full-text side searches them like the query's own
(no prefix syntax, so every backend runs them), and a form absent from the store costs
a vocabulary lookup. Only English queries are widened (see :func:`looks_english`), and
only their ASCII words of four letters or more; other scripts, other languages and
short words stay as typed.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

from tideline import text as lexical

__all__ = ["Coverage", "coverage", "forms", "looks_english", "widen"]

_MIN_LETTERS = 4
_SUFFIXES = ("ing", "ied", "ies", "ed", "es", "s", "d")
_VOWELS = frozenset("aeiou")
_WORDS = re.compile(r"[^\W\d_]+(?:['’][a-z]+)?")
# Function words that tell English from the other languages written in Latin letters
# (German above all: an English stemmer on "Datenbanken" would only invent words).
_ENGLISH = frozenset("""the a an is are was were be been do does did has have had what
which who whom where when why how of to in on at for with from my your his her our their
this that these those it i you he she we they and or not can could would should will""".split())
_OTHER = frozenset("""der die das den dem des ein eine einen ist sind war wie wo wann wer
welche welcher welches und oder nicht mit für auf von zu ich du er sie wir ihr hat haben
le la les un une est et ou pas avec pour el los las es y con por del qué""".split())
_lock = threading.Lock()
_stemmer: Any = None


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        with _lock:
            if _stemmer is None:
                import Stemmer

                _stemmer = Stemmer.Stemmer("english")
    return str(_stemmer.stemWord(word))


def _bases(word: str) -> set[str]:
    """Candidate base forms: the word without a regular suffix (the word when it has none)."""
    out: set[str] = set()
    for suffix in _SUFFIXES:
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            continue
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            out.add(base)
            if suffix in ("ied", "ies"):
                out.add(base + "y")
            elif suffix in ("ing", "ed", "es") and base[-1] not in _VOWELS:
                out.add(base + "e")  # "hiking" → "hike"
            if len(base) >= 2 and base[-1] == base[-2] and base[-1] not in _VOWELS:
                out.add(base[:-1])  # "running" → "run"
            break  # the longest suffix only: "activities" is not "activitie" + "s"
    return out or {word}


def _inflect(base: str) -> set[str]:
    """The regular inflections of a base form (itself included)."""
    out = {base}
    if base.endswith(("s", "x", "z", "ch", "sh")):
        out |= {base + "es", base + "ed", base + "ing"}
    elif len(base) >= 2 and base[-1] == "y" and base[-2] not in _VOWELS:
        out |= {base[:-1] + "ies", base[:-1] + "ied", base + "ing"}
    elif base.endswith("e"):
        out |= {base + "s", base + "d", base[:-1] + "ing"}
    else:
        out |= {base + "s", base + "ed", base + "ing"}
        if (len(base) >= 3 and base[-1] not in _VOWELS and base[-2] in _VOWELS
                and base[-3] not in _VOWELS and base[-1] not in "wxy"):
            out |= {base + base[-1] + "ed", base + base[-1] + "ing"}  # "run" → "running"
    return out


@functools.lru_cache(maxsize=4096)
def forms(word: str, limit: int = 12) -> tuple[str, ...]:
    """Other regular forms of an English ``word`` with the same stem (the word excluded).

    Args:
        word: one casefolded word.
        limit: most forms returned.

    Returns:
        The forms, shortest first; empty for short, non-ASCII or non-alphabetic words.
    """
    if len(word) < _MIN_LETTERS or not word.isascii() or not word.isalpha():
        return ()
    stem = _stem(word)
    found: set[str] = set()
    for base in _bases(word):
        found.update(c for c in _inflect(base) if c != word and _stem(c) == stem)
    return tuple(sorted(found, key=lambda f: (len(f), f))[:limit])


@functools.lru_cache(maxsize=1024)  # asked for each space of a recall, twice
def looks_english(text: str) -> bool:
    """Whether ``text`` reads as English: more English function words than those of
    German, French or Spanish, and at least one.

    Args:
        text: a query.

    Returns:
        True for English text.
    """
    words = [w.casefold() for w in _WORDS.findall(text[:2_000])]
    english = sum(w in _ENGLISH for w in words)
    return english > 0 and english > sum(w in _OTHER for w in words)


def widen(terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The forms of each query term that has any (see :func:`forms`).

    Args:
        terms: keyword terms of a query (casefolded).

    Returns:
        ``{term: forms}`` for the terms that have other forms.
    """
    out: dict[str, tuple[str, ...]] = {}
    for term in terms:
        found = forms(term)
        if found:
            out[term] = found
    return out


def coverage(
    text: str, terms: Sequence[str], weights: Sequence[float] | None,
    alternatives: dict[str, tuple[str, ...]],
) -> float:
    """:func:`~tideline.text.keyword_coverage` where a term also counts as
    found when one of its ``alternatives`` (its other forms) occurs.

    Args:
        text: the stored text.
        terms: the query's keyword terms.
        weights: weight per term (None: equal).
        alternatives: other forms per term (see :func:`widen`).

    Returns:
        0–1 (0 when there are no terms).
    """
    return Coverage(terms, weights, alternatives)(text)


class Coverage:
    """:func:`coverage` of one query, prepared once for all of its candidates.

    Recall scores some eighty candidate texts against the same terms; the terms'
    patterns and weights are looked up once here instead of once per text.

    Args:
        terms: the query's keyword terms.
        weights: weight per term (None: equal).
        alternatives: other forms per term (see :func:`widen`).
    """

    __slots__ = ("_checks", "_count", "_total")

    def __init__(self, terms: Sequence[str], weights: Sequence[float] | None,
                 alternatives: dict[str, tuple[str, ...]]) -> None:
        ws = list(weights) if weights is not None else [1.0] * len(terms)
        # Without forms and weights this is keyword_coverage's plain share of terms found.
        self._count = not alternatives and weights is None
        self._total: float = len(terms) if self._count else sum(ws)
        # Each term is the term itself, or a pattern of it and its forms with the start
        # they all share: most texts lack it, and a substring test is far cheaper than
        # the pattern's search at every position.
        self._checks: list[tuple[str, re.Pattern[str] | None, float]] = []
        if not terms or self._total <= 0:
            return
        for term, w in zip(terms, ws, strict=True):
            alts = alternatives.get(term)
            if alts is None:
                self._checks.append((term, None, w))
            else:
                self._checks.append((_shared_start(term, alts), _group(term, alts), w))

    def __call__(self, text: str) -> float:
        """The weighted share of the terms ``text`` holds (0–1)."""
        if not self._checks:
            return 0.0
        hay = lexical._clean_keywords(text)
        if self._count:
            return sum(1 for needle, group, _ in self._checks
                       if _holds(hay, needle, group)) / self._total
        found = 0.0
        for needle, group, w in self._checks:
            if _holds(hay, needle, group):
                found += w
        return found / self._total


def _holds(hay: str, needle: str, group: re.Pattern[str] | None) -> bool:
    if group is None:
        return lexical._find_keyword(hay, needle)
    if len(needle) < 3:  # a short shared start occurs too often to try each place
        return needle in hay and group.search(hay) is not None
    # Every match starts with the shared start: try the pattern only where it occurs
    # (its look-behind still sees the text before), not at every place of a long turn.
    at = hay.find(needle)
    while at != -1:
        if group.match(hay, at) is not None:
            return True
        at = hay.find(needle, at + 1)
    return False


@functools.lru_cache(maxsize=1024)
def _shared_start(term: str, alts: tuple[str, ...]) -> str:
    """The longest start ``term`` and all of its forms share (every match holds it)."""
    return os.path.commonprefix([term, *alts])


@functools.lru_cache(maxsize=1024)
def _group(term: str, alts: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for a word and its forms (all ASCII letters), as whole words."""
    words = "|".join(re.escape(w) for w in sorted({term, *alts}, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{words})(?!\w)")
