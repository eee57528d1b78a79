"""A strong hit carries to its speaker's turn across the other's question (issue 12)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tests.recall.chat import recall_tuned, store_chat

from tideline import Memory
from tideline.models import Turn
from tideline.recall.across import carried_scores
from tideline.recall.candidates import Candidate
from tideline.recall.turn_rules import TurnRules

pytestmark = pytest.mark.backends


def _turn(tid: int, index: int, speaker: str, text: str, session: str = "s1",
          scope: str = "p") -> Turn:
    return Turn(id=tid, session=session, turn_index=index, speaker=speaker, role="user",
                text=text, timestamp=None, source="chat", message_id=f"m{tid}", scope=scope)


def _places(*turns: Turn) -> dict[tuple[str, str, int], Turn]:
    return {(t.scope, t.session, t.turn_index): t for t in turns}


def test_a_hit_carries_across_the_other_speakers_question_both_ways() -> None:
    went = _turn(1, 0, "Ana", "I went camping last week.")
    where = _turn(2, 1, "Bo", "Nice! Where was it?")
    lake = _turn(3, 2, "Ana", "At the lake, with the kids.")
    known = _places(went, where, lake)
    # Half the hit's score, however much of the turn between asks ("Nice!" tells).
    assert carried_scores([(went, 2.0)], known, 0.5) == {lake.id: 1.0}
    assert carried_scores([(lake, 1.0)], known, 0.5) == {went.id: 0.5}
    # Two hits reaching one turn: it keeps the larger carry.
    far = _turn(4, 4, "Ana", "We slept in a tent.")
    asks = _turn(5, 3, "Bo", "Did it rain?")
    known |= _places(far, asks)
    assert carried_scores([(went, 1.0), (far, 3.0)], known, 0.5) == {lake.id: 1.5}
    assert carried_scores([(went, 2.0)], known, 0.0) == {}  # 0 disables it


def test_it_never_crosses_to_another_speaker_or_over_a_statement() -> None:
    went = _turn(1, 0, "Ana", "I went camping last week.")
    where = _turn(2, 1, "Bo", "Where was it?")
    # Two places on, but Bo's own turn (or a third person's): not Ana's continuation.
    for other in ("Bo", "Cy"):
        reply = _turn(3, 2, other, "At the lake, I heard.")
        assert carried_scores([(went, 1.0)], _places(went, where, reply), 0.5) == {}
    lake = _turn(3, 2, "Ana", "At the lake, with the kids.")
    # The turn between tells, it does not ask.
    nice = _turn(2, 1, "Bo", "Sounds great. I stayed home.")
    assert carried_scores([(went, 1.0)], _places(went, nice, lake), 0.5) == {}
    # The turn between is Ana's own question: nobody asked her.
    own = _turn(2, 1, "Ana", "Have you been there?")
    assert carried_scores([(went, 1.0)], _places(went, own, lake), 0.5) == {}
    # Turns not read (or of another session, or another scope) are not reached.
    assert carried_scores([(went, 1.0)], _places(went, lake), 0.5) == {}
    other_session = _turn(3, 2, "Ana", "At the lake.", session="s2")
    assert carried_scores([(went, 1.0)], _places(went, where, other_session), 0.5) == {}
    other_scope = _turn(3, 2, "Ana", "At the lake.", scope="q")
    assert carried_scores([(went, 1.0)], _places(went, where, other_scope), 0.5) == {}
    # No speaker known: no "same person".
    blank = [_turn(1, 0, "", "I went camping."), _turn(2, 1, "Bo", "Where?"),
             _turn(3, 2, "", "At the lake.")]
    assert carried_scores([(blank[0], 1.0)], _places(*blank), 0.5) == {}


CONTINUED = "At the lake, together with the kids and my sister."


def _chat(store_dir: Path, between: str, third: str = "Ana") -> None:
    store_chat(store_dir, [
        {"session": "s1", "speaker": "Ana", "id": "went",
         "text": "We went camping in the mountains, a new tent and all."},
        {"session": "s1", "speaker": "Bo", "id": "between", "text": between},
        {"session": "s1", "speaker": third, "id": "continued", "text": CONTINUED},
        {"session": "s1", "speaker": "Bo", "id": "after", "text": "Sounds lovely, say hi."},
    ])


def _ranked(store_dir: Path, weight: float) -> list[tuple[str, float]]:
    """The items with the neighbour rule off (only the carry reaches two places on)."""
    packet = recall_tuned(store_dir, "camping mountains new tent", neighbour_hits=0,
                          across_question=weight)
    return [(i.message_id or "", i.score) for i in packet.items]


def test_the_continuation_after_a_follow_up_question_is_recalled(store_dir: Path) -> None:
    """The continuation shares no word with the query and sits two places from the hit:
    last of the chat without the carry, right after the hit with it, at half the hit's
    score times the answer lift (it follows Bo's question)."""
    _chat(store_dir, "Oh wow, where exactly?")
    off, on = _ranked(store_dir, 0.0), _ranked(store_dir, 0.5)
    assert [m for m, _ in off][:3] == ["went", "between", "continued"]
    assert [m for m, _ in on][:3] == ["went", "continued", "between"]
    hit = dict(on)["went"]
    assert abs(dict(on)["continued"] - round(0.5 * hit * 1.1, 4)) < 1e-3
    assert {m: v for m, v in on if m != "continued"} == {m: v for m, v in off
                                                          if m != "continued"}


def test_no_carry_over_a_statement(store_dir: Path) -> None:
    _chat(store_dir, "Oh wow, I stayed home.")
    assert _ranked(store_dir, 0.5) == _ranked(store_dir, 0.0)


def test_no_carry_to_another_speakers_turn(store_dir: Path) -> None:
    _chat(store_dir, "Oh wow, where exactly?", third="Cy")
    assert _ranked(store_dir, 0.5) == _ranked(store_dir, 0.0)


def _session(mem: Memory) -> list[Turn]:
    speakers = ["Ana", "Bo"] * 5
    mem.add_turns([{"session": "s1", "speaker": who, "id": f"t{i}",
                    "text": "Where was it?" if who == "Bo" else f"Ana tells part {i}."}
                   for i, who in enumerate(speakers)], source="chat")
    every = mem.store.session_turns("s1", limit=100)
    return sorted(every, key=lambda t: t.turn_index)


def test_the_first_hits_are_read_two_places_wide(mem: Memory) -> None:
    """The neighbour read takes a radius per hit (one statement for both rules)."""
    turns = _session(mem)
    got = mem.store.neighbour_turns([turns[2], turns[7]], radius=[2, 1])
    assert sorted(t.turn_index for t in got) == [0, 1, 2, 3, 4, 6, 7, 8]
    with pytest.raises(ValueError, match="radii"):
        mem.store.neighbour_turns([turns[2], turns[7]], radius=[2])


def test_the_carry_reaches_a_turn_recall_had_not_read(mem: Memory) -> None:
    """Only the hit is a candidate: the neighbour rule brings in Bo's questions either
    side, the carry Ana's turns two places on, at half the hit's score (none without it)."""
    turns = _session(mem)
    hit = turns[4]
    engine = mem._rt.engine
    config = engine.config
    query = mem.embedder.embed_query("Ana tells part 4")
    index = {t.id: t.turn_index for t in turns}
    for weight, want in ((0.5, {2, 3, 4, 5, 6}), (0.0, {3, 4, 5})):
        rules = TurnRules(mem.store, mem.embedder.dim, dataclasses.replace(
            config, recall=dataclasses.replace(config.recall, across_question=weight)),
            engine._people)
        cands = {("turn", hit.id): Candidate("turn", hit.id, "lexical", similarity=0.9,
                                             score=1.0)}
        rules.neighbours(query, cands, {hit.id: hit}, ["global"], None, None)
        assert {index[k] for _, k in cands} == want
        carried = [c for c in cands.values() if index[c.key] in (2, 6)]
        assert [(c.source, c.score) for c in carried] == [("graph", 0.5)] * len(carried)
