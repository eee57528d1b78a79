"""Tests for tideline.text and tideline.store.fts_query against real SQLite FTS5 tables.

SQLite only (tests/backend.py): the FTS5 expression syntax; PostgreSQL builds tsqueries
from the same terms.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from typing import Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tideline import text as lexical
from tideline.errors import InvalidInput
from tideline.store import fts_query as fts
from tideline.store.fts_query import match_expression, raw_match, trigram_expression
from tideline.text import contains_term, has_cjk, index_text, query_terms

Mode = Literal["any", "all"]
MODES: tuple[Mode, ...] = ("any", "all")


# --- a tiny store with the two tables ------------------------------------------------


class Store:
    """The two FTS5 tables of the real schema, in memory."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5("
            'body, tokenize="unicode61 remove_diacritics 2")'
        )
        self.conn.execute('CREATE VIRTUAL TABLE memories_tri USING fts5(body, tokenize="trigram")')
        self.next_id = 1

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def add(self, text: str) -> int:
        rowid = self.next_id
        self.next_id += 1
        body = unicodedata.normalize("NFC", text)
        self.conn.execute(
            "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", (rowid, index_text(body))
        )
        self.conn.execute("INSERT INTO memories_tri(rowid, body) VALUES (?, ?)", (rowid, body))
        return rowid

    def match(self, table: str, expression: str | None) -> set[int]:
        if expression is None:
            return set()
        rows = self.conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table})",
            (expression,),
        )
        return {r[0] for r in rows}

    def words(self, query: str, mode: Mode = "any") -> set[int]:
        return self.match("memories_fts", match_expression(query, mode=mode))

    def trigrams(self, query: str) -> set[int]:
        return self.match("memories_tri", trigram_expression(query))

    def search(self, query: str, mode: Mode = "any") -> set[int]:
        return self.words(query, mode) | self.trigrams(query)


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store()
    yield s
    s.conn.close()


def storable(text: str) -> str:
    """What the real store accepts: no NUL, no lone surrogates."""
    return "".join(ch for ch in text if ch != "\x00" and not "\ud800" <= ch <= "\udfff")


# --- strategies ---------------------------------------------------------------------

TRAPS = [
    "\x00", "\x01", "\x1f", "\x7f", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e",
    "\u200f", "\u202e", "\u2066", "\u2069", "\u00ad", '"', '""', "'", "*", "(", ")", "{", "}",
    "[", "]", "NEAR", "NEAR(", "NEAR/3", "AND", "OR", "NOT", "and", "^", ":", "-", "+", "\\",
    "col:", "body:", "\u0301", "\u0308", "e\u0301", "\U0001f600", "\U0001f97a",
    "\U0001f44d\U0001f3fd",
    "\u05e9\u05dc\u05d5\u05dd", "\u0645\u0631\u062d\u0628\u0627", "\u0131", "\u0130", "\u00df",
    "\u1e9e", "\ufb01", "\uff21\uff22", "\u19b0", "\u1cf2", "\U000e0001", "\ue000", "\U0010ffff",
    "\ud800", "\udfff", " ", "\t", "\n", "\u3000", "\u00a0", "\u2028", "边界", "の", "한",
    "E1234", "whale-listen", "a", "the", "\u0434\u0430", "x" * 200, "\u0301" * 150 + "a",
]

trap_text = st.lists(st.sampled_from(TRAPS) | st.text(max_size=5), max_size=12).map("".join)
any_text = st.text() | trap_text | st.text(st.characters(codec="utf-8"))
# Lone surrogates only reach queries (the store rejects them in documents).
query_text = any_text | st.text(st.characters(categories=["Cs", "Ll", "Po", "Mn"]))

LATIN = ["memory", "whale", "listen", "tide", "Recall", "postgres", "error", "the", "is",
         "what", "café", "naïve", "Ärger", "a"]
IDENTS = ["E1234", "whale-listen", "psycopg2", "psycopg2-binary", "ORA-00942", "v1.2.3",
          "foo_bar.baz", "@user", "C++", "bob@example.com", "x86_64", "K8s", "2024-05-01"]
CYRILLIC = ["память", "Кит", "слушать", "что", "и", "ошибка", "ёлка"]
GERMAN = ["Straße", "Grüße", "Übermäßig", "und", "die", "Fußgänger", "schön"]
CJK_WORDS = ["我们", "需要", "讨论", "一下", "边界", "问题", "记忆", "系统", "数据库", "连接",
             "中华人民", "的", "是", "人工智能", "学习", "东京", "ラーメン", "食べる", "학교에서",
             "공부", "時間"]

cjk_sentence = st.lists(st.sampled_from(CJK_WORDS), min_size=1, max_size=8).map("".join)
doc_word = (
    st.sampled_from(LATIN + IDENTS + CYRILLIC + GERMAN)
    | cjk_sentence
    | st.tuples(st.sampled_from(LATIN + IDENTS), st.sampled_from(["", ",", ".", ":", ")", "?"]))
    .map("".join)
    | st.tuples(st.sampled_from(["(", '"', "'"]), st.sampled_from(LATIN + IDENTS)).map("".join)
)
document = st.lists(doc_word, min_size=1, max_size=12).map(" ".join)


def probes_of(doc: str) -> list[str]:
    """Words a user could look for in ``doc``."""
    out: list[str] = []
    for token in doc.split():
        for run in lexical._CJK_RUN.findall(token):
            out.extend(
                run[i : i + n] for n in (2, 3, 4) for i in range(len(run) - n + 1)
            )
        if any(ch.isalnum() for ch in token):
            out.append(token)
    return out


# --- safety -------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=query_text, doc=any_text)
def test_any_text_gives_a_safe_expression(query: str, doc: str) -> None:
    with Store() as store:
        store.add(storable(doc))
        for mode in MODES:
            expr = match_expression(query, mode=mode)
            assert expr is None or expr.strip()
            store.match("memories_fts", expr)  # must not raise
        store.match("memories_tri", trigram_expression(query))
    query_terms(query)
    contains_term(storable(doc), query)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=any_text)
def test_a_document_matches_itself(doc: str) -> None:
    """Every term of a query is in the document it came from, so AND still finds it."""
    doc = storable(doc)
    with Store() as store:
        rowid = store.add(doc)
        store.add("unrelated filler text")
        expr = match_expression(doc, mode="all")
        if expr is not None:
            assert rowid in store.match("memories_fts", expr), expr
            assert rowid in store.match("memories_fts", match_expression(doc, mode="any"))
        tri = trigram_expression(doc)
        if tri is not None:
            assert rowid in store.match("memories_tri", tri), tri


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(document, min_size=1, max_size=4), data=st.data())
def test_every_stored_word_is_found(docs: list[str], data: st.DataObject) -> None:
    which = data.draw(st.integers(0, len(docs) - 1))
    probes = probes_of(docs[which])
    assume(probes)
    probe = data.draw(st.sampled_from(probes))
    with Store() as store:
        ids = [store.add(d) for d in docs]
        expr = match_expression(probe)
        assert expr is not None, probe
        found = store.search(probe)
        assert ids[which] in found, (probe, expr, trigram_expression(probe))
        assert ids[which] in store.words(probe, "all"), (probe, match_expression(probe, mode="all"))


# --- examples -----------------------------------------------------------------------


def test_cjk_word_inside_a_sentence(store: Store) -> None:
    hit = store.add("我们需要讨论一下边界的问题")
    store.add("今天天气很好")
    assert store.words("边界") == {hit}
    assert store.words("边界问题", "all") == {hit}
    assert store.words("一下边") == {hit}
    assert store.words("问") == {hit}  # one character: prefix over bigrams
    assert store.words("题") == {hit}  # last character of the run
    assert store.words("天气") != {hit}


def test_japanese_and_korean(store: Store) -> None:
    ja = store.add("明日は東京でラーメンを食べる予定です")
    ko = store.add("학교에서 한국어를 공부합니다")
    assert ja in store.words("ラーメン")
    assert ja in store.words("東京")
    assert ko in store.words("학교")
    assert ko in store.words("공부", "all")
    assert ko in store.words("한국어")


@pytest.mark.parametrize(
    ("doc", "query"),
    [
        ("the whale-listen service is down", "whale-listen"),
        ("the whale-listen service is down", "whale"),
        ("error E1234 occurred at noon", "E1234"),
        ("error E1234 occurred at noon", "e1234"),
        ("pip install psycopg2-binary", "psycopg2"),
        ("pip install psycopg2-binary", "psycopg"),
        ("ORA-00942: table or view does not exist", "ORA-00942"),
        ("ORA-00942: table or view does not exist", "00942"),
        ("released v1.2.3 yesterday", "v1.2.3"),
        ("call foo_bar.baz() first", "foo_bar.baz"),
        ("ping @user about it", "@user"),
        ("we use C++ here", "C++"),
        ("mail bob@example.com today", "bob@example.com"),
        ("Grüße aus der Straße", "Straße"),
        ("Grüße aus der Straße", "GRÜẞE"),
        ("Ошибка памяти", "ошибка"),
        ("café au lait", "cafe"),
        ("ＡＢＣ full width", "abc"),
        ("zero\u200bwidth join", "zerowidth"),
    ],
)
def test_identifiers_and_words_are_found(store: Store, doc: str, query: str) -> None:
    hit = store.add(doc)
    store.add("nothing to see here")
    assert hit in store.search(query)


@pytest.mark.parametrize(
    "query",
    ['"', "*", "AND", "OR", "NOT", "NEAR(", "NEAR(a b", 'foo"bar', "-x", "^", "col:val",
     "body:x", "(", ")", "a OR", "* OR *", '"unterminated', "\x00", "a\x00b", "\ud800",
     "{body}: x", "+", "NEAR/2", "^foo", "foo*", "'", "\\", "😀", "\u200b"],
)
def test_hostile_queries_are_safe(store: Store, query: str) -> None:
    store.add('some "text" AND more NEAR(x) col:val foo"bar -x ^ foo*')
    for mode in MODES:
        store.match("memories_fts", match_expression(query, mode=mode))
    store.match("memories_tri", trigram_expression(query))


def test_operator_words_are_plain_words(store: Store) -> None:
    hit = store.add("NEAR the AND gate, NOT OR")
    assert hit in store.words("NEAR")
    assert hit in store.words("AND OR NOT", "all")
    assert hit in store.words('foo"bar') or match_expression('foo"bar') == '"foo""bar"'


def test_nothing_searchable_gives_none() -> None:
    for query in ["", "   ", '"', "*", "^", "-", "()", "\x00\x01", "\u200b\u200d", "\ud800"]:
        assert match_expression(query) is None, query
        assert match_expression(query, mode="all") is None, query
    assert trigram_expression("ab cd") is None
    assert trigram_expression("...") is None


def test_stopwords(store: Store) -> None:
    assert match_expression("what is") is not None
    assert match_expression("what is", mode="all") is not None
    assert match_expression("что и") is not None
    assert match_expression("der die und") is not None
    assert match_expression("的") is not None
    expr = match_expression("what is the whale-listen port")
    assert expr == '"whale-listen" OR "port"'
    hit = store.add("what is this")
    assert hit in store.words("what is")
    assert query_terms("what is the whale-listen port?") == ["whale-listen", "port"]
    assert query_terms("what is") == []
    assert trigram_expression("what is the whale-listen") == '"whale-listen"'
    assert trigram_expression("which where") == '"which" OR "where"'
    assert trigram_expression("what the") is None


def test_all_mode_joins_with_and() -> None:
    assert match_expression("alpha beta", mode="all") == '"alpha" AND "beta"'
    assert match_expression("alpha beta") == '"alpha" OR "beta"'
    assert match_expression("alpha alpha") == '"alpha"'


def test_caps() -> None:
    many = " ".join(f"w{i}" for i in range(500))
    expr = match_expression(many)
    assert expr is not None
    assert expr.count(" OR ") == lexical.MAX_TERMS - 1
    tri = trigram_expression(" ".join(f"word{i}" for i in range(500)))
    assert tri is not None and tri.count(" OR ") == lexical.MAX_TERMS - 1
    assert len(query_terms(many)) == lexical.MAX_TERMS


def test_long_word_becomes_a_prefix_query(store: Store) -> None:
    blob = "a1b2c3d4" * 40
    hit = store.add(f"token {blob} end")
    expr = match_expression(blob)
    assert expr is not None and expr.endswith("*")
    assert len(expr) < lexical.MAX_TERM_CHARS + 10
    assert hit in store.words(blob)
    assert hit in store.trigrams(blob)


def test_trigram_expression() -> None:
    assert trigram_expression("(psycopg2), E1234!") == '"psycopg2" OR "E1234"'
    assert trigram_expression('"foo"bar"') == '"foo""bar"'
    assert trigram_expression("Fooba fooba FOOBA") == '"Fooba"'


def test_index_text() -> None:
    assert index_text("plain text, unchanged") == "plain text, unchanged"
    body = index_text("讨论边界")
    tokens = body.split()
    assert tokens[:4] == ["讨论", "论边", "边界", "界"]
    assert "讨论" in tokens[4:] and "边界" in tokens[4:]
    assert index_text("单").split() == ["单"]
    assert "psycopg2" in index_text("使用psycopg2连接").split()


def test_has_cjk() -> None:
    assert has_cjk("边界")
    assert has_cjk("ラーメン")
    assert has_cjk("ﾗｰﾒﾝ")
    assert has_cjk("한국어")
    assert has_cjk("mixed 中 text")
    assert not has_cjk("plain ascii, ÄÖÜ, кириллица")
    assert not has_cjk("、。「」・")


def test_query_terms() -> None:
    assert query_terms("Error E1234 in psycopg2, and ORA-00942.") == [
        "error", "e1234", "psycopg2", "ora-00942",
    ]
    assert query_terms("C++ @user v1.2.3 foo_bar.baz (x)") == [
        "c++", "@user", "v1.2.3", "foo_bar.baz",
    ]
    assert query_terms("Straße STRASSE") == ["strasse"]
    assert query_terms("我们需要讨论一下边界的问题") == ["需要", "讨论一下", "边界", "问题"]
    assert "psycopg2" in query_terms("使用psycopg2连接")
    assert query_terms("") == []


def test_contains_term() -> None:
    assert not contains_term("please upgrade now", "pg")
    assert contains_term("error E1234: disk", "E1234")
    assert contains_term("ERROR e1234", "e1234")
    assert not contains_term("error E12345", "E1234")
    assert not contains_term("foo_bar", "foo")
    assert contains_term("use C++17 here", "c++")
    assert contains_term("ping @user now", "@user")
    assert contains_term("see whale-listen.", "whale-listen")
    assert contains_term("我们需要讨论一下边界的问题", "边界")
    assert contains_term("使用psycopg2连接", "psycopg2")
    assert contains_term("Grüße aus der STRASSE", "straße")
    assert not contains_term("который", "кот")
    assert contains_term("кот спит", "Кот")
    assert not contains_term("anything", "")
    assert contains_term("pg pgupgrade", "pg")


def test_raw_match() -> None:
    assert raw_match('"a" NEAR b*') == '"a" NEAR b*'
    for bad in ["a\x00b", "\ud800", "  "]:
        with pytest.raises(InvalidInput):
            raw_match(bad)


# --- agreement with SQLite's tokenizer ------------------------------------------------


def test_token_chars_agree_with_sqlite() -> None:
    """Every character the module counts as a token char yields a token in unicode61.

    (Otherwise an AND query could hold an empty phrase and silently match nothing.)
    CJK characters must be token characters too.
    """
    db = sqlite3.connect(":memory:")
    db.execute('CREATE VIRTUAL TABLE f USING fts5(body, tokenize="unicode61 remove_diacritics 2")')
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, instance)")
    chars = [
        cp
        for cp in range(0x80, 0x110000)
        if not 0xD800 <= cp < 0xE000
        and (fts._is_token_char(chr(cp)) or has_cjk(chr(cp)))
    ]
    db.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", [(cp, chr(cp)) for cp in chars])
    tokenised = {row[0] for row in db.execute("SELECT DISTINCT doc FROM v")}
    missing = [hex(cp) for cp in chars if cp not in tokenised]
    assert missing == []


def test_jieba_is_not_imported_for_non_cjk_and_is_silent() -> None:
    code = (
        "import sys\n"
        "from tideline import text as l\n"
        "from tideline.store import fts_query as f\n"
        "l.index_text('plain words'); f.match_expression('psycopg2 E1234')\n"
        "l.query_terms('what is this'); f.trigram_expression('hello there')\n"
        "assert 'jieba' not in sys.modules, 'jieba imported for non-CJK text'\n"
        "l.index_text('我们需要讨论一下边界的问题'); f.match_expression('边界')\n"
        "assert 'jieba' in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PATH": ""},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == ""


def test_trigram_only_for_identifiers_codes_cjk_and_compounds() -> None:
    for token in ("psycopg2", "E1234", "whale-listen", "v1.2.3", "边界问题", "Datenbankverbindung",
                  "psycopg"):
        assert trigram_expression(token) is not None, token
    for token in ("live", "now", "the cat sat"):
        assert trigram_expression(token) is None, token
