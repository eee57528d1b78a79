"""A date the query names, matched by a related turn from then, is evidence (issue 12)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.embed.hashing import HashingEmbedder

_WORDS = """garden tomato basil river piano violin hiking camping pottery bakery sunset lake
forest painting bicycle museum dinosaur puppy kitten shelter church picnic concert guitar
novel poetry festival beach mountain recipe""".split()


def _strict_embedder() -> HashingEmbedder:
    # Only the date can make the packet trusted: the best cosine stays under the abstain
    # bar and the margin signal is off.
    emb = hashing()
    emb.profile = dataclasses.replace(emb.profile, abstain=0.5, margin=100.0)
    return emb


def _fill(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        rows = [{"session": "s1", "speaker": "John", "id": "truck",
                 "timestamp": "2023-08-16T14:00:00+00:00",
                 "text": "Thanks to the donations our brigade got a brand new fire truck."}]
        rows += [{"session": f"f{i}", "speaker": "Maria",
                  "timestamp": f"2023-0{1 + i % 6}-0{1 + i % 9}T10:00:00+00:00",
                  "text": " ".join(_WORDS[(i * 7 + j * 3) % len(_WORDS)] for j in range(6))}
                 for i in range(60)]
        mem.add_turns(rows, source="chat")


def _ask(store_dir: Path, query: str, when_trust: float) -> tuple[bool, list[str]]:
    base = Config()
    config = dataclasses.replace(base, recall=dataclasses.replace(base.recall,
                                                                  when_trust=when_trust))
    with Memory.open(store_dir, embedder=_strict_embedder(), project="global",
                     config=config) as mem:
        packet = mem.recall(query, log=False, limit=5)
    return packet.abstained, [i.message_id or "" for i in packet.items]


def test_a_related_turn_of_the_named_date_makes_the_answer_trusted(store_dir: Path) -> None:
    """LoCoMo conv-41 "What did the donations help John's community acquire on 16 August,
    2023?" was abstained on (best cosine 0.831 under the 0.836 bar) though its evidence
    turn, spoken that day, ranked first."""
    _fill(store_dir)
    query = "What did the donations bring the brigade on 16 August 2023?"
    assert _ask(store_dir, query, 0.0)[0]  # without the date signal: abstained
    abstained, ids = _ask(store_dir, query, Config().recall.when_trust)
    assert not abstained
    assert ids[0] == "truck"


def test_an_off_topic_query_naming_a_stored_date_is_still_abstained_on(
    store_dir: Path,
) -> None:
    """A turn from the date that shares none of the query's words is no evidence."""
    _fill(store_dir)
    abstained, _ = _ask(store_dir, "Who won the chess olympiad final on 16 August 2023?",
                        Config().recall.when_trust)
    assert abstained
