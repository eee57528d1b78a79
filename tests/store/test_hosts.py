"""Many writer processes on two "hosts" share one memory: nothing lost, nothing doubled.

Issue 11 "One suite, two backends": writer processes × gated writes, raw turns and
recalls, plus a sleeper per host, from two hosts — separate processes with separate local
state directories and the same database (PostgreSQL); on SQLite both hosts share the one
directory, which is the store. Paired writers on the two hosts write the same shared
facts and turns with the same idempotency keys and message ids at the same time, so a
race in idempotency or turn identity shows as a duplicate. The normal suite runs a small
version on each backend; the ``stress`` marker runs 16 writers × 500 writes
(``make stress``). Each run prints one JSON line of figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.backend import Backend, rows, scalar
from tests.conftest import hashing

pytestmark = pytest.mark.backends

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import json, os, sys, time
from tests.conftest import hashing
from tideline import Memory

role, home, worker, count, out, stop = sys.argv[1:7]
worker, count = int(worker), int(count)
errors, acked, replays, sleeps = [], [], 0, 0
with Memory.open(home, embedder=hashing(), project="global") as mem:
    if role == "sleeper":
        while True:
            stopping = os.path.exists(stop)  # one more sleep after the writers stopped
            try:
                res = mem.sleep(wait_s=120)
                sleeps += not res.get("skipped", False)
                errors += [f"sleep {k}: {v}"[:300] for k, v in res.get("errors", {}).items()]
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            if stopping:
                break
            time.sleep(0.3)
    else:
        pair = worker // 2  # workers 2p and 2p+1 run on different hosts
        for i in range(count):
            try:
                key = f"w{worker}-{i}"
                mem.remember(f"host fact {worker}x{i}: the {i % 13}th crane of lake {worker}",
                             scope=f"p{worker % 3}", idempotency_key=key)
                acked.append(key)
                if i % 4 == 0:  # the pair writes this one at the same time from both hosts
                    key = f"shared{pair}-{i}"
                    mem.remember(f"shared fact {pair}x{i}: the heron count of marsh {pair}",
                                 idempotency_key=key)
                    acked.append(key)
                if i % 5 == 0:
                    mem.add_turns([{"session": f"s{pair}", "role": "user", "id": f"t{pair}-{i}",
                                    "text": f"turn {i} of pair {pair} about the tide"}])
                if i % 7 == 3:  # a retry of an acknowledged write is a no-op
                    prev = f"w{worker}-{i - 1}"
                    res = mem.remember(
                        f"host fact {worker}x{i - 1}: the {(i - 1) % 13}th crane of lake {worker}",
                        scope=f"p{worker % 3}", idempotency_key=prev)
                    replays += res.replayed
                    if not res.replayed:
                        errors.append(f"retry of {prev} was not a replay")
                if i % 3 == 0:
                    mem.recall(f"crane of lake {worker}", scope=f"p{worker % 3}")
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
print(json.dumps({"role": role, "worker": worker, "acked": acked, "errors": errors,
                  "replays": replays, "sleeps": sleeps}), file=open(out, "w"))
"""


def _spawn(backend: Backend, role: str, home: Path, worker: int, count: int,
           out: Path, stop: Path) -> subprocess.Popen[bytes]:
    env = backend.env() | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", WORKER, role,
                             str(home), str(worker), str(count), str(out), str(stop)],
                            env=env, cwd=ROOT)


def run_hosts(backend: Backend, base: Path, writers: int, count: int) -> dict[str, Any]:
    """Run ``writers`` writer processes and one sleeper per host; returns the figures."""
    hosts = [base / "host-a", base / "host-b"] if not backend.is_sqlite else [base / "store"] * 2
    backend.open(hosts[0], embedder=hashing(), project="global").close()
    stop = base / "stop"
    outs = [base / f"w{w}.json" for w in range(writers)]
    started = time.perf_counter()
    procs = [_spawn(backend, "writer", hosts[w % 2], w, count, outs[w], stop)
             for w in range(writers)]
    sleepers = [_spawn(backend, "sleeper", hosts[h], h, 0, base / f"sleep{h}.json", stop)
                for h in (0, 1)]
    for p in procs:
        assert p.wait(timeout=3600) == 0
    stop.touch()
    for p in sleepers:
        assert p.wait(timeout=600) == 0
    seconds = time.perf_counter() - started
    results = [json.loads(o.read_text()) for o in outs]
    slept = [json.loads((base / f"sleep{h}.json").read_text()) for h in (0, 1)]
    acked = {k for r in results for k in r["acked"]}
    with backend.open(hosts[1], embedder=hashing(), project="global") as mem:
        backend.check(mem)
        keys = dict(rows(mem, "SELECT key, memory_id FROM write_keys"))
        stored = {int(r[0]) for r in rows(mem, "SELECT id FROM memories")}
        duplicates = scalar(mem, "SELECT count(*) - count(DISTINCT gesture) FROM memories")
        shared = dict(rows(mem, "SELECT gesture, count(*) FROM memories "
                                "WHERE gesture LIKE 'shared fact %' GROUP BY gesture"))
        turns = scalar(mem, "SELECT count(*) FROM turns")
        turn_ids = scalar(mem, "SELECT count(DISTINCT message_id) FROM turns")
    pairs = (writers + 1) // 2
    figures = {
        "test": "two_hosts", "backend": backend.name, "writers": writers, "count": count,
        "acked": len(acked), "keys": len(keys), "lost": len(acked - set(keys)),
        "keys_without_memory": sum(1 for m in keys.values() if int(m) not in stored),
        "duplicates": int(duplicates), "shared_doubled": sum(1 for n in shared.values()
                                                             if n != 1),
        "turns": int(turns), "turn_ids": int(turn_ids),
        "replays": sum(r["replays"] for r in results),
        "sleeps": sum(s["sleeps"] for s in slept),
        "errors": [e for r in results + slept for e in r["errors"]],
        "seconds": round(seconds, 1),
        "expected_turns": pairs * len(range(0, count, 5)),
    }
    print(json.dumps({k: v for k, v in figures.items() if k != "errors"}
                     | {"errors": len(figures["errors"]), "first_errors": figures["errors"][:3]}))
    with backend.open(hosts[1], embedder=hashing(), project="global") as mem:
        figures["doctor_ok"] = mem.doctor()["ok"]  # after the figures are out
    return figures


def _assert_clean(f: dict[str, Any], writers: int, count: int) -> None:
    assert f["errors"] == []
    assert f["lost"] == 0 and f["keys_without_memory"] == 0
    assert f["duplicates"] == 0 and f["shared_doubled"] == 0
    own = writers * count
    shared = ((writers + 1) // 2) * len(range(0, count, 4))
    assert f["acked"] == own + shared == f["keys"]
    assert f["turns"] == f["turn_ids"] == f["expected_turns"]
    assert f["replays"] == writers * len([i for i in range(count) if i % 7 == 3])
    assert f["doctor_ok"]


def test_two_hosts_lose_and_double_nothing(backend: Backend, tmp_path: Path) -> None:
    """4 writers × 30 writes (plus shared facts, turns, retries, recalls) and a sleeper on
    each of two hosts: every acknowledged write is stored once, every retry a no-op."""
    f = run_hosts(backend, tmp_path, writers=4, count=30)
    _assert_clean(f, 4, 30)


@pytest.mark.stress
def test_two_hosts_sixteen_writers_stress(backend: Backend, tmp_path: Path) -> None:
    """Issue 11's figure: 16 writer processes × 500 writes plus recalls and sleeps from two
    hosts — 0 lost, 0 duplicates, 0 errors."""
    f = run_hosts(backend, tmp_path, writers=16, count=500)
    _assert_clean(f, 16, 500)


def test_a_second_host_sees_the_first_hosts_writes(backend: Backend, tmp_path: Path) -> None:
    """A memory written through one host's directory is recalled through the other's."""
    a, b = (tmp_path / "a", tmp_path / "b") if not backend.is_sqlite else (tmp_path,) * 2
    with backend.open(a, embedder=hashing(), project="global") as first, \
            backend.open(b, embedder=hashing(), project="global") as second:
        mid = first.remember("the lighthouse keeper logs the tide at dawn").id
        items = second.recall("lighthouse keeper tide").items
        assert items and int(items[0].id) == mid
