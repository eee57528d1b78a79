"""Both cores when the machine is quiet: ``python -m tideline.bench cores``.

Imports the first conversation of the ``conversation`` bench (196 turns) as raw turns
with the e5 embedder into a fresh store, and times single query embeddings, under three
thread policies — ``1`` (``TIDELINE_EMBED_THREADS=1``), ``all`` (every core, OpenMP's
default before the choice was made per call) and ``auto`` (neither set: each engine call
is granted the cores the other processes left free, :mod:`tideline.embed.cores`) — on a
quiet machine and with one core held by another process (a busy loop, started before
the run and stopped after). Every run is a fresh process with ``OMP_NUM_THREADS``
removed from its environment; runs alternate between the policies, and each figure is
the median of ``--runs``. Seconds of ``add_turns`` and query p50 per policy and load,
then each against ``1`` in the same load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tideline.bench.backends import machine

__all__ = ["main", "run_cores"]

POLICIES = ("1", "all", "auto")
LOADS = ("quiet", "one core busy")


def _child(turns: int, queries: int) -> dict[str, Any]:
    from tideline.bench import conversation
    from tideline.embed import make_embedder
    from tideline.memory import Memory

    conv = conversation.load()[0]
    rows = conversation.turn_rows(conv)[:turns]
    asks = [q["question"] for c in conversation.load() for q in c["questions"]][:queries]
    emb = make_embedder("e5")
    emb.embed_query("warm up")
    with tempfile.TemporaryDirectory(prefix="tideline-cores-") as tmp:
        with Memory.open(Path(tmp) / "store", embedder=emb, project="global") as mem:
            t0 = time.perf_counter()
            added = mem.add_turns(rows, source="bench-cores")
            import_s = time.perf_counter() - t0
    waits = []
    for text in asks:
        t1 = time.perf_counter()
        emb.embed_query(text)
        waits.append(time.perf_counter() - t1)
    return {"turns": len(rows), "inserted": added.inserted, "import_s": import_s,
            "query_p50_ms": statistics.median(waits) * 1000}


def _spin(stop: Any) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


def _one(policy: str, turns: int, queries: int, cores: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "TIDELINE_EMBED_THREADS")}
    if policy != "auto":
        env["TIDELINE_EMBED_THREADS"] = "1" if policy == "1" else str(cores)
    out = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "tideline.bench", "cores", "--child",
         "--turns", str(turns), "--queries", str(queries)],
        env=env, capture_output=True, text=True, check=True, timeout=1800)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if result["inserted"] != result["turns"]:
        raise RuntimeError(f"policy {policy}: {result['inserted']} of {result['turns']} "
                           "turns imported")
    return result


def run_cores(*, turns: int = 196, queries: int = 20, runs: int = 3) -> dict[str, Any]:
    """Every policy under every load, ``runs`` times alternated; medians and ratios."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    figures: dict[str, dict[str, Any]] = {}
    for load in LOADS:
        stop = mp.Event()
        spinner = mp.Process(target=_spin, args=(stop,), daemon=True) if load != "quiet" \
            else None
        if spinner is not None:
            spinner.start()
            time.sleep(2.0)  # the load average and the grant see it before the first run
        try:
            seen: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
            for _ in range(runs):
                for policy in POLICIES:
                    seen[policy].append(_one(policy, turns, queries, cores))
        finally:
            if spinner is not None:
                stop.set()
                spinner.join(5)
                if spinner.is_alive():
                    spinner.terminate()
        base = statistics.median(r["import_s"] for r in seen["1"])
        base_q = statistics.median(r["query_p50_ms"] for r in seen["1"])
        figures[load] = {
            policy: {
                "import_s": round(statistics.median(r["import_s"] for r in rows), 2),
                "import_s_runs": [round(r["import_s"], 2) for r in rows],
                "import_vs_1": round(statistics.median(r["import_s"] for r in rows) / base, 3),
                "query_p50_ms": round(statistics.median(r["query_p50_ms"] for r in rows), 1),
                "query_vs_1": round(statistics.median(r["query_p50_ms"] for r in rows)
                                    / base_q, 3),
            } for policy, rows in seen.items()}
    return {"bench": "cores", "machine": machine(), "cores": cores, "turns": turns,
            "queries": queries, "runs": runs, "figures": figures}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench cores")
    parser.add_argument("--turns", type=int, default=196)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.turns, args.queries)))
        return
    print(json.dumps(run_cores(turns=args.turns, queries=args.queries, runs=args.runs),
                     indent=1))
