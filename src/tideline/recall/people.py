"""Who a query is about: the people it names, short forms resolved to full names.

The known people of a scope are the speakers of its stored turns plus the
``known_persons`` setting (``TIDELINE_KNOWN_PERSONS="Alice,Bob"``). A query word
names a person when it is the name itself or a short form of it: a prefix of at
least three letters that fits exactly one known name ("Mel" → Melanie), or the
possessive ("Melanie's"). Recall uses this to favour what the named person said
(see :func:`named_people`) — a question about Melanie's activities is answered
mostly by Melanie's own turns, across every session.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence

from tideline.store.base import Store

__all__ = ["SpeakerDirectory", "named_people"]

_WORD = re.compile(r"[^\W\d_]+(?:['’]s)?", re.UNICODE)
_GENERIC = frozenset({"user", "assistant", "system", "tool", "unknown", "agent", "me", "you"})
_MIN_SHORT = 3


def _first(name: str) -> str:
    return name.split()[0].casefold() if name.split() else ""


def named_people(query: str, people: Iterable[str]) -> set[str]:
    """The known people a query names (by full first name, full name or a short form).

    Args:
        query: the query text.
        people: known names (speakers, ``known_persons``).

    Returns:
        The names, as given in ``people``, that the query mentions.
    """
    names = [p for p in dict.fromkeys(people) if p and _first(p) not in _GENERIC]
    if not names:
        return set()
    words = {re.sub(r"['’]s$", "", w).casefold() for w in _WORD.findall(query)}
    found: set[str] = set()
    for w in words:
        exact = [n for n in names if _first(n) == w or n.casefold() == w]
        if exact:
            found.update(exact)
            continue
        if len(w) >= _MIN_SHORT:
            short = [n for n in names if _first(n).startswith(w) and _first(n) != w]
            if len(short) == 1:
                found.add(short[0])
    return found


class SpeakerDirectory:
    """The distinct speakers of each scope, kept up to date incrementally.

    A scan reads only the turns added since the last one (turn ids only grow), so
    asking again is one indexed ``max(id)`` lookup when nothing changed.
    """

    def __init__(self, store: Store, known: Sequence[str] = ()) -> None:
        self.store = store
        self.known = tuple(k.strip() for k in known if k.strip())
        self._seen = 0
        self._by_scope: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def people(self, scopes: Sequence[str]) -> set[str]:
        """Speakers of ``scopes`` plus the configured known persons."""
        with self._lock:
            last, rows = self.store.speakers_since(self._seen)
            for scope, speaker in rows:
                self._by_scope.setdefault(scope, set()).add(speaker)
            self._seen = max(self._seen, last)
            out = set(self.known)
            for scope in scopes:
                out |= self._by_scope.get(scope, set())
        return out
