"""Bulk loads (``store.bulk_load`` + ``store.insert_memories``) on every backend: the rows,
index rows and vectors a row-by-row insert would write, all of it or nothing.

Issue 11 ("Benchmarks … at 1M memories"): PostgreSQL loaded ~73 memories/s a row at a
time; the bulk path (``COPY``, the derived indexes of empty tables built at the end) is
what the recall bench, ``tideline import tideline`` and ``tideline migrate`` use.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import rows, scalar

from tideline import Memory
from tideline.errors import TidelineError
from tideline.models import LexicalQuery, MemoryRecord

pytestmark = pytest.mark.backends

_WORDS = ("harbour", "lantern", "quartz", "meadow", "cobalt", "falcon", "juniper", "vortex")


def _rec(i: int, **kw: Any) -> MemoryRecord:
    text = f"{_WORDS[i % len(_WORDS)]} note {i} about ticket QB-{1000 + i}"
    return MemoryRecord(id=0, scope=kw.pop("scope", "global"), kind="fact", gesture=text,
                        weight=0.25, stability=7.0, last_access=1.0e9, recorded_at=1.0e9,
                        updated_at=1.0e9, **kw)


def _vectors(mem: Memory, recs: list[MemoryRecord]) -> list[np.ndarray | None]:
    return list(mem.embedder.embed_passages([r.gesture for r in recs]))


def _indexes(mem: Memory) -> list[tuple[Any, ...]]:
    if mem.store.backend == "sqlite":
        return rows(mem, "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                         "ORDER BY name")
    return rows(mem, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
                     "ORDER BY indexname")


def _counts(mem: Memory) -> tuple[int, int, int]:
    lex = "memories_fts" if mem.store.backend == "sqlite" else "memories_lex"
    return (int(scalar(mem, "SELECT count(*) FROM memories")),
            int(scalar(mem, f"SELECT count(*) FROM {lex}")),  # noqa: S608
            int(scalar(mem, "SELECT count(*) FROM vectors")))


def test_a_bulk_load_writes_what_one_insert_at_a_time_writes(mem: Memory) -> None:
    recs = [_rec(i) for i in range(40)]
    vecs = _vectors(mem, recs)
    vecs[7] = None  # the embedder gave none: the memory is marked pending
    before = _indexes(mem)
    with mem.store.bulk_load(len(recs)) as c:
        ids = mem.store.insert_memories(c, recs[:25], vecs[:25])
        ids += mem.store.insert_memories(c, recs[25:], vecs[25:])
    assert len(set(ids)) == 40 and ids == sorted(ids)
    assert _indexes(mem) == before  # the deferred indexes are back, as they were
    stored = mem.store.get_memories(ids)
    assert [stored[i].gesture for i in ids] == [r.gesture for r in recs]
    assert stored[ids[3]].weight == 0.25 and stored[ids[3]].recorded_at == 1.0e9
    found = mem.store.memory_vectors(list(stored.values()), mem.embedder.dim)
    assert set(found) == set(ids) - {ids[7]}
    for mid, vec in zip(ids, vecs, strict=True):
        if vec is not None:
            assert found[mid].tobytes() == np.asarray(vec, dtype=np.float32).tobytes()
    assert mem.store.vectors_pending()
    hits = mem.store.search_memories(LexicalQuery(text="QB-1013"), substrings=True,
                                     scopes=["global"], limit=5)
    assert hits and hits[0][0] == ids[13]
    words = mem.store.search_memories(LexicalQuery(text="juniper"), substrings=False,
                                      scopes=["global"], limit=50)
    assert {i for i, _ in words} == {ids[i] for i in range(40) if i % len(_WORDS) == 6}
    top = mem.recall("quartz note 10 about ticket QB-1010", limit=3, include_turns=False)
    assert top.items and int(top.items[0].id) == ids[10]
    fresh = mem.remember("a gated write after the bulk load")
    assert fresh.id not in ids and fresh.id > max(ids)


def test_a_bulk_load_into_a_store_that_holds_rows_keeps_its_indexes(mem: Memory) -> None:
    old = mem.remember("a memory written before the load").id
    before = _indexes(mem)
    recs = [_rec(i) for i in range(5)]
    with mem.store.bulk_load(len(recs)) as c:
        ids = mem.store.insert_memories(c, recs, _vectors(mem, recs))
    assert _indexes(mem) == before and old not in ids
    assert _counts(mem) == (6, 6, 6)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(1, 30), data=st.data(),
       fault=st.sampled_from(["importance", "status", "raise"]))
def test_a_failed_bulk_load_leaves_nothing(mem: Memory, size: int, data: st.DataObject,
                                           fault: str) -> None:
    """A bad row anywhere in a load (or an error raised by the caller mid-load) is a
    typed error, and the store keeps no row, index row, vector or dropped index of it."""
    before_rows, before_indexes = _counts(mem), _indexes(mem)
    bad = data.draw(st.integers(0, size - 1))
    recs = [_rec(i) for i in range(size)]
    if fault == "importance":
        recs[bad] = _rec(bad, importance=9)
    elif fault == "status":
        recs[bad] = _rec(bad, status="forgotten")
    vecs = _vectors(mem, recs)
    with pytest.raises((TidelineError, RuntimeError)) as caught, \
            mem.store.bulk_load(size) as c:
        mem.store.insert_memories(c, recs[:bad], vecs[:bad])
        if fault == "raise":
            raise RuntimeError("the caller failed mid-load")
        mem.store.insert_memories(c, recs[bad:], vecs[bad:])
    assert isinstance(caught.value, TidelineError) == (fault != "raise")
    assert _counts(mem) == before_rows
    assert _indexes(mem) == before_indexes
