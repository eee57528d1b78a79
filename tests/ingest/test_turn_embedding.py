"""Turn vectors: each turn embedded once, leaning towards the turn before it (issue 12)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tests.conftest import hashing

from tideline import Memory
from tideline.embed.base import Vectors
from tideline.embed.hashing import HashingEmbedder
from tideline.store.turn_embedding import PREV_WEIGHT, embed_turns


class Counting(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.profile = hashing().profile
        self.texts: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return super().embed_passages(texts)


def _chat(n: int) -> list[dict[str, object]]:
    return [{"session": "s1", "speaker": "Ana" if i % 2 else "Ben", "text": f"line {i} of talk",
             "id": f"m{i}", "timestamp": 1_714_759_200 + 60 * i} for i in range(n)]


def test_an_import_embeds_each_turn_text_once(store_dir: Path) -> None:
    """add_turns of 200 turns used to embed every turn twice (with its predecessor)."""
    emb = Counting()
    with Memory.open(store_dir, embedder=emb) as mem:
        mem.add_turns(_chat(200), source="chat")
    assert len(emb.texts) == 200
    assert len(set(emb.texts)) == 200
    assert all("\n" not in t for t in emb.texts)


def test_a_turn_vector_leans_towards_its_predecessor(store_dir: Path) -> None:
    emb = hashing()
    with Memory.open(store_dir, embedder=emb) as mem:
        mem.add_turns(_chat(3), source="chat")
        turns = sorted(mem.store.session_turns("s1"), key=lambda t: t.turn_index)
        stored = mem.store.turn_vectors(turns, emb.dim)
    own = emb.embed_passages([f"{t.speaker}: {t.text}" for t in turns])
    first = stored[turns[0].id]
    assert np.allclose(first, own[0], atol=1e-6)
    mixed = own[2] + PREV_WEIGHT * own[1]
    assert np.allclose(stored[turns[2].id], mixed / np.linalg.norm(mixed), atol=1e-6)


def test_streamed_turns_get_the_same_vectors_as_one_batch(tmp_path: Path) -> None:
    emb = hashing()
    rows = _chat(5)
    with Memory.open(tmp_path / "batch", embedder=emb) as mem:
        mem.add_turns(rows, source="chat")
        batch = {t.message_id: v for t in mem.store.session_turns("s1")
                 for v in [mem.store.turn_vectors([t], emb.dim)[t.id]]}
    with Memory.open(tmp_path / "stream", embedder=emb) as mem:
        for row in rows:
            mem.add_turns([row], source="chat")
        stream = {t.message_id: v for t in mem.store.session_turns("s1")
                  for v in [mem.store.turn_vectors([t], emb.dim)[t.id]]}
    assert batch.keys() == stream.keys()
    for key, vec in batch.items():
        assert np.allclose(vec, stream[key], atol=1e-6)


def test_doctor_repairs_a_turn_vector_as_the_import_made_it(store_dir: Path) -> None:
    emb = hashing()
    with Memory.open(store_dir, embedder=emb) as mem:
        mem.remember("an unrelated fact")
        mem.add_turns(_chat(4), source="chat")
        turns = sorted(mem.store.session_turns("s1"), key=lambda t: t.turn_index)
        before = mem.store.turn_vectors(turns, emb.dim)
        with mem.store.transaction() as c:
            mem.store._drop_vector(c, mem.store.space("t", turns[2].scope), turns[2].id)
        assert turns[2].id not in mem.store.turn_vectors(turns, emb.dim)
        mem.doctor(repair=True)
        after = mem.store.turn_vectors(turns, emb.dim)
    assert np.allclose(after[turns[2].id], before[turns[2].id], atol=1e-6)


def test_embed_turns_dedupes_and_checks_lengths() -> None:
    emb = Counting()
    out = embed_turns(emb, ["a: x", "b: y", "a: x"], [None, "a: x", "b: y"])
    assert out.shape == (3, emb.dim)
    assert sorted(emb.texts) == ["a: x", "b: y"]
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    try:
        embed_turns(emb, ["a"], [])
    except ValueError:
        pass
    else:
        raise AssertionError("a length mismatch must raise")
