"""Trace dynamics in sleep: dormancy, revival, promotion, use-reinforcement, snapshots."""

from __future__ import annotations

import time

from tests.backend import run_all
from tests.sleep.conftest import DAY, age, statuses

from tideline import Memory
from tideline.config import Dynamics
from tideline.dynamics import reinforce, retention
from tideline.models import MemoryRecord
from tideline.sleep.orchestrate import run_sleep
from tideline.store.consolidation import ConsolidationStore


def test_decay_makes_dormant_never_deletes_and_reinforcement_revives(mem: Memory) -> None:
    old = mem.remember("the staging database password rotates every quarter").id
    fresh = mem.remember("lunch is at noon on fridays").id
    before = mem.recall("staging database password", abstain=False).memories[0]
    assert before.id == old and before.status == "episodic"
    res = run_sleep(mem._rt, now=time.time() + 40 * DAY)
    assert res["steps"]["dynamics"]["dormant"] == 2
    assert statuses(mem) == {old: "dormant", fresh: "dormant"}
    age(mem, [old, fresh], 40)  # the clock of recall agrees with the simulated sleep
    after = mem.recall("staging database password", abstain=False).memories[0]
    assert after.id == old and after.status == "dormant"
    assert after.score < before.score * mem.config.dynamics.dormant_rank_factor
    mem.reflect([old], 1.0)
    assert statuses(mem)[old] == "episodic"
    res = mem.sleep()
    assert statuses(mem)[old] == "episodic" and statuses(mem)[fresh] == "dormant"
    assert mem.get(old).reinforcements == 1


def test_sleep_promotes_and_revives_by_the_numbers(mem: Memory) -> None:
    a = mem.remember("the on-call rotation changes on mondays").id
    b = mem.remember("grafana dashboards live in the ops folder").id
    run_all(mem, [  # e.g. promote_after was lowered in the config
        ("UPDATE memories SET reinforcements = 3 WHERE id = ?", (a,)),
        ("UPDATE memories SET status = 'dormant' WHERE id = ?", (b,))])
    res = mem.sleep()
    dyn = res["steps"]["dynamics"]
    assert dyn["promoted"] == 1 and dyn["revived"] == 1
    assert statuses(mem) == {a: "semantic", b: "episodic"}
    assert mem.get(a).stability >= mem.config.dynamics.semantic_half_life_days
    assert a in dyn["ids"]["promoted"] and b in dyn["ids"]["revived"]


def test_a_recall_hit_is_spaced_practice(mem: Memory) -> None:
    mid = mem.remember("the invoice job runs at 03:00 UTC").id
    age(mem, [mid], 3)
    ret_before = retention(mem.get(mid), time.time())
    mem.recall("invoice job schedule")
    res = mem.sleep()
    rec = mem.get(mid)
    assert res["steps"]["dynamics"]["reinforced_by_use"] == 1
    assert rec.reinforcements == 1 and rec.stability > 7.0
    assert retention(rec, time.time()) > ret_before
    # The same hit is not counted twice.
    assert mem.sleep(force=True)["steps"]["dynamics"]["reinforced_by_use"] == 0


def test_a_hit_right_after_writing_does_not_reinforce(mem: Memory) -> None:
    mid = mem.remember("the cafeteria closes at 15:00").id
    mem.recall("cafeteria closing time")
    assert mem.sleep()["steps"]["dynamics"]["reinforced_by_use"] == 0
    assert mem.get(mid).reinforcements == 0


def test_each_sleep_records_a_retention_snapshot(mem: Memory) -> None:
    ids = [mem.remember(t).id for t in ("one fact about llamas", "two facts about owls")]
    mem.sleep()
    age(mem, ids[:1], 10)
    mem.remember("a third fact, about herons")
    mem.sleep()
    snaps = ConsolidationStore(mem.store).snapshots()
    assert len(snaps) == 2
    assert snaps[0]["mean"] == 1.0 and snaps[1]["mean"] < 1.0
    assert sum(snaps[1]["histogram"]) == 3 and snaps[1]["by_status"]["episodic"]["count"] == 3


def test_spaced_reinforcement_grows_the_half_life_more_than_massed() -> None:
    dyn = Dynamics()
    base = MemoryRecord(id=1, scope="global", kind="fact", gesture="x", stability=7.0,
                        last_access=0.0)
    massed = reinforce(reinforce(base, 0.1 * DAY, dyn), 0.2 * DAY, dyn)
    spaced = reinforce(reinforce(base, 7 * DAY, dyn), 20 * DAY, dyn)
    assert spaced.stability > massed.stability > base.stability
    promoted = reinforce(spaced, 40 * DAY, dyn)
    assert promoted.status == "semantic" and promoted.stability >= dyn.semantic_half_life_days
