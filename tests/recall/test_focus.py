"""A query about a person ranks turns by what it asks, not by the name (issue 12)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.recall.focus import blend, focus_vector


def _talk(mem: Memory) -> None:
    """Caroline says Melanie's name over and over; Melanie once tells what she made."""
    turns = [{"session": f"s{i % 6}", "speaker": "Caroline",
              "text": f"Melanie, Melanie, has Melanie made it home yet {i}"} for i in range(60)]
    turns.insert(17, {"session": "s9", "speaker": "Melanie",
                      "text": "I finished a watercolour of the harbour"})
    turns.insert(40, {"session": "s7", "speaker": "Melanie", "text": "Thanks, lovely to hear"})
    mem.add_turns(turns, source="chat")


def _first(store_dir: Path, query: str, name_focus: float) -> list[str]:
    plain = Config.load(home=store_dir)
    config = dataclasses.replace(plain, recall=dataclasses.replace(plain.recall,
                                                                   name_focus=name_focus))
    with Memory.open(store_dir, embedder=hashing(), config=config) as mem:
        packet = mem.recall(query, log=False, limit=5)
    return [i.text for i in packet.items]


def test_the_named_persons_topical_turn_beats_turns_full_of_the_name(store_dir: Path) -> None:
    """Without the focus, the turns that repeat "Melanie" win on the name alone."""
    with Memory.open(store_dir, embedder=hashing()) as mem:
        _talk(mem)
    query = "Which watercolors has Melanie made?"
    assert _first(store_dir, query, 0.5)[0] == "I finished a watercolour of the harbour"
    assert _first(store_dir, query, 0.0)[0].startswith("Melanie, Melanie")


def test_no_focus_when_the_query_names_everyone_or_no_one(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing()) as mem:
        _talk(mem)
    for query in ("Which watercolors have Melanie and Caroline made?",
                  "Which watercolors were made?"):
        assert _first(store_dir, query, 0.5) == _first(store_dir, query, 0.0)


def test_the_focus_vector_takes_the_name_out() -> None:
    name = np.zeros(4, dtype=np.float32)
    name[0] = 1.0
    query = np.array([0.8, 0.6, 0.0, 0.0], dtype=np.float32)
    aim = focus_vector(query, [name], 0.5)
    assert aim is not None
    assert float(np.linalg.norm(aim)) == pytest.approx(1.0, abs=1e-6)
    assert float(aim @ name) < float(query @ name)
    assert focus_vector(query, [name], 0.0) is None
    assert focus_vector(query, [], 0.5) is None
    assert focus_vector(np.zeros(4, dtype=np.float32), [name], 0.5) is None
    assert focus_vector(name, [name], 1.0) is None  # nothing left but the name


@given(st.dictionaries(st.integers(0, 50), st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
                       min_size=1, max_size=30))
def test_blend_keeps_the_plain_scale_and_the_focus_order(
    pairs: dict[int, tuple[float, float]],
) -> None:
    plain = {k: a for k, (a, _) in pairs.items()}
    focused = {k: b for k, (_, b) in pairs.items()}
    out = blend(plain, focused)
    assert out.keys() == pairs.keys()
    assert np.mean(list(out.values())) == pytest.approx(np.mean(list(plain.values())), abs=1e-9)
    for k, j in ((k, j) for k in pairs for j in pairs):
        if plain[k] == plain[j] and focused[k] > focused[j] + 1e-9:
            assert out[k] > out[j]
    assert blend(plain, {}) == {}
