"""A gated write on PostgreSQL as one statement outside a transaction, and its portable
meaning on both backends (issue 11, "concurrent writes scaling past SQLite's single
writer": reproducer ``python -m tideline.bench writers --backend sqlite,postgres
--writers 1,16``)."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from tests.backend import run, scalar
from tests.postgres.conftest import pg_database

from tideline import Memory
from tideline.errors import InvalidInput
from tideline.models import MemoryRecord
from tideline.store.base import GatedWrite
from tideline.store.postgres import open_postgres
from tideline.write.path import AT_ONCE_TRIES

_keys = itertools.count()


def _idle_in_transaction(mem: Memory) -> int:
    return int(scalar(mem, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND state LIKE 'idle in transaction%'"))


def _gated(text: str, vector: np.ndarray | None, *, decision: str = "new",
           nearest: int | None = None, context: str = "") -> GatedWrite:
    now = time.time()
    rec = MemoryRecord(id=0, scope="global", kind="fact", gesture=text, context=context,
                       tags=("t", text[:8] or "x"), recorded_at=now, updated_at=now,
                       last_access=now, weight=1.5)
    return GatedWrite(rec=rec, vector=vector, decision=decision, similarity=0.5 if nearest else 0.0,
                      nearest=nearest, key=f"k{next(_keys)}", refresh_key=False,
                      event={"decision": decision, "nearest": nearest}, now=now)


def test_a_new_memory_is_two_statements(pg_mem: Memory) -> None:
    """A write the gate finds new: its search (with the key read), then the one
    statement that writes it — 2 statements, no BEGIN or COMMIT (it was 6)."""
    pg_mem.remember("the heron nests on the north marsh")
    before = pg_mem.store.statements_sent()
    res = pg_mem.remember("kiln firing schedule moves to thursdays")
    assert res.decision == "new"
    assert pg_mem.store.statements_sent() - before == 2


def test_an_acknowledged_write_is_committed_and_leaves_no_transaction(
        pg_mem: Memory, pg_url: str, tmp_path: Path) -> None:
    """When ``remember`` returns, another host's connection sees every row of it (the
    statement committed before its result came back) and no session of this store is
    left inside a transaction."""
    first = pg_mem.remember("the lighthouse keeper logs the tide at dawn")
    res = pg_mem.remember("the lighthouse keeper logs the tide at dawn on pier 17",
                          idempotency_key="k1")
    assert res.decision == "link"
    assert _idle_in_transaction(pg_mem) == 0
    other = open_postgres(pg_url, tmp_path / "b", pg_mem.store.namespace, pg_mem.store.marker)
    try:
        got = other.get_memories([res.id])[res.id]
        assert got.gesture == "the lighthouse keeper logs the tide at dawn on pier 17"
        assert other.write_key("k1") == (res.id, "link", pytest.approx(res.similarity, abs=1e-4),
                                         first.id)
        assert res.id in other.memory_vectors([got], pg_mem.embedder.dim)
        assert [(e.src, e.dst) for e in other.edges_of([res.id], ["related"])] == \
            [(res.id, first.id)]
        assert [e["memory_id"] for e in other.events(kinds=["write"], limit=1)] == [res.id]
    finally:
        other.close()


def test_a_writer_of_the_same_key_in_flight_is_waited_for(pg_mem: Memory, pg_url: str,
                                                          tmp_path: Path) -> None:
    """Another host writes the same idempotency key in an open transaction (it holds the
    key's lock): the one-statement write waits for it, then finds the key claimed and
    answers that host's outcome as a replay — one memory, not two."""
    store = pg_mem.store
    other = open_postgres(pg_url, tmp_path / "b", store.namespace, store.marker)
    held, done = threading.Event(), threading.Event()
    first: dict[str, int] = {}
    result: dict[str, Any] = {}
    text = "the heron nests on the north marsh"

    def in_flight() -> None:
        now = time.time()
        with other.transaction() as c:
            other.commit_reads(c, "k-heron", since=None, lock=[])  # takes the key's lock
            first["id"] = other.insert_memory(c, MemoryRecord(
                id=0, scope="global", kind="fact", gesture=text, recorded_at=now,
                updated_at=now, last_access=now), None)
            other.record_write_key(c, "k-heron", first["id"], "new", 0.0, None, now)
            held.set()
            done.wait(30)

    holder = threading.Thread(target=in_flight)
    holder.start()
    writer = threading.Thread(target=lambda: result.update(
        res=pg_mem.remember(text, idempotency_key="k-heron")))
    try:
        assert held.wait(30)
        writer.start()
        deadline = time.monotonic() + 30
        with pg_database(other).read() as c:  # one session polls the server's lock table
            while c.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                            "AND NOT granted").fetchone()[0] == 0:
                assert time.monotonic() < deadline, "the write never waited for the key"
                time.sleep(0.02)
    finally:
        done.set()
        holder.join()
        if writer.is_alive() or writer.ident is not None:
            writer.join()
        other.close()
    res = result["res"]
    assert res.replayed and res.id == first["id"] and res.decision == "new"
    assert scalar(store, "SELECT count(*) FROM memories WHERE gesture = ?", (text,)) == 1


def test_a_target_that_changed_meanwhile_is_judged_again(pg_mem: Memory,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The target the write judged is superseded by another host between the write's
    read of it and its statement: the statement writes nothing (the row's digest
    differs), the write judges the target again and stores a new memory — it does not
    potentiate a superseded one."""
    store = pg_mem.store
    target = pg_mem.remember("the heron nests on the north marsh").id
    real = type(store).gate_target
    calls: list[int] = []

    def superseded_after_reading(self: Any, mid: int) -> Any:
        found = real(self, mid)
        calls.append(mid)
        if len(calls) == 1:
            run(self, "UPDATE memories SET status = 'superseded' WHERE id = ?", (mid,))
        return found

    monkeypatch.setattr(type(store), "gate_target", superseded_after_reading)
    res = pg_mem.remember("The heron nests on the north marsh.")
    assert calls == [target, target]
    assert res.decision == "new" and res.id != target
    assert store.get_memories([target])[target].reinforcements == 0


def test_a_target_that_keeps_changing_is_written_under_its_lock(
        pg_mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A target that changes after every read: after :data:`AT_ONCE_TRIES` judgements the
    write takes the target's row lock in a transaction and potentiates it as it is then."""
    store = pg_mem.store
    target = pg_mem.remember("the heron nests on the north marsh").id
    real = type(store).gate_target
    calls: list[int] = []

    def touched_after_reading(self: Any, mid: int) -> Any:
        found = real(self, mid)
        calls.append(mid)
        run(self, "UPDATE memories SET last_access = last_access + 1 WHERE id = ?", (mid,))
        return found

    monkeypatch.setattr(type(store), "gate_target", touched_after_reading)
    res = pg_mem.remember("The heron nests on the north marsh.")
    assert len(calls) == AT_ONCE_TRIES
    assert res.decision == "potentiate" and res.id == target
    assert store.get_memories([target])[target].reinforcements == 1


def test_a_refused_write_leaves_nothing_and_no_transaction(
        pg_mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server refuses the one statement (an infinite vector component): a typed
    error, no row of the write anywhere, no transaction left open, and the next write
    goes through on the same pool."""
    real = pg_mem.embedder.embed_passages

    def infinite(texts: Any) -> Any:
        out = np.array(real(texts), dtype=np.float32)
        out[:, 0] = np.inf
        return out

    monkeypatch.setattr(pg_mem.embedder, "embed_passages", infinite)
    with pytest.raises(InvalidInput):
        pg_mem.remember("the heron nests on the north marsh", idempotency_key="k-inf")
    for table in ("memories", "memories_lex", "vectors", "write_keys", "events"):
        assert scalar(pg_mem, f"SELECT count(*) FROM {table}") == 0, table  # noqa: S608
    assert _idle_in_transaction(pg_mem) == 0
    monkeypatch.setattr(pg_mem.embedder, "embed_passages", real)
    assert pg_mem.remember("the heron nests on the north marsh",
                           idempotency_key="k-inf").decision == "new"


@pytest.mark.parametrize("which", ["mem", "pg_mem"])
def test_the_at_once_write_replays_and_refuses_a_changed_target(
        which: str, request: pytest.FixtureRequest) -> None:
    """Both backends' ``record_gated_at_once``: nothing written when the target changed
    since its token was read, written with the token read again, and the same key
    then answers the stored outcome."""
    m: Memory = request.getfixturevalue(which)
    store = m.store
    target = m.remember("the heron nests on the north marsh").id
    _, token = store.gate_target(target)
    run(m, "UPDATE memories SET last_access = last_access + 1 WHERE id = ?", (target,))
    vec = np.ones(m.embedder.dim, dtype=np.float32)
    write = _gated("the heron nests on the north marsh at pier 17", vec, decision="link",
                   nearest=target)
    assert store.record_gated_at_once(write, since=None, target=(target, token)) == (None, None)
    _, token = store.gate_target(target)
    seen, mid = store.record_gated_at_once(write, since=None, target=(target, token))
    assert seen is None and mid is not None
    assert store.record_gated_at_once(write, since=None, target=(target, token)) == \
        ((mid, "link", 0.5, target), None)
    assert [(e.src, e.dst) for e in store.edges_of([mid], ["related"])] == [(mid, target)]
    assert store.gate_target(10**9) == (None, None)


_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                min_size=1, max_size=40)
_FLOATS = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT, context=_TEXT, data=st.data())
def test_any_text_and_vector_written_at_once_read_back_identical(
        pg_mem: Memory, mem: Memory, text: str, context: str, data: st.DataObject) -> None:
    """Whatever text and float32 vector (extremes, subnormals, signed zeros) a write
    stores in one statement on PostgreSQL reads back exactly — the record field for
    field, the vector bit for bit — as the same write does on SQLite."""
    vec = data.draw(arrays(np.float32, pg_mem.embedder.dim, elements=_FLOATS))
    for m in (pg_mem, mem):
        write = _gated(text, vec, context=context)
        seen, mid = m.store.record_gated_at_once(write, since=None, target=None)
        assert seen is None and mid is not None
        got = m.store.get_memories([mid])[mid]
        assert got == dataclasses.replace(write.rec, id=mid)
        assert m.store.memory_vectors([got], pg_mem.embedder.dim)[mid].tobytes() == vec.tobytes()
