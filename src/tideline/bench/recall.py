"""Synthetic scaling benchmark: ``python -m tideline.bench recall --sizes 10000,100000``.

For each size N it loads N synthetic facts (see :mod:`tideline.bench.synth`) into a
fresh store, then asks paraphrase, exact-token and noise queries and prints one
JSON line with recall@1/5/10, abstention precision and recall, p50/p95 latency
engine-only and end to end (on a server also the statements one recall sent it, journal
included), write throughput (gated writes and bulk load), ANN
agreement with exact search (recall@10 of the index against a full scan, and the
pipeline's recall@10 with the index against the same pipeline over a full scan), and
peak RSS.

``--backend sqlite,postgres`` runs every size on each backend in the same run, SQLite
first as the baseline (see :mod:`tideline.bench.backends`), and prints one more line
per size with PostgreSQL's figures beside SQLite's. ``--runs`` repeats the query pass and
reports the median of the runs' percentiles.

Bulk load inserts rows through the store's own insert (same tables, full-text and
vector log) in large transactions but without the novelty gate — the synthetic
facts are template siblings that a gate would rightly treat as near-duplicates.
Gated write throughput is measured separately on a sample.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tideline.bench.backends import Place, machine, parse_backends, place
from tideline.bench.synth import Fact, Query, generate
from tideline.config import Config
from tideline.embed import make_embedder
from tideline.errors import InvalidInput
from tideline.memory import Memory
from tideline.models import MemoryRecord

__all__ = ["bulk_load", "main", "run_size", "side_by_side"]


def bulk_load(mem: Memory, facts: list[Fact], *, batch: int = 2_000,
              progress: bool = False,
              timings: dict[str, float] | None = None) -> tuple[dict[int, int], float]:
    """Insert facts without the gate in one bulk transaction (the store's
    ``bulk_load``/``insert_memories``: ``COPY`` on PostgreSQL, the derived indexes of
    an empty store built at the end); returns fact key → memory id and the seconds
    taken, commit included. ``timings`` receives ``rows_s`` (the rows) and ``commit_s``
    (what the end of the load took: PostgreSQL's index builds)."""
    ids: dict[int, int] = {}
    start = time.perf_counter()
    now = time.time()
    with mem.store.bulk_load(len(facts)) as c:
        for lo in range(0, len(facts), batch):
            chunk = facts[lo:lo + batch]
            vectors = mem.embedder.embed_passages([f.text for f in chunk])
            recs = [MemoryRecord(id=0, scope="global", kind="fact", gesture=f.text,
                                 weight=0.25, stability=7.0, last_access=now,
                                 recorded_at=now, updated_at=now) for f in chunk]
            for fact, mid in zip(chunk, mem.store.insert_memories(c, recs, list(vectors)),
                                 strict=True):
                ids[fact.key] = mid
            if progress and (lo // batch) % 25 == 0:
                print(f"  loaded {lo + len(chunk)}/{len(facts)} "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
        rows_done = time.perf_counter()
    end = time.perf_counter()
    if timings is not None:
        timings["rows_s"] = rows_done - start
        timings["commit_s"] = end - rows_done
    return ids, end - start


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0


def run_size(n: int, queries: int, embedder: str, *, gated_sample: int = 1_000,
             progress: bool = False, workdir: Path | None = None,
             keep: Path | None = None, backend: str = "sqlite",
             database: str | None = None, runs: int = 1,
             shared_buffers: str | None = None) -> dict[str, Any]:
    """Run the benchmark at one size on one backend and return its figures.

    With ``keep`` the loaded store is kept in ``keep/<embedder>-<n>`` (PostgreSQL:
    ``keep/postgres-<embedder>-<n>``, the embedded server's data included) and reused
    by later runs (loading 100k facts through e5 takes most of an hour on two cores),
    so only the queries are measured again; load figures then come from the first run.
    """
    facts, qs = generate(n, queries)
    with contextlib.ExitStack() as stack:
        if keep is None:
            base = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="tideline-bench-", dir=workdir)))
        else:
            base = keep / (f"{embedder}-{n}" if backend == "sqlite"
                           else f"{backend}-{embedder}-{n}")
            base.mkdir(parents=True, exist_ok=True)
        where = stack.enter_context(place(backend, base, f"recall-{embedder}-{n}",
                                          database=database, keep=keep is not None,
                                          shared_buffers=shared_buffers))
        cfg = Config.load(home=where.home, embedder=embedder)
        emb = make_embedder(embedder)
        manifest = base / "loaded.json"
        with Memory.open(cfg.home, embedder=emb, config=cfg, project="global",
                         **where.open_args()) as mem:
            reused = manifest.exists()
            if reused:
                loaded = json.loads(manifest.read_text())
                ids = {int(k): v for k, v in loaded.pop("ids").items()}
                _check_reuse(manifest, loaded.pop("queries", None), queries)
            else:
                gated = _gated_throughput(where, base / "gated", emb, facts[:gated_sample])
                timings: dict[str, float] = {}
                ids, load_s = bulk_load(mem, facts, progress=progress, timings=timings)
                t0 = time.perf_counter()
                index = getattr(mem.vectors, "index", None)
                if index is not None:  # SQLite's local ANN file (PostgreSQL's: at commit)
                    index("m", "global").save()
                build_s = time.perf_counter() - t0 + timings["commit_s"]
                loaded = {"bulk_load_per_s": round(n / load_s, 1),
                          "bulk_load_s": round(load_s, 1),
                          "bulk_rows_per_s": round(n / max(timings["rows_s"], 1e-9), 1),
                          "index_build_s": round(build_s, 1),
                          "gated_writes": gated}
                if keep is not None:
                    manifest.write_text(json.dumps(loaded | {"queries": queries, "ids": ids}))
            t0 = time.perf_counter()
            warmed = mem.vectors.warm()  # what SQLite's first search loads, PostgreSQL reads
            warm = {"warm_s": round(time.perf_counter() - t0, 1), "warmed": warmed,
                    "first_recall_new_process": _first_recall_new_process(
                        where, embedder, qs[0].text)}
            mem.recall("warm up the caches", include_turns=False, log=False)
            passes = [_ask(mem, qs, ids) for _ in range(max(1, runs))]
            result = passes[0]
            result["latency_ms"] = {
                key: round(statistics.median(p["latency_ms"][key] for p in passes), 3)
                for key in passes[0]["latency_ms"]}
            if "statements_per_recall" in passes[0]:
                result["statements_per_recall"] = statistics.median(
                    p["statements_per_recall"] for p in passes)
            result["ann_vs_exact"] = _ann_agreement(mem, qs, ids)
        result.update({"backend": backend, "n": n, "queries": len(qs), "runs": len(passes),
                       "embedder": emb.marker, "reused_store": reused} | warm | loaded)
        result["peak_rss_mb"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


_FIRST_RECALL = """
import json, sys, time
t0 = time.perf_counter()
from tideline.memory import Memory
args = json.loads(sys.argv[1])
with Memory.open(args.pop("home"), embedder=args.pop("embedder"), project="global",
                 **args.pop("open")) as mem:
    t1 = time.perf_counter()
    mem.recall(args["query"], limit=10, include_turns=False, log=False)
    t2 = time.perf_counter()
print(json.dumps({"open_s": round(t1 - t0, 2), "first_recall_s": round(t2 - t1, 2)}))
"""


def _first_recall_new_process(where: Place, embedder: str, query: str) -> dict[str, Any]:
    """The first recall of a new process on the loaded store (issue 33 item 13: after a
    bulk import it rebuilt the vector index, 30.9 s at 100k; now the import built it),
    and what opening the store took before it (imports included)."""
    import subprocess
    import sys

    args = {"home": str(where.home), "embedder": embedder, "open": where.open_args(),
            "query": query}
    proc = subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", _FIRST_RECALL, json.dumps(args)],
        capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _check_reuse(manifest: Path, loaded_with: int | None, queries: int) -> None:
    """Refuse to query a kept store with another ``--queries`` than it was loaded with:
    the synthetic people (so every fact) depend on the query count, and a mismatch
    scores every query against facts the store does not hold (all recalls 0).

    Raises:
        InvalidInput: the counts differ (a manifest without one predates the check).
    """
    if loaded_with is not None and loaded_with != queries:
        raise InvalidInput(f"{manifest.parent} was loaded with --queries {loaded_with}; "
                           f"query it with the same count (got {queries}): the facts "
                           "depend on it")


def _gated_throughput(where: Place, home: Path, emb: Any, facts: list[Fact]) -> dict[str, Any]:
    decisions: dict[str, int] = {}
    extra: dict[str, Any] = {}
    if where.database is not None:  # the same server, a namespace of its own
        extra = {"database": where.database, "namespace": f"{where.namespace or 'bench'}-gated"}
    with Memory.open(home, embedder=emb, project="global", **extra) as mem:
        start = time.perf_counter()
        for f in facts:
            res = mem.remember(f.text)
            decisions[res.decision] = decisions.get(res.decision, 0) + 1
        secs = time.perf_counter() - start
    return {"n": len(facts), "per_s": round(len(facts) / secs, 1), "decisions": decisions}


def _ask(mem: Memory, qs: list[Query], ids: dict[int, int]) -> dict[str, Any]:
    hits = {k: {1: 0, 5: 0, 10: 0, "n": 0} for k in ("paraphrase", "exact")}
    engine: list[float] = []
    e2e: list[float] = []
    abstained_noise = abstained_real = noise = 0
    sent = mem.store.statements_sent()
    for q in qs:
        t0 = time.perf_counter()
        packet = mem.recall(q.text, limit=10, include_turns=False)
        e2e.append((time.perf_counter() - t0) * 1000)
        engine.append(packet.engine_ms)
        if q.expected is None:
            noise += 1
            abstained_noise += packet.abstained
            continue
        abstained_real += packet.abstained
        ranked = [int(i.id) for i in packet.items]
        target = ids[q.expected]
        bucket = hits[q.kind]
        bucket["n"] += 1
        for k in (1, 5, 10):
            bucket[k] += target in ranked[:k]
    after = mem.store.statements_sent()
    out: dict[str, Any] = {}
    if sent is not None and after is not None:  # a server: what one recall sent it
        out["statements_per_recall"] = round((after - sent) / max(1, len(qs)), 2)
    for kind, b in hits.items():
        n = max(1, b["n"])
        out[kind] = {f"recall@{k}": round(b[k] / n, 4) for k in (1, 5, 10)} | {"n": b["n"]}
    real = len(qs) - noise
    out["abstention"] = {
        "precision": round(abstained_noise / max(1, abstained_noise + abstained_real), 4),
        "recall": round(abstained_noise / max(1, noise), 4),
        "false_abstention_rate": round(abstained_real / max(1, real), 4),
    }
    out["latency_ms"] = {
        "engine_p50": round(statistics.median(engine), 3),
        "engine_p95": round(_percentile(engine, 95), 3),
        "e2e_p50": round(statistics.median(e2e), 3),
        "e2e_p95": round(_percentile(e2e, 95), 3),
    }
    return out


class _ExactSpace:
    """Stands in for the vector index: a brute-force scan of every stored vector."""

    def __init__(self, keys: np.ndarray, matrix: np.ndarray) -> None:
        self.keys, self.matrix = keys, matrix

    def search(self, kind: str, scopes: Any, query: np.ndarray, k: int) -> dict[int, float]:
        if kind != "m":
            return {}
        sims = self.matrix @ query
        top = np.argpartition(-sims, min(k, len(sims) - 1))[:k]
        return {int(self.keys[i]): float(sims[i]) for i in top}


def _all_vectors(mem: Memory, ids: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Every loaded memory's stored vector, through the store API both backends offer."""
    wanted = sorted(ids.values())
    keys_list: list[int] = []
    mats: list[np.ndarray] = []
    for lo in range(0, len(wanted), 5_000):
        recs = list(mem.store.get_memories(wanted[lo:lo + 5_000]).values())
        found = mem.store.memory_vectors(recs, mem.embedder.dim)
        for key in sorted(found):
            keys_list.append(key)
            mats.append(found[key])
    return np.asarray(keys_list, dtype=np.int64), np.stack(mats).astype(np.float32)


def _ann_agreement(mem: Memory, qs: list[Query], ids: dict[int, int],
                   sample: int = 200) -> dict[str, float]:
    """How close the ANN index comes to exact search.

    ``index_recall_at_10``: share of the exact top-10 (over all stored vectors) that the
    index returns, over the first ``sample`` queries. ``pipeline_recall_at_10_exact``:
    recall@10 of the whole pipeline on every paraphrase query when the vector side is a
    full scan, and ``ratio`` the ANN pipeline's recall@10 divided by it (target ≥ 0.95).
    """
    keys, matrix = _all_vectors(mem, ids)
    agree = total = 0
    for q in qs[:sample]:
        qv = mem.embedder.embed_query(q.text)
        exact = set(keys[np.argsort(-(matrix @ qv))[:10]].tolist())
        approx = set(mem.vectors.search("m", ["global"], qv, 10))
        agree += len(exact & approx)
        total += len(exact)
    para = [q for q in qs if q.kind == "paraphrase" and q.expected is not None]
    engine = mem._rt.engine
    found = {"ann": 0, "exact": 0}
    for label in ("ann", "exact"):
        saved = engine.vectors
        if label == "exact":
            engine.vectors = _ExactSpace(keys, matrix)  # type: ignore[assignment]
        try:
            for q in para:
                packet = mem.recall(q.text, limit=10, include_turns=False, log=False)
                target = ids[q.expected] if q.expected is not None else -1
                found[label] += target in {int(i.id) for i in packet.items}
        finally:
            engine.vectors = saved
    n = max(1, len(para))
    return {"index_recall_at_10": round(agree / max(1, total), 4),
            "pipeline_recall_at_10_ann": round(found["ann"] / n, 4),
            "pipeline_recall_at_10_exact": round(found["exact"] / n, 4),
            "ratio": round(found["ann"] / max(1, found["exact"]), 4)}


def side_by_side(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One size's figures per backend in one line, and PostgreSQL's p50 over SQLite's."""
    keys = ("engine_p50", "engine_p95", "e2e_p50", "e2e_p95")
    out: dict[str, Any] = {"bench": "recall_side_by_side",
                           "n": next(iter(results.values()))["n"]}
    for name, r in results.items():
        out[name] = {k: r["latency_ms"][k] for k in keys} | {
            "paraphrase_recall@10": r["paraphrase"]["recall@10"],
            "exact_recall@10": r["exact"]["recall@10"],
            "index_recall@10": r["ann_vs_exact"]["index_recall_at_10"],
            "pipeline_recall@10_index": r["ann_vs_exact"]["pipeline_recall_at_10_ann"],
            "pipeline_recall@10_exact": r["ann_vs_exact"]["pipeline_recall_at_10_exact"],
            "pipeline_ratio": r["ann_vs_exact"]["ratio"],
            "bulk_load_per_s": r.get("bulk_load_per_s"),
            "statements_per_recall": r.get("statements_per_recall"),
            "gated_writes_per_s": (r.get("gated_writes") or {}).get("per_s")}
    if "sqlite" in results and "postgres" in results:
        base = results["sqlite"]["latency_ms"]["engine_p50"]
        out["postgres_over_sqlite_engine_p50"] = round(
            results["postgres"]["latency_ms"]["engine_p50"] / base, 2) if base else None
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench recall")
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated store sizes (e.g. 10000,100000,1000000)")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--embedder", default="e5", help="e5 (default) or hashing")
    parser.add_argument("--gated-sample", type=int, default=1_000)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep loaded stores under this folder and reuse them")
    parser.add_argument("--n", type=int, default=None, help="one size (overrides --sizes)")
    parser.add_argument("--backend", default="sqlite",
                        help="comma-separated: sqlite, postgres (side by side, SQLite first)")
    parser.add_argument("--database", default=None,
                        help="an existing PostgreSQL URL (default: an embedded server)")
    parser.add_argument("--runs", type=int, default=3,
                        help="query passes per store; percentiles are their median")
    parser.add_argument("--shared-buffers", default=None,
                        help="the embedded PostgreSQL server's shared_buffers (e.g. 1GB)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    backends = parse_backends(args.backend)
    sizes = [args.n] if args.n else [int(s) for s in args.sizes.split(",") if s.strip()]
    host = machine() | {"arch": platform.machine()}
    for size in sizes:
        by_backend: dict[str, dict[str, Any]] = {}
        for backend in backends:
            started = time.time()
            result = run_size(size, args.queries, args.embedder,
                              gated_sample=args.gated_sample, progress=not args.quiet,
                              workdir=args.workdir, keep=args.keep, backend=backend,
                              database=args.database, runs=args.runs,
                              shared_buffers=args.shared_buffers)
            result["wall_s"] = round(time.time() - started, 1)
            result["machine"] = host
            by_backend[backend] = result
            print(json.dumps(result), flush=True)
        if len(by_backend) > 1:
            print(json.dumps(side_by_side(by_backend) | {"machine": host}), flush=True)


if __name__ == "__main__":
    main()
