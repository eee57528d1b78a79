"""Sleep orchestration: backup, gate, --only, lock, guard, journal, errors.

On both backends (tests/backend.py), except the backup files (SQLite's own)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.backend import Backend
from tests.conftest import hashing
from tests.sleep.conftest import age, statuses

import tideline.sleep.plasticity as plasticity_mod
from tideline import Config, InvalidInput, Memory
from tideline.sleep.orchestrate import STEPS, run_sleep
from tideline.store.consolidation import ConsolidationStore

pytestmark = pytest.mark.backends

TEXTS = [
    "atlas uses PostgreSQL 16 on pg-atlas-01",
    "the loader fails with error E1234 when a CSV column is added",
    "Mira reviews every schema migration before it ships",
    "nightly backups of atlas go to the s3 bucket atlas-backups",
    "我们决定把边界问题交给审查小组处理",
    "Die Deployment-Pipeline läuft jeden Abend um 22 Uhr",
]


def fill(mem: Memory) -> list[int]:
    ids = [mem.write(t, tags=["atlas"] if "atlas" in t else ["ops"],
                     entities_role="Mira=审查; Bo=执行").id for t in TEXTS]
    for q in ("atlas database", "E1234 loader", "who reviews migrations"):
        mem.recall(q)
    mem.reflect(ids[:2], 0.8)
    return ids


def test_full_sleep_runs_every_step_and_journals(mem: Memory, backend: Backend) -> None:
    fill(mem)
    res = mem.sleep()
    assert res["skipped"] is False
    assert list(res["steps"]) == list(STEPS)
    assert res["errors"] == {} and res["stopped"] == {} and res["needs_force"] is False
    assert res["memories"] == {"before": len(TEXTS), "after": len(TEXTS)}
    if backend.is_sqlite:
        assert Path(res["backup"]).exists() and Path(res["backup"]).parent.name == "backups"
    else:  # the database server keeps the backups (docs/postgres.md)
        assert res["backup"] is None
    assert all("ms" in m for m in res["steps"].values())
    events = mem.events(kinds=["sleep"])
    assert len(events) == 1
    assert events[0]["data"]["steps"]["plasticity"]["written"] > 0
    assert events[0]["id"] == res["event_id"]


def test_gate_skips_until_something_changes(mem: Memory) -> None:
    fill(mem)
    assert mem.sleep()["skipped"] is False
    again = mem.sleep()
    assert again["skipped"] is True and again["reason"] == "unchanged"
    assert len(mem.events(kinds=["sleep"])) == 1  # a skipped sleep writes nothing
    mem.recall("atlas")
    assert mem.sleep()["skipped"] is False
    assert mem.sleep()["skipped"] is True
    mem.remember("a brand new fact about zebras")
    assert mem.sleep()["skipped"] is False


def test_gate_ignores_bookkeeping_and_opens_after_refresh(mem: Memory) -> None:
    fill(mem)
    mem.sleep()
    mem.store.log_event(None, "hook", {"hook": "stop"})
    assert mem.sleep()["skipped"] is True
    later = time.time() + (mem.config.sleep.refresh_after_hours + 1) * 3600
    assert run_sleep(mem._rt, now=later)["skipped"] is False


def test_force_runs_even_when_unchanged(mem: Memory) -> None:
    fill(mem)
    mem.sleep()
    res = mem.sleep(force=True)
    assert res["skipped"] is False and res["forced"] is True


@pytest.mark.parametrize("step", STEPS)
def test_every_step_runs_alone(mem: Memory, step: str) -> None:
    fill(mem)
    res = mem.sleep(only=step)
    assert res["skipped"] is False
    assert list(res["steps"]) == [step]
    assert res["errors"] == {}
    assert "marker" not in res  # --only never satisfies the gate for a full sleep
    assert mem.sleep()["skipped"] is False


def test_unknown_step_is_a_typed_error(mem: Memory) -> None:
    with pytest.raises(InvalidInput):
        mem.sleep(only="nap")


def test_backups_rotate_and_zero_disables(store_dir: Path) -> None:
    cfg = Config.load(home=store_dir, backups_keep=2)
    with Memory.open(config=cfg, embedder=hashing()) as m:
        fill(m)
        for _ in range(4):
            m.sleep(force=True)
    assert len(list((store_dir / "backups").glob("sleep-*.db"))) == 2
    cfg0 = Config.load(home=store_dir, backups_keep=0)
    with Memory.open(config=cfg0, embedder=hashing()) as m:
        assert m.sleep(force=True)["backup"] is None
    assert len(list((store_dir / "backups").glob("sleep-*.db"))) == 2  # untouched


def test_a_failing_step_is_reported_and_the_rest_still_run(
    mem: Memory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fill(mem)

    def broken(ctx: object) -> dict[str, object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(plasticity_mod, "run", broken)
    res = mem.sleep()
    assert res["errors"] == {"plasticity": "RuntimeError: boom"}
    assert res["steps"]["topics"]["clusters"] >= 0 and "error" not in res["steps"]["dynamics"]
    assert "marker" not in res
    monkeypatch.undo()
    assert mem.sleep()["skipped"] is False  # the failed run did not close the gate


def test_a_live_lock_makes_the_second_sleep_give_up(mem: Memory) -> None:
    fill(mem)
    cons = ConsolidationStore(mem.store)
    assert cons.try_lock("someone-else", 600, time.time()) is None
    res = mem.sleep(wait_s=0.3)
    assert res["skipped"] is True and res["reason"] == "busy"
    assert res["holder"]["pid"] == os.getpid()
    cons.release_lock("someone-else")
    assert mem.sleep()["skipped"] is False


def test_a_dead_holder_is_taken_over(mem: Memory) -> None:
    fill(mem)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(proc.stdout)
    ConsolidationStore(mem.store).put_state("lock", {
        "holder": "ghost", "pid": dead, "host": os.uname().nodename,
        "expires": time.time() + 3600})
    assert mem.sleep(wait_s=5)["skipped"] is False


_CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from tests.conftest import hashing
import tideline.sleep.plasticity as p
from tideline import Memory
real = p.run
def slow(ctx):
    time.sleep(1.5)   # hold the lock long enough for the other process to arrive
    return real(ctx)
p.run = slow
go = float(sys.argv[1])
with Memory.open(sys.argv[2], embedder=hashing()) as m:
    while time.time() < go:
        time.sleep(0.005)
    print(json.dumps(m.sleep()))
"""


def test_two_processes_sleep_one_at_a_time(store_dir: Path, tmp_path: Path,
                                          backend: Backend) -> None:
    with Memory.open(store_dir, embedder=hashing()) as m:
        ids = fill(m)
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(root=str(Path(__file__).resolve().parents[2])))
    go = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, str(script), str(go), str(store_dir)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    ran = [o for o in outs if not o["skipped"]]
    waited = [o for o in outs if o["skipped"]]
    assert len(ran) == 1 and len(waited) == 1
    assert waited[0]["reason"] == "done by another sleep"
    with Memory.open(store_dir, embedder=hashing()) as m:
        assert len(m.events(kinds=["sleep"])) == 1
        assert set(ids) <= set(statuses(m))
        assert ConsolidationStore(m.store).get_state("lock") is None


def test_guard_stops_mass_dormancy_until_forced(mem: Memory) -> None:
    rng = random.Random(3)
    words = [f"{a}{b}" for a in "bcdfgklmnprstvz" for b in ("ax", "el", "ir", "ol", "un")]
    ids = sorted({mem.remember(" ".join(rng.sample(words, 6)), tags=[f"t{i}"]).id
                  for i in range(60)})
    assert len(ids) == 60
    age(mem, ids, 90)
    res = mem.sleep()
    dyn = res["steps"]["dynamics"]
    assert dyn["dormant"] == 0 and "would make dormant 60 of 60" in dyn["stopped"]["reason"]
    assert res["needs_force"] is True and "dynamics" in res["stopped"]
    assert set(statuses(mem).values()) == {"episodic"}
    forced = mem.sleep(force=True)
    assert forced["steps"]["dynamics"]["dormant"] == 60
    assert set(statuses(mem).values()) == {"dormant"}
    assert len(statuses(mem)) == 60
