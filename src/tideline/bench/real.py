"""Real-text benchmark: ``python -m tideline.bench real [--embedder e5] [--queries both]``.

A hand-written multilingual set (``bench/data/real.json``: English, Chinese,
Russian, German; facts in ``global`` and two projects; paraphrase, exact-token
and noise queries). The full pipeline (novelty-gated writes, hybrid recall,
abstention) runs beside a naive baseline: full-scan cosine over every fact in the
query's scopes, abstaining below the embedder's abstention floor.

``--queries`` picks the query set: ``dev`` (the queries of ``real.json``, which
:mod:`tideline.bench.calibrate` also reads), ``heldout``
(``bench/data/real_heldout.json``: paraphrase and noise queries against the same
facts, written before any tuning and never used to calibrate anything) or
``both`` (default). Each set runs on a freshly built store, so its figures do not
depend on which other set ran.

Prints one JSON document: recall@1/@5 per query type and language for both (and a
BM25 baseline over the facts), recall@10 and NDCG@10 overall,
noise abstention, false abstentions, write decisions (facts lost to merging) and
latency. The dev figures sit at the top level (``pipeline``,
``baseline_full_scan``); the held-out ones in the ``heldout`` block.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from tideline.bench.baselines import Bm25
from tideline.bench.locomo import tuned
from tideline.config import Config
from tideline.embed import Embedder, make_embedder
from tideline.memory import Memory

__all__ = ["RealSet", "check_queries", "load", "load_heldout", "main", "run"]

QUERY_SETS = ("dev", "heldout", "both")
TYPES = ("paraphrase", "exact", "noise")
LANGS = ("en", "zh", "ru", "de", "mixed")
_QUERY_KEYS = {"id", "lang", "type", "scope", "text", "expected"}
_OPTIONAL_KEYS = {"token", "cross_lingual"}

Ask = Callable[[dict[str, Any]], tuple[list[str], bool, float]]


@dataclass(frozen=True)
class RealSet:
    """The parsed benchmark file."""

    facts: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]


def _read(name: str) -> dict[str, Any]:
    raw = resources.files("tideline.bench").joinpath(f"data/{name}").read_text("utf-8")
    data: dict[str, Any] = json.loads(raw)
    return data


def load() -> RealSet:
    """Read ``bench/data/real.json`` (facts, dev queries, duplicate pairs) from the package."""
    data = _read("real.json")
    return RealSet(data["facts"], data["queries"], data["duplicates"])


def load_heldout(facts: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Read and validate the held-out queries of ``bench/data/real_heldout.json``.

    For reporting only: nothing may be calibrated or tuned on these queries.

    Raises:
        ValueError: the file is malformed (see :func:`check_queries`).
    """
    data = _read("real_heldout.json")
    queries = data.get("queries")
    if not isinstance(queries, list):
        raise ValueError("real_heldout.json: 'queries' must be a list")
    problems = check_queries(load().facts if facts is None else facts, queries)
    if problems:
        raise ValueError("real_heldout.json: " + "; ".join(problems[:10]))
    return queries


def check_queries(facts: list[dict[str, Any]], queries: list[Any]) -> list[str]:
    """Problems in ``queries`` against ``facts`` (empty if the set is well-formed).

    Every query needs a unique string id, a known type/lang, a scope that some
    fact lives in and a non-empty text; ``expected`` lists existing fact ids
    visible from the query's scope (its own or ``global``), empty exactly for
    noise queries; an exact query names a ``token`` that occurs in its text.
    """
    scope_of = {f["id"]: f["scope"] for f in facts}
    scopes = set(scope_of.values())
    problems: list[str] = []
    seen: set[str] = set()
    for n, q in enumerate(queries):
        if not isinstance(q, dict):
            problems.append(f"query #{n}: not an object")
            continue
        qid = q.get("id")
        tag = f"{qid!r}" if isinstance(qid, str) else f"query #{n}"
        missing = _QUERY_KEYS - q.keys()
        extra = q.keys() - _QUERY_KEYS - _OPTIONAL_KEYS
        if missing or extra:
            problems.append(f"{tag}: missing keys {sorted(missing)}, unknown keys {sorted(extra)}")
            continue
        if not isinstance(qid, str) or not qid:
            problems.append(f"{tag}: id must be a non-empty string")
        elif qid in seen:
            problems.append(f"{tag}: duplicate id")
        else:
            seen.add(qid)
        if q["type"] not in TYPES:
            problems.append(f"{tag}: type {q['type']!r} not in {TYPES}")
        if q["lang"] not in LANGS:
            problems.append(f"{tag}: lang {q['lang']!r} not in {LANGS}")
        if q["scope"] not in scopes:
            problems.append(f"{tag}: scope {q['scope']!r} holds no fact")
        if not isinstance(q["text"], str) or not q["text"].strip():
            problems.append(f"{tag}: empty text")
        expected = q["expected"]
        if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
            problems.append(f"{tag}: expected must be a list of fact ids")
            continue
        if (q["type"] == "noise") != (not expected):
            problems.append(f"{tag}: expected must be empty exactly for noise queries")
        if len(set(expected)) != len(expected):
            problems.append(f"{tag}: duplicate expected ids")
        for e in expected:
            if e not in scope_of:
                problems.append(f"{tag}: expected fact {e!r} does not exist")
            elif scope_of[e] not in _scopes(q["scope"]):
                problems.append(f"{tag}: expected fact {e!r} is outside scope {q['scope']!r}")
        if q["type"] == "exact":
            token = q.get("token")
            if not isinstance(token, str) or token.casefold() not in str(q["text"]).casefold():
                problems.append(f"{tag}: exact query needs a token that occurs in its text")
    return problems


def _scopes(scope: str) -> set[str]:
    return {scope, "global"}


def run(embedder: Embedder, *, queries: str = "dev",
        config: Config | None = None) -> dict[str, Any]:
    """Run pipeline and baseline on the real set; returns the figures.

    Args:
        embedder: the embedder under test (its profile supplies the thresholds).
        queries: ``"dev"``, ``"heldout"`` or ``"both"`` (see the module docstring).
        config: the pipeline's settings (default :meth:`Config.load`; ablations).
    """
    if queries not in QUERY_SETS:
        raise ValueError(f"queries must be one of {QUERY_SETS}, not {queries!r}")
    data = load()
    facts = data.facts
    sets: dict[str, list[dict[str, Any]]] = {}
    if queries in ("dev", "both"):
        sets["dev"] = data.queries
    if queries in ("heldout", "both"):
        sets["heldout"] = load_heldout(facts)
    fact_vecs = embedder.embed_passages([f["text"] for f in facts])
    index = Bm25([f["id"] for f in facts], [f["text"] for f in facts])
    out: dict[str, Any] = {
        "embedder": embedder.marker,
        "profile": embedder.profile.__dict__,
        "facts": len(facts),
    }
    for name, qs in sets.items():
        decisions, lost, pipeline = _run_pipeline(embedder, facts, qs, config)
        baseline = _evaluate(qs, lambda q: _baseline(embedder, facts, fact_vecs, q))
        lexical = _evaluate(qs, functools.partial(_bm25, index, facts))
        # the store is rebuilt per set; its write decisions are deterministic
        out.setdefault("write_decisions", decisions)
        out.setdefault("facts_lost_to_merge", lost)
        block = {"queries": len(qs), "pipeline": pipeline, "baseline_full_scan": baseline,
                 "baseline_bm25": lexical}
        if name == "dev":
            out.update(block)
        else:
            out[name] = block
    return out


def _run_pipeline(
    embedder: Embedder, facts: list[dict[str, Any]], queries: list[dict[str, Any]],
    config: Config | None = None,
) -> tuple[dict[str, int], int, dict[str, Any]]:
    """Write every fact into a fresh store, then ask ``queries``."""
    with tempfile.TemporaryDirectory(prefix="tideline-real-") as tmp:
        with Memory.open(Path(tmp) / "s", embedder=embedder, project="global",
                         config=config) as mem:
            decisions: dict[str, int] = {}
            mem_of: dict[str, int] = {}
            owner: dict[int, str] = {}
            for f in facts:
                res = mem.remember(f["text"], scope=f["scope"], idempotency_key=f["id"])
                decisions[res.decision] = decisions.get(res.decision, 0) + 1
                if res.decision == "potentiate":
                    continue  # the fact's text was merged into another memory: it counts as lost
                mem_of[f["id"]] = res.id
                owner[res.id] = f["id"]
            figures = _evaluate(queries, lambda q: _pipeline(mem, q, owner))
    return decisions, len(facts) - len(mem_of), figures


def _pipeline(
    mem: Memory, q: dict[str, Any], owner: dict[int, str]
) -> tuple[list[str], bool, float]:
    t0 = time.perf_counter()
    packet = mem.recall(q["text"], scope=q["scope"], limit=10, include_turns=False)
    ms = (time.perf_counter() - t0) * 1000
    return [owner.get(int(i.id), "?") for i in packet.items], packet.abstained, ms


def _baseline(
    embedder: Embedder, facts: list[dict[str, Any]], vecs: np.ndarray, q: dict[str, Any]
) -> tuple[list[str], bool, float]:
    t0 = time.perf_counter()
    qv = embedder.embed_query(q["text"])
    allowed = np.array([f["scope"] in _scopes(q["scope"]) for f in facts])
    sims = np.where(allowed, vecs @ qv, -np.inf)
    order = np.argsort(-sims)[:10]
    abstained = bool(sims[order[0]] < embedder.profile.abstain)
    ranked = [] if abstained else [facts[i]["id"] for i in order if np.isfinite(sims[i])]
    return ranked, abstained, (time.perf_counter() - t0) * 1000


def _bm25(index: Bm25, facts: list[dict[str, Any]],
          q: dict[str, Any]) -> tuple[list[str], bool, float]:
    """BM25 over the facts of the query's scopes (abstains when nothing matches)."""
    t0 = time.perf_counter()
    allowed = {f["id"] for f in facts if f["scope"] in _scopes(q["scope"])}
    ranked = [fid for fid in index.search(q["text"], len(facts)) if fid in allowed][:10]
    return ranked, not ranked, (time.perf_counter() - t0) * 1000


def _evaluate(queries: list[dict[str, Any]], ask: Ask) -> dict[str, Any]:
    by_type: dict[str, dict[str, float]] = {}
    by_lang: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    noise = noise_abstained = real = false_abstained = 0
    at10 = ndcg = 0.0
    for q in queries:
        ranked, abstained, ms = ask(q)
        latencies.append(ms)
        if q["type"] == "noise":
            noise += 1
            noise_abstained += abstained
            continue
        real += 1
        false_abstained += abstained
        expected = set(q["expected"])
        at10 += len(expected & set(ranked[:10])) / max(1, len(expected))
        dcg = sum(1.0 / math.log2(i + 2) for i, fid in enumerate(ranked[:10]) if fid in expected)
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(expected), 10)))
        ndcg += dcg / ideal if ideal else 0.0
        for table, key in ((by_type, q["type"]), (by_lang, q["lang"])):
            row = table.setdefault(key, {"n": 0, "recall@1": 0.0, "recall@5": 0.0})
            row["n"] += 1
            row["recall@1"] += bool(expected & set(ranked[:1]))
            row["recall@5"] += bool(expected & set(ranked[:5]))
    for table in (by_type, by_lang):
        for row in table.values():
            for k in ("recall@1", "recall@5"):
                row[k] = round(row[k] / max(1, row["n"]), 4)
    return {
        "by_type": by_type,
        "by_lang": by_lang,
        "overall": {"n": real, "recall@10": round(at10 / max(1, real), 4),
                    "ndcg@10": round(ndcg / max(1, real), 4)},
        "noise_abstention": round(noise_abstained / max(1, noise), 4),
        "false_abstention": round(false_abstained / max(1, real), 4),
        "latency_ms_p50": round(statistics.median(latencies), 3) if latencies else 0.0,
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench real")
    parser.add_argument("--embedder", default="e5")
    parser.add_argument(
        "--queries",
        choices=QUERY_SETS,
        default="both",
        help="dev: real.json queries; heldout: real_heldout.json (report only); both",
    )
    parser.add_argument("--tune", action="append", default=[], metavar="NAME=VALUE",
                        help="change one recall setting (repeatable; ablations)")
    args = parser.parse_args(argv)
    try:
        config = tuned(args.tune)
    except ValueError as exc:
        parser.error(str(exc))
    result = run(make_embedder(args.embedder), queries=args.queries, config=config)
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
