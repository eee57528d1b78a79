"""`python -m tideline.bench replicas` (issue 31): a real primary and standby, recall on
each, replication lag under writes, failover time. Timings are printed, never asserted;
the test checks the figures' shape on a tiny run."""

from __future__ import annotations

import math

from tideline.bench.replicas import run_replicas


def test_replicas_bench_measures_both_servers_the_lag_and_a_failover() -> None:
    out = run_replicas(memories=20, queries=8, runs=1, writers=1, lag_seconds=0.5,
                       failovers=1, durable=False)
    assert out["bench"] == "replicas" and out["synchronous"]
    for target in ("primary", "standby"):
        figures = out["recall"][target]
        assert figures["p50_ms"] > 0 and figures["p95_ms"] >= figures["p50_ms"]
        assert figures["server_cpu_ms_per_recall"] >= 0 and len(figures["runs"]) == 1
    assert out["lag"]["writes_per_s"] > 0
    failover = out["failover"]
    assert not math.isnan(failover["kill_to_first_write_s"])
    assert failover["kill_to_first_write_s"] > 0 and failover["kill_to_promoted_s"] > 0
    assert out["machine"]["cpus"]
