"""Sleep never loses or hard-deletes a memory, whatever happened before it (each backend)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend, rows
from tests.conftest import hashing

from tideline import Config, Memory
from tideline.sleep.orchestrate import STEPS, run_sleep

WORDS = ("atlas postgres kafka loader cello violin garden compost tomato ticket airport "
         "mira bo review deploy rollback backup error E1234 边界 审查 设计 Pipeline Abend "
         "сервер база").split()

write = st.tuples(st.just("write"), st.lists(st.sampled_from(WORDS), min_size=2, max_size=7),
                  st.sampled_from(["global", "atlas", "orchard"]),
                  st.lists(st.sampled_from(["ops", "db", "music", "家"]), max_size=2),
                  st.sampled_from(["", "Mira=审查; Bo=执行", "Bo=设计"]),
                  st.integers(1, 5))
recall = st.tuples(st.just("recall"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
                   st.sampled_from(["global", "atlas", "orchard"]))
reflect = st.tuples(st.just("reflect"), st.lists(st.integers(0, 40), min_size=1, max_size=3),
                    st.sampled_from([-1.0, -0.5, 0.5, 1.0]))
turns = st.tuples(st.just("turns"), st.lists(st.sampled_from(WORDS), min_size=2, max_size=6),
                  st.sampled_from(["global", "atlas"]))
sleep = st.tuples(st.just("sleep"), st.sampled_from([None, *STEPS]), st.booleans(),
                  st.sampled_from([0.0, 0.0, 2.0, 40.0, 400.0]))
pytestmark = pytest.mark.backends

ops = st.lists(st.one_of(write, write, recall, recall, reflect, turns, sleep), min_size=5,
               max_size=30)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(ops)
def test_random_histories_never_lose_a_memory(backend: Backend, history: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp, backend.environ(backend.fresh()):
        cfg = Config.load(home=Path(tmp), backups_keep=1)
        mem = Memory.open(config=cfg, embedder=hashing())
        backend.check(mem)
        try:
            written: set[int] = set()
            n = 0
            for op in history:
                if op[0] == "write":
                    _, words, scope, tags, roles, imp = op
                    written.add(mem.write(" ".join(words), scope=scope, tags=tags,
                                          entities_role=roles, importance=imp).id)
                elif op[0] == "recall":
                    mem.recall(" ".join(op[1]), scope=op[2])
                elif op[0] == "reflect":
                    ids = sorted(written)
                    if ids:
                        mem.reflect([ids[i % len(ids)] for i in op[1]], op[2])
                elif op[0] == "turns":
                    n += 1
                    mem.add_turns([{"session": f"s{n}", "role": "user", "text": " ".join(op[1]),
                                    "timestamp": time.time(), "id": f"m{n}"}], scope=op[2])
                else:
                    _, only, force, days = op
                    before = _rows(mem)
                    res = run_sleep(mem._rt, only=only, force=force,
                                    now=time.time() + days * 86_400)
                    assert res.get("errors", {}) == {}
                    after = _rows(mem)
                    assert set(before) == set(after)
                    # Sleep changes status and weights, never what a memory says.
                    assert all(before[i][:3] == after[i][:3] for i in before)
            assert written <= set(_rows(mem))
            res = mem.sleep(force=True)
            assert res["errors"] == {} and written <= set(_rows(mem))
            assert res["memories"]["before"] == res["memories"]["after"]
        finally:
            mem.close()


def _rows(mem: Memory) -> dict[int, tuple[str, str, str, str]]:
    return {int(i): (g, ctx, sc, st_) for i, g, ctx, sc, st_ in rows(
        mem, "SELECT id, gesture, context, scope, status FROM memories")}
