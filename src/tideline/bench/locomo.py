"""LoCoMo recall benchmark: ``python -m tideline.bench locomo --data DIR [--keep DIR]``.

Reads a LoCoMo split in the layout of ``../shared/bench/locomo-dev/`` (``turns.jsonl``,
``questions.jsonl``; the data is CC BY-NC and never part of the project) and scores it
exactly as that split's README says: per conversation a fresh store; its turns go in
through :meth:`~tideline.memory.Memory.add_turns` (scope = the conversation id, session
= ``"{conv_id}-S{session}"``, id = the ``dia_id``, the speaker, role ``user``, timestamp
= the session date, text plus `` [shares image: …]`` when a turn shared one); then each
question is asked with ``Memory.recall(question, scope=conv_id, limit=10)``. A returned
turn counts by its message id, a returned memory by the turns its ``source_links``
point at. R@k is the share of the question's evidence turns among the first k distinct
turns; NDCG@10 uses binary gains.

Beside the pipeline, in the same run: BM25 over the turn texts (``bm25s`` with an
English stemmer, the ``bench`` extra), a full-scan cosine over the stored turn vectors,
and their reciprocal-rank fusion. R@25 comes from a second recall with ``limit=25``
(the judged figures are those of the ``limit=10`` call).

Latency: end-to-end ``Memory.recall`` wall time p50/p95, the engine's search part
(``engine_ms``), and a bare query embedding of the same question measured right after
it (same process, same load): compare ratios, not absolute figures, on a busy machine.
``--import-n N`` also times ``add_turns`` of the first N turns into a fresh store
against ``embed_passages`` of the same texts (the import cost ratio).

``--keep DIR`` keeps each conversation's store under DIR and reuses it when it already
holds the conversation's turns (queries only; delete DIR after changing how turns are
embedded). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tideline.bench.baselines import TurnBaselines, mean_rows, ndcg10
from tideline.bench.embed_cache import CachedEmbedder
from tideline.config import Config
from tideline.embed import Embedder, make_embedder
from tideline.memory import Memory
from tideline.models import RecallPacket

__all__ = ["CATEGORIES", "KS", "load", "main", "ranked_turns", "run", "score", "tuned", "turn_rows"]

#: LoCoMo's question categories (its numbers 1–5, named), in report order.
CATEGORIES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
#: The k of every recall@k the bench reports.
KS = (1, 5, 10, 25)
SOURCE = "locomo"
_WORDS = re.compile(r"\w+")


def load(data: str | Path) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Turns by conversation (file order) and the questions of a LoCoMo split directory.

    Raises:
        FileNotFoundError: ``turns.jsonl`` or ``questions.jsonl`` is missing.
        ValueError: a line is not a JSON object with the fields the README names.
    """
    root = Path(data)
    turns: dict[str, list[dict[str, Any]]] = {}
    for row in _jsonl(root / "turns.jsonl", ("conv_id", "session", "session_date_time",
                                             "dia_id", "speaker", "text")):
        turns.setdefault(str(row["conv_id"]), []).append(row)
    questions = list(_jsonl(root / "questions.jsonl", ("qid", "conv_id", "question",
                                                       "category_name", "evidence")))
    return turns, questions


def _jsonl(path: Path, keys: Sequence[str]) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row, dict) or any(k not in row for k in keys):
                raise ValueError(f"{path.name}:{n}: expected an object with {list(keys)}")
            yield row


def turn_text(row: Mapping[str, Any]) -> str:
    """A turn's text as the scoring rule stores it (an image caption appended)."""
    text = str(row["text"])
    caption = row.get("image_caption")
    return f"{text} [shares image: {caption}]" if caption else text


def turn_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``add_turns`` mappings of one conversation, as the scoring rule says."""
    return [{"session": f"{r['conv_id']}-S{r['session']}", "id": str(r["dia_id"]),
             "speaker": str(r["speaker"]), "role": "user",
             "timestamp": str(r["session_date_time"]), "text": turn_text(r)} for r in rows]


def ranked_turns(packet: RecallPacket, message_of: Mapping[int, str]) -> list[str]:
    """The distinct turn (message) ids a packet returns, in order.

    A memory counts by the turns its ``source_links`` point at (``message_of`` maps
    internal turn ids to message ids).
    """
    out: dict[str, None] = {}
    for item in packet.items:
        if item.type == "turn" and item.message_id:
            out.setdefault(item.message_id)
        else:
            for tid in item.source_links:
                if tid in message_of:
                    out.setdefault(message_of[tid])
    return list(out)


def score(ranked: Sequence[str], evidence: Iterable[str]) -> dict[str, float]:
    """R@k for :data:`KS` and NDCG@10 (binary gains) of one ranked list."""
    gold = set(evidence)
    out = {f"r@{k}": len(gold.intersection(ranked[:k])) / len(gold) for k in KS}
    out["ndcg@10"] = ndcg10(ranked, gold, len(gold))
    return out


def _summary(per_q: Sequence[tuple[str, dict[str, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"all": mean_rows([s for _, s in per_q]), "n": len(per_q)}
    out["by_category"] = {c: mean_rows([s for cat, s in per_q if cat == c]) for c in CATEGORIES
                          if any(cat == c for cat, _ in per_q)}
    return out


def _pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)), 2) if values else 0.0


def tuned(settings: Sequence[str]) -> Config | None:
    """The default config with ``NAME=VALUE`` recall settings changed (ablations), or
    None when there are none.

    Raises:
        ValueError: an unknown setting or a value of the wrong type.
    """
    if not settings:
        return None
    base = Config.load()
    changes: dict[str, Any] = {}
    for setting in settings:
        name, sep, value = setting.partition("=")
        if not sep or not hasattr(base.recall, name):
            raise ValueError(f"not a recall setting NAME=VALUE: {setting!r}")
        old = getattr(base.recall, name)
        if isinstance(old, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"{name} takes true or false, not {value!r}")
            changes[name] = value.lower() in ("true", "1")
        else:
            changes[name] = type(old)(value)
    return dataclasses.replace(base, recall=dataclasses.replace(base.recall, **changes))


def _open_store(
    conv: str, rows: list[dict[str, Any]], embedder: Embedder, keep: Path | None,
    tmp: Path, config: Config | None = None,
) -> tuple[Memory, float]:
    """A store holding the conversation's turns (reused from ``keep``); import seconds."""
    home = (keep if keep is not None else tmp) / conv
    mem = Memory.open(home, embedder=embedder, project=conv, config=config)
    t0 = time.perf_counter()
    if mem.store.stats().get("turns", 0) != len(rows):
        mem.add_turns(turn_rows(rows), scope=conv, source=SOURCE)
    return mem, time.perf_counter() - t0


def _ask(mem: Memory, conv: str, q: dict[str, Any], embedder: Embedder,
         message_of: Mapping[int, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    packet = mem.recall(q["question"], scope=conv, limit=10)
    wall = (time.perf_counter() - t0) * 1000
    t1 = time.perf_counter()
    embedder.embed_query(q["question"])
    bare = (time.perf_counter() - t1) * 1000
    wide = mem.recall(q["question"], scope=conv, limit=25, log=False)
    ranked = ranked_turns(packet, message_of)
    ranked25 = ranked_turns(wide, message_of)
    found = score(ranked, q["evidence"])
    found["r@25"] = score(ranked25, q["evidence"])["r@25"]
    return {"scores": found, "abstained": packet.abstained, "wall_ms": wall,
            "engine_ms": packet.engine_ms, "bare_ms": bare}


def run(
    data: str | Path, embedder: Embedder, *, keep: Path | None = None,
    limit_questions: int | None = None, details: bool = False,
    progress: Callable[[str], None] | None = None, config: Config | None = None,
) -> dict[str, Any]:
    """Score the pipeline and the baselines on a LoCoMo split (see the module docstring;
    ``config``: the pipeline's, default :meth:`Config.load`)."""
    turns, questions = load(data)
    if limit_questions is not None:
        questions = questions[:limit_questions]
    pipe: list[tuple[str, dict[str, float]]] = []
    bm25: list[tuple[str, dict[str, float]]] = []
    scan: list[tuple[str, dict[str, float]]] = []
    fused: list[tuple[str, dict[str, float]]] = []
    wall: list[float] = []
    engine: list[float] = []
    bare: list[float] = []
    abstained: list[str] = []
    rows_out: list[dict[str, Any]] = []
    imports: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tideline-locomo-") as tmpdir:
        for conv, rows in turns.items():
            asked = [q for q in questions if q["conv_id"] == conv]
            if not asked:
                continue
            if progress is not None:
                progress(f"{conv}: {len(rows)} turns, {len(asked)} questions")
            mem, seconds = _open_store(conv, rows, embedder, keep, Path(tmpdir), config)
            imports[conv] = round(seconds, 2)
            try:
                base = TurnBaselines(mem.store, [conv], embedder.dim)
                message_of = base.message_of
                for q in asked:
                    cat = str(q["category_name"])
                    got = _ask(mem, conv, q, embedder, message_of)
                    pipe.append((cat, got["scores"]))
                    wall.append(got["wall_ms"])
                    engine.append(got["engine_ms"])
                    bare.append(got["bare_ms"])
                    if got["abstained"]:
                        abstained.append(q["qid"])
                    lists = base.rank(q["question"], embedder.embed_query(q["question"]))
                    scan.append((cat, score(lists["full_scan"], q["evidence"])))
                    bm25.append((cat, score(lists["bm25"], q["evidence"])))
                    fused.append((cat, score(lists["rrf"], q["evidence"])))
                    if details:
                        rows_out.append({"qid": q["qid"], "category": cat,
                                         **{k: round(v, 3) for k, v in got["scores"].items()}})
            finally:
                mem.close()
    answerable = [q for q in questions if q["category_name"] != "adversarial"]
    p50_wall, p50_bare = _pct(wall, 50), _pct(bare, 50)
    out: dict[str, Any] = {
        "embedder": embedder.marker, "questions": len(questions),
        "pipeline": _summary(pipe), "bm25": _summary(bm25), "full_scan": _summary(scan),
        "rrf_bm25_full_scan": _summary(fused),
        "abstained": {
            "answerable_share": round(sum(q["qid"] in abstained for q in answerable)
                                      / max(1, len(answerable)), 3),
            "all_share": round(len(abstained) / max(1, len(questions)), 3),
        },
        "latency_ms": {"recall_p50": p50_wall, "recall_p95": _pct(wall, 95),
                       "search_p50": _pct(engine, 50), "search_p95": _pct(engine, 95),
                       "bare_query_embed_p50": p50_bare,
                       "recall_over_bare_p50": round(p50_wall / p50_bare, 3) if p50_bare else None},
        "import_s": imports,
    }
    if details:
        out["details"] = rows_out
    return out


def import_cost(data: str | Path, embedder: Embedder, n: int, repeats: int = 1) -> dict[str, Any]:
    """Seconds of ``add_turns`` of the first ``n`` turns into a fresh store vs. a bare
    ``embed_passages`` of the same texts (interleaved, best of ``repeats``)."""
    turns, _ = load(data)
    rows = next(iter(turns.values()))[:n]
    mappings = turn_rows(rows)
    texts = [f"{m['speaker']}: {m['text']}" for m in mappings]
    conv = str(rows[0]["conv_id"])
    bare_s, add_s = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        embedder.embed_passages(texts)
        bare_s.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory(prefix="tideline-locomo-import-") as tmpdir:
            with Memory.open(tmpdir, embedder=embedder, project=conv) as mem:
                t1 = time.perf_counter()
                mem.add_turns(mappings, scope=conv, source=SOURCE)
                add_s.append(time.perf_counter() - t1)
    return {"turns": len(rows), "add_turns_s": round(min(add_s), 2),
            "bare_embed_s": round(min(bare_s), 2),
            "ratio": round(min(add_s) / min(bare_s), 3)}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench locomo")
    parser.add_argument("--data", required=True, help="a LoCoMo split directory")
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the conversations' stores here and reuse them")
    parser.add_argument("--embed-cache", type=Path, action="append", default=[], metavar="DIR",
                        help="passage vectors keyed by text (tideline.bench.embed_cache); "
                             "repeatable: all read, misses saved to the last writable")
    parser.add_argument("--questions", type=int, default=None, help="only the first N")
    parser.add_argument("--import-n", type=int, default=0,
                        help="also time add_turns of the first N turns against bare embedding")
    parser.add_argument("--details", action="store_true", help="per-question figures")
    parser.add_argument("--tune", action="append", default=[], metavar="NAME=VALUE",
                        help="change one recall setting (ablations; repeatable), "
                             "e.g. --tune answer_lift=0")
    args = parser.parse_args(argv)
    try:
        config = tuned(args.tune)
    except ValueError as exc:
        parser.error(str(exc))
    embedder: Embedder = make_embedder(args.embedder)
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, *args.embed_cache)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    result = run(args.data, embedder, keep=args.keep, limit_questions=args.questions,
                 details=args.details, config=config,
                 progress=lambda m: print(f"# {m}", file=sys.stderr, flush=True))  # noqa: T201
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    if args.import_n > 0:
        result["import_cost"] = import_cost(args.data, embedder, args.import_n)
    print(json.dumps(result, indent=2, ensure_ascii=False))  # noqa: T201
