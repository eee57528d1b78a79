"""Issue 29 (latency): the query's embedding runs beside the full-text side of recall.

The word statistics and the word and substring searches need no vector, so recall
runs them in a worker while the caller embeds the query; the packet is the one a
precomputed query vector gives. A SQLite recall inside a write transaction keeps them in
the caller (the worker's reads would wait for it).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tests.backend import Backend
from tests.conftest import hashing

from tideline.embed.hashing import HashingEmbedder
from tideline.models import LexicalQuery

pytestmark = pytest.mark.backends

TURNS = [("Ana", "we hiked to the Kesselfall gorge on Sunday"),
         ("Ben", "how long did the Kesselfall walk take you?"),
         ("Ana", "about four hours with the detour past the mill"),
         ("Ben", "I still have to fix the bike's rear brake")]


class _WaitsForSearch(HashingEmbedder):
    """A query embedding that finishes only once recall has searched the turns' words
    (or after a bound: an embedding made before the search never sees it)."""

    def __init__(self) -> None:
        super().__init__()
        self.profile = hashing().profile
        self.searched = threading.Event()
        self.saw_search: list[bool] = []

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        self.saw_search.append(self.searched.wait(timeout=10))
        return super().embed_query(text)


def test_the_query_embedding_runs_beside_the_word_search(
        store_dir: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = _WaitsForSearch()
    mem = backend.open(store_dir, embedder=embedder, project="global")
    try:
        mem.add_turns([{"session": "s1", "speaker": who, "text": text, "id": f"m{i}"}
                       for i, (who, text) in enumerate(TURNS)], source="chat")
        search = mem.store.search_turns

        def searched(q: LexicalQuery, **kwargs):  # type: ignore[no-untyped-def]
            embedder.searched.set()
            return search(q, **kwargs)

        monkeypatch.setattr(mem.store, "search_turns", searched)
        engine = mem._rt.engine
        packet = engine.recall("Kesselfall walk", scopes=["global"], scope="global", limit=5)
        assert embedder.saw_search == [True]  # the search ran while the embedding waited
        assert not packet.degraded
        assert packet.embed_ms > 0

        embedder.searched.set()
        given = engine.recall("Kesselfall walk", scopes=["global"], scope="global", limit=5,
                              query_vector=embedder.embed_query("Kesselfall walk"))
        assert [(i.id, i.score, i.source) for i in packet.items] == [
            (i.id, i.score, i.source) for i in given.items]
        assert TURNS[1][1] in {i.text for i in packet.items}
    finally:
        mem.close()


def test_a_recall_inside_a_write_transaction_reads_in_its_own_thread(store_dir: Path,
                                                                      backend: Backend) -> None:
    """A worker's read would wait for the caller's transaction, which waits for the
    worker: on SQLite the full-text side runs in the caller then (PostgreSQL's worker
    reads on its own connection, which the caller's transaction does not hold up)."""
    mem = backend.open(store_dir, embedder=hashing(), project="global")
    done: list[int] = []

    def inside() -> None:
        with mem.store.transaction():
            packet = mem._rt.engine.recall("Kesselfall walk", scopes=["global"],
                                           scope="global", limit=5)
            done.append(len(packet.items))

    mem.add_turns([{"session": "s1", "speaker": who, "text": text, "id": f"m{i}"}
                   for i, (who, text) in enumerate(TURNS)], source="chat")
    thread = threading.Thread(target=inside, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()  # (a deadlocked recall never returns, nor may close)
    mem.close()
    assert done and done[0] > 0
