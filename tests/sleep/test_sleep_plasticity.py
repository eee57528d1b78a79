"""Learned associations: the STDP-like commit of co-recall eligibility."""

from __future__ import annotations

import time

import pytest
from tests.backend import scalar
from tests.sleep.conftest import DAY, co_recall

from tideline import Memory
from tideline.config import SleepTuning
from tideline.sleep.orchestrate import run_sleep
from tideline.sleep.plasticity import Recall, learn

pytestmark = pytest.mark.backends

T = SleepTuning()


def recall(rid: int, ts: float, items: list[int], scope: str = "global",
           score: float = 1.0) -> Recall:
    return Recall(rid, ts, scope, new=True, items=[(r, m, score) for r, m in enumerate(items)])


def test_order_matters_within_a_recall() -> None:
    delta, stats = learn([recall(1, 0.0, [10, 20, 30])], [], T)
    assert delta[(10, 20)] > delta[(20, 10)] > 0
    assert delta[(10, 20)] > delta[(10, 30)]  # farther apart in rank, weaker
    assert stats["pairs_within"] == 3


def test_time_window_and_scope_matter_across_recalls() -> None:
    near, _ = learn([recall(1, 0.0, [1]), recall(2, 30.0, [2])], [], T)
    far, _ = learn([recall(1, 0.0, [1]), recall(2, 400.0, [2])], [], T)
    out, _ = learn([recall(1, 0.0, [1]), recall(2, T.stdp_window_s + 1, [2])], [], T)
    other, _ = learn([recall(1, 0.0, [1], "atlas"), recall(2, 30.0, [2], "orchard")], [], T)
    assert near[(1, 2)] > far[(1, 2)] > 0
    assert near[(1, 2)] > near[(2, 1)]  # earlier recall → later recall is the strong direction
    assert (1, 2) not in out and (1, 2) not in other


def test_old_pairs_are_never_committed_twice() -> None:
    old = Recall(1, 0.0, "global", new=False, items=[(0, 1, 1.0), (1, 2, 1.0)])
    delta, _ = learn([old, recall(2, 10.0, [3])], [], T)
    assert (1, 2) not in delta and (1, 3) in delta


def test_reward_modulates_the_update() -> None:
    base, _ = learn([recall(1, 0.0, [1, 2])], [], T)
    good, st = learn([recall(1, 0.0, [1, 2])], [(5.0, [1, 2], 1.0)], T)
    bad, _ = learn([recall(1, 0.0, [1, 2])], [(5.0, [1, 2], -1.0)], T)
    late, _ = learn([recall(1, 0.0, [1, 2])], [(T.reward_window_s + 10, [1, 2], 1.0)], T)
    assert good[(1, 2)] > base[(1, 2)] > 0 > bad[(1, 2)]
    assert late[(1, 2)] == base[(1, 2)] and st["rewarded_recalls"] == 1


def test_recalls_and_sleep_make_directed_edges_and_clear_eligibility(mem: Memory) -> None:
    a = mem.remember("kestrel is the name of the analytics cluster").id
    b = mem.remember("kestrel runs ClickHouse 24 on three nodes").id
    c = mem.remember("the cafeteria serves ramen on tuesdays").id
    for _ in range(3):
        packet = mem.recall("kestrel analytics cluster")
        assert [i.id for i in packet.memories][:2] == [a, b]
    res = mem.sleep()["steps"]["plasticity"]
    edges = co_recall(mem)
    assert edges[(a, b)] > edges[(b, a)] > 0.3
    assert (a, c) not in edges and (c, a) not in edges
    assert res["recalls"] == 3 and res["written"] >= 2
    # Committed rows stay only as partners for the next window, and are never re-counted.
    assert mem.sleep(force=True)["steps"]["plasticity"]["recalls"] == 0
    assert abs(co_recall(mem)[(a, b)] - edges[(a, b)]) < 1e-4  # only seconds of decay
    later = run_sleep(mem._rt, now=time.time() + 3600, force=True)["steps"]["plasticity"]
    assert later["eligibility_cleared"] == 6
    assert scalar(mem, "SELECT count(*) FROM eligibility") == 0


def test_edges_decay_and_weak_ones_are_pruned_memories_stay(mem: Memory) -> None:
    a = mem.remember("orchid is the internal name of the billing service").id
    b = mem.remember("orchid bills customers on the first of the month").id
    mem.recall("orchid billing service")
    mem.sleep()
    w0 = co_recall(mem)[(a, b)]
    res = run_sleep(mem._rt, now=time.time() + 45 * DAY, force=True)["steps"]["plasticity"]
    assert abs(res["decay"] - 0.5) < 0.01
    assert abs(co_recall(mem)[(a, b)] - w0 / 2) < 0.01
    res = run_sleep(mem._rt, now=time.time() + 400 * DAY, force=True)["steps"]["plasticity"]
    assert res["pruned"] >= 1 and (a, b) not in co_recall(mem)
    assert {mem.get(a).id, mem.get(b).id} == {a, b}


def test_learned_edges_reach_a_memory_two_hops_away(mem: Memory) -> None:
    a = mem.remember("Project Orion stores all its telemetry in the Kestrel cluster").id
    b = mem.remember("The Kestrel cluster is administered by Mira Tanaka").id
    c = mem.remember("Mira Tanaka is on parental leave until March").id
    for i in range(12):
        mem.remember(f"unrelated note {i}: the {['red', 'blue', 'green'][i % 3]} "
                     f"{['bike', 'kettle', 'lamp', 'chair'][i % 4]} needs repair")
    query = "Project Orion telemetry"

    def found() -> list[int]:
        return [i.id for i in mem.recall(query, limit=8).memories]

    assert a in found() and b not in found() and c not in found()
    for _ in range(3):
        mem.recall("Kestrel cluster administered")
        mem.recall("Mira Tanaka parental leave")
    mem.sleep()
    packet = mem.recall(query, limit=8)
    by_id = {i.id: i for i in packet.memories}
    assert a in by_id and b in by_id and c in by_id
    assert by_id[c].source == "graph" and by_id[b].source == "graph"
