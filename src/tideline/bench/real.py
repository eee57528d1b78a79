"""Real-text benchmark: ``python -m tideline.bench real [--embedder e5]``.

A hand-written multilingual set (``bench/data/real.json``: English, Chinese,
Russian, German; facts in ``global`` and two projects; paraphrase, exact-token
and noise queries). The full pipeline (novelty-gated writes, hybrid recall,
abstention) runs beside a naive baseline: full-scan cosine over every fact in the
query's scopes, abstaining below the embedder's abstention floor.

Prints one JSON document: recall@1/@5 per query type and language for both,
noise abstention, false abstentions, write decisions (facts lost to merging) and
latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from tideline.embed import Embedder, make_embedder
from tideline.memory import Memory

__all__ = ["RealSet", "load", "main", "run"]


@dataclass(frozen=True)
class RealSet:
    """The parsed benchmark file."""

    facts: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]


def load() -> RealSet:
    """Read ``bench/data/real.json`` from the package."""
    raw = resources.files("tideline.bench").joinpath("data/real.json").read_text("utf-8")
    data = json.loads(raw)
    return RealSet(data["facts"], data["queries"], data["duplicates"])


def _scopes(scope: str) -> set[str]:
    return {scope, "global"}


def run(embedder: Embedder, *, gate: bool = True) -> dict[str, Any]:
    """Run pipeline and baseline on the real set; returns the figures."""
    data = load()
    facts = data.facts
    with tempfile.TemporaryDirectory(prefix="tideline-real-") as tmp:
        with Memory.open(Path(tmp) / "s", embedder=embedder) as mem:
            mem_of: dict[str, int] = {}
            decisions: dict[str, int] = {}
            owner: dict[int, str] = {}
            for f in facts:
                res = mem.remember(f["text"], scope=f["scope"], idempotency_key=f["id"])
                decisions[res.decision] = decisions.get(res.decision, 0) + 1
                if res.decision == "potentiate":
                    continue  # the fact's text was merged into another memory: it counts as lost
                mem_of[f["id"]] = res.id
                owner[res.id] = f["id"]
            pipeline = _evaluate(data, lambda q: _pipeline(mem, q, owner))
        fact_vecs = embedder.embed_passages([f["text"] for f in facts])
        baseline = _evaluate(data, lambda q: _baseline(embedder, facts, fact_vecs, q))
    return {
        "embedder": embedder.marker,
        "profile": embedder.profile.__dict__,
        "facts": len(facts),
        "queries": len(data.queries),
        "write_decisions": decisions,
        "facts_lost_to_merge": len(facts) - len(mem_of),
        "pipeline": pipeline,
        "baseline_full_scan": baseline,
    }


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


def _evaluate(data: RealSet, ask: Any) -> dict[str, Any]:
    by_type: dict[str, dict[str, float]] = {}
    by_lang: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    noise = noise_abstained = real = false_abstained = 0
    for q in data.queries:
        ranked, abstained, ms = ask(q)
        latencies.append(ms)
        if q["type"] == "noise":
            noise += 1
            noise_abstained += abstained
            continue
        real += 1
        false_abstained += abstained
        expected = set(q["expected"])
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
        "noise_abstention": round(noise_abstained / max(1, noise), 4),
        "false_abstention": round(false_abstained / max(1, real), 4),
        "latency_ms_p50": round(statistics.median(latencies), 3),
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench real")
    parser.add_argument("--embedder", default="e5")
    args = parser.parse_args(argv)
    print(json.dumps(run(make_embedder(args.embedder)), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
