"""Conversational recall benchmark: ``python -m tideline.bench conversation [--embedder e5]``.

Two hand-written conversations (``bench/data/conversations.json``: two named people
chatting over six months, sessions with dates, short replies, pronouns, plans that
change) and questions labelled with the ids of their evidence turns, in five
categories: ``single_hop``, ``multi_hop`` (evidence in two or more sessions),
``temporal`` (answerable from the turns plus their session dates), ``open``
(inference from what was said) and ``unanswerable`` (never discussed; no evidence).

Each conversation is imported as raw turns into a fresh store through the public
:meth:`~tideline.memory.Memory.add_turns` (session, speaker, role, text, a timestamp of
the session date plus one minute per turn, and the turn id as the source's message
id); every question is then asked with :meth:`~tideline.memory.Memory.recall` and the
message ids of the returned turn items are compared with the evidence. A naive
baseline runs beside it: full-scan cosine between the query vector and each turn's
own text, abstaining below the embedder's abstention floor.

Prints one JSON document: per category and overall (answerable questions), recall@k
(share of the evidence turns found in the top k, averaged over questions) and hit@k
(any evidence turn in the top k), for the pipeline and the baseline; how often each
abstains on unanswerable questions (and, falsely, on answerable ones); p50/p95
latency. ``--details`` adds, per question, the rank of every evidence turn.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from tideline.bench.baselines import Bm25
from tideline.bench.locomo import tuned
from tideline.config import Config
from tideline.embed import Embedder, make_embedder
from tideline.memory import Memory

__all__ = ["CATEGORIES", "check", "load", "main", "run", "turn_rows"]

#: The question categories of the conversation bench, in report order.
CATEGORIES = ("single_hop", "multi_hop", "temporal", "open", "unanswerable")
ANSWERABLE = tuple(c for c in CATEGORIES if c != "unanswerable")
SOURCE = "bench-conversation"
DEFAULT_KS = (5, 10, 20)
_TOP_KEYS = {"version", "note", "conversations"}
_CONV_KEYS = {"id", "speakers", "sessions", "questions"}
_SESSION_KEYS = {"id", "date", "turns"}
_TURN_KEYS = {"id", "speaker", "text"}
_QUESTION_KEYS = {"id", "category", "question", "evidence"}
_QUESTION_OPTIONAL = {"answer"}
_WORDS = re.compile(r"\w+")

Ask = Callable[[str], tuple[list[str], bool, float]]


def load(data: Any = None) -> list[dict[str, Any]]:
    """The conversations of ``bench/data/conversations.json`` (or of ``data``), validated.

    Raises:
        ValueError: the data is malformed (see :func:`check`).
    """
    if data is None:
        raw = resources.files("tideline.bench").joinpath("data/conversations.json")
        data = json.loads(raw.read_text("utf-8"))
    problems = check(data)
    if problems:
        raise ValueError("conversations.json: " + "; ".join(problems[:10]))
    conversations: list[dict[str, Any]] = data["conversations"]
    return conversations


def _parse_date(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _words(text: str) -> str:
    return " ".join(_WORDS.findall(text.casefold()))


def check(data: Any) -> list[str]:
    """Problems in a conversations document (empty if it is well-formed).

    Every id is a unique string, a session's id is ``<conversation>:s<n>`` and a
    turn's ``<session>:t<n>`` (numbered from 1 in order); session dates are ISO 8601
    with a UTC offset and strictly increase within a conversation, later than the
    previous session's last turn (one minute per turn); each turn is spoken by one
    of the conversation's two speakers and has text. A question has a known
    category and a non-empty text that does not copy an evidence turn; its evidence
    lists distinct turn ids of its own conversation, is empty exactly for
    ``unanswerable`` questions and spans two sessions or more for ``multi_hop``.
    """
    if not isinstance(data, dict):
        return ["the document must be an object"]
    problems: list[str] = []
    if not data.keys() <= _TOP_KEYS or "conversations" not in data:
        problems.append(f"top-level keys must be within {sorted(_TOP_KEYS)} with conversations")
    conversations = data.get("conversations")
    if not isinstance(conversations, list) or not conversations:
        return [*problems, "conversations must be a non-empty list"]
    seen: set[str] = set()

    def new_id(value: Any, tag: str) -> bool:
        if not isinstance(value, str) or not value:
            problems.append(f"{tag}: id must be a non-empty string")
            return False
        if value in seen:
            problems.append(f"{tag}: duplicate id {value!r}")
            return False
        seen.add(value)
        return True

    for n, conv in enumerate(conversations):
        tag = f"conversation #{n}"
        if not isinstance(conv, dict) or conv.keys() != _CONV_KEYS:
            problems.append(f"{tag}: must be an object with keys {sorted(_CONV_KEYS)}")
            continue
        if not new_id(conv["id"], tag):
            continue
        cid = conv["id"]
        speakers = conv["speakers"]
        if (not isinstance(speakers, list) or len(speakers) != 2
                or not all(isinstance(s, str) and s.strip() for s in speakers)
                or speakers[0] == speakers[1]):
            problems.append(f"{cid}: speakers must be two distinct names")
            speakers = []
        session_of, text_of = _check_sessions(conv, speakers, new_id, problems)
        questions = conv["questions"]
        if not isinstance(questions, list) or not questions:
            problems.append(f"{cid}: questions must be a non-empty list")
            continue
        for m, q in enumerate(questions):
            _check_question(q, f"{cid} question #{m}", session_of, text_of, new_id, problems)
    return problems


def _check_sessions(
    conv: dict[str, Any], speakers: list[str], new_id: Callable[[Any, str], bool],
    problems: list[str],
) -> tuple[dict[str, str], dict[str, str]]:
    """Check a conversation's sessions and turns; returns turn id → session id and → text."""
    cid = conv["id"]
    sessions = conv["sessions"]
    session_of: dict[str, str] = {}
    text_of: dict[str, str] = {}
    if not isinstance(sessions, list) or not sessions:
        problems.append(f"{cid}: sessions must be a non-empty list")
        return session_of, text_of
    last_end: datetime | None = None
    for s_no, sess in enumerate(sessions, start=1):
        stag = f"{cid} session #{s_no}"
        if not isinstance(sess, dict) or sess.keys() != _SESSION_KEYS:
            problems.append(f"{stag}: must be an object with keys {sorted(_SESSION_KEYS)}")
            continue
        sid = sess["id"]
        if not new_id(sid, stag):
            continue
        if sid != f"{cid}:s{s_no}":
            problems.append(f"{stag}: id {sid!r} should be {cid}:s{s_no}")
        date = _parse_date(sess["date"])
        turns = sess["turns"]
        if date is None:
            problems.append(f"{sid}: date {sess['date']!r} is not ISO 8601 with a UTC offset")
        elif last_end is not None and date <= last_end:
            problems.append(f"{sid}: date {sess['date']} does not come after the previous "
                            "session's last turn")
        if date is not None and isinstance(turns, list):
            last_end = date + timedelta(minutes=max(0, len(turns) - 1))
        if not isinstance(turns, list) or not turns:
            problems.append(f"{sid}: turns must be a non-empty list")
            continue
        for t_no, turn in enumerate(turns, start=1):
            ttag = f"{sid} turn #{t_no}"
            if not isinstance(turn, dict) or turn.keys() != _TURN_KEYS:
                problems.append(f"{ttag}: must be an object with keys {sorted(_TURN_KEYS)}")
                continue
            if not new_id(turn["id"], ttag):
                continue
            session_of[turn["id"]] = sid
            if turn["id"] != f"{sid}:t{t_no}":
                problems.append(f"{ttag}: id {turn['id']!r} should be {sid}:t{t_no}")
            if turn["speaker"] not in speakers:
                problems.append(f"{turn['id']}: speaker {turn['speaker']!r} is not in {speakers}")
            if not isinstance(turn["text"], str) or not turn["text"].strip():
                problems.append(f"{turn['id']}: empty text")
            else:
                text_of[turn["id"]] = turn["text"]
    return session_of, text_of


def _check_question(
    q: Any, tag: str, session_of: dict[str, str], text_of: dict[str, str],
    new_id: Callable[[Any, str], bool], problems: list[str],
) -> None:
    if not isinstance(q, dict):
        problems.append(f"{tag}: not an object")
        return
    missing = _QUESTION_KEYS - q.keys()
    extra = q.keys() - _QUESTION_KEYS - _QUESTION_OPTIONAL
    if missing or extra:
        problems.append(f"{tag}: missing keys {sorted(missing)}, unknown keys {sorted(extra)}")
        return
    if not new_id(q["id"], tag):
        return
    qid = q["id"]
    if q["category"] not in CATEGORIES:
        problems.append(f"{qid}: category {q['category']!r} not in {CATEGORIES}")
    text = q["question"]
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{qid}: empty question")
        text = ""
    evidence = q["evidence"]
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        problems.append(f"{qid}: evidence must be a list of turn ids")
        return
    if (q["category"] == "unanswerable") != (not evidence):
        problems.append(f"{qid}: evidence must be empty exactly for unanswerable questions")
    if len(set(evidence)) != len(evidence):
        problems.append(f"{qid}: duplicate evidence ids")
    unknown = [e for e in evidence if e not in session_of]
    if unknown:
        problems.append(f"{qid}: evidence {unknown} are not turns of this conversation")
    if q["category"] == "multi_hop" and len({session_of.get(e) for e in evidence}) < 2:
        problems.append(f"{qid}: multi_hop evidence must span two sessions or more")
    asked = _words(text)
    copied = [e for e in evidence if e in text_of and _words(text_of[e]) in asked]
    if copied:
        problems.append(f"{qid}: the question copies evidence turn(s) {copied} verbatim")


def turn_rows(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """The mappings :meth:`Memory.add_turns` receives for one conversation.

    Each turn is stamped with its session's date plus one minute per turn before it.
    """
    rows: list[dict[str, Any]] = []
    for sess in conv["sessions"]:
        start = datetime.fromisoformat(sess["date"])
        for n, turn in enumerate(sess["turns"]):
            rows.append({
                "session": sess["id"], "speaker": turn["speaker"], "role": "user",
                "text": turn["text"], "id": turn["id"],
                "timestamp": (start + timedelta(minutes=n)).isoformat(),
            })
    return rows


def run(
    embedder: Embedder, *, ks: Sequence[int] = DEFAULT_KS,
    conversations: Sequence[str] | None = None, details: bool = False,
    config: Config | None = None,
) -> dict[str, Any]:
    """Run pipeline and baseline over the conversations; returns the figures.

    Args:
        embedder: the embedder under test (its profile supplies the thresholds).
        ks: the cut-offs for recall@k and hit@k.
        conversations: ids of the conversations to run (default: all).
        details: add per-question evidence ranks to the result.
        config: the pipeline's settings (default :meth:`Config.load`; ablations).
    """
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError("k values must be positive integers")
    convs = load()
    if conversations is not None:
        unknown = set(conversations) - {c["id"] for c in convs}
        if unknown:
            raise ValueError(f"unknown conversation ids: {sorted(unknown)}")
        convs = [c for c in convs if c["id"] in set(conversations)]
    limit = ks[-1]
    rows: dict[str, list[dict[str, Any]]] = {"pipeline": [], "baseline_full_scan": [],
                                             "baseline_bm25": []}
    imported: list[dict[str, Any]] = []
    for conv in convs:
        turns = turn_rows(conv)
        with tempfile.TemporaryDirectory(prefix="tideline-conv-") as tmp:
            with Memory.open(Path(tmp) / "store", embedder=embedder, project="global",
                             config=config) as mem:
                t0 = time.perf_counter()
                result = mem.add_turns(turns, source=SOURCE)
                import_s = time.perf_counter() - t0
                mem.recall("warm up", limit=limit, log=False)
                rows["pipeline"] += _ask_all(conv, lambda text: _pipeline(mem, text, limit))
        rows["baseline_full_scan"] += _run_baseline(embedder, conv, turns, limit)
        rows["baseline_bm25"] += _run_bm25(conv, turns, limit)
        imported.append({"id": conv["id"], "sessions": len(conv["sessions"]),
                         "turns": len(turns), "inserted": result.inserted,
                         "questions": len(conv["questions"]),
                         "import_s": round(import_s, 2)})
    out: dict[str, Any] = {
        "embedder": embedder.marker,
        "profile": embedder.profile.__dict__,
        "k": ks,
        "conversations": imported,
        "questions": sum(c["questions"] for c in imported),
    }
    for name, answers in rows.items():
        out[name] = _summarise(answers, ks)
    if details:
        out["details"] = [
            {"id": p["id"], "category": p["category"], "question": p["question"],
             "evidence": p["evidence"], "pipeline_ranks": p["ranks"],
             "baseline_ranks": b["ranks"], "pipeline_abstained": p["abstained"],
             "baseline_abstained": b["abstained"]}
            for p, b in zip(rows["pipeline"], rows["baseline_full_scan"], strict=True)
        ]
    return out


def _pipeline(mem: Memory, text: str, limit: int) -> tuple[list[str], bool, float]:
    t0 = time.perf_counter()
    packet = mem.recall(text, limit=limit, log=False)
    ms = (time.perf_counter() - t0) * 1000
    ranked = [str(i.message_id) for i in packet.items if i.type == "turn"]
    return ranked, packet.abstained, ms


def _run_baseline(
    embedder: Embedder, conv: dict[str, Any], turns: list[dict[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """Ask every question of ``conv`` by full-scan cosine over each turn's own text."""
    vecs = embedder.embed_passages([t["text"] for t in turns])
    ids = [t["id"] for t in turns]
    return _ask_all(conv, lambda text: _baseline(embedder, ids, vecs, text, limit))


def _baseline(
    embedder: Embedder, ids: list[str], vecs: np.ndarray, text: str, limit: int
) -> tuple[list[str], bool, float]:
    t0 = time.perf_counter()
    sims = vecs @ embedder.embed_query(text)
    order = np.argsort(-sims, kind="stable")[:limit]
    abstained = bool(sims[order[0]] < embedder.profile.abstain)
    ranked = [ids[i] for i in order]
    return ranked, abstained, (time.perf_counter() - t0) * 1000


def _run_bm25(conv: dict[str, Any], turns: list[dict[str, Any]],
              limit: int) -> list[dict[str, Any]]:
    """Ask every question of ``conv`` by BM25 over ``"speaker: text"`` (abstains with no hit)."""
    index = Bm25([t["id"] for t in turns], [f"{t['speaker']}: {t['text']}" for t in turns])

    def ask(text: str) -> tuple[list[str], bool, float]:
        t0 = time.perf_counter()
        ranked = index.search(text, limit)
        return ranked, not ranked, (time.perf_counter() - t0) * 1000

    return _ask_all(conv, ask)


def _ask_all(conv: dict[str, Any], ask: Ask) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = []
    for q in conv["questions"]:
        ranked, abstained, ms = ask(q["question"])
        position = {mid: n for n, mid in enumerate(ranked, start=1)}
        answers.append({
            "id": q["id"], "category": q["category"], "question": q["question"],
            "evidence": q["evidence"], "ranks": [position.get(e) for e in q["evidence"]],
            "abstained": abstained, "ms": ms,
        })
    return answers


def _summarise(answers: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    by_category: dict[str, dict[str, Any]] = {}
    for cat in ANSWERABLE:
        rows = [a for a in answers if a["category"] == cat]
        if rows:
            by_category[cat] = _figures(rows, ks)
    answerable = [a for a in answers if a["category"] != "unanswerable"]
    unanswerable = [a for a in answers if a["category"] == "unanswerable"]
    latencies = [a["ms"] for a in answers]
    return {
        "by_category": by_category,
        "overall": _figures(answerable, ks) if answerable else {"n": 0},
        "unanswerable": {
            "n": len(unanswerable),
            "abstained": _share(sum(a["abstained"] for a in unanswerable), len(unanswerable)),
        },
        "false_abstention": _share(sum(a["abstained"] for a in answerable), len(answerable)),
        "latency_ms_p50": round(statistics.median(latencies), 3) if latencies else 0.0,
        "latency_ms_p95": round(float(np.percentile(latencies, 95)), 3) if latencies else 0.0,
    }


def _figures(rows: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for k in ks:
        found = [sum(r is not None and r <= k for r in a["ranks"]) for a in rows]
        out[f"recall@{k}"] = _share(
            sum(f / len(a["ranks"]) for f, a in zip(found, rows, strict=True)), len(rows))
        out[f"hit@{k}"] = _share(sum(f > 0 for f in found), len(rows))
    out["ndcg@10"] = _share(sum(_ndcg10(a["ranks"]) for a in rows), len(rows))
    return out


def _ndcg10(ranks: list[int | None]) -> float:
    """NDCG@10 with binary gains of one question, from its evidence turns' 1-based ranks."""
    dcg = sum(1.0 / math.log2(r + 1) for r in ranks if r is not None and r <= 10)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(ranks), 10)))
    return dcg / ideal if ideal else 0.0


def _share(total: float, n: int) -> float:
    return round(total / n, 4) if n else 0.0


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        message = f"--k takes comma-separated integers, not {text!r}"
        raise argparse.ArgumentTypeError(message) from exc
    if not ks or ks[0] < 1 or ks[-1] > 200:
        raise argparse.ArgumentTypeError("--k values must lie in 1..200")
    return ks


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench conversation")
    parser.add_argument("--embedder", default="e5", help="e5 (default), hashing or http")
    parser.add_argument("--k", type=_parse_ks, default=list(DEFAULT_KS),
                        help="cut-offs for recall@k and hit@k (default 5,10,20)")
    parser.add_argument("--conversations", default=None,
                        help="comma-separated conversation ids (default: all)")
    parser.add_argument("--details", action="store_true",
                        help="add per-question evidence ranks")
    parser.add_argument("--tune", action="append", default=[], metavar="NAME=VALUE",
                        help="change one recall setting (repeatable; ablations)")
    args = parser.parse_args(argv)
    chosen = None if args.conversations is None else [
        c.strip() for c in args.conversations.split(",") if c.strip()]
    try:
        config = tuned(args.tune)
    except ValueError as exc:
        parser.error(str(exc))
    result = run(make_embedder(args.embedder), ks=args.k, conversations=chosen,
                 details=args.details, config=config)
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
