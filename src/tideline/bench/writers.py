"""Concurrent gated writes: ``python -m tideline.bench writers --backend sqlite,postgres``.

For each backend and each writer count (``--writers 1,16``) it starts that many writer
processes on a fresh store (hashing embedder, so the figure is the store's, not the
model's), lets them open the store, then starts them together; each makes ``--count``
gated writes (``remember`` with its own idempotency key). Writes/s is every
acknowledged write over the wall time from the start signal until the last writer
finished; the median of ``--runs`` runs is reported, SQLite first as the baseline, with
the machine. On SQLite every writer opens the one directory; on PostgreSQL each writer
has its own local directory (a host of its own) and the same database. One JSON line per
backend and writer count, then one line side by side.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tideline.bench.backends import Place, machine, parse_backends, place
from tideline.embed import HashingEmbedder
from tideline.memory import Memory

__all__ = ["main", "run_writers"]

_WORDS = ("harbour lighthouse anchor tide river compass winter storm sail map kiln otter "
          "heron comet garden violin ticket airport bread oven marathon replica vacuum "
          "planner checkpoint canary latency eviction broker retention snapshot").split()


def _writer(where: Place, home: str, worker: int, count: int, ready: Any, go: Any,
            out: Any) -> None:
    rng = random.Random(worker)
    errors: list[str] = []
    acked = 0
    with Memory.open(home, embedder=HashingEmbedder(), project="global",
                     **where.open_args()) as mem:
        ready.put(worker)
        go.wait()
        for i in range(count):
            text = (f"writer {worker} note {i}: the " + " ".join(rng.sample(_WORDS, 6))
                    + f" (ref W{worker}-{i})")
            try:
                mem.remember(text, idempotency_key=f"w{worker}-{i}")
                acked += 1
            except Exception as exc:  # counted and reported, the run goes on
                errors.append(f"{type(exc).__name__}: {exc}")
    out.put((worker, acked, errors[:5], len(errors)))


def _one_run(backend: str, writers: int, count: int, database: str | None,
             label: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="tideline-bench-writers-") as tmp, \
            place(backend, Path(tmp), label, database=database) as where:
        Memory.open(where.home, embedder=HashingEmbedder(), project="global",
                    **where.open_args()).close()
        ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = []
        for w in range(writers):
            # PostgreSQL: a local directory per writer, as separate hosts would have.
            home = where.home if backend == "sqlite" else Path(tmp) / f"host{w}"
            procs.append(ctx.Process(target=_writer, args=(where, str(home), w, count,
                                                           ready, go, out)))
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=600)
        start = time.perf_counter()
        go.set()
        results = [out.get(timeout=3600) for _ in procs]
        seconds = time.perf_counter() - start
        for p in procs:
            p.join(timeout=60)
    acked = sum(r[1] for r in results)
    return {"seconds": seconds, "acked": acked, "errors": sum(r[3] for r in results),
            "error_samples": [e for r in results for e in r[2]][:5]}


def run_writers(backend: str, writers: int, count: int, runs: int,
                database: str | None = None) -> dict[str, Any]:
    """Median writes/s of ``runs`` runs of ``writers`` processes × ``count`` writes."""
    done = [_one_run(backend, writers, count, database,
                     f"writers-{writers}-{run}-{time.time_ns()}") for run in range(runs)]
    rates = [d["acked"] / d["seconds"] for d in done if d["seconds"] > 0]
    return {"bench": "writers", "backend": backend, "writers": writers,
            "writes_per_writer": count, "runs": runs,
            "writes_per_s": round(statistics.median(rates), 1) if rates else 0.0,
            "writes_per_s_runs": [round(r, 1) for r in rates],
            "acked": [d["acked"] for d in done], "expected": writers * count,
            "errors": sum(d["errors"] for d in done),
            "error_samples": [e for d in done for e in d["error_samples"]][:5]}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m tideline.bench writers")
    ap.add_argument("--backend", default="sqlite,postgres",
                    help="comma-separated: sqlite, postgres (SQLite first, the baseline)")
    ap.add_argument("--writers", default="1,16", help="comma-separated writer counts")
    ap.add_argument("--count", type=int, default=200, help="gated writes per writer")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--database", default=None,
                    help="an existing PostgreSQL URL (default: an embedded server)")
    args = ap.parse_args(argv)
    host = machine()
    table: dict[str, dict[int, float]] = {}
    for backend in parse_backends(args.backend):
        for writers in (int(w) for w in args.writers.split(",") if w.strip()):
            res = run_writers(backend, writers, args.count, args.runs, args.database)
            table.setdefault(backend, {})[writers] = res["writes_per_s"]
            print(json.dumps(res | {"machine": host}), flush=True)
    print(json.dumps({"bench": "writers_side_by_side", "writes_per_s": table,
                      "machine": host}), flush=True)


if __name__ == "__main__":
    main()
