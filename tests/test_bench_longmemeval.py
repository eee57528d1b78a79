"""The LongMemEval bench and the text-keyed embedding cache, on a tiny history written here.

The real split is the upstream authors' and lives outside the project; these tests
write two questions of their own in its layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tests.conftest import hashing

from tideline.bench import longmemeval
from tideline.bench.embed_cache import CachedEmbedder, text_key

SESSIONS = [
    ("s-a", "2023/05/20 (Sat) 02:21", [
        ("user", "I adopted a grey cat called Miso last week.", True),
        ("assistant", "Congratulations on adopting Miso! Cats need a scratching post.", False),
    ]),
    ("s-b", "2023/05/22 (Mon) 10:00", [
        ("user", "Can you suggest a pasta recipe with tomatoes?", False),
        ("assistant", "Try a simple pomodoro: tomatoes, garlic, basil and olive oil.", False),
    ]),
    ("s-a", "2023/05/25 (Thu) 18:30", [  # a repeated session id: its own session
        ("user", "My car needs new tyres before the road trip.", False),
        ("assistant", "Check the tread depth and the pressure first.", False),
    ]),
]


def _question(qid: str, qtype: str, question: str, answer_sessions: list[str]) -> dict[str, object]:
    return {
        "question_id": qid, "question_type": qtype, "question": question,
        "question_date": "2023/05/30 (Tue) 20:00", "answer": "x",
        "answer_session_ids": answer_sessions,
        "haystack_session_ids": [s for s, _, _ in SESSIONS],
        "haystack_dates": [d for _, d, _ in SESSIONS],
        "haystack_sessions": [[{"role": r, "content": c, **({"has_answer": True} if a else {})}
                               for r, c, a in turns] for _, _, turns in SESSIONS],
    }


def _split(root: Path) -> Path:
    (root / "questions").mkdir(parents=True)
    for n, q in enumerate((
        _question("q1", "single-session-user", "What is the name of my cat?", ["s-a"]),
        _question("q2_abs", "single-session-user", "What colour is my horse?", ["s-a"]),
    )):
        (root / "questions" / f"{n}_{q['question_id']}.json").write_text(json.dumps(q))
    return root


def test_history_rows_follow_the_scoring_rule() -> None:
    rows, session_of, evidence = longmemeval.history_rows(
        _question("q", "multi-session", "?", ["s-a"]))
    assert rows[0] == {"session": "s-a", "id": "0:0", "speaker": "user", "role": "user",
                       "timestamp": "2023-05-20T02:21:00+00:00",
                       "text": "I adopted a grey cat called Miso last week."}
    assert [r["session"] for r in rows[4:]] == ["s-a#2", "s-a#2"]
    assert session_of == {"s-a": "s-a", "s-b": "s-b", "s-a#2": "s-a"}
    assert evidence == {"0:0"}


def test_score_is_turn_and_session_level() -> None:
    sessions = {"0:0": "s-a", "0:1": "s-a", "1:0": "s-b", "2:0": "s-a"}
    got = longmemeval.score(["1:0", "0:1", "0:0"], {"0:0", "2:0"}, sessions, ["s-a", "s-c"])
    assert got["r@5"] == 0.5
    assert got["sr@5"] == 0.5  # s-a owns a returned turn; s-c none
    assert got["sessions@10"] == 2.0
    assert 0 < got["ndcg@10"] < 1


def test_run_reports_pipeline_beside_baselines_and_abstention(tmp_path: Path) -> None:
    out = longmemeval.run(_split(tmp_path / "split"), hashing())
    for name in longmemeval.METHODS:
        assert out[name]["n"] == 1  # the abstention question is not scored for recall
        assert {"r@5", "r@10", "r@25", "ndcg@10", "sr@5", "sr@10", "sr@25"} <= set(
            out[name]["all"])
        assert set(out[name]["by_type"]) == {"single-session-user"}
    assert out["bm25"]["all"]["r@5"] == 1.0  # "cat" is in the evidence turn only
    assert set(out["abstained"]) == {"answerable", "abstention"}
    assert out["latency_ms"]["bare_query_embed_p50"] > 0
    assert out["latency_ms"]["first_recall_p50"] > 0


def test_cache_answers_known_texts_and_embeds_misses(tmp_path: Path) -> None:
    inner = hashing()
    cached = np.zeros((1, inner.dim), dtype=np.float32)
    cached[0, 0] = 1.0
    np.savez(tmp_path / "a.npz", keys=np.array([text_key("user: hello")], dtype="S40"),
             vecs=cached)
    emb = CachedEmbedder(inner, tmp_path)
    assert emb.marker == inner.marker and len(emb) == 1
    got = emb.embed_passages(["user: hello", "user: other"])
    assert np.array_equal(got[0], cached[0])  # from the cache, not the hashing embedder
    assert np.array_equal(got[1], inner.embed_passages(["user: other"])[0])
    assert (emb.hits, emb.misses) == (1, 1)
    saved = emb.save()
    assert saved is not None
    again = CachedEmbedder(inner, tmp_path)
    assert len(again) == 2 and again.save() is None
    assert np.array_equal(again.embed_passages(["user: other"])[0], got[1])
    assert again.misses == 0


def test_cache_layers_read_a_readonly_dir_and_keep_misses_in_a_writable_one(
        tmp_path: Path) -> None:
    """A shared read-only cache first, a writable one after it: both are read, the misses
    (passage vectors the shared one lacks) are saved in the writable one only."""
    inner = hashing()
    shared, mine = tmp_path / "shared", tmp_path / "mine"
    shared.mkdir()
    known = inner.embed_passages(["user: hello"])
    np.savez(shared / "a.npz", keys=np.array([text_key("user: hello")], dtype="S40"),
             vecs=known)
    shared.chmod(0o555)
    try:
        emb = CachedEmbedder(inner, shared, mine)
        emb.embed_passages(["user: hello", "user: a passage"])
        assert (emb.hits, emb.misses) == (1, 1)
        saved = emb.save()
        assert saved is not None and saved.parent == mine
        assert sorted(p.name for p in shared.iterdir()) == ["a.npz"]
        again = CachedEmbedder(inner, shared, mine)
        again.embed_passages(["user: hello", "user: a passage"])
        assert (again.hits, again.misses) == (2, 0)
    finally:
        shared.chmod(0o755)
