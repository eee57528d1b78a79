"""A turn that answers the other speaker's question is lifted (issue 12, eighth round)."""

from __future__ import annotations

from pathlib import Path

from tests.recall.chat import recall_tuned, store_chat

from tideline.models import Turn
from tideline.recall.answers import answer_factors


def _turn(tid: int, index: int, speaker: str, text: str, session: str = "s1") -> Turn:
    return Turn(id=tid, session=session, turn_index=index, speaker=speaker, role="user",
                text=text, timestamp=None, source="chat", message_id=f"m{tid}", scope="p")


def test_only_a_turn_after_another_speakers_question_is_lifted() -> None:
    asks = _turn(1, 0, "Bo", "What got you into pottery?")
    answer = _turn(2, 1, "Ana", "My aunt took me to a class at the studio.")
    goes_on = _turn(3, 2, "Ana", "Is it not lovely? I made a bowl there.")
    half = _turn(4, 3, "Bo", "Great bowl. Did you glaze it yourself?")
    after_half = _turn(5, 4, "Ana", "Yes, in blue.")
    elsewhere = _turn(6, 1, "Ana", "I made a vase.", session="s2")
    known = [asks, answer, goes_on, half, after_half, elsewhere]
    got = answer_factors([answer, goes_on, after_half, elsewhere, asks], known, 0.1)
    assert got[answer.id] == 1.1  # the whole turn before it asks
    # The turn before is her own (a question she asked herself): not an answer to anyone.
    assert goes_on.id not in got
    # Five of the seven words before it sit in a question: that share of the lift.
    assert abs(got[after_half.id] - (1.0 + 0.1 * 5 / 7)) < 1e-9
    # No turn before it in its own session (s2 holds no index 0).
    assert elsewhere.id not in got
    assert asks.id not in got  # the first turn of the session
    # Only turns whose predecessor is known are lifted; 0 lifts nothing.
    assert answer_factors([answer], [answer], 0.1) == {}
    assert answer_factors([answer], known, 0.0) == {}


def _ranked(store_dir: Path, lift: float) -> list[tuple[str, float]]:
    packet = recall_tuned(store_dir, "pottery class at the studio bowl", answer_lift=lift)
    return [(i.message_id or "", i.score) for i in packet.items]


def test_the_answer_to_a_question_outranks_the_same_words_said_unasked(
    store_dir: Path,
) -> None:
    """LoCoMo: "What got you into it?" is followed by the turn that tells the fact; of
    two turns as near the query, the one that answers the other's question ranks first
    with the lift and second without it, and only its score moves, by the factor."""
    store_chat(store_dir, [
        {"session": "s1", "speaker": "Ana", "id": "unasked",
         "text": "The pottery class at the studio was fun, we made a bowl."},
        {"session": "s2", "speaker": "Bo", "id": "asks",
         "text": "How was your weekend?"},
        {"session": "s2", "speaker": "Ana", "id": "answer",
         "text": "The pottery class at the studio was fun, I made a bowl."},
    ])
    off = _ranked(store_dir, 0.0)
    on = _ranked(store_dir, 0.3)
    assert [m for m, _ in off][:2] == ["unasked", "answer"]
    assert [m for m, _ in on][:2] == ["answer", "unasked"]
    assert dict(on)["unasked"] == dict(off)["unasked"]
    assert abs(dict(on)["answer"] - round(dict(off)["answer"] * 1.3, 4)) < 1e-3


def test_the_locomo_bench_changes_one_recall_setting_for_an_ablation() -> None:
    from tideline.bench import locomo

    assert locomo.tuned([]) is None
    config = locomo.tuned(["answer_lift=0", "trust_hubness=false", "neighbour_hits=5"])
    assert config is not None
    assert config.recall.answer_lift == 0.0
    assert config.recall.trust_hubness is False
    assert config.recall.neighbour_hits == 5
    assert config.recall.listener_discount == 0.15  # the rest as loaded
    for bad in ("no_such_setting=1", "answer_lift", "trust_hubness=maybe", "answer_lift=x"):
        try:
            locomo.tuned([bad])
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
