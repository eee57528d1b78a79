"""SQLite FTS5 syntax for lexical recall: safe MATCH expressions over the analysed terms.

Two FTS5 tables back lexical recall per kind (rowid = the row's integer id)::

    CREATE VIRTUAL TABLE memories_fts USING fts5(
        body, tokenize="unicode61 remove_diacritics 2");  -- body = index_text(text)
    CREATE VIRTUAL TABLE memories_tri USING fts5(
        body, tokenize="trigram");                          -- body = NFC text

:func:`match_expression` mirrors :func:`tideline.text.index_text` on the query side
(CJK words become bigram phrases) and quotes every term, so no user text can reach
the FTS5 query parser as syntax. The trigram table catches substrings of identifiers
(``E1234`` inside ``errE1234x``, ``psycopg`` inside ``psycopg2-binary``);
:func:`trigram_expression` builds its query from the whitespace tokens of three
characters or more. :func:`expressions` turns a :class:`~tideline.models.LexicalQuery`
into both.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from typing import Literal

from tideline.errors import InvalidInput
from tideline.models import LexicalQuery
from tideline.text import (
    ASCII_PUNCT,
    CJK_SEGMENT,
    EDGE_PUNCT,
    MAX_CJK_WORD,
    MAX_PARTS,
    MAX_TERM_CHARS,
    MAX_TERMS,
    STOPWORDS,
    bigrams,
    clean_words,
    cut,
    cut_for_search,
    index_text,
    strip_edges,
    strip_invisible,
    wants_substring,
)

__all__ = ["expression", "expressions", "has_token", "index_text", "match_expression", "quote",
           "raw_match", "trigram_expression"]

_NOT_TOKEN_CHARS = frozenset(
    [chr(cp) for cp in range(0x19B0, 0x19C1)] + ["\u19c8", "\u19c9", "\u1cf2", "\u1cf3"]
)

# Characters stripped from both ends of a whitespace token (keyword and trigram terms).


def _is_token_char(ch: str) -> bool:
    """True when unicode61 surely keeps ``ch`` as (part of) a token."""
    if ch.isascii():
        return ch.isalnum()
    cat = unicodedata.category(ch)
    return (cat[0] in "LN" or cat == "Co") and ch not in _NOT_TOKEN_CHARS


def _has_token(text: str) -> bool:
    return any(_is_token_char(ch) for ch in text)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def quote(term: str) -> str:
    """``term`` as one FTS5 string (a phrase of its tokens; no syntax of its own)."""
    return _quote(term)


def has_token(text: str) -> bool:
    """Whether ``text`` holds a character the word index keeps (else it matches nothing)."""
    return _has_token(text)


def _cjk_term(word: str, *, han: bool = False) -> str:
    """Query expression for one CJK word, matching the rewrite of :func:`index_text`.

    One character is a prefix query (it finds the bigrams that start with it and
    the last character of a run); two characters are one bigram; a longer word
    is its bigram phrase OR the word itself (a jieba token, for BM25 weight).
    A longer Han compound (``边界问题``, ``人工智能``) may also match as all of its
    jieba search parts (``边界`` AND ``问题``), so ``边界的问题`` is found too.
    """
    if len(word) == 1:
        return _quote(word) + "*"
    if len(word) == 2:
        return _quote(word)
    alternatives = [_quote(" ".join(bigrams(word))), _quote(word)]
    if han:
        parts = list(dict.fromkeys(p for p in cut_for_search(word) if 2 <= len(p) < len(word)))
        if parts:
            joined = " AND ".join(_cjk_term(p) for p in parts[:MAX_PARTS])
            alternatives.append(f"({joined})" if len(parts) > 1 else joined)
    return "(" + " OR ".join(alternatives) + ")"


def _word_terms(query: str) -> list[tuple[str, bool]]:
    """Quoted terms of ``query`` for the word table, each with its stopword flag."""
    terms: list[tuple[str, bool]] = []
    seen: set[str] = set()

    def add(expr: str, stop: bool) -> bool:
        if expr not in seen:
            seen.add(expr)
            terms.append((expr, stop))
        return len(terms) >= MAX_TERMS

    for token in clean_words(query).split():
        pos = 0
        pieces: list[tuple[str, str]] = []
        for seg in CJK_SEGMENT.finditer(token):
            pieces.append(("text", token[pos : seg.start()]))
            pieces.append(("han" if seg.group("han") else "other", seg.group()))
            pos = seg.end()
        pieces.append(("text", token[pos:]))
        for kind, piece in pieces:
            if kind == "text":
                # ASCII punctuation separates tokens in unicode61, so trimming it
                # from the ends never changes what the phrase matches.
                text = piece.strip(ASCII_PUNCT)
                if not _has_token(text):
                    continue
                word = strip_edges(text).casefold().replace("\u2019", "'")
                # A lone letter or digit (an initial, "K.") is as unspecific as a stopword.
                stop = word in STOPWORDS or len(word) < 2
                if len(text) > MAX_TERM_CHARS:
                    end = MAX_TERM_CHARS
                    while not _has_token(text[:end]):
                        end += MAX_TERM_CHARS
                    expr = _quote(text[:end]) + ("*" if end < len(text) else "")
                else:
                    expr = _quote(text)
                if add(expr, stop):
                    return terms
            else:
                words = cut(piece) if kind == "han" else [piece]
                for word in words:
                    if len(word) <= MAX_CJK_WORD:
                        expr = _cjk_term(word, han=kind == "han")
                    else:  # a bigram phrase of a prefix matches wherever the whole word does
                        expr = _quote(" ".join(bigrams(word[:MAX_CJK_WORD])))
                    if add(expr, word in STOPWORDS):
                        return terms
    return terms


def _plain(expr: str) -> str | None:
    """The casefolded text of a simple quoted term (``"abc"`` → ``abc``), else None."""
    if len(expr) >= 2 and expr[0] == expr[-1] == '"' and '"' not in expr[1:-1].replace('""', ""):
        return expr[1:-1].replace('""', '"').casefold().strip(EDGE_PUNCT)
    return None


def _is_initial(expr: str) -> bool:
    """A quoted single letter that is not a stopword (a name's initial)."""
    plain = _plain(expr)
    return plain is not None and len(plain) == 1 and plain.isalpha() and (
        plain not in STOPWORDS)


def _without(kept: list[str], drop: Collection[str]) -> list[str]:
    """Leave out dropped terms, but never all of them."""
    if not drop:
        return kept
    rest = [e for e in kept if _plain(e) not in drop]
    return rest or kept[:1]


def match_expression(
    query: str, *, mode: Literal["any", "all"] = "any", drop: Collection[str] = (),
    together: Collection[str] = (),
) -> str | None:
    """Build a safe FTS5 MATCH expression for the unicode61 (word) table.

    Every term is a quoted FTS5 string (inner double quotes doubled), so user
    text never reaches the query parser as syntax: ``AND``, ``NEAR(``, ``col:x``,
    ``-x``, ``^`` and ``*`` are plain words or nothing. A whitespace token becomes
    a phrase (``"whale-listen"`` matches the tokens ``whale listen`` in order);
    CJK words become bigram phrases (one character: a prefix query). Stopwords
    are dropped when the query holds other terms and kept when it holds only
    stopwords. At most :data:`MAX_TERMS` terms are used.

    Args:
        query: raw user text.
        mode: ``"any"`` joins terms with OR, ``"all"`` with AND.

    Returns:
        The MATCH expression, or None when the query holds nothing searchable.
    """
    terms = _word_terms(query)
    if not terms:
        return None
    kept = [expr for expr, stop in terms if not stop] or [expr for expr, _ in terms]
    if mode == "all":
        return " AND ".join(_without(kept, drop))
    parts = [e for e in kept if _plain(e) not in drop] if drop else list(kept)
    both = [e for e in kept if _plain(e) in together] if together else []
    if len(both) > 1:
        # An initial ("Jonas K. Tanaka") is never searched alone, but it narrows the
        # conjunction of the name's other parts to the person meant.
        both += [e for e, _ in terms if _is_initial(e)]
        parts.append("(" + " AND ".join(both) + ")")
    return " OR ".join(parts or kept[:1])


def trigram_expression(
    query: str, *, drop: Collection[str] = (), known: Collection[str] = ()
) -> str | None:
    """Build a safe FTS5 MATCH expression for the trigram (substring) table.

    The query is NFC-normalised (controls become spaces, lone surrogates go);
    each whitespace token is stripped of surrounding punctuation and kept when
    it has three characters or more, one of them a letter or digit, and looks
    like an identifier, a code, CJK text or a word of five letters or more. Tokens are
    quoted, cut to :data:`MAX_TERM_CHARS` and joined with OR; stopwords are
    left out unless nothing else remains. The trigram
    tokenizer folds case itself, so the stored body may be lowercased or not.

    Args:
        query: raw user text.

    Returns:
        The MATCH expression, or None when no token is long enough.
    """
    cleaned = unicodedata.normalize("NFC", strip_invisible(query, drop_format=False))
    terms: list[tuple[str, bool]] = []
    seen: set[str] = set()
    for token in cleaned.split():
        term = token.strip(EDGE_PUNCT)[:MAX_TERM_CHARS]
        key = term.casefold()
        if len(term) < 3 or key in seen or not any(ch.isalnum() for ch in term):
            continue
        if not wants_substring(term):
            continue
        seen.add(key)
        terms.append((_quote(term), key.replace("\u2019", "'") in STOPWORDS))
        if len(terms) >= MAX_TERMS:
            break
    if not terms:
        return None
    kept = [expr for expr, stop in terms if not stop] or [expr for expr, _ in terms]
    if known:
        # Whole words the word table already holds need no substring search.
        kept = [e for e in kept if _plain(e) not in known]
        if not kept:
            return None
    return " OR ".join(_without(kept, drop))


def raw_match(expression: str) -> str:
    """Pass an FTS5 expression through unchanged (opt-in raw query mode).

    The caller runs it and maps :class:`sqlite3.OperationalError` (syntax
    errors) to a typed error.

    Args:
        expression: an FTS5 MATCH expression written by the user.

    Returns:
        ``expression`` itself.

    Raises:
        InvalidInput: the expression holds a NUL character or a lone surrogate,
            or is blank.
    """
    if "\x00" in expression:
        raise InvalidInput("FTS expression must not contain NUL characters")
    if any("\ud800" <= ch <= "\udfff" for ch in expression):
        raise InvalidInput("FTS expression must not contain lone surrogates")
    if not expression.strip():
        raise InvalidInput("FTS expression is empty")
    return expression


def expression(query: LexicalQuery, *, substrings: bool) -> str | None:
    """One of :func:`expressions`: the trigram table's with ``substrings``, else the
    word table's (a search asks one table, and needs only its expression built)."""
    if substrings:
        return trigram_expression(query.text, drop=query.drop, known=query.known)
    return match_expression(query.text, drop=query.drop, together=query.together)


def expressions(query: LexicalQuery) -> tuple[str | None, str | None]:
    """The MATCH expressions of a lexical query for the word table and the trigram table.

    Args:
        query: the terms the recall engine chose.

    Returns:
        (word-table expression, trigram-table expression); None where nothing is
        searchable in that table.
    """
    return (match_expression(query.text, drop=query.drop, together=query.together),
            trigram_expression(query.text, drop=query.drop, known=query.known))
