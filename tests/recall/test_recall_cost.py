"""The recall path's cheaper forms answer exactly as the plain ones they replace.

Recall latency work (issue 12: LoCoMo recall p50 within 1.25x a bare query embedding)
cut repeated work out of the recall path; each cut is checked here against the plain
computation it stands for, and against the statements the store is asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backend import scalar, sqlite_conn, sqlite_statement_texts
from tests.conftest import hashing

from tideline import Memory
from tideline import text as lexical
from tideline.recall import morph
from tideline.store.rows import turn_from_row
from tideline.store.sql import padded
from tideline.store.sqlite import SQLiteStore
from tideline.store.sqlite import store as sqlite_store
from tideline.times import MAX_TS, MIN_TS, clamped_time, stored_time

# Letters, digits, "_", punctuation, accents, CJK (Han, kana, hangul) and the characters
# around the lowest CJK letter (U+1100), where the boundary check changes its path.
_CHARS = st.sampled_from(list("ab_1 .,:-'é") + ["一", "中", "あ", "한", "\u1100", "\u10ff",
                                                 "\u11ff", "Ⅻ", "٣"])


def _reference_is_word_char(ch: str) -> bool:
    return (ch.isalnum() or ch == "_") and lexical._CJK_RUN.match(ch) is None


def _reference_find(hay: str, needle: str) -> bool:
    """The keyword search as it was written before (every occurrence, both edges)."""
    if not needle:
        return False
    check_left = _reference_is_word_char(needle[0])
    check_right = _reference_is_word_char(needle[-1])
    start = hay.find(needle)
    while start != -1:
        end = start + len(needle)
        left_ok = start == 0 or not check_left or not _reference_is_word_char(hay[start - 1])
        right_ok = end == len(hay) or not check_right or not _reference_is_word_char(hay[end])
        if left_ok and right_ok:
            return True
        start = hay.find(needle, start + 1)
    return False


def _reference_coverage(text: str, terms: Sequence[str], weights: Sequence[float] | None,
                        alternatives: dict[str, tuple[str, ...]]) -> float:
    """Keyword coverage as computed per text before :class:`morph.Coverage`."""
    if not alternatives:
        return lexical.keyword_coverage(text, terms, weights)
    if not terms:
        return 0.0
    hay = lexical._clean_keywords(text)
    ws = list(weights) if weights is not None else [1.0] * len(terms)
    total = sum(ws)
    if total <= 0:
        return 0.0
    found = 0.0
    for term, w in zip(terms, ws, strict=True):
        alts = alternatives.get(term)
        if alts is not None:
            if morph._group(term, alts).search(hay):
                found += w
        elif _reference_find(hay, term):
            found += w
    return found / total


def test_the_word_character_test_is_unchanged_for_every_code_point() -> None:
    assert all(lexical._is_word_char(chr(c)) == _reference_is_word_char(chr(c))
               for c in range(0x110000))


@settings(max_examples=400, deadline=None)
@given(hay=st.text(_CHARS, max_size=40), needle=st.text(_CHARS, max_size=5),
       cut=st.tuples(st.integers(0, 40), st.integers(0, 6)))
def test_keyword_search_matches_the_reference(hay: str, needle: str,
                                              cut: tuple[int, int]) -> None:
    inside = hay[cut[0]:cut[0] + cut[1]]  # a needle that surely occurs somewhere
    for n in (needle, inside):
        assert lexical._find_keyword(hay, n) == _reference_find(hay, n)


_WORDS = st.sampled_from(["melanie", "camping", "camped", "paint", "painting", "kids",
                          "mel", "c++", "v1.2", "中文", "_x", ""])


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_WORDS, max_size=8), terms=st.lists(_WORDS, max_size=5, unique=True),
       weighted=st.booleans(), weights=st.lists(st.floats(0.0, 3.0), min_size=5, max_size=5),
       forms=st.booleans())
def test_prepared_coverage_matches_the_per_text_computation(
    words: list[str], terms: list[str], weighted: bool, weights: list[float], forms: bool,
) -> None:
    text = "Melanie: " + " ".join(words) + "!"
    ws = weights[:len(terms)] if weighted else None
    alternatives = {t: ("camped", "camps") for t in terms if forms and t == "camping"}
    want = _reference_coverage(text, terms, ws, alternatives)
    assert morph.Coverage(terms, ws, alternatives)(text) == want
    assert morph.coverage(text, terms, ws, alternatives) == want


_FORMS_WORDS = st.sampled_from(["camp", "camps", "camped", "camping", "campfire", "scamp",
                                 "paint", "painted", "painting", "paintings", "race", "raced",
                                 "racing", "races", "carry", "carried", "carries", "carrying",
                                 "activity", "activities", "melanie's", "c++", "中文"])


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_FORMS_WORDS, max_size=8),
       terms=st.lists(st.sampled_from(["camped", "painting", "races", "carried",
                                       "activities", "campfire", "c++"]),
                      max_size=4, unique=True),
       weights=st.none() | st.lists(st.floats(0.1, 3.0), min_size=4, max_size=4),
       glue=st.sampled_from([" ", "-", "", ", "]))
def test_coverage_with_real_forms_matches_the_per_text_computation(
    words: list[str], terms: list[str], weights: list[float] | None, glue: str,
) -> None:
    text = "Mira: " + glue.join(words)
    ws = weights[:len(terms)] if weights is not None else None
    alternatives = morph.widen(terms)
    # The forms are real ones: "camped" also finds "camping".
    assert all(t in alternatives for t in terms if t.isalpha())
    assert morph.Coverage(terms, ws, alternatives)(text) == _reference_coverage(
        text, terms, ws, alternatives)


def test_a_forms_pattern_searches_only_texts_holding_their_shared_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 12 (LoCoMo recall latency): a term with forms ("camped": camping, camps…)
    was a pattern searched at every position of every candidate text; now only the
    texts holding the start its forms share ("camp") are searched."""
    searched: list[str] = []

    class Counting:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def search(self, hay: str) -> re.Match[str] | None:
            searched.append(hay)
            return self.pattern.search(hay)

        def match(self, hay: str, pos: int) -> re.Match[str] | None:
            searched.append(hay)  # tried only where the shared start occurs (issue 29)
            return self.pattern.match(hay, pos)

    real = morph._group
    monkeypatch.setattr(morph, "_group", lambda term, alts: Counting(real(term, alts)))
    terms = ["camped", "painting"]
    cover = morph.Coverage(terms, [1.0, 2.0], morph.widen(terms))
    texts = [f"Ben: line {i} about the Leipzig marathon" for i in range(40)]
    texts += ["Mira: we went camping!", "Ben: a scamp", "Mira: she painted a lake"]
    got = [cover(t) for t in texts]
    assert got[:40] == [0.0] * 40 and got[40:] == [1 / 3, 0.0, 2 / 3]
    assert len(set(searched)) == 3  # "camp" and "paint" are in those three only


@contextmanager
def _statements(mem: Memory) -> Iterator[list[str]]:
    seen: list[str] = []
    conn = sqlite_conn(mem)
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _turns(n: int, session: str = "s1") -> list[dict[str, object]]:
    return [{"session": session, "speaker": "Ben" if i % 2 else "Mira", "role": "user",
             "text": f"line {i} about the Leipzig marathon and pasta",
             "id": f"{session}:{i}", "timestamp": 1_714_759_200 + 60 * i} for i in range(n)]


def test_an_empty_memory_table_is_not_searched(store_dir: Path) -> None:
    """A store of imported turns holds no memories: recall asks neither the memories'
    full-text tables nor their vocabulary (it did, two searches and a lookup per token)."""
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns(_turns(6), source="chat")
        with _statements(mem) as seen:
            packet = mem.recall("Leipzig marathon pasta", log=False)
        assert packet.items and all(i.type == "turn" for i in packet.items)
        assert not [s for s in seen if "memories_fts" in s or "memories_tri" in s
                    or "memories_vocab" in s]
        # Nor its vectors (an index sync per scope) or the clusters of its rows.
        assert not [s for s in seen if "'m:" in s or "clusters.version" in s]
        assert any("turns_fts" in s for s in seen) and any("'t:" in s for s in seen)
        # Once a memory exists, the memories' side is searched and finds it by its words.
        mem.write("the Leipzig marathon pasta party is on Friday")
        with _statements(mem) as seen:
            packet = mem.recall("Leipzig marathon pasta", log=False)
        assert any("memories_fts" in s for s in seen) and any("'m:" in s for s in seen)
        assert any(i.type == "memory" and i.source == "lexical" for i in packet.items)


def test_document_frequencies_match_one_lookup_per_token(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sqlite_store, "_VOCAB_CHUNK", 2)  # several statements, one token over
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns(_turns(5) + _turns(3, "s2"), source="chat")
        store = mem.store
        assert isinstance(store, SQLiteStore)
        tokens = ["leipzig", "marathon", "nowhere", "line", "leipzig", "1", "4", "pasta"]
        got, total = store.document_frequencies("t", tokens)
        one_by_one = {t: scalar(mem, "SELECT doc FROM temp.turns_vocab WHERE term = ?",
                                (t,)) or 0 for t in tokens}
        assert got == one_by_one and got["leipzig"] == 8 and got["nowhere"] == 0
        assert got["1"] == 2 and got["4"] == 1 and total >= 8
        assert store.document_frequencies("m", tokens) == (dict.fromkeys(tokens, 0), 0)


def test_exact_document_frequencies_follow_every_change_of_the_index(
    store_dir: Path,
) -> None:
    """The counts are kept between recalls (a query's tokens are not looked up again),
    and every change of the word index shows at once: turns added through this handle
    and through another one, a memory written and forgotten. Fails when the kept counts
    are not keyed by the index's structure and averages records (the counts of the
    first call come back)."""
    tokens = ["leipzig", "marathon", "otter", "1"]

    def counts(mem: Memory, kind: str = "t") -> dict[str, int]:
        store = mem.store
        assert isinstance(store, SQLiteStore)
        return store.document_frequencies(kind, tokens)[0]

    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns(_turns(3), source="chat")
        assert counts(mem) == {"leipzig": 3, "marathon": 3, "otter": 0, "1": 1}
        with _statements(mem) as seen:
            assert counts(mem)["leipzig"] == 3
        assert not [q for q in seen if "turns_vocab" in q]  # kept, not counted again
        mem.add_turns([{"session": "s2", "speaker": "Ben", "role": "user", "id": "s2:0",
                        "text": "an otter at the Leipzig marathon", "timestamp": 1_714_800_000}],
                      source="chat")
        assert counts(mem) == {"leipzig": 4, "marathon": 4, "otter": 1, "1": 1}
        with Memory.open(store_dir, embedder=hashing(), project="global") as other:
            other.add_turns(_turns(2, "s3"), source="chat")
        assert counts(mem) == {"leipzig": 6, "marathon": 6, "otter": 1, "1": 2}
        otter = mem.write("the otter swam past the Leipzig bridge").id
        mem.write("a kiln for the studio")
        assert counts(mem, "m") == {"leipzig": 1, "marathon": 0, "otter": 1, "1": 0}
        mem.forget(otter)  # the highest id stays where it was; only the index moved
        assert counts(mem, "m") == {"leipzig": 0, "marathon": 0, "otter": 0, "1": 0}


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.integers(0, 7)),
                      min_size=1, max_size=10),
       radius=st.integers(0, 2))
def test_neighbour_turns_are_every_turn_within_the_radius_once(
    neighbour_store: Memory, picks: list[tuple[str, int]], radius: int,
) -> None:
    store = neighbour_store.store
    every = store.turns_between(["global"], -1e12, 1e12, 1_000)
    by_place = {(t.session, t.turn_index): t for t in every}
    hits = [by_place[p] for p in picks if p in by_place]
    got = store.neighbour_turns(hits, radius=radius)
    want = {t.id for t in every if any(t.session == h.session
                                       and abs(t.turn_index - h.turn_index) <= radius
                                       for h in hits)}
    assert sorted(t.id for t in got) == sorted(want)  # each once, overlapping windows too
    assert {t.id: t for t in got} == {t.id: t for t in every if t.id in want}


@pytest.fixture(scope="module")
def neighbour_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """Three sessions of 8, 3 and 6 turns (a hit at the first or last place has one
    neighbour)."""
    home = tmp_path_factory.mktemp("neighbours") / "store"
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        mem.add_turns(_turns(8) + _turns(3, "s2") + _turns(6, "s3"), source="chat")
        yield mem


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-5, 5)), most=st.integers(1, 40))
def test_padded_lists_select_what_the_list_does(values: list[int], most: int) -> None:
    got = padded(values, most)
    assert got[:len(values)] == values and set(got) == set(values)
    n, size = len(values), len(got)
    assert n <= size <= max(n, most)
    # Padded to a power of two (at least 8) unless the caller's most cut it short.
    assert size in (n, most) or (size >= 8 and size & (size - 1) == 0)
    assert size < 2 * max(n, 8)


def test_id_lists_of_every_length_take_a_few_statement_texts(store_dir: Path) -> None:
    """Issue 12 (LoCoMo recall latency): each length of an ``IN (…)`` list was a
    statement text of its own, and a recall's id lists (its candidate turns, their
    vectors, the query's tokens) of every length overflowed the connection's cache of
    prepared statements (128), so its largest statements were prepared anew nearly
    every time. Padded to a power of two, lengths 1 to 300 take at most six texts per
    statement, and each read returns exactly what the unpadded one did."""
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns(_turns(150) + _turns(150, "s2"), source="chat")
        store = mem.store
        assert isinstance(store, SQLiteStore)
        every = store.turns_between(["global"], -1e12, 1e12, 1_000)
        tokens = [f"w{i}" for i in range(150)] + ["leipzig", "line", "pasta"] + [
            str(i) for i in range(150)]
        want_df = {t: scalar(mem, "SELECT doc FROM temp.turns_vocab WHERE term = ?",
                             (t,)) or 0 for t in tokens}
        with sqlite_statement_texts(mem) as texts:
            for n in range(1, len(every) + 1):
                picked = every[-n:]  # newest first in id order: the last ids
                store._turn_rows.clear()  # every id read, not only the one not read before
                store._turn_vecs.clear()
                got = store.get_turns(t.id for t in reversed(picked))
                assert list(got) == sorted(t.id for t in picked)
                assert list(got.values()) == sorted(picked, key=lambda t: t.id)
                vectors = store.turn_vectors(picked, mem.embedder.dim)
                assert sorted(vectors) == sorted(t.id for t in picked)
                store._df_exact.clear()  # every token counted, not only the newest one
                df, _ = store.document_frequencies("t", tokens[:n])
                assert df == {t: want_df[t] for t in tokens[:n]}
        for table in ("FROM turns WHERE", "FROM vectors WHERE", "turns_vocab"):
            assert 1 < len({s for s in texts if table in s}) <= 7, table


_STORED_TIMES = (st.none() | st.floats(allow_nan=True, allow_infinity=True)
                 | st.integers(-(2**70), 2**70) | st.sampled_from(
                     [MIN_TS, MAX_TS, -62_135_596_800.5, 253_402_300_799.5, "x", True]))


@settings(max_examples=300, deadline=None)
@given(spoken=_STORED_TIMES, recorded=_STORED_TIMES)
def test_a_turn_read_back_keeps_the_times_stored_time_and_clamped_time_give(
    spoken: object, recorded: object,
) -> None:
    row = (7, "s1", 2, "Mira", "user", "hello", spoken, "chat", "s1:2", "global", recorded)
    turn = turn_from_row(row)
    want_spoken, want_recorded = stored_time(spoken), clamped_time(recorded)
    assert (turn.timestamp, turn.recorded_at) == (want_spoken, want_recorded)
    assert type(turn.timestamp) is type(want_spoken)
    assert type(turn.recorded_at) is type(want_recorded)


@settings(max_examples=300, deadline=None)
@given(dim=st.integers(1, 400), seed=st.integers(0, 2**32 - 1), wide=st.booleans())
def test_the_method_dot_gives_the_bits_of_the_matmul_operator(
    dim: int, seed: int, wide: bool,
) -> None:
    """Recall scores its candidates with ``v.dot(q)`` (cheaper to call); it must give
    exactly what ``v @ q`` gave, or near-ties could change places."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((8, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    q = rng.standard_normal(dim).astype(np.float64 if wide else np.float32)
    for v in rows:  # rows of one matrix, as the store's vectors are
        assert float(v.dot(q)) == float(v @ q)
