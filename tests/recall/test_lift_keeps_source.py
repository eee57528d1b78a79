"""A turn lifted beside a hit never ends above the hit it was lifted from (issue 29)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.recall.chat import recall_tuned, store_chat

from tideline.recall.lifts import keep_sources


def test_a_neighbour_above_its_source_is_put_just_below_it() -> None:
    scores = {1: 0.5, 2: 0.7, 3: 0.9, 4: 0.2}
    assert keep_sources(scores, {2: 1, 4: 3}) == [2]
    assert scores[2] < scores[1] and scores[1] - scores[2] < 1e-12
    assert scores[4] == 0.2 and scores[3] == 0.9  # in order already: untouched


def test_a_chain_of_lifts_is_ordered_to_its_end() -> None:
    scores = {1: 0.3, 2: 0.6, 3: 0.9}
    keep_sources(scores, {3: 2, 2: 1})  # 1 lifted 2, 2 lifted 3
    assert scores[1] > scores[2] > scores[3]


@given(st.lists(st.floats(0, 5), min_size=2, max_size=12), st.data())
def test_every_lifted_turn_ends_below_its_source(values: list[float], data: st.DataObject) -> None:
    scores = dict(enumerate(values))
    # Lifts go from a turn to a later one (no cycle), as a hit lifts a turn it outscored.
    lifted = {t: data.draw(st.integers(0, t - 1)) for t in range(1, len(values))
              if data.draw(st.booleans())}
    keep_sources(scores, lifted)
    assert all(scores[t] < scores[s] for t, s in lifted.items())


def _order(store_dir: Path, keep: bool) -> list[str]:
    packet = recall_tuned(store_dir, "kitchen shelves painted blue", neighbour_hits=3,
                          neighbour_factor=0.95, listener_discount=0.6, keep_sources=keep)
    return [i.message_id or "" for i in packet.items]


def test_the_listener_discount_does_not_put_the_lifted_reply_above_the_hit(
    store_dir: Path,
) -> None:
    store_chat(store_dir, [
        {"session": "a", "speaker": "Ann", "id": "before", "text": "weekend plans anyone"},
        {"session": "a", "speaker": "Bo", "id": "hit",
         "text": "Your kitchen shelves painted blue, you did them well, you and your brush"},
        {"session": "a", "speaker": "Ann", "id": "reply", "text": "took a whole weekend"},
    ])
    off = _order(store_dir, keep=False)
    assert off.index("reply") < off.index("hit")  # the discounted hit fell below its lift
    on = _order(store_dir, keep=True)
    assert on.index("hit") < on.index("reply")
