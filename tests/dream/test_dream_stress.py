"""Dream apply under kill -9 and under concurrent writers (``make stress``)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.backend import scalar
from tests.conftest import hashing

from tideline import Memory

pytestmark = pytest.mark.stress



WORDS = ("harbour violin glacier orchid tram lantern compiler meadow invoice saffron "
         "tundra pelican quarry mosaic bramble cobalt falcon juniper lagoon marble nectar "
         "obsidian parsley quince rhubarb sequoia thimble umber vortex walnut yarrow zephyr "
         "anchor bishop canyon dolphin ember fjord geyser hammock").split()


def _answer(turn_ids: list[int]) -> dict[str, object]:
    return {"memories": [
        {"gesture": f"{w.title()} {WORDS[(i * 7) % 40]} {WORDS[(i * 11 + 3) % 40]} {i}.",
         "kind": "decision", "source_links": [turn_ids[i % len(turn_ids)]],
         "importance": 3, "emotional": 1, "recurrence": 1, "unresolved": 1}
        for i, w in enumerate(WORDS)]}


def _counts(store: Path) -> tuple[int, str]:
    with Memory.open(store, embedder=hashing()) as mem:
        n = scalar(mem, "SELECT count(*) FROM memories WHERE kind = 'decision'")
        ok = scalar(mem, "PRAGMA integrity_check")  # SQLite only: the file's own check
    return int(n), str(ok)


def test_kill_9_during_dream_apply_is_all_or_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Memory.open(store, embedder=hashing()) as mem:
        res = mem.add_turns([{"session": "s", "role": "user", "text": f"turn {i}",
                              "id": f"t{i}"} for i in range(10)])
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(_answer(list(res.turn_ids))), encoding="utf-8")
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    reference = tmp_path / "reference"  # the full outcome, through the same CLI
    with Memory.open(reference, embedder=hashing()) as ref:
        ref.add_turns([{"session": "s", "role": "user", "text": f"turn {i}", "id": f"t{i}"}
                       for i in range(10)])
    subprocess.run([sys.executable, "-m", "tideline", "dream", "apply", "solidify", str(answer),
                    "--store", str(reference)], env=env, check=True, capture_output=True)
    full = _counts(reference)[0]
    assert full >= 30
    rng = random.Random(7)
    outcomes = {"none": 0, "all": 0}
    for _cycle in range(20):
        proc = subprocess.Popen([sys.executable, "-m", "tideline", "dream", "apply", "solidify",
                                 str(answer), "--store", str(store), "--json"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        n, ok = _counts(store)
        assert ok == "ok" and n in (0, full), n  # never half a layer
        outcomes["all" if n else "none"] += 1
    done = subprocess.run([sys.executable, "-m", "tideline", "dream", "apply", "solidify",
                           str(answer), "--store", str(store), "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    n, ok = _counts(store)
    assert (n, ok) == (full, "ok")  # a retry after a kill never duplicates
    print(json.dumps({"test": "dream_apply_kill9", "cycles": sum(outcomes.values()),
                      **outcomes, "rows": n, "duplicates": 0, "integrity": ok}))


def _writer(home: str, count: int, out: mp.Queue) -> None:
    acked: list[int] = []
    errors: list[str] = []
    with Memory.open(home, embedder=hashing()) as mem:
        for i in range(count):
            try:
                acked.append(mem.remember(f"concurrent note {i} about {i * 7919 % 101}",
                                          scope="atlas", idempotency_key=f"c{i}").id)
            except Exception as exc:  # recorded, asserted on below
                errors.append(f"{type(exc).__name__}: {exc}")
    out.put((acked, errors))


def test_dream_apply_alongside_a_writer_loses_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Memory.open(store, embedder=hashing()) as mem:
        ids = [mem.write(f"The {w} matters for atlas.", scope="atlas").id
               for w in ("harbour", "violin", "glacier", "orchid")]
    spawn = mp.get_context("spawn")
    queue: mp.Queue = spawn.Queue()
    writer = spawn.Process(target=_writer, args=(str(store), 300, queue))
    writer.start()
    applied = 0
    with Memory.open(store, embedder=hashing()) as mem:
        for round_ in range(10):
            result = mem.apply_dream("comb", {
                "weights": [{"memory_id": ids[round_ % 4], "importance": 1 + round_ % 5,
                             "reason": "r"}],
                "conflicts": [], "profiles": [], "self_concept": [],
                "threads": [{"title": f"thread {round_}", "source_memories": ids[:2]}]})
            applied += result["counts"]["threads"]
    writer.join(timeout=300)
    acked, errors = queue.get(timeout=10)
    with Memory.open(store, embedder=hashing()) as mem:
        lost = [i for i in acked if i not in mem.store.get_memories(acked)]
        threads = len(mem.threads())
    assert errors == [] and lost == [] and applied == threads == 10
    print(json.dumps({"test": "dream_apply_concurrent", "acked": len(acked), "lost": len(lost),
                      "errors": len(errors), "dream_applies": applied}))
