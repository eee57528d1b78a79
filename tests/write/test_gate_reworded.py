"""The gate's edges after issue 28: reworded corrections and inflected Russian.

A correction is often said with a word or two around the value reworded: "Igor reviews
the atlas release every Friday" → "Igor never reviews the atlas release on Friday",
"…会重试七次，然后通知李娜" → "…不会重试，然后通知李娜", "The alert fired in time." →
"The alert never fired.". The whole-text gate took these for two wordings ("conflict")
and wrote them with a ``related`` edge, so recall did not know which one is newer. They
are one statement corrected: a new memory with an ``updates`` edge. Facts about the same
person that are not one sentence edited stay apart (the gate bench's hard negatives).

The gate also read Russian words unstemmed, so "Бабушка Миры …" and "Бабушке Миры …" (one
grandmother, two cases: a pair the ``real`` bench labels *related*) shared one word and
were not linked.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tideline import Memory
from tideline.bench.gate import TEMPLATES
from tideline.embed.profiles import PROFILES
from tideline.write.contrast import compare
from tideline.write.path import judge

pytestmark = pytest.mark.backends

E5 = PROFILES["e5"]

LONG = "Incident report for the quarry cluster. " + " ".join(
    f"Step {i}: the operator checked the queue depth and the replica lag on node {i}."
    for i in range(40))

# (first, then): each was written as ``link`` (verdict "conflict") on bc5f0be.
REWORDED = [
    ("Igor reviews the atlas release every Friday",
     "Igor never reviews the atlas release on Friday"),
    ("The orchard nightly job never retries before it pages Priya",
     "The orchard nightly job retries seven times before it pages Priya"),
    ("lantern的夜间任务失败后会重试七次，然后通知李娜",
     "lantern的夜间任务失败后不会重试，然后通知李娜"),
    (LONG + " The alert fired in time.", LONG + " The alert never fired."),
]

# The same person (or project), another statement: never a correction.
NOT_CORRECTIONS = [
    ("赵磊这个季度负责orchard的值班", "赵磊负责审核quarry的发布，每个周二一次"),
    ("Igor owns the on-call rotation for harbor this quarter",
     "Igor wants the quarry reports in the team channel by 9 am"),
    ("Petra will die Berichte von atlas bis 7 Uhr im Teamkanal haben",
     "Petra übernimmt in diesem Quartal die Rufbereitschaft für lantern"),
    ("Mira has a dentist appointment with Dr. Albrecht on 14 March 2026 at 8:30.",
     "Mira flies to Lisbon for her conference talk on 9 October 2026."),
    # One value each, or a negation, but not one sentence edited.
    ("The atlas cache TTL is five minutes", "The atlas nightly job retries seven times"),
    ("atlas的缓存过期时间是五分钟", "atlas的夜间任务失败后会重试七次"),
    ("Deploys of atlas happen on Fridays",
     "The atlas staging server is not in the Frankfurt data center"),
]


def _gate(new: str, old: str, cosine: float = 0.95) -> str:
    return judge(new, old, cosine, E5.same, E5.related, min(E5.related, E5.abstain))[0]


@pytest.mark.parametrize(("first", "then"), REWORDED)
def test_a_reworded_correction_is_a_correction(first: str, then: str) -> None:
    assert compare(then, first).verdict == "correction"
    assert compare(first, then).verdict == "correction"  # and taken back
    assert _gate(then, first) == "correct"
    assert _gate(then, first, 1.0) == "correct"


@pytest.mark.parametrize(("first", "then"), NOT_CORRECTIONS)
def test_another_statement_about_the_same_subject_is_no_correction(first: str,
                                                                   then: str) -> None:
    for cosine in (0.9, 0.95):
        assert _gate(then, first, cosine) == "new", (first, then, cosine)
        assert _gate(first, then, cosine) == "new", (then, first, cosine)


@settings(max_examples=150, deadline=None)
@given(lang=st.sampled_from(sorted(TEMPLATES)), data=st.data(),
       name=st.sampled_from(["Deniz", "Lena", "张伟", "李娜"]),
       proj=st.sampled_from(["atlas", "orchard"]), day=st.sampled_from(["Friday", "周五"]),
       city=st.sampled_from(["Tokyo", "上海"]), indent=st.sampled_from(["tabs", "空格"]),
       nw=st.sampled_from(["five", "zwölf", "十二"]), n=st.sampled_from(["7", "30"]),
       ver=st.sampled_from(["14", "16"]), cosine=st.floats(E5.related, 1.0))
def test_a_statement_and_its_negation_are_a_correction(
    lang: str, data: st.DataObject, name: str, proj: str, day: str, city: str, indent: str,
    nw: str, n: str, ver: str, cosine: float,
) -> None:
    """Every template of the gate bench against its negated form (several reword more than
    the negation: "every Friday" → "on Friday", "retries five times" → "never retries"):
    a correction either way, never a link or a potentiation."""
    said, negated = data.draw(st.sampled_from(TEMPLATES[lang]))
    slots = {"name": name, "proj": proj, "day": day, "city": city, "indent": indent,
             "nw": nw, "n": n, "ver": ver}
    first, then = said.format(**slots), negated.format(**slots)
    assert _gate(then, first, cosine) == "correct", (first, then)
    assert _gate(first, then, cosine) == "correct", (then, first)


def test_russian_words_are_read_by_their_stems() -> None:
    old = "Бабушка Миры живёт в Калининграде, и Мира звонит ей каждое воскресенье."
    new = "Бабушке Миры в этом году исполнится 88 лет."
    assert _gate(new, old, 0.87) == "link"
    # An inflected restatement is the same statement; a changed day is a correction.
    said = "Мира звонит бабушке каждое воскресенье."
    assert compare("Мира звонит бабушке по воскресеньям.", said).verdict == "same"
    assert _gate("Мира звонит бабушке каждую субботу.", said) == "correct"


def test_reworded_corrections_are_stored_with_an_updates_edge(e5_mem: Memory) -> None:
    for n, (first, then) in enumerate(REWORDED):
        scope = f"r{n}"
        old = e5_mem.remember(first, scope=scope)
        new = e5_mem.remember(then, scope=scope)
        assert (old.decision, new.decision) == ("new", "correct"), (then, new)
        assert new.edge == {"type": "updates", "src": new.id, "dst": old.id}
        # Recall puts the newer statement first, saying what it updates.
        packet = e5_mem.recall(then[-60:], scope=scope, abstain=False)
        ids = [int(i.id) for i in packet.items]
        assert ids.index(new.id) < ids.index(old.id)


def test_inflected_russian_facts_are_linked(e5_mem: Memory) -> None:
    """A pair the ``real`` bench labels *related*: one grandmother, two grammatical cases."""
    old = e5_mem.remember(
        "Бабушка Миры живёт в Калининграде, и Мира звонит ей каждое воскресенье.", scope="ru")
    new = e5_mem.remember("Бабушке Миры в этом году исполнится 88 лет.", scope="ru")
    assert new.similarity >= E5.related
    assert (new.decision, new.edge) == ("link", {"type": "related", "src": new.id,
                                                 "dst": old.id})
