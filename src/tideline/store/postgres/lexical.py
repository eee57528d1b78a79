"""Full-text search on PostgreSQL: a ``tsvector`` word index and a ``pg_trgm`` substring index.

The word index holds Tideline's own tokens, not PostgreSQL's parser's: the text goes
through the same CJK rewrite as SQLite's (:func:`tideline.text.index_text`:
character bigrams, the run's last character, the jieba search words), then is split
into casefolded, diacritic-free word tokens, stored with their positions as a
``tsvector`` literal. The query side takes the same term analysis as SQLite (the
terms, the dropped common ones, the ANDed ones of :class:`~tideline.models.LexicalQuery`)
and turns each term into a ``tsquery`` of the same tokens: a multi-token term is a
phrase (``'whale' <-> 'listen'``), a one-character CJK term a prefix (``'京':*``).
So a CJK query finds what it finds on SQLite, and no user text reaches either parser
as syntax: lexemes are only ever ``\\w`` runs, quoted.

The substring index holds the NFC, casefolded text under a ``gin_trgm_ops`` index;
identifier-like terms (``E4521``, ``whale-listen``, ``psycopg``) are matched with
``LIKE '%term%'`` (wildcards in the term escaped), which the trigram index serves.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from tideline import text as lexical
from tideline.models import LexicalQuery
from tideline.store import fts_query as fts

__all__ = ["Search", "plan", "substring_text", "tokens", "words_vector"]

_MAX_LEXEME = 256  # characters; a longer token is cut (the query cuts its terms at 128)
_MAX_POSITION = 16_383  # PostgreSQL's cap on a tsvector position
_MAX_POSITIONS = 255  # positions kept per lexeme
_SPLIT = re.compile(r"[^\w]+")


def tokens(text: str) -> list[str]:
    """The word tokens of already rewritten text (see :func:`lexical.index_text`):
    casefolded, diacritics removed, split on everything that is not a word character —
    the tokens :func:`tideline.text.index_tokens` looks up."""
    folded = text.replace("\x00", " ").casefold()
    if folded.isascii():  # nothing to decompose, no combining mark: the same tokens
        plain = folded
    else:
        folded = unicodedata.normalize("NFKD", folded)
        plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return [t[:_MAX_LEXEME] for t in _SPLIT.split(plain) if t]


def _lexeme(token: str) -> str:
    # Tokens are \w runs: no quote or backslash can occur, but stay safe regardless.
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def words_vector(body: str) -> str:
    """The ``tsvector`` literal of one row's text (cast with ``::tsvector``)."""
    positions: dict[str, list[int]] = {}
    for pos, token in enumerate(tokens(lexical.index_text(body)), start=1):
        found = positions.setdefault(token, [])
        if len(found) < _MAX_POSITIONS:
            p = min(pos, _MAX_POSITION)
            if not found or found[-1] != p:
                found.append(p)
    return " ".join(f"{_lexeme(t)}:{','.join(map(str, ps))}" for t, ps in positions.items())


def substring_text(body: str) -> str:
    """What the substring index holds of a row's text: NFC, casefolded, no NULs."""
    cleaned = body.replace("\x00", " ")
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", cleaned).casefold())


# -- the FTS5-shaped expressions of the shared term analysis, as a tree ----------------


@dataclass(frozen=True)
class _Term:
    text: str
    prefix: bool


@dataclass(frozen=True)
class _Op:
    op: str  # "&" or "|"
    items: tuple[_Node, ...]


_Node = _Term | _Op


def _scan(expr: str) -> Iterator[str | _Term]:
    i, n = 0, len(expr)
    while i < n:
        ch = expr[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            yield ch
            i += 1
        elif ch == '"':
            j, buf = i + 1, []
            while j < n:
                if expr[j] == '"':
                    if j + 1 < n and expr[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(expr[j])
                j += 1
            prefix = j + 1 < n and expr[j + 1] == "*"
            yield _Term("".join(buf), prefix)
            i = j + (2 if prefix else 1)
        else:
            j = i
            while j < n and not expr[j].isspace() and expr[j] not in '()"':
                j += 1
            word = expr[i:j]
            if word not in ("AND", "OR"):
                raise ValueError(f"unexpected {word!r} in a full-text expression")
            yield word
            i = j


def _parse(expr: str) -> _Node | None:
    items = list(_scan(expr))
    pos = 0

    def primary() -> _Node | None:
        nonlocal pos
        item = items[pos]
        pos += 1
        if isinstance(item, _Term):
            return item
        if item == "(":
            node = alternatives()
            pos += 1  # ")"
            return node
        raise ValueError(f"unexpected {item!r} in a full-text expression")

    def conjunction() -> _Node | None:
        nonlocal pos
        parts = [primary()]
        while pos < len(items) and items[pos] == "AND":
            pos += 1
            parts.append(primary())
        kept = tuple(p for p in parts if p is not None)
        if len(kept) != len(parts):
            return None  # a term with no token matches nothing, so neither does the AND
        return kept[0] if len(kept) == 1 else _Op("&", kept)

    def alternatives() -> _Node | None:
        nonlocal pos
        parts = [conjunction()]
        while pos < len(items) and items[pos] == "OR":
            pos += 1
            parts.append(conjunction())
        kept = tuple(p for p in parts if p is not None)
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else _Op("|", kept)

    if not items:
        return None
    return alternatives()


def _tsquery(node: _Node) -> str | None:
    if isinstance(node, _Term):
        toks = tokens(node.text)
        if not toks:
            return None
        out = [_lexeme(t) for t in toks]
        if node.prefix:
            out[-1] += ":*"
        return out[0] if len(out) == 1 else "(" + " <-> ".join(out) + ")"
    parts = [_tsquery(item) for item in node.items]
    if node.op == "&":
        if any(p is None for p in parts):
            return None
        kept = [p for p in parts if p is not None]
    else:
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
    return kept[0] if len(kept) == 1 else "(" + f" {node.op} ".join(kept) + ")"


def _substrings(node: _Node) -> list[str]:
    if isinstance(node, _Term):
        text = substring_text(node.text).strip()
        return [text] if len(text) >= 3 else []
    return [s for item in node.items for s in _substrings(item)]


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@dataclass(frozen=True)
class Search:
    """One backend query: a ``tsquery`` literal, or the ``LIKE`` patterns of substrings."""

    tsquery: str | None = None
    patterns: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """True when nothing can match (the query held no searchable term)."""
        return self.tsquery is None and not self.patterns


def from_expression(expression: str | None, *, substrings: bool) -> Search:
    """The search for an FTS5-shaped expression of :mod:`tideline.store.fts_query`
    (``"term"``, ``"term"*``, ``AND``, ``OR``, parentheses)."""
    if not expression:
        return Search()
    node = _parse(expression.replace("\x00", " "))
    if node is None:
        return Search()
    if substrings:
        return Search(patterns=tuple(_like(s) for s in dict.fromkeys(_substrings(node))))
    return Search(tsquery=_tsquery(node))


def plan(query: LexicalQuery, *, substrings: bool) -> Search:
    """The search for a :class:`LexicalQuery` on the word or the substring index."""
    text = query.text.replace("\x00", " ")
    if substrings:
        expr = fts.trigram_expression(text, drop=query.drop, known=query.known)
    else:
        expr = fts.match_expression(text, drop=query.drop, together=query.together)
    return from_expression(expr, substrings=substrings)
