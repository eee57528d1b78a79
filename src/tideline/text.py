"""Query and text analysis shared by every backend: terms, CJK segmentation, stopwords.

Nothing here knows a query language. The recall engine and the backends' full-text
code read the same analysis: :func:`query_terms` (the keyword terms of a query, for the
exact-keyword boost and the document-frequency budget), :func:`index_text` (the text a
word index stores: every CJK run rewritten into its character bigrams, its last
character alone, and the jieba ``cut_for_search`` words, since word tokenizers treat a
run of CJK characters without spaces as one token), :func:`index_tokens` (the tokens a
word index makes of a term), :func:`keyword_coverage` and :func:`contains_term`.
Building blocks for a backend's query builder (normalisation, stopwords, segmentation)
are public too; the SQLite FTS5 syntax lives in :mod:`tideline.store.fts_query`.

jieba is imported lazily, on the first text that holds CJK characters: it costs
about half a second to load, and nothing else pays for it.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ASCII_PUNCT",
    "CJK_SEGMENT",
    "EDGE_PUNCT",
    "MAX_CJK_WORD",
    "MAX_PARTS",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "STOPWORDS",
    "bigrams",
    "clean_words",
    "contains_term",
    "cut",
    "cut_for_search",
    "has_cjk",
    "preload_segmenter",
    "index_text",
    "index_tokens",
    "keyword_coverage",
    "query_terms",
    "strip_edges",
    "strip_invisible",
    "wants_substring",
]

MAX_TERMS = 64
"""Most terms one MATCH expression (or one list of boost terms) holds; later ones are ignored."""

MAX_TERM_CHARS = 128
"""Longest quoted term; a longer one is cut and becomes a prefix query (or, for the
trigram table, a shorter substring), which only ever widens the match."""

MAX_CJK_WORD = 32
"""Longest CJK word (jieba word, kana/hangul run) used whole in a query; a longer one
becomes the bigram phrase of its prefix, which still matches wherever the whole does."""

MAX_PARTS = 8
"""Most jieba search parts used as the alternative spelling of one long Han word."""

# --- character classes -------------------------------------------------------------

# Han ideographs (and the ideographic iteration / number marks used with them).
_HAN = (
    "\u3005-\u3007\u3021-\u3029\u3038-\u303c\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002fa1f\U00030000-\U000323af"
)
# Kana, hangul, bopomofo: CJK scripts that jieba does not segment.
_KANA_HANGUL = (
    "\u1100-\u11ff\u3031-\u3035\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    "\u3105-\u312f\u3131-\u318e\u31a0-\u31bf\u31f0-\u31ff\ua960-\ua97c\uac00-\ud7a3"
    "\ud7b0-\ud7fb\uff66-\uff9f\uffa0-\uffdc\U0001b000-\U0001b16f"
)
_CJK_RUN = re.compile(f"[{_HAN}{_KANA_HANGUL}]+")
#: The lowest character of those ranges: anything below it is not CJK.
_FIRST_CJK = min(ch for ch in _HAN + _KANA_HANGUL if ch != "-")
CJK_SEGMENT = re.compile(f"(?P<han>[{_HAN}]+)|(?P<other>[{_KANA_HANGUL}]+)")

# Letters that Python's Unicode tables call L*/N* but that SQLite's unicode61
# tokenizer (Unicode 6.1 data) treats as separators.

#: Punctuation that may surround a word and is never part of it (ASCII, CJK, quotes).
EDGE_PUNCT = (
    ",.;:!?()[]{}<>\"'`"
    "\u2018\u2019\u201a\u201c\u201d\u201e\u00ab\u00bb\u2039\u203a\u2026"
    "\u3001\u3002\u300a\u300b\u300c\u300d\u300e\u300f\u3010\u3011"
    "\uff01\uff08\uff09\uff0c\uff0e\uff1a\uff1b\uff1f"
)
_LEAD_PUNCT = EDGE_PUNCT.replace(".", "")  # keep a leading dot: ".env", ".NET"

_ASCII_CONTROLS = {cp: " " for cp in [*range(0x20), 0x7F]}
_ASCII_CONTROL_BYTES = bytes(0x20 if cp in _ASCII_CONTROLS else cp for cp in range(256))
#: Every control (Cc), surrogate (Cs) and format (Cf) character of Unicode 15, and a few
#: neighbours: a text without any is returned by strip_invisible as it is, without
#: asking each of its characters' category (a long non-ASCII turn cost ~0.1 ms a recall).
_MAYBE_INVISIBLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    "\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001-\U000e007f]"
)
#: Every ASCII character that is neither a letter nor a digit.
ASCII_PUNCT = "".join(chr(cp) for cp in range(0x21, 0x7F) if not chr(cp).isalnum())

# --- stopwords (casefolded) ---------------------------------------------------------

_STOP_EN = """
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing done down during each either
else ever few for from further get got had has have having he her here hers herself him
himself his how i if in into is it its itself just let me might more most much must my
myself no nor not now of off on once only or other our ours ourselves out over own please
same shall she should so some such than that the their theirs them themselves then there
these they this those through to too under until up upon us very was we were what when
where which while who whom whose why will with would yes yet you your yours yourself
yourselves i'm i've i'd i'll you're you've it's that's there's what's who's let's don't
doesn't didn't isn't aren't wasn't weren't can't couldn't won't wouldn't shouldn't
"""
_STOP_DE = """
aber alle allem allen aller alles als also am an ander andere anderem anderen anderer
anderes auch auf aus bei bin bis bist da damit dann das dass dein deine dem den denn der
des dich die dies diese diesem diesen dieser dieses dir doch dort du durch ein eine einem
einen einer eines er es etwas euch euer eure für gegen hab habe haben hat hatte hatten
hier hin ich ihm ihn ihnen ihr ihre im in ist ja jede jedem jeden jeder jedes kann kein
keine man mein meine mich mir mit muss nach nicht nichts noch nun nur ob oder ohne sehr
sein seine sich sie sind so solche soll sollte sondern um und uns unser unsere unter viel
vom von vor war waren warum was weg weil welche welchem welchen welcher welches wenn wer
werde werden wie wieder will wir wird wo wollen zu zum zur über
"""
_STOP_RU = """
а без более бы был была были было быть в вам вас весь во вот все всего всех вы где да
даже для до его ее её ей если есть еще ещё же за здесь и из или им их к как какая какой
когда кто ли либо мне много может мы на над надо не него нее неё нет ни них но ну о об
однако он она они оно от очень по под при с со так также такой там те тем то того тоже
той только том ты у уже хотя чего чей чем что чтобы чье чья эта эти это этого этой этом
этот я
"""
_STOP_CJK = """
的 了 是 在 和 与 及 或 也 都 就 而 之 其 这 那 这个 那个 一个 我 你 他 她 它 我们 你们 他们
吗 呢 吧 啊 呀 么 什么 怎么 如何 哪 哪个 有 没 没有 不 被 把 给 对 从 向 于 以 为 着 过 地 得
个 些 很 还 又 请 让 が は を に で と も の へ や か ね よ な だ です ます
"""
#: Casefolded stopwords of English, German, Russian and CJK.
STOPWORDS = frozenset((_STOP_EN + _STOP_DE + _STOP_RU + _STOP_CJK).split())

# --- jieba (lazy) -------------------------------------------------------------------

_jieba: Any = None
_jieba_lock = threading.Lock()


def _load_jieba() -> Any:
    """Import and initialise jieba once, silently (no log lines, no warnings).

    Its prefix dictionary (~500k entries) costs about a second to load; the warm hook
    process loads it ahead (:func:`preload_segmenter`) so a session's first Chinese or
    Japanese prompt does not pay it. jieba caches the built dictionary in a per-user
    cache folder (:func:`_segmenter_cache`) instead of the shared temporary folder, where
    another user's cache file cannot be replaced and a cleaned /tmp rebuilds it.
    """
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    import jieba

                    jieba.setLogLevel(logging.WARNING)
                    cache = _segmenter_cache()
                    if cache is not None:
                        jieba.dt.tmp_dir = str(cache)
                    jieba.initialize()
                _jieba = jieba
    return _jieba


def _segmenter_cache() -> Path | None:
    """``$XDG_CACHE_HOME/tideline`` (default ``~/.cache/tideline``), private; None when it
    cannot be made (then jieba keeps its own default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(base) / "tideline"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def preload_segmenter() -> None:
    """Load the CJK word segmenter now (a warm process, before the first CJK query)."""
    _load_jieba()


def cut(text: str) -> list[str]:
    """The jieba words of ``text`` (precise mode), blanks dropped."""
    return [w for w in _load_jieba().lcut(text) if w.strip()]


def word_share(word: str) -> float:
    """How common a Chinese word is: its share of jieba's dictionary counts (0: unknown).

    Args:
        word: one jieba word.

    Returns:
        The word's dictionary frequency over the dictionary's total (0 for a word jieba
        does not know, such as most personal names).
    """
    dt = _load_jieba().dt
    return float(dt.FREQ.get(word, 0) or 0) / float(dt.total or 1)


def cut_for_search(text: str) -> list[str]:
    """The jieba search words of ``text`` (a compound and its parts), blanks dropped."""
    return [w for w in _load_jieba().lcut_for_search(text) if w.strip()]


# --- normalisation ------------------------------------------------------------------


def strip_invisible(text: str, *, drop_format: bool) -> str:
    """Controls become spaces; lone surrogates (and, if asked, format chars) go."""
    if _MAYBE_INVISIBLE.search(text) is None:  # the common case: nothing to strip
        return text
    if text.isascii():  # a byte table maps the controls in one pass
        return text.encode("ascii").translate(_ASCII_CONTROL_BYTES).decode("ascii")
    # Only the few candidates are looked at, not every character of a long turn.
    return _MAYBE_INVISIBLE.sub(_keep_format if not drop_format else _drop_format, text)


def _invisible(ch: str, drop_format: bool) -> str:
    cat = unicodedata.category(ch)
    if cat == "Cc":
        return " "
    if cat == "Cs" or (drop_format and cat == "Cf"):
        return ""
    return ch


def _keep_format(m: re.Match[str]) -> str:
    return _invisible(m.group(), False)


def _drop_format(m: re.Match[str]) -> str:
    return _invisible(m.group(), True)


def clean_words(text: str) -> str:
    """Normalisation shared by :func:`index_text` and :func:`match_expression`.

    NFKC folds full-width forms, ligatures and half-width kana; zero-width and
    bidi format characters are dropped so that ``foo\\u200bbar`` is ``foobar`` on
    both sides.
    """
    return unicodedata.normalize("NFKC", strip_invisible(text, drop_format=True))


# Recall checks the same candidate texts for every query's keywords; the texts repeat.
@functools.lru_cache(maxsize=8192)
def _clean_keywords(text: str) -> str:
    """Normalisation for keyword matching: NFC, casefolded."""
    cleaned = unicodedata.normalize("NFC", strip_invisible(text, drop_format=True))
    return unicodedata.normalize("NFC", cleaned.casefold())


def _is_word_char(ch: str) -> bool:
    """Word character for keyword boundaries: letter, digit or ``_``, not CJK."""
    if ch < _FIRST_CJK:  # no CJK letter sits this low
        return ch.isalnum() or ch == "_"
    return (ch.isalnum() or ch == "_") and _CJK_RUN.match(ch) is None



def strip_edges(token: str) -> str:
    """``token`` without surrounding punctuation (a leading dot stays: ``.env``)."""
    return token.lstrip(_LEAD_PUNCT).rstrip(EDGE_PUNCT)


def bigrams(run: str) -> list[str]:
    """The overlapping character pairs of ``run``."""
    return [run[i : i + 2] for i in range(len(run) - 1)]


# --- public API ---------------------------------------------------------------------


def has_cjk(text: str) -> bool:
    """Tell whether ``text`` holds any Chinese, Japanese or Korean letter.

    Args:
        text: any text.

    Returns:
        True when a Han ideograph, kana, hangul or bopomofo character occurs.
    """
    return _CJK_RUN.search(text) is not None


def index_text(text: str) -> str:
    """Text to store in the unicode61 table's ``body``.

    Non-CJK text is kept (NFKC-normalised, controls and invisible format
    characters removed). Every CJK run is replaced by its character bigrams in
    order, then its last character alone, then the jieba search words (two
    characters or more) of its Han parts and its kana/hangul parts as whole
    words. The result is only for the index; never show it.

    Args:
        text: the memory or turn text.

    Returns:
        The body for the ``unicode61`` FTS5 table.
    """
    cleaned = clean_words(text)
    if not has_cjk(cleaned):
        return cleaned
    out: list[str] = []
    pos = 0
    for match in _CJK_RUN.finditer(cleaned):
        run = match.group()
        parts = bigrams(run)
        parts.append(run[-1])
        for seg in CJK_SEGMENT.finditer(run):
            if seg.group("han"):
                parts.extend(w for w in cut_for_search(seg.group()) if len(w) >= 2)
            elif 2 <= len(seg.group()) <= MAX_CJK_WORD:
                parts.append(seg.group())
        out.append(cleaned[pos : match.start()])
        out.append(" " + " ".join(parts) + " ")
        pos = match.end()
    out.append(cleaned[pos:])
    return "".join(out)


_IDENTIFIER_PUNCT = frozenset("-_./:@#+\\=~$%&")


def wants_substring(term: str) -> bool:
    """Whether a token goes to the trigram table: identifiers, codes, CJK, longer words.

    Short plain words are matched whole by the word table; sending them to the
    trigram table too would only add slow, noisy substring hits (``live`` in
    ``olive``, ``now`` in ``know``). Longer words keep substring search so that
    ``psycopg`` still finds ``psycopg2-binary``.
    """
    return (
        any(ch.isdigit() or ch in _IDENTIFIER_PUNCT for ch in term)
        or has_cjk(term)
        or len(term) >= 5
    )


def query_terms(query: str) -> list[str]:
    """Distinct keyword terms of ``query`` for the exact-keyword boost.

    Terms are casefolded and NFC-normalised: whitespace tokens stripped of
    surrounding punctuation (identifiers keep their inner punctuation:
    ``whale-listen``, ``v1.2.3``, ``c++``) with two characters or more and a
    letter or digit, plus the jieba words of CJK text (kana/hangul runs whole).
    English, German, Russian and common CJK stopwords are left out.

    Args:
        query: raw user text.

    Returns:
        Up to :data:`MAX_TERMS` terms, in order of first appearance.
    """
    cleaned = _clean_keywords(query)
    terms: list[str] = []
    seen: set[str] = set()

    def add(term: str) -> None:
        if term not in seen and term.replace("\u2019", "'") not in STOPWORDS:
            seen.add(term)
            terms.append(term)

    for token in cleaned.split():
        token = strip_edges(token)
        if not has_cjk(token):
            if len(token) >= 2 and any(ch.isalnum() for ch in token):
                add(token)
            continue
        pos = 0
        for seg in CJK_SEGMENT.finditer(token):
            rest = strip_edges(token[pos : seg.start()])
            if len(rest) >= 2 and any(ch.isalnum() for ch in rest):
                add(rest)
            if seg.group("han"):
                for word in cut(seg.group()):
                    add(word)
            elif len(seg.group()) >= 2:
                add(seg.group())
            pos = seg.end()
        rest = strip_edges(token[pos:])
        if len(rest) >= 2 and any(ch.isalnum() for ch in rest):
            add(rest)
    return terms[:MAX_TERMS]


def contains_term(text: str, term: str) -> bool:
    """Tell whether ``term`` occurs in ``text`` as a keyword.

    Both sides are casefolded (NFC). Where the term starts or ends with a
    letter, digit or ``_`` (not CJK), the neighbouring character in ``text``
    must not be one, so ``pg`` is not found in ``upgrade`` while ``E1234`` is
    found in ``error E1234:`` and ``c++`` in ``C++17``. CJK terms match as plain
    substrings.

    Args:
        text: the stored text.
        term: one term, typically from :func:`query_terms`.

    Returns:
        True when the term occurs.
    """
    return _find_keyword(_clean_keywords(text), _clean_keywords(term).strip())


def index_tokens(term: str) -> list[str]:
    """The tokens the word table's tokenizer makes of ``term`` (casefolded, no diacritics).

    Used to look terms up in the FTS vocabulary (document frequencies).
    """
    return list(_index_tokens(term))


# Recall asks for the tokens of each query term once per space and step.
@functools.lru_cache(maxsize=4096)
def _index_tokens(term: str) -> tuple[str, ...]:
    body = index_text(term)
    folded = unicodedata.normalize("NFKD", body.casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return tuple(t for t in re.split(r"[^\w]+", plain) if t)


def keyword_coverage(
    text: str, terms: Sequence[str], weights: Sequence[float] | None = None
) -> float:
    """Share of ``terms`` that occur in ``text`` as keywords (see :func:`contains_term`).

    The text is normalised once, so this is the cheap way to score many terms.

    Args:
        text: the stored text.
        terms: terms as :func:`query_terms` returns them (already normalised).
        weights: optional weight per term (e.g. inverse document frequency), so that
            a rare identifier counts for more than a name that is everywhere.

    Returns:
        0–1 (0 when there are no terms).
    """
    if not terms:
        return 0.0
    hay = _clean_keywords(text)
    if weights is None:
        return sum(1 for t in terms if _find_keyword(hay, t)) / len(terms)
    total = sum(weights)
    if total <= 0:
        return 0.0
    found = sum(w for t, w in zip(terms, weights, strict=True) if _find_keyword(hay, t))
    return found / total


def _find_keyword(hay: str, needle: str) -> bool:
    if not needle:
        return False
    start = hay.find(needle)
    if start == -1:  # most candidate texts lack most terms
        return False
    check_left, check_right = _keyword_edges(needle)
    size, width = len(hay), len(needle)
    while start != -1:
        end = start + width
        left_ok = not check_left or start == 0 or not _is_word_char(hay[start - 1])
        right_ok = not check_right or end == size or not _is_word_char(hay[end])
        if left_ok and right_ok:
            return True
        start = hay.find(needle, start + 1)
    return False


@functools.lru_cache(maxsize=4096)
def _keyword_edges(needle: str) -> tuple[bool, bool]:
    """Whether the text around an occurrence of ``needle`` is checked on the left and on
    the right (where the needle starts or ends with a word character)."""
    return _is_word_char(needle[0]), _is_word_char(needle[-1])
