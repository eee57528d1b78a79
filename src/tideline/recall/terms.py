"""How one query searches a space's full-text side: the weight of each term, which
terms are ORed and which ANDed, and the other word forms the index holds.

Everything here is read from the store's document frequencies (one call per space and
query), so the engine builds the :class:`~tideline.models.LexicalQuery` pair of each
space without knowing any backend's syntax.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

from tideline import text as lexical
from tideline.config import Config
from tideline.models import LexicalQuery
from tideline.recall import morph
from tideline.store.base import Store

__all__ = ["Analysis", "Queries", "QueryTerms"]

#: The lexical queries of one space: for the word index and for the substring index.
Queries = tuple[LexicalQuery, LexicalQuery]


class Analysis(NamedTuple):
    """A query's terms as one space sees them."""

    #: IDF weight of each query term (the keyword coverage reads them).
    weights: list[float]
    #: The other forms of each term that the space's index holds.
    forms: dict[str, tuple[str, ...]]
    #: What the word index and the substring index are asked.
    queries: Queries
    #: The space holds no rows at all (its full-text side need not be asked).
    empty: bool = False


class QueryTerms:
    """Term statistics of queries over one store (see the module docstring)."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config

    def analyse(self, space: str, query: str, terms: Sequence[str]) -> Analysis:
        """Weights, word forms and the two lexical queries of ``query`` in ``space``
        (``m`` memories, ``t`` turns); ``terms`` are :func:`tideline.text.query_terms`."""
        freq = self.frequencies(space, query, terms)
        weights, common, known, together = self.stats(space, terms, freq)
        forms, widened = self.word_forms(space, query, terms, common, freq)
        # The word index also finds the other forms of the words; the substring
        # index looks for what was typed.
        word = LexicalQuery(text=widened, drop=frozenset(common), together=tuple(together),
                            known=frozenset(known))
        return Analysis(weights, forms, (word, dataclasses.replace(word, text=query)),
                        empty=bool(terms) and freq[1] == 0)

    def frequencies(self, space: str, query: str,
                     terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """The document frequencies :meth:`stats` and :meth:`word_forms` read, in
        one call to the store (one round trip on a server): the query's index tokens and
        the other word forms, which depend only on the terms."""
        if not terms:
            return {}, 0
        wanted = [x for t in terms for x in lexical.index_tokens(t)]
        if self.config.recall.word_forms and morph.looks_english(query):
            wanted += [f for fs in morph.widen(terms).values() for f in fs]
        return self.store.document_frequencies(space, wanted)

    def stats(
        self, space: str, terms: Sequence[str],
        freq: tuple[dict[str, int], int] | None = None,
    ) -> tuple[list[float], set[str], set[str], list[str]]:
        """IDF of each query term, and how the full-text side searches the terms.

        A term found in most rows (the user's own name, the project's name) says little
        about which row is meant; an error code found in one row says everything. A term
        made of several index tokens counts as its rarest one. The rarest terms are ORed
        while their document frequencies add up to at most ``posting_budget`` (ranking a
        long posting list costs time at scale and ranks nothing); the terms left out
        (``common``) are searched together instead: up to ``conjunction_terms`` of the
        rarest of them ANDed, so a row holding the person's first name, surname and the
        topic is still found, at the cost of an intersection. Terms whose every token the
        word index holds (``known``) skip the substring (trigram) search: the word table
        finds them as phrases.

        Returns:
            Weights (one per term), the terms left out of the OR, the known words, and
            the terms to AND.
        """
        if not terms:
            return [], set(), set(), []
        tune = self.config.recall
        tokens = {t: lexical.index_tokens(t) for t in terms}
        df, total = freq if freq is not None else self.store.document_frequencies(
            space, [x for v in tokens.values() for x in v])
        n = max(total, 1)
        freqs = [min((df.get(x, 0) for x in tokens[t]), default=0) for t in terms]
        weights = [max(math.log((n + 1) / (f + 0.5)), 0.05) for f in freqs]
        order = sorted(range(len(terms)), key=lambda i: freqs[i])
        spent, left_out = 0, []
        for i in order:
            if spent + freqs[i] > tune.posting_budget:
                left_out.append(i)
            else:
                spent += freqs[i]
        together = [terms[i] for i in left_out[:tune.conjunction_terms]]
        if len(together) < 2 and left_out and spent == 0:
            # Nothing found in the index is rare enough and nothing can be ANDed:
            # search the rarest term anyway, so the lexical side is never empty.
            left_out.pop(0)
        if len(together) < 2:
            together = []
        common = {terms[i] for i in left_out}
        known = {t for i, t in enumerate(terms) if freqs[i] > 0}
        return weights, common, known, together

    def word_forms(
        self, space: str, query: str, terms: Sequence[str], common: set[str],
        freq: tuple[dict[str, int], int] | None = None,
    ) -> tuple[dict[str, tuple[str, ...]], str]:
        """Other forms of the query's words that the space's index holds, and the query
        text widened by them for the full-text side (see :mod:`tideline.recall.morph`).

        Forms of the terms left out of the full-text OR (``common``), and forms in more
        rows than ``posting_budget``, only count as keyword evidence.
        """
        if not self.config.recall.word_forms or not terms or not morph.looks_english(query):
            return {}, query
        wanted = morph.widen(terms)
        if not wanted:
            return {}, query
        df = freq[0] if freq is not None else self.store.document_frequencies(
            space, [f for fs in wanted.values() for f in fs])[0]
        held = {t: kept for t, fs in wanted.items() if (kept := tuple(f for f in fs if df.get(f)))}
        budget = self.config.recall.posting_budget
        extra = [f for t, fs in held.items() if t not in common for f in fs
                 if df[f] <= budget]
        return held, (query + " " + " ".join(extra)) if extra else query
