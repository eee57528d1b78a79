"""Faults and load, as RELIABILITY.md promises: kill -9, many writers, fuzzed input, disk full.

Each test prints one JSON line of figures. The quick tier runs in CI; the ``stress``
marker runs the long versions (``make stress``).

SQLite only (tests/backend.py): kill -9 against one file, its page limit as a full disk,
the file copy of a backup; many writers on PostgreSQL: tests/store/test_hosts.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.backend import rows, scalar, sqlite_conn
from tests.conftest import hashing

from tideline import Memory, StoreFull, TidelineError

WRITER = r"""
import sys
from tests.conftest import hashing
from tideline import Memory
home, acks, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Memory.open(home, embedder=hashing()) as mem, open(acks, "a", buffering=1) as out:
    i = start
    while True:
        key = f"k{i}"
        mem.remember(f"fact number {i} about the {i % 17}th heron colony", idempotency_key=key)
        if i % 4 == 0:
            mem.add_turns([{"session": "s", "role": "user", "text": f"turn {i}", "id": key}])
        out.write(key + "\n")
        i += 1
"""


def _kill_cycles(tmp_path: Path, cycles: int) -> dict[str, object]:
    home, acks = tmp_path / "s", tmp_path / "acks.txt"
    Memory.open(home, embedder=hashing()).close()
    acks.touch()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    rng = random.Random(5)
    start = 0
    for _ in range(cycles):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(home), str(acks),
                                 str(start)], env=env, cwd=Path(__file__).parents[2])
        before = len(acks.read_text().split())
        deadline = time.time() + 60
        while len(acks.read_text().split()) < before + 5 and time.time() < deadline:
            time.sleep(0.05)  # wait until the writer is really writing
        time.sleep(rng.uniform(0.05, 0.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = [line for line in acks.read_text().splitlines() if line]
        start = len(done) + 50  # keys the killed process may have committed unacked are skipped
    acked = set(acks.read_text().split())
    with Memory.open(home, embedder=hashing()) as mem:
        keys = {r[0] for r in rows(mem, "SELECT key FROM write_keys")}
        memories = mem.introspect()["memories"]
        duplicates = scalar(mem, "SELECT count(*) - count(DISTINCT gesture) FROM memories")
        doctor = mem.doctor(repair=True)
        # A retry of every acknowledged write is a no-op.
        replays = sum(mem.remember(f"fact number {k[1:]} about the {int(k[1:]) % 17}th heron "
                                   "colony", idempotency_key=k).replayed for k in sorted(acked))
    figures = {"test": "kill9_remember", "cycles": cycles, "acked": len(acked),
               "rows": memories, "lost": len(acked - keys),
               "unacked_committed": len(keys - acked), "duplicates": duplicates,
               "retry_noops": replays, "integrity": doctor["checks"]["integrity"]}
    print(json.dumps(figures))
    return figures


def test_kill9_during_writes_loses_nothing(tmp_path: Path) -> None:
    f = _kill_cycles(tmp_path, cycles=3)
    assert f["acked"] > 0
    assert f["lost"] == 0 and f["duplicates"] == 0 and f["integrity"] == ["ok"]
    assert f["retry_noops"] == f["acked"]


@pytest.mark.stress
def test_kill9_stress(tmp_path: Path) -> None:
    f = _kill_cycles(tmp_path, cycles=40)
    assert f["lost"] == 0 and f["duplicates"] == 0 and f["integrity"] == ["ok"]


def _fuzz_text(rng: random.Random, n: int) -> str:
    alphabet = (string.printable + "\"'*^:()-+NEARANDORNOT" + "边界潮痕測試ёжикüß" +
                "\u200b\u202e\u2066\ufeff\U000e0041🌊\u0301")
    return "".join(rng.choice(alphabet) for _ in range(n))


def _fuzz(mem: Memory, count: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    errors: list[str] = []
    typed = 0
    for i in range(count):
        text = _fuzz_text(rng, rng.randint(0, 60))
        try:
            mem.recall(text, log=False)
        except TidelineError:
            typed += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        if i % 10 == 0:
            try:
                mem.remember(text or "x", idempotency_key=f"f{i}")
            except TidelineError:
                typed += 1
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
    figures = {"test": "fuzz", "inputs": count, "untyped_errors": len(errors),
               "typed_errors": typed, "doctor_ok": mem.doctor()["ok"]}
    print(json.dumps(figures))
    return figures | {"examples": errors[:3]}


def test_fuzzed_queries_and_writes(mem: Memory) -> None:
    mem.remember("the whale-listen service streams hydrophone audio (E1234)")
    f = _fuzz(mem, 400, seed=1)
    assert f["untyped_errors"] == 0, f["examples"]
    assert f["doctor_ok"]


@pytest.mark.stress
def test_fuzz_stress(mem: Memory) -> None:
    f = _fuzz(mem, 20_000, seed=2)
    assert f["untyped_errors"] == 0, f["examples"]


def test_disk_full_is_typed_and_nothing_half_written(mem: Memory) -> None:
    keep = mem.remember("a memory written before the disk filled up").id
    conn = sqlite_conn(mem)  # SQLite's page limit stands in for a full disk
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(StoreFull):
        for i in range(200):
            mem.remember(f"filler {i} " + "lorem ipsum dolor sit amet " * 200)
    conn.execute("PRAGMA max_page_count = 1073741823")
    assert mem.get(keep).gesture.startswith("a memory written")
    report = mem.doctor()
    print(json.dumps({"test": "disk_full", "doctor_ok": report["ok"],
                      "parity": report["checks"]["parity"]}))
    assert report["ok"], report


def test_backup_under_load_restores(tmp_path: Path) -> None:
    home = tmp_path / "s"
    with Memory.open(home, embedder=hashing()) as mem:
        words = ["heron", "kiln", "otter", "comet", "basalt", "lantern", "quince", "marsh",
                 "ferry", "cobalt", "walnut", "glacier", "tundra", "saffron", "harbour"]
        for i in range(50):
            picks = random.Random(i).sample(words, 4)
            mem.remember(f"log {i}: the {picks[0]} met a {picks[1]} near the {picks[2]} "
                         f"with {picks[3]} (ref L{i:04d})", idempotency_key=f"n{i}")
        before = mem.introspect()["memories"]
        backup = mem.store.backup("manual")
        assert backup is not None
        mem.remember("written after the backup")
    restored = tmp_path / "r"
    restored.mkdir()
    (restored / "tideline.db").write_bytes(backup.read_bytes())
    with Memory.open(restored, embedder=hashing()) as mem:
        stats = mem.introspect()
        assert stats["memories"] == before
        assert mem.doctor()["ok"]
        assert mem.recall("L0007", abstain=True).items


@pytest.mark.stress
def test_many_writers_stress(tmp_path: Path) -> None:
    import multiprocessing as mp

    from tests.store.test_reliability import _writer

    home = tmp_path / "s"
    Memory.open(home, embedder=hashing()).close()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(home), w, 300, out)) for w in range(8)]
    t0 = time.time()
    for p in procs:
        p.start()
    results = [out.get(timeout=1200) for _ in procs]
    for p in procs:
        p.join()
    errors = sum(len(e) for _, _, e in results)
    acked = sum(a for _, a, _ in results)
    with Memory.open(home, embedder=hashing()) as mem:
        keys = scalar(mem, "SELECT count(*) FROM write_keys")
        ok = mem.doctor()["ok"]
    print(json.dumps({"test": "writers_8x300", "acked": acked, "rows": keys,
                      "lost": acked - keys, "errors": errors, "seconds": round(time.time() - t0),
                      "integrity_ok": ok}))
    assert errors == 0 and acked == keys == 2400 and ok
