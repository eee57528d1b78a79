"""Issue 11, "Everything works on both": the surfaces whose PostgreSQL behaviour differs from
SQLite's in how they find the store — the hooks' warm prefetch server, and the sleep gate
seen from two hosts as separate processes with separate local state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import ROOT, hashing
from tests.hooks.conftest import SESSION, run_hook_process

from tideline import Memory
from tideline.embed import HashingEmbedder
from tideline.hooks import warm


def _wait_for_pong(home: Path) -> dict[str, object] | None:
    deadline = time.time() + 90
    while time.time() < deadline:
        pong = warm.ask(home, "default", {"op": "ping"}, timeout=2)
        if pong is not None:
            return pong
        time.sleep(0.2)
    return None


def test_warm_auto_reads_the_embedder_of_the_database(pg_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11: `hooks/warm.py` read the embedder marker from the local directory, which
    holds no database on PostgreSQL, so `auto` fell back to `$TIDELINE_EMBEDDER` or e5 and
    started a model server for a store built with the hashing embedder."""
    home = tmp_path / "local"
    Memory.open(home, database=pg_url, embedder=hashing()).close()
    monkeypatch.delenv("TIDELINE_WARM", raising=False)
    monkeypatch.delenv("TIDELINE_EMBEDDER", raising=False)
    assert warm.mode() == "auto"
    assert not warm.wanted(home, database=pg_url)
    assert warm.spawn(home, "default", database=pg_url) is False
    assert not warm.socket_path(home, "default").with_suffix(".starting").exists()


def test_the_warm_server_serves_the_database_and_steps_down_on_a_reembed(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11: the warm server checked the store's embedder marker in the local directory
    (none on PostgreSQL), so after another host re-embedded the database it kept answering
    with the old embedder; it now reads the marker from db_meta and steps down."""
    home = tmp_path / "local"
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    with Memory.open(tmp_path / "host-a", database=pg_url, embedder=hashing(),
                     project="atlas") as seed:
        seed.write("We fixed loader error E1234 by mapping the region column", scope="atlas",
                   importance=5, emotional=4, recurrence=4, unresolved=2)
    env = {"TIDELINE_WARM": "always", "TIDELINE_WARM_IDLE": "60",
           "TIDELINE_DATABASE_URL": pg_url}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    base = {"session_id": SESSION, "cwd": str(repo), "transcript_path": str(repo / "t.jsonl")}
    start = run_hook_process("session-start", base | {"hook_event_name": "SessionStart"},
                             home, cwd=repo, **env)
    assert start.returncode == 0, start.stderr
    assert "E1234" in start.stdout
    pong = _wait_for_pong(home)
    assert pong is not None, "the warm server did not come up"
    try:
        answer = warm.ask(home, "default", {"op": "prefetch", "query": "loader E1234",
                                            "project": {"name": "atlas", "rule": "explicit"}})
        assert answer is not None and "region column" in answer["result"]["text"]
        assert not (home / "tideline.db").exists()  # served from the database
        with Memory.open(tmp_path / "host-b", database=pg_url, embedder=hashing()) as other:
            other.reembed(HashingEmbedder(dim=64))
        # The marker changed in the database: the server refuses and goes.
        assert warm.ask(home, "default", {"op": "ping"}, timeout=10) is None
        deadline = time.time() + 30
        while time.time() < deadline and warm.alive(home, "default"):
            time.sleep(0.2)
        assert not warm.alive(home, "default")
    finally:
        try:
            os.kill(int(str(pong["pid"])), signal.SIGTERM)
        except ProcessLookupError:
            pass


def _cli(home: Path, url: str, *args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(home),
                          "--database", url, "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "TIDELINE_EMBEDDER": "hashing"})
    assert out.returncode == 0, out.stderr
    data: dict[str, object] = json.loads(out.stdout)
    return data


def test_the_sleep_gate_across_two_host_processes(pg_url: str, tmp_path: Path) -> None:
    """Issue 11, "sleep … the gate 'nothing changed' works" across hosts: host A sleeps, host
    B (another process, another local directory) finds nothing changed; a write on B opens
    the gate for A, and A's sleep closes it for B again."""
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    _cli(host_a, pg_url, "remember", "the shared loader runs at night")
    first = _cli(host_a, pg_url, "sleep")
    assert first["skipped"] is False and first["errors"] == {}
    seen = _cli(host_b, pg_url, "sleep")
    assert seen["skipped"] is True and seen["reason"] == "unchanged"
    _cli(host_b, pg_url, "remember", "host b adds a second memory")
    after = _cli(host_a, pg_url, "sleep")
    assert after["skipped"] is False
    again = _cli(host_b, pg_url, "sleep")
    assert again["skipped"] is True and again["reason"] == "unchanged"
    # Neither host keeps a database of its own.
    assert not (host_a / "tideline.db").exists() and not (host_b / "tideline.db").exists()
