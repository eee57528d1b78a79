"""The turns next to a turn hit come in with it (the reply to a question)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config, RecallTuning
from tideline.recall.candidates import Candidate


def _chat(session: str, lines: list[tuple[str, str]]) -> list[dict[str, object]]:
    return [{"session": session, "speaker": who, "role": "user", "text": text,
             "id": f"{session}:{n}", "timestamp": 1_714_759_200 + 60 * n}
            for n, (who, text) in enumerate(lines)]


ANSWER = "yes!! 4:12:09, a personal best"


def test_the_turn_next_to_a_hit_is_recalled(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing()) as mem:
        mem.add_turns(_chat("s1", [
            ("Ben", "good morning, coffee first"),
            ("Mira", ANSWER),
            ("Ben", "wow, at the Leipzig marathon?"),
            ("Mira", "my knees disagree"),
        ]), source="chat")
        mem.add_turns(_chat("s2", [("Ben", f"filler line {i} about the weather")
                                   for i in range(100)]), source="chat")

    def top(config: Config) -> list[str]:
        with Memory.open(store_dir, embedder=hashing(), config=config) as mem:
            packet = mem.recall("Leipzig marathon", log=False, limit=4)
            return [str(i.message_id) for i in packet.items if i.type == "turn"]

    # Without the answer lift: "my knees disagree" answers the hit's question and would
    # be lifted above it (tests/recall/test_answer_turns.py); here only the order counts.
    loaded = Config.load(home=store_dir)
    plain = dataclasses.replace(loaded, recall=RecallTuning(answer_lift=0.0))
    # Alone: no turn read beside the hits (the carry across a question reads two places
    # around the best three, recall/across.py).
    alone = dataclasses.replace(plain, recall=RecallTuning(neighbour_hits=0, answer_lift=0.0,
                                                           across_question=0.0))
    assert top(alone)[0] == "s1:2" and "s1:1" not in top(alone)[:3]
    # The answer shares no word with the question, but sits right before the hit.
    assert top(plain)[0] == "s1:2" and set(top(plain)[:3]) == {"s1:1", "s1:2", "s1:3"}


def test_neighbours_keep_to_the_scope_rule(mem: Memory) -> None:
    lines = [("Ben", "did you finish the Leipzig marathon?"), ("Mira", ANSWER)]
    mem.add_turns(_chat("s1", lines[:1]), source="chat", scope="atlas")
    # Same session name, other project: its turn must never be pulled in as a neighbour.
    mem.add_turns(_chat("s1", [("Ben", "placeholder"), ("Mira", "secret of orchard")]),
                  source="other", scope="orchard")
    packet = mem.recall("Leipzig marathon", scope="atlas", log=False, limit=10)
    assert all(i.scope in ("atlas", "global") for i in packet.items)
    assert "secret of orchard" not in {i.text for i in packet.items}


def test_a_same_named_session_of_another_scope_is_not_a_neighbour(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing()) as mem:
        mem.add_turns(_chat("s1", [("Ben", "did you finish the Leipzig marathon?")]),
                      source="chat", scope="atlas")
        mem.add_turns(_chat("s1", [("Ben", "placeholder"), ("Mira", "unrelated global note")]),
                      source="other", scope="global")
        both = mem.store.session_turns("s1", limit=10)
        assert {t.scope for t in both} == {"atlas", "global"}  # both scopes hold an "s1"
        hit = next(t for t in both if t.scope == "atlas")
        cands = {("turn", hit.id): Candidate("turn", hit.id, "lexical", similarity=0.9,
                                             score=1.0)}
        found = {hit.id: hit}
        query = mem.embedder.embed_query("Leipzig marathon")
        mem._rt.engine._turns.neighbours(query, cands, found, ["atlas", "global"], None, None)
        assert list(cands) == [("turn", hit.id)]  # global "s1" turn 1 is not its neighbour
