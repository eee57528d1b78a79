"""The cheap paths of the per-candidate text scores equal their plain definitions (issue 29).

A recall over a long user ↔ assistant history scores ~100 candidate texts of thousands of
characters: the question share, the listener share and the keyword normalisation each
take a shortcut there. A shortcut may change the cost, never a score.
"""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from tideline import text as lexical
from tideline.recall import asking, listener


def _plain_strip(text: str, drop_format: bool) -> str:
    out: list[str] = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Cc":
            out.append(" ")
        elif cat == "Cs" or (drop_format and cat == "Cf"):
            continue
        else:
            out.append(ch)
    return "".join(out)


def _plain_question_share(text: str) -> float:
    total = asked = 0
    for sentence in asking._SENTENCE.findall(text):
        n = len(asking._WORD.findall(sentence))
        total += n
        if sentence.rstrip().endswith(("?", "？")):
            asked += n
    return asked / total if total else 0.0


_PIECES = st.sampled_from([
    "you", "You're", "I", "my", "'", "''", "rock'n'roll", "you'd've", "'quoted'", "y'all", "don't",
    "?", "？", "!", ".", "3.5", " ", "\n", "\t", "\x00", "\x7f", "\u200b", "\ufeff",
    "\u00ad", "\ud800", "\U000e0041", "é", "–", "\u2019", "我", "你", "du", "Dein", "😀",
])
_TEXTS = st.one_of(st.text(max_size=300), st.lists(_PIECES, max_size=60).map("".join))


@settings(max_examples=300)
@given(_TEXTS)
def test_strip_invisible_equals_the_per_character_rule(text: str) -> None:
    for drop in (True, False):
        assert lexical.strip_invisible(text, drop_format=drop) == _plain_strip(text, drop)


def test_the_quick_check_knows_every_invisible_character() -> None:
    # If a Unicode update adds a format character, this names it (the shortcut would
    # otherwise keep it in the text).
    missed = [hex(cp) for cp in range(0x110000)
              if unicodedata.category(chr(cp)) in ("Cc", "Cs", "Cf")
              and lexical._MAYBE_INVISIBLE.match(chr(cp)) is None]
    assert missed == []


@settings(max_examples=300)
@given(_TEXTS)
def test_question_share_equals_the_share_of_words_in_questions(text: str) -> None:
    assert asking.question_share.__wrapped__(text) == _plain_question_share(text)


@settings(max_examples=300)
@given(_TEXTS)
def test_listener_counts_equal_the_counts_of_the_pattern_words(text: str) -> None:
    folded = text.casefold().replace("\u2019", "'")
    words = re.findall(r"[a-z]+(?:'[a-z]+)?|[我你您]", folded)
    assert listener._counts(folded) == (sum(w in listener._SPEAKER for w in words),
                                        sum(w in listener._LISTENER for w in words))
