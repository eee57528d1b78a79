"""Query words widened to their other forms: "camped" finds "camping" (issue 12)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline import text as lexical
from tideline.config import Config
from tideline.recall import morph
from tideline.recall.morph import coverage, forms, widen


def test_regular_inflections_are_found() -> None:
    assert {"camp", "camps", "camping"} <= set(forms("camped"))
    assert {"paint", "painted", "paints"} <= set(forms("painting"))
    assert "run" in forms("running")
    assert "hike" in forms("hiking")
    assert {"study", "studied"} <= set(forms("studies"))
    assert "destressed" in forms("destress")


def test_short_foreign_and_odd_words_are_left_as_typed() -> None:
    assert forms("ran") == ()
    assert forms("Häuser".casefold()) == ()
    assert forms("e1234x") == ()
    assert forms("дома") == ()
    assert widen(["the", "ok", "camped"]).keys() == {"camped"}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=14))
def test_forms_are_other_ascii_words(word: str) -> None:
    got = forms(word)
    assert word not in got
    assert all(f.isascii() and f.isalpha() and len(f) >= 3 for f in got)
    assert len(got) == len(set(got))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80), st.lists(st.sampled_from(
    ["camped", "painting", "kids", "moved", "e1234", "河流"]), max_size=4, unique=True))
def test_forms_only_ever_add_keyword_evidence(text: str, terms: list[str]) -> None:
    plain = lexical.keyword_coverage(text, terms)
    widened = coverage(text, terms, None, widen(terms))
    assert 0.0 <= plain <= widened <= 1.0


def _camping_store(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns([{"session": "s1", "speaker": "Melanie",
                        "text": "We went camping in the forest last week"}]
                      + [{"session": "s2", "speaker": "Ben", "text": f"weather note {i}"}
                         for i in range(30)], source="chat")


def _camping_hit(store_dir: Path, word_forms: bool) -> tuple[float, str] | None:
    base = Config()
    config = dataclasses.replace(base, recall=dataclasses.replace(base.recall,
                                                                  word_forms=word_forms))
    with Memory.open(store_dir, embedder=hashing(), project="global", config=config) as mem:
        packet = mem.recall("Where has she camped before?", log=False, limit=5)
    for item in packet.items:
        if "camping" in item.text:
            return item.score, item.source
    return None


def test_a_query_in_another_form_finds_the_turn_by_its_words(store_dir: Path) -> None:
    """ "Where has Melanie camped?" (LoCoMo conv-26): the evidence says "camping"."""
    _camping_store(store_dir)
    widened = _camping_hit(store_dir, word_forms=True)
    plain = _camping_hit(store_dir, word_forms=False)
    assert widened is not None and widened[1] == "lexical"
    assert plain is None or plain[1] != "lexical"
    assert plain is None or widened[0] > plain[0]


def test_only_english_queries_are_widened(store_dir: Path) -> None:
    """The `real` bench's German queries lost recall@5 to English forms of German words."""
    assert morph.looks_english("Where has Melanie camped?")
    assert not morph.looks_english("Welche Datenbank nutzt das Projekt?")
    assert not morph.looks_english("E1234 psycopg2")
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns([{"session": "s", "speaker": "Ana", "text": "Wir nutzen Datenbanken"},
                       {"session": "s", "speaker": "Bo", "text": "We went camping"}],
                      source="chat")
        forms_de, text_de = mem._rt.engine._terms.word_forms("t", "Welche Datenbank nutzt ihr?",
                                                    ["welche", "datenbank", "nutzt"], set())
        forms_en, text_en = mem._rt.engine._terms.word_forms("t", "Where have you camped?",
                                                    ["camped"], set())
    assert forms_de == {} and text_de == "Welche Datenbank nutzt ihr?"
    assert forms_en == {"camped": ("camping",)}
    assert text_en == "Where have you camped? camping"
