"""Turn-level knowledge updates: of two turns telling the same thing, the later first (issue 29)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import hashing
from tests.recall.chat import recall_tuned

from tideline import Memory
from tideline.recall.restated import Told, later_first


def _told(key: int, score: float, session: str, time: float, speaker: str = "u",
          coverage: float = 1.0) -> Told:
    return Told(key, score, ("p", speaker), session, time, coverage)


def test_the_later_restatement_is_put_just_above_the_earlier() -> None:
    ranked = [_told(1, 0.9, "a", 1.0), _told(2, 0.8, "b", 2.0)]
    moved = later_first(ranked, ratio=0.8, coverage=0.6)
    assert list(moved) == [2] and 0.9 < moved[2] < 0.9 + 1e-12


def test_only_the_same_speaker_in_another_session_near_in_score_restates() -> None:
    assert later_first([_told(1, 0.9, "a", 1), _told(2, 0.8, "a", 2)],
                       ratio=0.8, coverage=0.6) == {}  # same session: the talk goes on
    assert later_first([_told(1, 0.9, "a", 1), _told(2, 0.8, "b", 2, speaker="v")],
                       ratio=0.8, coverage=0.6) == {}  # someone else
    assert later_first([_told(1, 0.9, "a", 1), _told(2, 0.5, "b", 2)],
                       ratio=0.8, coverage=0.6) == {}  # far below: about something else
    assert later_first([_told(1, 0.9, "a", 1), _told(2, 0.8, "b", 2, coverage=0.2)],
                       ratio=0.8, coverage=0.6) == {}  # not the query's thing
    assert later_first([_told(1, 0.9, "a", 2), _told(2, 0.8, "b", 1)],
                       ratio=0.8, coverage=0.6) == {}  # the earlier one is first already
    assert later_first([_told(1, 0.9, "a", 1), _told(2, 0.8, "b", 2)],
                       ratio=0.0, coverage=0.6) == {}  # off


@given(st.lists(st.tuples(st.floats(0, 3), st.sampled_from("abc"), st.floats(0, 10),
                          st.floats(0, 1)), max_size=14))
def test_a_moved_turn_lands_just_above_a_better_earlier_one(
    rows: list[tuple[float, str, float, float]],
) -> None:
    ranked = sorted((_told(i, s, sess, t, coverage=c) for i, (s, sess, t, c) in enumerate(rows)),
                    key=lambda t: -t.score)
    by_key = {t.key: t for t in ranked}
    for key, score in later_first(ranked, ratio=0.8, coverage=0.6).items():
        assert score > by_key[key].score or score == by_key[key].score
        assert any(score > e.score and e.time < by_key[key].time for e in ranked[:10])


def test_the_later_value_of_a_restated_fact_ranks_first(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns([
            {"session": "s1", "role": "user", "id": "old", "timestamp": "2023-04-03T10:00:00Z",
             "text": "I see my therapist Dr. Smith often: every two weeks."},
            {"session": "s2", "role": "user", "id": "new", "timestamp": "2023-11-03T10:00:00Z",
             "text": "I see my therapist Dr. Smith often now: every week."},
            *({"session": "f", "role": "user", "text": f"weather note {i}"} for i in range(30)),
        ], source="chat")
    query = "How often do I see my therapist Dr. Smith?"
    off = [i.message_id for i in recall_tuned(store_dir, query, update_ratio=0.0).items]
    assert off.index("old") < off.index("new")
    # The hashing embedder of the tests scores the two further apart than e5 does.
    on = [i.message_id for i in recall_tuned(store_dir, query, update_ratio=0.8).items]
    assert on.index("new") < on.index("old")
