"""Turn rows and turn vectors read once per process, and never stale (the recall path's
row cache, :mod:`tideline.store.rowcache`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backend import Backend
from tests.conftest import hashing

from tideline import Memory
from tideline.store.rowcache import RowCache

pytestmark = pytest.mark.backends

_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.lists(st.tuples(st.integers(0, 12), st.integers()),
                                       max_size=6)),
    st.tuples(st.just("take"), st.lists(st.integers(0, 12), max_size=6)),
    st.tuples(st.just("drop"), st.lists(st.integers(0, 12), max_size=4)),
    st.tuples(st.just("clear"), st.just([])),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(0, 5), ops=_OPS)
def test_the_cache_is_a_least_recently_used_map_of_its_capacity(
        capacity: int, ops: list[tuple[str, list]]) -> None:
    """Against a plain model: a hit is the value last put, a miss is reported in order,
    and past the capacity the value used longest ago goes first."""
    cache: RowCache[int, int] = RowCache(capacity)
    model: OrderedDict[int, int] = OrderedDict()
    for op, args in ops:
        if op == "put" and capacity:
            for key, value in args:
                model[key] = value
                model.move_to_end(key)
                while len(model) > capacity:
                    model.popitem(last=False)
            cache.put(args)
        elif op == "take":
            found, missing = cache.take(args)
            for key in args:
                if key in model:
                    model.move_to_end(key)
            assert found == {k: model[k] for k in args if k in model}
            assert missing == [k for k in args if k not in model]
        elif op == "drop":
            cache.drop(args)
            for key in args:
                model.pop(key, None)
        elif op == "clear":
            cache.clear()
            model.clear()
        assert len(cache) == len(model) <= capacity


def test_a_negative_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        RowCache(-1)


def _chat(n: int, session: str = "s1") -> list[dict[str, str]]:
    return [{"session": session, "speaker": "Ana" if i % 2 else "Bo",
             "id": f"{session}-{i}", "text": f"turn {i} of {session} about kayaks",
             "timestamp": f"2026-03-0{1 + (session == 's2')}T10:{i:02d}:00Z"}
            for i in range(n)]


def test_turns_read_twice_are_the_rows_a_fresh_store_reads(store_dir: Path,
                                                            backend: Backend) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="p") as mem:
        mem.add_turns(_chat(6) + _chat(3, "s2"), source="chat")
        ids = [t.id for t in mem.store.turns_between(["p"], -1e12, 1e12, 100)]
        assert len(ids) == 9
        first = mem.store.get_turns(reversed(ids))
        again = mem.store.get_turns([*ids[3:], *ids[:3], 10**9])  # and an id no turn has
        assert list(first) == list(again) == sorted(ids)  # in the order of their ids
        assert first == again
        with Memory.open(store_dir, embedder=hashing(), project="p") as fresh:
            assert fresh.store.get_turns(ids) == again
            hits = list(again.values())[::4]
            assert (mem.store.neighbour_turns(hits, radius=2)
                    == mem.store.neighbour_turns(hits, radius=2)
                    == fresh.store.neighbour_turns(hits, radius=2))


def test_a_turn_added_after_a_window_was_read_is_a_neighbour_at_once(
        store_dir: Path, backend: Backend) -> None:
    """A place past a session's last turn is never taken as empty from memory: the turn
    that fills it later, written by another store (another host), is found."""
    with Memory.open(store_dir, embedder=hashing(), project="p") as mem:
        mem.add_turns(_chat(4), source="chat")
        turns = mem.store.turns_between(["p"], -1e12, 1e12, 100)
        assert len(turns) == 4
        last = max(turns, key=lambda t: t.turn_index)
        before = mem.store.neighbour_turns([last], radius=1)
        assert [t.turn_index for t in before] == [2, 3]
        assert [t.turn_index for t in mem.store.neighbour_turns([last], radius=1)] == [2, 3]
        with Memory.open(store_dir, embedder=hashing(), project="p") as other:
            other.add_turns([{"session": "s1", "speaker": "Bo", "id": "late",
                              "text": "one more thing about kayaks",
                              "timestamp": "2026-03-01T11:00:00Z"}], source="chat")
        after = mem.store.neighbour_turns([last], radius=1)
        assert [t.turn_index for t in after] == [2, 3, 4]
        assert after[-1].message_id == "late"
        # A window of places all read before is answered as it was, the new turn with it.
        assert mem.store.neighbour_turns([last], radius=1) == after


def test_recall_over_a_warm_cache_answers_as_a_fresh_process(store_dir: Path,
                                                            backend: Backend) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="p") as mem:
        mem.add_turns(_chat(12) + _chat(8, "s2"), source="chat")
        queries = ["kayaks of s2", "turn 5", "what about s1"]
        warm = [[(i.type, i.id, round(i.score, 9)) for i in mem.recall(q, log=False).items]
                for q in queries]
        again = [[(i.type, i.id, round(i.score, 9)) for i in mem.recall(q, log=False).items]
                 for q in queries]
    with Memory.open(store_dir, embedder=hashing(), project="p") as fresh:
        cold = [[(i.type, i.id, round(i.score, 9)) for i in fresh.recall(q, log=False).items]
                for q in queries]
    assert warm == again == cold
    assert all(warm)


_REEMBED = """
import sys
from tideline.memory import Memory
from tests.conftest import hashing

class Other(type(hashing())):
    model = "hashing-other"
    def embed_passages(self, texts):
        return -super().embed_passages(texts)  # every vector changes

with Memory.open(sys.argv[1], embedder=hashing(), project="p") as mem:
    mem.reembed(Other())
"""


def test_vectors_rewritten_by_another_process_are_read_anew(store_dir: Path,
                                                           backend: Backend) -> None:
    """Another process re-embeds the store while this one holds its turn vectors: the
    next read returns the new vectors (the change log names them), not the cached ones."""
    with Memory.open(store_dir, embedder=hashing(), project="p") as mem:
        mem.add_turns(_chat(5), source="chat")
        turns = mem.store.turns_between(["p"], -1e12, 1e12, 100)
        old = mem.store.turn_vectors(turns, 384)
        assert len(old) == 5
        assert mem.store.turn_vectors(turns, 384).keys() == old.keys()
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, "-c", _REEMBED, str(store_dir)], check=True,
                       env=env, cwd=root, timeout=120)
        new = mem.store.turn_vectors(turns, 384)
        assert new.keys() == old.keys()
        for tid, vector in new.items():
            assert np.allclose(vector, -old[tid])
