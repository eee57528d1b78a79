"""LongMemEval recall benchmark: ``python -m tideline.bench longmemeval --data DIR``.

Reads questions in the upstream layout of ``../shared/bench/longmemeval-dev/questions/``
(one JSON file per question; the data is the upstream authors' and never part of the
project) and scores them as that folder's README says: per question a fresh store; its
history goes in through :meth:`~tideline.memory.Memory.add_turns` as raw turns (scope =
the question id, session = the session id — a repeated id stored as its own session —,
the role as speaker and role, the session date as the turn time); then the question is
asked with ``Memory.recall(question, scope=qid, limit=50)``. Recall reads absolute dates
only, so the question date is not passed (every turn predates it).

For answerable questions: turn-level R@k (share of the ``has_answer`` turns among the
first k returned turns, k = 5, 10, 25) and NDCG@10 (binary gains); session-level sR@k
(share of ``answer_session_ids`` owning one of the first k turns); the distinct sessions
of the first 10; overall and per question type. Abstention questions (ids ending in
``_abs``) count only for how often recall abstains, against the answerable ones.

Beside the pipeline, in the same run (:mod:`tideline.bench.baselines`): BM25 over the
turn texts, an exact full-scan cosine over the turns' own vectors (each text embedded
alone, as a plain vector store holds it: the cache's vectors) and their reciprocal-rank
fusion. Latency: end-to-end ``Memory.recall`` p50, the engine's search part
(``search_p50``) and a bare query embedding of the same question right after it
(compare ratios on a busy machine). Each store's first recall (of :data:`WARM_UP`,
which loads the vector index and warms SQLite) is timed apart as
``first_recall_p50``; the question's recall is the second.

``--embed-cache DIR`` (:mod:`tideline.bench.embed_cache`) takes passage vectors from
``DIR/*.npz`` (the dev folder's ``vectors/`` hold every history's); a miss is embedded
(repeat the flag to add a writable layer after a read-only one: misses are saved there).
``--keep DIR`` keeps each question's store under DIR and reuses it. Prints one JSON
document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tideline.bench.baselines import TurnBaselines, mean_rows, ndcg10
from tideline.bench.embed_cache import CachedEmbedder
from tideline.bench.locomo import ranked_turns, tuned
from tideline.config import Config
from tideline.embed import Embedder, make_embedder
from tideline.memory import Memory

__all__ = ["KS", "TYPES", "history_rows", "load", "main", "run", "score"]

#: The k of every recall@k the bench reports.
KS = (5, 10, 25)
#: LongMemEval's question types, in report order.
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
         "multi-session", "knowledge-update", "temporal-reasoning")
SOURCE = "longmemeval"
#: The text of the recall that warms each fresh store before the question is timed.
WARM_UP = "warm up"
METHODS = ("pipeline", "bm25", "full_scan", "rrf_bm25_full_scan")
_FIELDS = ("question_id", "question_type", "question", "haystack_dates",
           "haystack_session_ids", "haystack_sessions")


def load(data: str | Path) -> list[dict[str, Any]]:
    """The questions of a LongMemEval split directory (``questions/*.json``, by name).

    Raises:
        FileNotFoundError: the directory has no ``questions/*.json``.
        ValueError: a file is not a question in the upstream layout.
    """
    paths = sorted((Path(data) / "questions").glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no questions/*.json under {data}")
    out = []
    for path in paths:
        q = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(q, dict) or any(k not in q for k in _FIELDS):
            raise ValueError(f"{path.name}: expected a question with {list(_FIELDS)}")
        if not (len(q["haystack_dates"]) == len(q["haystack_session_ids"])
                == len(q["haystack_sessions"])):
            raise ValueError(f"{path.name}: sessions, dates and ids differ in number")
        out.append(q)
    return out


def _when(date: str) -> str:
    """``"2023/05/20 (Sat) 02:21"`` as ISO 8601 UTC."""
    day, _, clock = date.partition(")")
    stamp = datetime.strptime(f"{day.split('(')[0].strip()} {clock.strip()}", "%Y/%m/%d %H:%M")
    return stamp.replace(tzinfo=UTC).isoformat()


def history_rows(q: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str], set[str]]:
    """The ``add_turns`` mappings of a question's history, the upstream session id of
    each stored session, and the message ids of its evidence (``has_answer``) turns.

    A repeated session id is stored as its own session (``"{id}#2"``, …); message ids
    are ``"{session position}:{turn position}"``.
    """
    rows: list[dict[str, Any]] = []
    session_of: dict[str, str] = {}
    evidence: set[str] = set()
    for i, (sid, date, turns) in enumerate(zip(q["haystack_session_ids"], q["haystack_dates"],
                                               q["haystack_sessions"], strict=True)):
        name, n = str(sid), 1
        while name in session_of:
            n += 1
            name = f"{sid}#{n}"
        session_of[name] = str(sid)
        stamp = _when(str(date))
        for j, turn in enumerate(turns):
            role = str(turn["role"])
            mid = f"{i}:{j}"
            rows.append({"session": name, "id": mid, "speaker": role, "role": role,
                         "timestamp": stamp, "text": str(turn["content"])})
            if turn.get("has_answer"):
                evidence.add(mid)
    return rows, session_of, evidence


def score(ranked: Sequence[str], evidence: set[str], sessions: Mapping[str, str],
          answer_sessions: Sequence[str]) -> dict[str, float]:
    """Turn-level R@k and NDCG@10, session-level sR@k and distinct sessions of the top 10.

    Args:
        ranked: message ids, best first.
        evidence: the evidence turns' message ids.
        sessions: each message id's upstream session id.
        answer_sessions: the question's ``answer_session_ids``.
    """
    out: dict[str, float] = {}
    for k in KS:
        out[f"r@{k}"] = len(evidence.intersection(ranked[:k])) / max(1, len(evidence))
    out["ndcg@10"] = ndcg10(ranked, evidence, len(evidence))
    gold = set(answer_sessions)
    for k in KS:
        hit = {sessions[t] for t in ranked[:k]} & gold
        out[f"sr@{k}"] = len(hit) / max(1, len(gold))
    out["sessions@10"] = float(len({sessions[t] for t in ranked[:10]}))
    return out


def _summary(per_q: Sequence[tuple[str, dict[str, float]]]) -> dict[str, Any]:
    return {"all": mean_rows([s for _, s in per_q]), "n": len(per_q),
            "by_type": {t: mean_rows([s for typ, s in per_q if typ == t]) for t in TYPES
                        if any(typ == t for typ, _ in per_q)}}


def _p50(values: Sequence[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


def run(
    data: str | Path, embedder: Embedder, *, keep: Path | None = None,
    limit_questions: int | None = None, details: bool = False,
    progress: Callable[[str], None] | None = None, config: Config | None = None,
) -> dict[str, Any]:
    """Score the pipeline and the baselines on a LongMemEval split (see the module
    docstring; ``config``: the pipeline's, default :meth:`Config.load`)."""
    questions = load(data)
    if limit_questions is not None:
        questions = questions[:limit_questions]
    results: dict[str, list[tuple[str, dict[str, float]]]] = {m: [] for m in METHODS}
    wall: list[float] = []
    cold: list[float] = []
    engine: list[float] = []
    bare: list[float] = []
    abstained = {"answerable": 0, "abstention": 0}
    counts = {"answerable": 0, "abstention": 0}
    rows_out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tideline-longmemeval-") as tmpdir:
        for q in questions:
            qid = str(q["question_id"])
            rows, session_of, evidence = history_rows(q)
            home = (keep if keep is not None else Path(tmpdir)) / qid
            t0 = time.perf_counter()
            mem = Memory.open(home, embedder=embedder, project=qid, config=config)
            try:
                if mem.store.stats().get("turns", 0) != len(rows):
                    mem.add_turns(rows, scope=qid, source=SOURCE)
                if isinstance(embedder, CachedEmbedder):
                    embedder.save()  # a long run's misses survive its interruption
                if progress is not None:
                    progress(f"{qid}: {len(rows)} turns, import "
                             f"{time.perf_counter() - t0:.1f} s")
                # The store's first recall loads its vector index and warms SQLite's
                # pages: timed apart (cold), with a text of its own, as the conversation
                # bench warms up; the question's recall is the steady state a server sees.
                t0 = time.perf_counter()
                mem.recall(WARM_UP, scope=qid, limit=50, log=False)
                cold.append((time.perf_counter() - t0) * 1000)
                t1 = time.perf_counter()
                packet = mem.recall(q["question"], scope=qid, limit=50, log=False)
                wall.append((time.perf_counter() - t1) * 1000)
                engine.append(packet.engine_ms)
                t2 = time.perf_counter()
                qv = embedder.embed_query(q["question"])
                bare.append((time.perf_counter() - t2) * 1000)
                base = TurnBaselines(mem.store, [qid], embedder.dim, own=embedder)
                kind = "abstention" if qid.endswith("_abs") else "answerable"
                counts[kind] += 1
                abstained[kind] += int(packet.abstained)
                if kind == "abstention":
                    continue
                sessions = {m["id"]: session_of[m["session"]] for m in rows}
                ranked = {"pipeline": ranked_turns(packet, base.message_of)}
                lists = base.rank(q["question"], qv)
                ranked["bm25"], ranked["full_scan"] = lists["bm25"], lists["full_scan"]
                ranked["rrf_bm25_full_scan"] = lists["rrf"]
                gold = [str(s) for s in q.get("answer_session_ids", [])]
                typ = str(q["question_type"])
                for method in METHODS:
                    results[method].append((typ, score(ranked[method], evidence, sessions,
                                                       gold)))
                if details:
                    got = results["pipeline"][-1][1]
                    rows_out.append({"qid": qid, "type": typ,
                                     **{k: round(v, 3) for k, v in got.items()},
                                     "top10": ranked["pipeline"][:10],
                                     "evidence": sorted(evidence)})
            finally:
                mem.close()
    p50_wall, p50_bare = _p50(wall), _p50(bare)
    out: dict[str, Any] = {
        "embedder": embedder.marker, "questions": len(questions),
        **{m: _summary(results[m]) for m in METHODS},
        "abstained": {k: round(abstained[k] / counts[k], 3) if counts[k] else None
                      for k in counts},
        "latency_ms": {"recall_p50": p50_wall, "search_p50": _p50(engine),
                       "first_recall_p50": _p50(cold),
                       "bare_query_embed_p50": p50_bare,
                       "recall_over_bare_p50": round(p50_wall / p50_bare, 3) if p50_bare
                       else None},
    }
    if isinstance(embedder, CachedEmbedder):
        out["embed_cache"] = {"hits": embedder.hits, "misses": embedder.misses}
    if details:
        out["details"] = rows_out
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench longmemeval")
    parser.add_argument("--data", required=True, help="a LongMemEval split directory")
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--embed-cache", type=Path, action="append", default=[], metavar="DIR",
                        help="passage vectors keyed by text (default: DATA/vectors if there); "
                             "repeatable: all read, misses saved to the last writable")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the questions' stores here and reuse them")
    parser.add_argument("--questions", type=int, default=None, help="only the first N")
    parser.add_argument("--details", action="store_true", help="per-question figures")
    parser.add_argument("--tune", action="append", default=[], metavar="NAME=VALUE",
                        help="change one recall setting (ablations; repeatable)")
    args = parser.parse_args(argv)
    try:
        config = tuned(args.tune)
    except ValueError as exc:
        parser.error(str(exc))
    embedder: Embedder = make_embedder(args.embedder)
    caches = list(args.embed_cache)
    if not caches and (Path(args.data) / "vectors").is_dir():
        caches = [Path(args.data) / "vectors"]
    if caches:
        embedder = CachedEmbedder(embedder, *caches)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    result = run(args.data, embedder, keep=args.keep, limit_questions=args.questions,
                 details=args.details, config=config,
                 progress=lambda m: print(f"# {m}", file=sys.stderr, flush=True))  # noqa: T201
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    print(json.dumps(result, indent=2, ensure_ascii=False))  # noqa: T201
