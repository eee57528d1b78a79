"""Who a query names: speakers and known persons, short forms resolved (issue 12)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.recall.people import SpeakerDirectory, named_people


def test_full_names_possessives_and_short_forms_resolve() -> None:
    assert named_people("What activities does Melanie do?", ["Melanie", "Caroline"]) == {
        "Melanie"}
    assert named_people("What is Caroline's identity?", ["Melanie", "Caroline"]) == {
        "Caroline"}
    assert named_people("what did mel paint?", ["Melanie", "Caroline"]) == {"Melanie"}
    assert named_people("Did Caro and Mel meet?", ["Melanie", "Caroline"]) == {
        "Melanie", "Caroline"}


def test_ambiguous_or_too_short_forms_name_no_one() -> None:
    assert named_people("what did Ma say", ["Maria", "Mark"]) == set()
    assert named_people("what did Mar say", ["Maria", "Mark"]) == set()
    assert named_people("the melody was nice", ["Melanie"]) == set()
    assert named_people("what did the user say", ["user", "assistant"]) == set()
    assert named_people("anything", []) == set()


def test_the_directory_follows_new_turns_per_scope(mem: Memory) -> None:
    directory = SpeakerDirectory(mem.store, known=["Zoe "])
    assert directory.people(["a"]) == {"Zoe"}
    mem.add_turns([{"speaker": "Ana", "text": "hi", "session": "s"}], scope="a")
    mem.add_turns([{"speaker": "Bo", "text": "yo", "session": "t"}], scope="b")
    assert directory.people(["a"]) == {"Ana", "Zoe"}
    mem.add_turns([{"speaker": "Cy", "text": "hey", "session": "s"}], scope="a")
    assert directory.people(["a", "b"]) == {"Ana", "Bo", "Cy", "Zoe"}


def _talk(mem: Memory) -> None:
    mem.add_turns([
        {"session": "s1", "speaker": "Melanie", "text": "I went camping at the lake"},
        {"session": "s3", "speaker": "Caroline", "text": "I went camping at the lake too"},
    ] + [{"session": "s2", "speaker": "Ben", "text": f"weather note {i}"}
         for i in range(30)], source="chat")


def test_a_query_naming_a_speaker_ranks_their_turn_first(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing()) as mem:
        _talk(mem)
    for name in ("Melanie", "Caroline"):
        with Memory.open(store_dir, embedder=hashing()) as mem:
            packet = mem.recall(f"Where did {name} go camping?", log=False, limit=3)
        assert packet.items[0].speaker == name


def test_the_boost_goes_to_the_named_speaker_only(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing()) as mem:
        _talk(mem)
    plain = Config.load(home=store_dir)
    off = dataclasses.replace(plain, recall=dataclasses.replace(plain.recall, speaker_boost=0))

    def scores(config: Config, query: str) -> dict[str, float]:
        with Memory.open(store_dir, embedder=hashing(), config=config) as mem:
            items = mem.recall(query, log=False, limit=10).items
        return {str(i.speaker): i.score for i in items if "camping" in i.text}

    for name, other in (("Melanie", "Caroline"), ("Caroline", "Melanie")):
        query = f"Where did {name} go camping?"
        on, bare = scores(plain, query), scores(off, query)
        assert on[name] - bare[name] == pytest.approx(plain.recall.speaker_boost, abs=2e-4)
        assert on[other] == pytest.approx(bare[other], abs=2e-4)
    both = "Where did Melanie and Caroline go camping?"
    on, bare = scores(plain, both), scores(off, both)
    assert on.keys() == {"Melanie", "Caroline"}
    assert all(on[n] - bare[n] == pytest.approx(plain.recall.speaker_boost, abs=2e-4)
               for n in on)


def test_known_persons_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELINE_KNOWN_PERSONS", "Alice, Bob,,Carol")
    assert Config.load().known_persons == ("Alice", "Bob", "Carol")
