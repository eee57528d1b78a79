"""Turns that only ask rank below turns that tell (issue 12)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.recall.chat import recall_tuned, store_chat

from tideline.config import Config
from tideline.recall.asking import question_share


def test_question_share_counts_the_words_in_questions() -> None:
    assert question_share("I went camping. It was great!") == 0.0
    assert question_share("What got you into running?") == 1.0
    assert 0.7 < question_share("Wow! What got you into running?") < 0.9
    assert question_share("") == 0.0
    assert question_share("你去哪里露营了？") == 1.0


@given(st.text(max_size=200))
def test_question_share_is_a_share(text: str) -> None:
    assert 0.0 <= question_share(text) <= 1.0


def _order(store_dir: Path, discount: float) -> list[str]:
    packet = recall_tuned(store_dir, "running marathon training", question_discount=discount)
    return [i.message_id or "" for i in packet.items]


def test_the_turn_that_tells_outranks_the_one_that_asks(store_dir: Path) -> None:
    """ "Wow! What got you into running?" ranked above the answer in LoCoMo conv-26."""
    store_chat(store_dir, [
        {"session": "s1", "speaker": "Ana", "id": "ask",
         "text": "Running marathon training? Really?"},
        {"session": "s2", "speaker": "Bo", "id": "tell",
         "text": "Running the marathon training plan, it was hard."},
    ])
    assert _order(store_dir, 0.0).index("ask") < _order(store_dir, 0.0).index("tell")
    assert _order(store_dir, 0.3).index("tell") < _order(store_dir, 0.3).index("ask")


def test_the_reply_to_a_question_hit_inherits_its_undiscounted_score(store_dir: Path) -> None:
    """The reply holds the answer the question turn only asked about: it comes in at
    ``neighbour_factor`` of the question's score before the discount (never above the
    question's own score), not at a share of the discounted one."""
    store_chat(store_dir, [
        {"session": "s1", "speaker": "Ana", "id": "ask",
         "text": "Running marathon training? Really?"},
        {"session": "s1", "speaker": "Bo", "id": "reply",
         "text": "Yes, three times a week since spring."},
    ])
    packet = recall_tuned(store_dir, "running marathon training",
                          neighbour_hits=Config().recall.neighbour_hits)
    by_id = {i.message_id: i for i in packet.items}
    assert by_id["reply"].score >= by_id["ask"].score > 0


def test_a_neighbour_that_only_asks_keeps_its_own_discount(store_dir: Path) -> None:
    """LoCoMo: 145 of the top-10 slots went to question turns pulled in beside a hit
    ("Wow! Did you see that band?") and none held evidence; a neighbour now scores
    ``neighbour_factor`` of its hit times its own question discount."""
    store_chat(store_dir, [
        {"session": "s1", "speaker": "Bo", "id": "tell",
         "text": "Running the marathon training plan, it was hard."},
        {"session": "s1", "speaker": "Ana", "id": "asks-back",
         "text": "Oh wow, who coached you?"},
    ])
    packet = recall_tuned(store_dir, "running marathon training",
                          neighbour_hits=Config().recall.neighbour_hits)
    by_id = {i.message_id: i for i in packet.items}
    tune = Config().recall
    expected = by_id["tell"].score * tune.neighbour_factor * (1 - tune.question_discount)
    assert 0 < by_id["asks-back"].score <= expected + 1e-3
