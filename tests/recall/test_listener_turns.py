"""Turns that speak to the listener rank below turns that tell of their speaker (issue 12)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.recall.chat import recall_tuned, store_chat

from tideline.recall.listener import listener_share


def test_listener_share_counts_second_person_among_person_pronouns() -> None:
    assert listener_share("I joined a gym last week, my trainer is great.") == 0.0
    assert listener_share("Your group sounds awesome! You must be proud.") == 1.0
    assert listener_share("You’re right, I’ll call you.") == 2 / 3  # curly apostrophe
    assert listener_share("The parade was loud.") == 0.0  # no person pronoun
    assert listener_share("Ich bin gestern geschwommen, und du?") == 0.5
    assert listener_share("Deine Gruppe klingt toll! Hast du das gemalt?") == 1.0
    assert listener_share("我们昨天去露营了。") == 0.0
    assert listener_share("你的画真好看！") == 1.0
    assert listener_share("Nous sommes allés camper hier.") == 0.0  # no listed pronoun
    assert listener_share("You " * 1500) == 1.0  # long texts are counted, not cached
    assert listener_share("") == 0.0


@given(st.text(max_size=200))
def test_listener_share_is_a_share(text: str) -> None:
    assert 0.0 <= listener_share(text) <= 1.0


def _ranked(store_dir: Path, discount: float) -> list[tuple[str, float]]:
    packet = recall_tuned(store_dir, "pottery class at the studio", listener_discount=discount)
    return [(i.message_id or "", i.score) for i in packet.items]


def test_the_turn_that_tells_outranks_the_reaction_that_speaks_to_the_listener(
    store_dir: Path,
) -> None:
    """LoCoMo conv-26 "What did Melanie paint recently?": Caroline's "Wow, Melanie! The
    colors really blend nicely. Painting looks like a great outlet for expressing
    yourself" ranked above Melanie's own "We love painting together lately … our latest
    work". A reaction addressed to the listener repeats the topic's words but holds no
    fact of its speaker; the discount puts the telling turn first."""
    store_chat(store_dir, [
        {"session": "s1", "speaker": "Ana", "id": "tell",
         "text": "I went to the pottery class at the studio and made a bowl."},
        {"session": "s2", "speaker": "Bo", "id": "react",
         "text": "Your pottery class at the studio sounds great, you made a bowl!"},
    ])
    off = _ranked(store_dir, 0.0)
    on = _ranked(store_dir, 0.15)
    assert [m for m, _ in off][:2] == ["react", "tell"]
    assert [m for m, _ in on][:2] == ["tell", "react"]
    # Only the reaction's score moves: by the discount times its share (1: all "you").
    assert dict(on)["tell"] == dict(off)["tell"]
    assert abs(dict(on)["react"] - round(dict(off)["react"] * 0.85, 4)) < 1e-3
