"""`python -m tideline.bench cores`: every thread policy under both loads, each in a fresh
process. Timings are printed, never asserted; the test checks the figures' shape and that
every run imported the turns it was asked to."""

from __future__ import annotations

import json
import subprocess
import sys

from tideline.bench.cores import LOADS, POLICIES


def test_cores_bench_measures_every_policy_under_every_load() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tideline.bench", "cores", "--runs", "1", "--turns", "6",
         "--queries", "2"], capture_output=True, text=True, check=True, timeout=600)
    out = json.loads(proc.stdout)
    assert out["bench"] == "cores" and out["turns"] == 6 and out["runs"] == 1
    assert set(out["figures"]) == set(LOADS)
    for load in LOADS:
        figures = out["figures"][load]
        assert set(figures) == set(POLICIES)
        assert figures["1"]["import_vs_1"] == 1.0 and figures["1"]["query_vs_1"] == 1.0
        for policy in POLICIES:
            assert len(figures[policy]["import_s_runs"]) == 1
            assert figures[policy]["import_s"] > 0 and figures[policy]["query_p50_ms"] > 0
    assert out["machine"]["cpus"]
