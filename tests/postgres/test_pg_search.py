"""Issue 11, PostgreSQL recall: a selective scope filter returns the true top k.

A filtered HNSW scan of a small scope among many (``hnsw.iterative_scan``) stops at the
first k rows that pass the filter: the benchmark saw about half of the exact top 10 for
small scopes. The store now searches such a space exactly, and the lexical search
finds a small scope's rows however many other rows match.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from tests.conftest import hashing

from tideline import Memory
from tideline.models import LexicalQuery, MemoryRecord
from tideline.store.postgres.pgvector import vector_text

_BIG, _SMALL = 2_500, 60


def _rec(scope: str, text: str) -> MemoryRecord:
    now = time.time()
    return MemoryRecord(id=0, scope=scope, kind="fact", gesture=text, weight=0.5,
                        stability=7.0, last_access=now, recorded_at=now, updated_at=now)


def _fill(mem: Memory, rng: np.random.Generator, big: int = _BIG,
          few: int = _SMALL) -> dict[int, np.ndarray]:
    """``big`` memories in scope ``big`` and ``few`` in ``small``, interleaved, with
    random unit vectors (nearly orthogonal in 384 dimensions: the hardest case for a
    graph index). Returns the small scope's vectors by memory id."""
    small: dict[int, np.ndarray] = {}
    dim = mem.embedder.dim
    with mem.store.transaction() as c:
        for i in range(big + few):
            vec = rng.standard_normal(dim).astype(np.float32)
            vec /= np.linalg.norm(vec)
            scope = "small" if i % ((big + few) // few) == 0 and len(small) < few else "big"
            text = f"row {i} of the kiln log, code errE4521x"
            mid = mem.store.insert_memory(c, _rec(scope, text), vec)
            if scope == "small":
                small[mid] = vec
    return small


def _store(store: Any, scope: str, keys: np.ndarray, vecs: np.ndarray) -> None:
    """Store ``vecs`` for ``keys`` in the memories space of ``scope`` (the vector search
    reads only the vectors table)."""
    space = store.space("m", scope)
    with store.transaction() as c:
        c.executemany("INSERT INTO vectors(space, key, v) VALUES (?, ?, ?::vector)",
                      [(space, int(k), vector_text(v))
                       for k, v in zip(keys, vecs, strict=True)])


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def test_a_small_scope_among_many_returns_the_exact_top_k(pg_url: str, tmp_path: Path) -> None:
    """The benchmark's "filtered HNSW returns about half of the exact top-10 for small
    scopes": 20,000 vectors in a big scope and 40 in a small one, random (nearly
    orthogonal in 384 dimensions: the hard case for a graph index); for every query the
    small scope's search returns exactly the top 10 of an exact scan of that scope. (A
    filtered HNSW walk stops after ``hnsw.max_scan_tuples``, 20,000, and meets the small
    scope's rows in graph order, not distance order.)"""
    emb = hashing()
    rng = np.random.default_rng(11)
    big = _unit(rng.standard_normal((20_000, emb.dim)))
    keys = np.arange(30_001, 30_041)
    small = _unit(rng.standard_normal((40, emb.dim)))
    # Inserted into a live index, as a store grows (a graph built at once in bulk was
    # good enough that the old search passed here).
    mem = Memory.open(tmp_path / "local", database=pg_url, embedder=emb, project="global")
    try:
        _store(mem.store, "big", np.arange(1, 20_001), big)
        _store(mem.store, "small", keys, small)
        for _ in range(20):
            q = _unit(rng.standard_normal(emb.dim))
            exact = keys[np.argsort(-(small @ q))[:10]]
            found = mem.vectors.search("m", ["small"], q, 10)
            assert set(found) == {int(k) for k in exact}
            for key, cosine in found.items():
                assert abs(cosine - float(small[key - 30_001] @ q)) < 1e-4
        # Both scopes in one call: each scope's own top 10, merged.
        both = mem.vectors.search("m", ["small", "big"], small[0], 10)
        assert len(both) == 20 and 30_001 in both
        assert sum(1 for key in both if key < 30_001) == 10
    finally:
        mem.close()


def test_lexical_search_finds_a_small_scope_among_many_matches(pg_mem: Memory) -> None:
    """Every row holds the searched word; only the small scope's rows come back, best
    first, however many rows of other scopes rank above them."""
    _fill(pg_mem, np.random.default_rng(3), big=600, few=30)
    rows = pg_mem.store.search_memories(LexicalQuery(text="kiln"), substrings=False,
                                        scopes=["small"], limit=100)
    assert len(rows) == 30
    recs = pg_mem.store.get_memories([mid for mid, _ in rows])
    assert {r.scope for r in recs.values()} == {"small"}
    scores = [score for _, score in rows]
    assert scores == sorted(scores, reverse=True)
    subs = pg_mem.store.search_memories(LexicalQuery(text="E4521"), substrings=True,
                                        scopes=["small"], limit=10)
    assert len(subs) == 10 and all(mid in recs for mid, _ in subs)
