"""A question across time brings up the best turns of several sessions (issue 29)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import hashing
from tests.recall.chat import recall_tuned

from tideline import Memory
from tideline.recall.diversity import asks_across, session_factors


def test_asks_across_reads_counts_durations_and_order() -> None:
    assert asks_across("How many kitchen items did I replace or fix?")
    assert asks_across("How long have I been working in my current role?")
    assert asks_across("Which device did I set up first, the thermostat or the router?")
    assert not asks_across("Where did I attend my cousin's wedding?")
    assert not asks_across("What is the firstborn's name?")  # "first" as a whole word only


def test_session_factors_keep_each_sessions_best() -> None:
    assert session_factors(["a", "a", "b", "a", "b"], 0.9) == [1.0, 0.9, 1.0, 0.9, 0.9]
    assert session_factors([], 0.5) == []


@given(st.lists(st.sampled_from("abc"), max_size=20), st.floats(0, 1))
def test_session_factors_are_one_per_item_and_bounded(sessions: list[str], decay: float) -> None:
    got = session_factors(sessions, decay)
    assert len(got) == len(sessions)
    assert all(min(decay, 1.0) <= f <= 1.0 for f in got)
    assert all(got[sessions.index(s)] == 1.0 for s in set(sessions))


def test_the_second_session_comes_up_for_a_question_across_time(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns([
            {"session": "a", "role": "user", "id": "a1",
             "text": "I fixed the kitchen shelves and the kitchen faucet today."},
            {"session": "a", "role": "user", "id": "a2",
             "text": "The kitchen shelves and the kitchen faucet look great."},
            {"session": "b", "role": "user", "id": "b1",
             "text": "The toaster items I replaced."},
            *({"session": "f", "role": "user", "text": f"weather note {i}"} for i in range(30)),
        ], source="chat")
    query = "How many kitchen shelves faucet toaster items did I fix?"
    off = [i.message_id for i in recall_tuned(store_dir, query, session_decay=1.0).items]
    on = [i.message_id for i in recall_tuned(store_dir, query, session_decay=0.5).items]
    first, second = [m for m in off if m in ("a1", "a2")]
    assert off.index(second) < off.index("b1")  # session a fills the first places
    assert on.index("b1") < on.index(second)
    assert on[0] == off[0] == first  # the best turn keeps its place
