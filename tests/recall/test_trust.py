"""Which candidates vouch for a query by their cosine: not the turns that only ask (issue 12).

Reproducer (issue 12, LoCoMo dev stores): "Which firmware version did Jon flash onto the
router?" was answered, not abstained on, because generic question turns ("Wow! What did
you get?", "Cool! What did it look like?") sat above the abstention bar for it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.recall.trust import vouching_similarity

_QUERY = "What did you get for your Swiss francs?"
_CHAT = [
    {"session": "s1", "speaker": "Ben", "text": "A new bike for the trail rides."},
    {"session": "s1", "speaker": "Ana", "text": "We baked bread all afternoon yesterday."},
    # Alone in its session: no reply leans on it (a reply's vector holds its question).
    {"session": "s2", "speaker": "Ana", "text": "Wow! What did you get?"},
]


def _abstained(store_dir: Path, turns: list[dict[str, Any]], **knobs: Any) -> bool:
    plain = Config.load(home=store_dir)
    config = dataclasses.replace(plain, recall=dataclasses.replace(plain.recall, **knobs))
    with Memory.open(store_dir, embedder=hashing(), config=config) as mem:
        if not mem.store.stats().get("turns"):
            mem.add_turns(turns, source="chat")
        return mem.recall(_QUERY, log=False, limit=5).abstained


def test_a_turn_that_only_asks_does_not_vouch(store_dir: Path) -> None:
    """The old rule (every turn's raw cosine) trusts the packet on the question turn."""
    assert _abstained(store_dir, _CHAT)
    assert not _abstained(store_dir, _CHAT, trust_question_share=1.0, trust_hubness=False)


def test_a_turn_that_tells_still_vouches(store_dir: Path) -> None:
    told = [*_CHAT, {"session": "s3", "speaker": "Ben",
                     "text": "Wow, you did get what you wanted."}]
    assert not _abstained(store_dir, told)


def test_memories_vouch_by_their_plain_cosine_and_turns_lose_their_hubness() -> None:
    rows = [(0.9, 0.0, None), (0.95, 0.2, "I flashed it."), (0.99, 0.0, "Did you? Really?")]
    assert vouching_similarity(rows, 0.5, 0.5) == 0.9
    assert abs(vouching_similarity(rows[1:2], 0.5, 0.5) - 0.85) < 1e-9
    assert vouching_similarity(rows, 0.0, 1.0) == 0.99
    # A turn farther than usual from the centroid gains nothing.
    assert vouching_similarity([(0.8, -0.3, "We went camping")], 0.5, 0.5) == 0.8
    assert vouching_similarity([], 0.5, 0.5) == 0.0


_texts = st.sampled_from(["Thanks!", "What did you get?", "I got a bike. Did you?",
                          "We went camping", "Why? How? Really.", ""])
_rows = st.lists(st.tuples(st.floats(-1, 1), st.floats(-0.3, 0.3),
                           st.one_of(st.none(), _texts)), max_size=12)


@given(_rows)
def test_with_both_off_it_is_the_old_rule(rows: list[tuple[float, float, str | None]]) -> None:
    assert vouching_similarity(rows, 0.0, 1.0) == max([0.0, *(r[0] for r in rows)])


@given(_rows, st.floats(0, 1), st.floats(0, 1))
def test_a_stricter_share_never_vouches_more(
    rows: list[tuple[float, float, str | None]], low: float, high: float,
) -> None:
    low, high = min(low, high), max(low, high)
    assert vouching_similarity(rows, 0.5, low) <= vouching_similarity(rows, 0.5, high)


@given(_rows, st.floats(0, 1), st.floats(0, 1))
def test_no_candidate_vouches_more_than_its_raw_cosine(
    rows: list[tuple[float, float, str | None]], hubness: float, share: float,
) -> None:
    assert vouching_similarity(rows, hubness, share) <= max([0.0, *(r[0] for r in rows)])
