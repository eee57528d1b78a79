"""Issue 31: failover with nothing acknowledged lost.

Writer, recaller and sleeper processes (tests/postgres/failover_load.py) run on the
session's primary + synchronous standby (``pg_pair``) through a multi-host write URL and
a read URL. The primary is killed with SIGKILL; while no primary exists, the test waits
until every writer has been refused with a typed, retryable error, the recaller has
answered from the standby marked read-only, and a prompt hook has run silently; then the
standby is promoted. The writers go on by themselves on the new primary. Counted:
attempted / acknowledged / found on the new primary / duplicated — every acknowledged
write is found exactly once, and no attempted write is there twice. A sleep interrupted
by the switch runs again cleanly. One cycle here; ``make stress`` runs many.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import hashing

from tideline import Memory

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Tally:
    """What the load processes wrote down, and what the new primary holds."""

    attempted: set[str] = field(default_factory=set)
    acked: dict[str, int] = field(default_factory=dict)
    retryable: Counter[str] = field(default_factory=Counter)
    other: list[str] = field(default_factory=list)
    recalls: int = 0
    read_only_recalls: int = 0
    sleeps: int = 0


def _read(paths: list[Path]) -> Tally:
    t = Tally()
    for path in paths:
        for line in path.read_text("utf-8").splitlines() if path.exists() else []:
            kind, _, rest = line.partition(" ")
            if kind == "A":
                t.attempted.add(rest)
            elif kind == "K":
                key, _, mid = rest.partition(" ")
                t.acked[key] = int(mid)
            elif kind == "R":
                t.retryable[rest.split(" ")[0]] += 1
            elif kind == "E":
                t.other.append(rest)
            elif kind == "OK":
                t.recalls += 1
                t.read_only_recalls += rest.endswith(" 1")
            elif kind == "S":
                t.sleeps += 1
    return t


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.05)
    if os.environ.get("TIDELINE_TEST_TRACE"):
        print(f"{time.monotonic() - started:6.2f}s {what}")  # noqa: T201


def _found(pair: Any, database: str) -> Counter[str]:
    """How many memories on the (new) primary carry each write's key."""
    rows = pair.sql(pair.primary, "SELECT gesture FROM memories", database)
    return Counter(str(r[0]).split(" ", 1)[0] for r in rows)


def run_cycles(pair: Any, database: str, tmp: Path, *, cycles: int, writers: int = 2,
               per_phase: int = 3) -> tuple[Tally, Counter[str]]:
    """Run the load through ``cycles`` failovers (each ends with the old primary rejoined
    as the standby); returns the tally and the keys found on the last primary."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
           "TIDELINE_DATABASE_URL": pair.write_url(database),
           "TIDELINE_DATABASE_READ_URL": pair.read_url(database),
           "TIDELINE_DATABASE_READ_WAIT_MS": "200", "OMP_NUM_THREADS": "1"}
    env.pop("TIDELINE_HOME", None)
    stop = tmp / "stop"
    roles = [("writer", f"w{n}") for n in range(writers)] + [("recaller", "r0"),
                                                             ("sleeper", "s0")]
    outs = {name: tmp / f"{name}.out" for _, name in roles}
    errs = {name: tmp / f"{name}.err" for _, name in roles}  # kept for a failure's reader
    procs = [subprocess.Popen(  # noqa: S603 - this interpreter, this repository's module
        [sys.executable, "-m", "tests.postgres.failover_load", role, name, str(outs[name]),
         str(stop)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=errs[name].open("wb")) for role, name in roles]
    writer_outs = [outs[name] for role, name in roles if role == "writer"]

    def acked_each(at_least: int) -> bool:
        return all(len(_read([p]).acked) >= at_least for p in writer_outs)

    try:
        target = per_phase
        _until(lambda: acked_each(target), "every writer acknowledged writes")
        for _ in range(cycles):
            before = _read(list(outs.values()))
            refused = {p: _refusals(p) for p in writer_outs}
            pair.kill_primary()
            # No primary now: writers are refused (typed, retryable), recalls answer
            # from the standby marked read-only, a hook stays silent.
            _until(lambda r=refused: all(_refusals(p) > r[p] for p in writer_outs),  # type: ignore[misc]
                   "every writer refused with primary_unavailable")
            _until(lambda b=before: _read([outs["r0"]]).read_only_recalls  # type: ignore[misc]
                   > b.read_only_recalls, "a read-only recall from the standby")
            _hook_is_silent(env, tmp)
            _fresh_recall_reads_the_standby(env, tmp)
            pair.promote()
            target += per_phase
            _until(lambda n=target: acked_each(n),  # type: ignore[misc]
                   "writers acknowledged on the new primary")
            pair.rejoin()
    finally:
        stop.touch()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    stderr = {name: path.read_text("utf-8", "replace") for name, path in errs.items()}
    assert not any("Traceback" in e for e in stderr.values()), stderr
    assert all(p.returncode == 0 for p in procs), stderr
    return _read(list(outs.values())), _found(pair, database)


def _refusals(path: Path) -> int:
    return _read([path]).retryable["primary_unavailable"]


def _hook_is_silent(env: dict[str, str], tmp: Path) -> None:
    """A prompt hook while no primary exists: exit 0, nothing on stderr."""
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "failover",
               "prompt": "what do the writers know", "cwd": str(tmp)}
    done = subprocess.run(  # noqa: S603 - this interpreter, the hook entry point
        [sys.executable, "-m", "tideline.hooks", "prompt", "--store", str(tmp / "hook")],
        input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=60, check=False)
    assert done.returncode == 0
    assert done.stderr.strip() == "", done.stderr


def _fresh_recall_reads_the_standby(env: dict[str, str], tmp: Path) -> None:
    """A CLI recall started while no primary exists opens the store from the standby."""
    done = subprocess.run(  # noqa: S603 - this interpreter, the CLI
        [sys.executable, "-m", "tideline", "recall", "writer fact", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        env={**env, "TIDELINE_EMBEDDER": "hashing", "TIDELINE_HOME": str(tmp / "cli")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["read_only"] is True


def check(tally: Tally, found: Counter[str]) -> dict[str, int]:
    """The counts, and the guarantees: every acked write found once, none twice."""
    counts = {"attempted": len(tally.attempted), "acked": len(tally.acked),
              "found": sum(1 for k in tally.acked if found[k] >= 1),
              "duplicated": sum(1 for k in tally.attempted if found[k] > 1)}
    assert counts["found"] == counts["acked"], counts
    assert counts["duplicated"] == 0, counts
    assert not tally.other, tally.other
    assert tally.retryable["primary_unavailable"] > 0
    assert tally.read_only_recalls > 0 and tally.recalls > tally.read_only_recalls
    return counts


def test_failover_loses_no_acknowledged_write_and_duplicates_none(
        pg_pair: Any, pair_db: str, tmp_path: Path) -> None:
    with Memory.open(tmp_path / "seed", embedder=hashing(), project="global",
                     database=pg_pair.write_url(pair_db)) as seed:  # migrated once, here
        seed.remember("seed fact so that the first recall has something to rank")
    pg_pair.wait_replayed()
    tally, found = run_cycles(pg_pair, pair_db, tmp_path, cycles=1)
    counts = check(tally, found)
    print("failover counts:", counts)  # noqa: T201 - shown with -s
    # A sleep the switch interrupted (or never let start) runs again on the new primary.
    with Memory.open(tmp_path / "after", embedder=hashing(), project="global",
                     database=pg_pair.write_url(pair_db)) as mem:
        done = mem.sleep(force=True)
        assert not done.get("errors")
        assert mem.recall(next(iter(tally.acked))).memories


@pytest.mark.stress
def test_many_failovers_lose_no_acknowledged_write(pg_pair: Any, pair_db: str,
                                                   tmp_path: Path) -> None:
    with Memory.open(tmp_path / "seed", embedder=hashing(), project="global",
                     database=pg_pair.write_url(pair_db)) as seed:
        seed.remember("seed fact so that the first recall has something to rank")
    pg_pair.wait_replayed()
    tally, found = run_cycles(pg_pair, pair_db, tmp_path, cycles=8, writers=3)
    counts = check(tally, found)
    print("failover counts over 8 cycles:", counts)  # noqa: T201 - shown with -s
