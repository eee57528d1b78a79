"""Issue 11: sleep on PostgreSQL — one at a time across hosts (advisory lock), and the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import hashing

from tideline import Memory
from tideline.sleep.gate import quick_skip
from tideline.store.consolidation import ConsolidationStore

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sys
from tideline.store.postgres.locks import SleepLocks
locks = SleepLocks(sys.argv[1])
print("held" if locks.acquire("default", "other-host") else "refused", flush=True)
sys.stdin.readline()
"""


def _holder(url: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, url], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_sleep_held_on_another_host_makes_this_one_skip(pg_mem: Memory, pg_url: str) -> None:
    pg_mem.remember("something for sleep to look at")
    proc = _holder(pg_url)
    try:
        res = pg_mem.sleep(wait_s=0.0)
        assert res["skipped"] is True and res["reason"] == "busy"
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
    ran = pg_mem.sleep(wait_s=5.0)
    assert ran["skipped"] is False


def test_the_lock_of_a_killed_sleep_goes_with_it(pg_mem: Memory, pg_url: str) -> None:
    """No lease to wait out: the advisory lock is released with the dead holder's session."""
    pg_mem.remember("something for sleep to look at")
    proc = _holder(pg_url)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    res = pg_mem.sleep(wait_s=0.0)
    while res.get("reason") == "busy" and time.monotonic() < deadline:
        # The server notices the closed socket on its own schedule.
        time.sleep(0.2)
        res = pg_mem.sleep(wait_s=0.0)
    assert res["skipped"] is False


def test_two_sleeps_of_one_process_never_both_hold_the_lock(pg_mem: Memory) -> None:
    cons = ConsolidationStore(pg_mem.store)
    assert cons.try_lock("one", 900.0, time.time()) is None
    other = cons.try_lock("two", 900.0, time.time())
    assert other is not None and other.holder == "one" and other.pid == os.getpid()
    cons.release_lock("one")
    assert cons.try_lock("two", 900.0, time.time()) is None
    cons.release_lock("two")


def test_the_gate_closes_after_a_sleep_and_opens_on_a_change(pg_mem: Memory,
                                                             pg_url: str) -> None:
    pg_mem.remember("the first memory")
    cons = ConsolidationStore(pg_mem.store)
    now = time.time()
    assert not cons.gate().unchanged(3600.0, now)
    cons.mark_slept(now)
    assert cons.gate().unchanged(3600.0, now + 1)
    home, ns = pg_mem.config.home, pg_mem.config.namespace
    lean = quick_skip(home, ns, 1.0, database=pg_url)
    assert lean is not None and lean["reason"] == "unchanged"
    out = subprocess.run([sys.executable, "-m", "tideline.sleep", "--store", str(home),
                          "--database", pg_url, "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True,
                         env={**os.environ, "TIDELINE_EMBEDDER": "hashing"})
    assert json.loads(out.stdout)["reason"] == "unchanged"
    pg_mem.recall("the first memory", log=False)  # reads change nothing
    assert cons.gate().unchanged(3600.0, now + 2)
    pg_mem.remember("a second memory")
    assert not cons.gate().unchanged(3600.0, now + 3)
    assert quick_skip(home, ns, 1.0, database=pg_url) is None


def test_a_sleep_on_postgres_takes_no_backup_file(pg_mem: Memory, tmp_path: Path) -> None:
    pg_mem.remember("something for sleep to look at")
    res = pg_mem.sleep(force=True)
    assert res["backup"] is None
    assert not (pg_mem.config.home / "backups").exists()
    assert {"vectors", "dynamics", "recurrence", "entities"} <= set(res["steps"])
    for step in ("vectors", "dynamics", "recurrence", "entities"):
        assert step not in res["errors"], res["errors"][step]


def test_a_second_host_with_its_own_local_state_sees_the_same_gate(
        pg_mem: Memory, pg_url: str, tmp_path: Path) -> None:
    pg_mem.remember("shared between hosts")
    ConsolidationStore(pg_mem.store).mark_slept(time.time())
    with Memory.open(tmp_path / "host-b", database=pg_url, embedder=hashing(),
                     project="global") as other:
        res = other.sleep()
        assert res["skipped"] is True and res["reason"] == "unchanged"
