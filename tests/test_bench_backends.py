"""The side-by-side benchmarks run on every backend in one run (issue 11, "Benchmarks").

``python -m tideline.bench recall --backend sqlite,postgres`` and ``writers``: tiny
sizes, the hashing embedder. Timings are printed, never asserted; the tests check that
each backend answered with the figures docs/benchmarks.md reports, and that the writers
lost nothing. PostgreSQL is the benchmark's own embedded server.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from tests.backend import BACKENDS

from tideline.bench import recall, writers
from tideline.bench.backends import parse_backends, place
from tideline.errors import InvalidInput


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_recall_bench_runs_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    recall.main(["--n", "300", "--queries", "40", "--embedder", "hashing", "--gated-sample",
                 "20", "--runs", "2", "--quiet", "--backend", ",".join(BACKENDS)])
    lines = _lines(capsys.readouterr().out)
    per = {r["backend"]: r for r in lines if "backend" in r}
    assert list(per) == list(BACKENDS)
    for r in per.values():
        assert r["n"] == 300 and r["runs"] == 2 and r["machine"]["cpus"]
        assert set(r["latency_ms"]) == {"engine_p50", "engine_p95", "e2e_p50", "e2e_p95"}
        assert r["exact"]["recall@10"] == 1.0  # exact tokens are found on every backend
        ann = r["ann_vs_exact"]
        assert 0.0 < ann["pipeline_recall_at_10_exact"] <= 1.0
        assert ann["index_recall_at_10"] > 0.9  # a 300-vector index is all but exact
    if len(BACKENDS) > 1:
        side = lines[-1]
        assert side["bench"] == "recall_side_by_side"
        assert set(BACKENDS) <= set(side) and "postgres_over_sqlite_engine_p50" in side


def test_a_kept_store_is_queried_only_with_the_query_count_it_was_loaded_with(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The synthetic facts depend on ``--queries``: a kept 1M store loaded with 100
    queries and asked 200 scored 0 on every query. Now it is refused, and the same count
    reuses the store with the recall it had."""
    args = ["--n", "200", "--embedder", "hashing", "--gated-sample", "5", "--runs", "1",
            "--quiet", "--keep", str(tmp_path)]
    recall.main([*args, "--queries", "20"])
    first = _lines(capsys.readouterr().out)[0]
    with pytest.raises(InvalidInput, match="--queries 20"):
        recall.main([*args, "--queries", "25"])
    recall.main([*args, "--queries", "20"])
    again = _lines(capsys.readouterr().out)[0]
    assert again["reused_store"] is True and first["reused_store"] is False
    assert again["exact"]["recall@10"] == first["exact"]["recall@10"] == 1.0


def test_writers_bench_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    writers.main(["--backend", ",".join(BACKENDS), "--writers", "1,2", "--count", "6",
                  "--runs", "1"])
    lines = _lines(capsys.readouterr().out)
    runs = [r for r in lines if r["bench"] == "writers"]
    assert [(r["backend"], r["writers"]) for r in runs] == [
        (b, w) for b in BACKENDS for w in (1, 2)]
    for r in runs:
        assert r["errors"] == 0 and r["acked"] == [r["expected"]] and r["writes_per_s"] > 0
        # The CPU one write costs: the writers' own, and the embedded server's on PostgreSQL
        # (read in clock ticks: a dozen writes may cost the server less than one tick,
        # so the counter itself is checked below with a query of known cost).
        assert r["client_cpu_ms"] > 0 and r["cpu_ms"] >= r["client_cpu_ms"]
        assert r["server_cpu_ms"] == 0.0 if r["backend"] == "sqlite" else r["server_cpu_ms"] >= 0
    assert set(lines[-1]["writes_per_s"]) == set(BACKENDS)
    assert set(lines[-1]["cpu_ms_per_write"]) == set(BACKENDS)
    assert all(r["prefill"] == 0 and r["stored_before"] == [0] for r in runs)


def test_writers_bench_prefills_each_store_before_the_writes(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--prefill N``: every run's fresh store holds the N bulk-loaded memories when the
    writers start, and the writers' gated writes into it still all land."""
    writers.main(["--backend", ",".join(BACKENDS), "--writers", "2", "--count", "5",
                  "--runs", "2", "--prefill", "120"])
    lines = _lines(capsys.readouterr().out)
    runs = [r for r in lines if r["bench"] == "writers"]
    assert [r["backend"] for r in runs] == list(BACKENDS)
    for r in runs:
        assert r["prefill"] == 120 and r["stored_before"] == [120, 120]
        assert r["errors"] == 0 and r["acked"] == [10, 10]
    assert lines[-1]["prefill"] == 120


def test_the_server_cpu_counts_backends_that_have_ended(tmp_path: Path) -> None:
    """The writers' connections end before the bench reads the server's CPU: their time
    must still be counted (the postmaster's reaped children). The bench's own embedded
    server, whichever backends the suite runs on."""
    import psycopg

    with place("postgres", tmp_path, "cpu") as where:
        postmaster = writers._postmaster(tmp_path)
        assert postmaster is not None and where.database is not None
        before = writers._server_cpu(postmaster)
        with psycopg.connect(where.database) as c:
            c.execute("SELECT count(*) FROM generate_series(1, 4000000)").fetchone()
        # The backend has ended once its connection closed; give the postmaster a moment
        # to reap it (its time then moves into the postmaster's cutime).
        for _ in range(50):
            spent = writers._server_cpu(postmaster) - before
            if spent >= 0.1:
                break
            time.sleep(0.1)
        assert spent >= 0.1


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(InvalidInput, match="--backend"):
        parse_backends("sqlite,mysql")
    assert parse_backends(" postgres , sqlite ") == ["postgres", "sqlite"]


def test_the_embedded_server_takes_the_shared_buffers_asked(tmp_path: Path) -> None:
    """``recall --shared-buffers 1GB``: the server the bench starts runs with it (its
    default, 128 MB, holds less than a 100k store's HNSW index)."""
    import psycopg

    with place("postgres", tmp_path / "run", "probe", shared_buffers="192MB") as where:
        assert where.database is not None
        with psycopg.connect(where.database) as conn:
            assert conn.execute("SHOW shared_buffers").fetchone() == ("192MB",)


def test_a_kept_server_a_killed_run_held_is_stopped_after_the_next_run(tmp_path: Path) -> None:
    """A bench killed mid-run left its pid among the server's holders in the kept data
    directory; every later ``--keep`` run then left the embedded server running."""
    import subprocess
    import sys

    with place("postgres", tmp_path, "first", keep=True):
        pass
    holders = tmp_path / "pg" / ".handle_pids.json"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: S603
    dead.wait()
    holders.write_text(json.dumps([dead.pid]))  # what the killed run left behind
    postmaster = tmp_path / "pg" / "postmaster.pid"
    try:
        with place("postgres", tmp_path, "second", keep=True) as where:
            assert where.database is not None and postmaster.exists()
        assert not postmaster.exists()  # stopped, not left running
        assert json.loads(holders.read_text()) == []
    finally:
        if postmaster.exists():  # the failure left it running: stop it for the next test
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
