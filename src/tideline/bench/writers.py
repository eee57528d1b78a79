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

``--prefill N`` loads N synthetic facts (:mod:`tideline.bench.synth`) into each fresh
store first, through the bulk path both backends share (the store's ``bulk_load`` and
``insert_memories``, as the recall bench loads), and one recall (``log=False``) builds the
local vector index SQLite keeps beside the file, as a store in use has it, before the
writers open it; none of this is timed. The gate's search and the vector index then work
at a store's size rather than in an empty one (the default, 0).

The machine's cores are shared, so each line also gives the CPU time one write costs:
the writer processes' own (``client_cpu_ms``) and the embedded PostgreSQL server's
(``server_cpu_ms``: the postmaster and every child process, those that ended
included), each over the acknowledged writes, median of the runs.
With W writers on C cores, writes/s cannot pass ``1000 · C / cpu_ms`` however well the
store scales; the CPU figure is the one that tells a backend's cost apart from the load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tideline.bench.backends import Place, machine, parse_backends, place
from tideline.bench.recall import bulk_load
from tideline.bench.synth import generate
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
        cpu = time.process_time()
        for i in range(count):
            text = (f"writer {worker} note {i}: the " + " ".join(rng.sample(_WORDS, 6))
                    + f" (ref W{worker}-{i})")
            try:
                mem.remember(text, idempotency_key=f"w{worker}-{i}")
                acked += 1
            except Exception as exc:  # counted and reported, the run goes on
                errors.append(f"{type(exc).__name__}: {exc}")
        cpu = time.process_time() - cpu
    out.put((worker, acked, errors[:5], len(errors), cpu))


def _postmaster(base: Path) -> int | None:
    """The pid of the embedded server that :func:`place` started under ``base`` (its
    ``postmaster.pid``); None for a server given by URL, whose processes may be elsewhere."""
    try:
        return int((base / "pg" / "postmaster.pid").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None


def _server_cpu(postmaster: int) -> float:
    """CPU seconds of the postmaster, its live children and its ended (reaped) children."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a process that ended while being read
        # After the name: state ppid … utime(11) stime(12) cutime(13) cstime(14).
        if int(entry.name) == postmaster:
            total += sum(int(f) for f in fields[11:15])
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def _one_run(backend: str, writers: int, count: int, database: str | None,
             label: str, prefill: int = 0) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="tideline-bench-writers-") as tmp, \
            place(backend, Path(tmp), label, database=database) as where:
        with Memory.open(where.home, embedder=HashingEmbedder(), project="global",
                         **where.open_args()) as mem:
            if prefill:
                facts = generate(prefill, 0)[0]
                bulk_load(mem, facts)
                # A recall builds (and the close saves) the host's local vector index as a
                # store in use has it: on SQLite each writer would otherwise build its own
                # on its first write (3.5 s of CPU at 20k memories), timed.
                mem.recall(facts[0].text, log=False)
            stored = int(mem.store.stats()["memories"])
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
        server = _postmaster(Path(tmp)) if backend == "postgres" and not database else None
        server_start = _server_cpu(server) if server else 0.0
        start = time.perf_counter()
        go.set()
        results = [out.get(timeout=3600) for _ in procs]
        seconds = time.perf_counter() - start
        server_cpu = _server_cpu(server) - server_start if server else None
        for p in procs:
            p.join(timeout=60)
    acked = sum(r[1] for r in results)
    return {"seconds": seconds, "acked": acked, "stored_before": stored,
            "errors": sum(r[3] for r in results),
            "error_samples": [e for r in results for e in r[2]][:5],
            "client_cpu": sum(r[4] for r in results), "server_cpu": server_cpu}


def _per_write_ms(done: list[dict[str, Any]], key: str) -> float | None:
    values = [1000 * d[key] / d["acked"] for d in done if d[key] is not None and d["acked"]]
    return round(statistics.median(values), 2) if values else None


def run_writers(backend: str, writers: int, count: int, runs: int,
                database: str | None = None, prefill: int = 0) -> dict[str, Any]:
    """Median writes/s of ``runs`` runs of ``writers`` processes × ``count`` writes, each
    run into a fresh store holding ``prefill`` memories first."""
    done = [_one_run(backend, writers, count, database,
                     f"writers-{writers}-{run}-{time.time_ns()}", prefill)
            for run in range(runs)]
    rates = [d["acked"] / d["seconds"] for d in done if d["seconds"] > 0]
    client, server = _per_write_ms(done, "client_cpu"), _per_write_ms(done, "server_cpu")
    if backend == "sqlite":
        server = 0.0  # in-process: the writers' CPU is all of it
    return {"bench": "writers", "backend": backend, "writers": writers,
            "writes_per_writer": count, "runs": runs, "prefill": prefill,
            "writes_per_s": round(statistics.median(rates), 1) if rates else 0.0,
            "writes_per_s_runs": [round(r, 1) for r in rates],
            "client_cpu_ms": client, "server_cpu_ms": server,
            "cpu_ms": None if client is None or server is None else round(client + server, 2),
            "stored_before": [d["stored_before"] for d in done],
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
    ap.add_argument("--prefill", type=int, default=0,
                    help="memories bulk-loaded into each fresh store before the timed "
                         "writes (not timed)")
    ap.add_argument("--database", default=None,
                    help="an existing PostgreSQL URL (default: an embedded server)")
    args = ap.parse_args(argv)
    if args.prefill < 0:
        ap.error("--prefill must be >= 0")
    host = machine()
    table: dict[str, dict[int, float]] = {}
    cpu: dict[str, dict[int, float | None]] = {}
    for backend in parse_backends(args.backend):
        for writers in (int(w) for w in args.writers.split(",") if w.strip()):
            res = run_writers(backend, writers, args.count, args.runs, args.database,
                              args.prefill)
            table.setdefault(backend, {})[writers] = res["writes_per_s"]
            cpu.setdefault(backend, {})[writers] = res["cpu_ms"]
            print(json.dumps(res | {"machine": host}), flush=True)
    print(json.dumps({"bench": "writers_side_by_side", "prefill": args.prefill,
                      "writes_per_s": table, "cpu_ms_per_write": cpu, "machine": host}),
          flush=True)


if __name__ == "__main__":
    main()
