"""Hubness: generic turns that sit near every query are discounted when ranking."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config, RecallTuning
from tideline.recall.candidates import Candidate
from tideline.recall.scoring import relevance
from tideline.store.sqlite.vector_index import VectorIndex

GENERIC = ["haha ok sure", "ok sure haha", "sure ok haha", "haha sure ok", "ok haha sure",
           "haha ok", "ok sure", "sure haha"]
SPECIFIC = "the ferry to Helsinki leaves at seven from terminal two"


class _Source:
    def __init__(self, keys: np.ndarray, mat: np.ndarray) -> None:
        self.keys, self.mat = keys, mat

    def vector_seq(self) -> int:
        return len(self.keys)

    def vector_changes(self, since: int) -> list[tuple[int, int, bool]]:
        return [(i + 1, int(k), True) for i, k in enumerate(self.keys) if i + 1 > since]

    def vectors_for(self, keys: list[int]) -> tuple[np.ndarray, np.ndarray]:
        pos = {int(k): i for i, k in enumerate(self.keys)}
        rows = [pos[k] for k in keys if k in pos]
        return self.keys[rows], self.mat[rows]

    def vector_count(self) -> int:
        return len(self.keys)

    def iter_all_vectors(self, batch: int):  # type: ignore[no-untyped-def]
        for lo in range(0, len(self.keys), batch):
            yield self.keys[lo:lo + batch], self.mat[lo:lo + batch]


def test_centroid_is_the_mean_direction_and_follows_growth(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    mat = rng.normal(size=(300, 16)).astype(np.float32) + 2.0
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    keys = np.arange(1, 301, dtype=np.int64)
    index = VectorIndex(tmp_path, "hub", 16, "m")
    index.sync(_Source(keys[:200], mat[:200]))
    unit, level = index.centroid() or (None, 0.0)
    assert unit is not None
    expected = mat[:200].mean(axis=0)
    expected /= np.linalg.norm(expected)
    assert np.allclose(unit, expected, atol=1e-5)
    assert abs(level - float((mat[:200] @ expected).mean())) < 1e-5
    # Under a tenth of growth the cached estimate stays; beyond it, it is recomputed.
    index.sync(_Source(keys[:210], mat[:210]))
    assert np.array_equal(index.centroid()[0], unit)  # type: ignore[index]
    index.sync(_Source(keys, mat))
    again = mat.mean(axis=0)
    again /= np.linalg.norm(again)
    assert np.allclose(index.centroid()[0], again, atol=1e-5)  # type: ignore[index]


def test_generic_turns_are_discounted(store_dir: Path) -> None:
    lines = GENERIC * 8 + [SPECIFIC]
    with Memory.open(store_dir, embedder=hashing()) as mem:
        mem.add_turns([{"session": "s", "speaker": "Ana", "text": t, "id": f"m{i}"}
                       for i, t in enumerate(lines)], source="chat")
        engine = mem._rt.engine
        turns = {t.id: t for t in mem.store.session_turns("s", limit=100)}
        vectors = mem.store.turn_vectors(list(turns.values()), mem.embedder.dim)
        hubs = engine._gather.hubs(turns, vectors)
        specific = next(t.id for t in turns.values() if t.text == SPECIFIC)
        generic = [tid for tid in turns if tid != specific]
        assert hubs[specific] < min(hubs[g] for g in generic)
        assert hubs[specific] < 0 < sum(hubs[g] for g in generic) / len(generic)

        cand = Candidate("turn", generic[0], "vector", similarity=0.5, hub=hubs[generic[0]])
        discounted = relevance(cand, 0.1, engine.config.recall)
        cand.hub = 0.0
        assert discounted < relevance(cand, 0.1, engine.config.recall)

    with Memory.open(store_dir / "small", embedder=hashing()) as mem:
        mem.add_turns([{"session": "s", "speaker": "Ana", "text": t, "id": f"m{i}"}
                       for i, t in enumerate(GENERIC)], source="chat")
        few = {t.id: t for t in mem.store.session_turns("s", limit=100)}
        few_vectors = mem.store.turn_vectors(list(few.values()), mem.embedder.dim)
        assert mem._rt.engine._gather.hubs(few, few_vectors) == {}  # too few turns to tell

    off = dataclasses.replace(Config.load(home=store_dir), recall=RecallTuning(turn_hubness=0))
    with Memory.open(store_dir, embedder=hashing(), config=off) as mem:
        assert mem._rt.engine._gather.hubs(turns, vectors) == {}
