"""The LoCoMo bench: scoring rule, store reuse and output on a tiny split written here.

The real split is CC BY-NC and lives outside the project; these tests write a few
turns of their own in its layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import hashing

from tideline.bench import locomo
from tideline.memory import Memory
from tideline.models import RecallItem, RecallPacket

TURNS = [
    ("D1:1", 1, "1:56 pm on 8 May, 2023", "Caroline", "Hey Mel! I went to a support group."),
    ("D1:2", 1, "1:56 pm on 8 May, 2023", "Melanie", "Nice! I painted a lake sunrise."),
    ("D1:3", 1, "1:56 pm on 8 May, 2023", "Caroline", "I want to study counseling."),
    ("D2:1", 2, "9:00 am on 20 May, 2023", "Melanie", "We went camping at the beach."),
    ("D2:2", 2, "9:00 am on 20 May, 2023", "Caroline", "Pottery class was fun."),
]
QUESTIONS = [
    ("q0", "multi-hop", "What activities does Melanie do?", ["D1:2", "D2:1"]),
    ("q1", "single-hop", "What does Caroline want to study?", ["D1:3"]),
]


def _split(root: Path) -> Path:
    root.mkdir()
    with (root / "turns.jsonl").open("w") as fh:
        for n, (dia, sess, date, speaker, text) in enumerate(TURNS):
            row = {"conv_id": "conv-x", "session": sess, "session_date_time": date,
                   "dia_id": dia, "turn_index": n, "speaker": speaker, "text": text}
            if dia == "D2:1":
                row["image_caption"] = "a tent on the sand"
            fh.write(json.dumps(row) + "\n")
    with (root / "questions.jsonl").open("w") as fh:
        for qid, cat, question, evidence in QUESTIONS:
            fh.write(json.dumps({"qid": qid, "conv_id": "conv-x", "question": question,
                                 "category_name": cat, "evidence": evidence}) + "\n")
    return root


def test_score_counts_evidence_among_first_k_and_ndcg() -> None:
    got = locomo.score(["a", "x", "b"], ["a", "b"])
    assert got["r@1"] == 0.5 and got["r@5"] == 1.0
    assert got["ndcg@10"] == pytest.approx((1 + 0.5) / (1 + 1 / 1.5849625007211563))
    assert locomo.score([], ["a"])["r@25"] == 0.0


def test_turn_rows_follow_the_scoring_rule(tmp_path: Path) -> None:
    turns, _ = locomo.load(_split(tmp_path / "split"))
    rows = locomo.turn_rows(turns["conv-x"])
    assert rows[0] == {"session": "conv-x-S1", "id": "D1:1", "speaker": "Caroline",
                       "role": "user", "timestamp": "1:56 pm on 8 May, 2023",
                       "text": "Hey Mel! I went to a support group."}
    assert rows[3]["text"].endswith(" [shares image: a tent on the sand]")


def test_memory_items_count_through_their_source_links() -> None:
    def item(**kw: object) -> RecallItem:
        base: dict[str, object] = {"type": "turn", "id": "x", "text": "t", "confidence": 0.5,
                                   "source": "vector", "scope": "s", "kind": "turn"}
        base.update(kw)
        return RecallItem(**base)  # type: ignore[arg-type]

    packet = RecallPacket(query="q", scope="s", items=(
        item(id="D1:2", message_id="D1:2"),
        item(type="memory", id=7, kind="digest", source_links=(3, 1, 2)),
    ), abstained=False, latency_ms=1.0)
    assert locomo.ranked_turns(packet, {1: "D1:1", 2: "D1:2", 3: "D2:1"}) == [
        "D1:2", "D2:1", "D1:1"]


def test_run_reports_pipeline_and_baselines_and_reuses_kept_stores(tmp_path: Path) -> None:
    split = _split(tmp_path / "split")
    keep = tmp_path / "keep"
    out = locomo.run(split, hashing(), keep=keep)
    for name in ("pipeline", "bm25", "full_scan", "rrf_bm25_full_scan"):
        assert out[name]["n"] == 2
        assert set(out[name]["all"]) == {"r@1", "r@5", "r@10", "r@25", "ndcg@10"}
    assert set(out["pipeline"]["by_category"]) == {"multi-hop", "single-hop"}
    assert out["bm25"]["by_category"]["single-hop"]["r@1"] == 1.0
    assert out["latency_ms"]["bare_query_embed_p50"] > 0
    with Memory.open(keep / "conv-x", embedder=hashing()) as mem:
        assert mem.store.stats()["turns"] == len(TURNS)
    again = locomo.run(split, hashing(), keep=keep)
    assert again["pipeline"] == out["pipeline"]
    with Memory.open(keep / "conv-x", embedder=hashing()) as mem:
        assert mem.store.stats()["turns"] == len(TURNS)


def test_import_cost_times_the_same_texts(tmp_path: Path) -> None:
    out = locomo.import_cost(_split(tmp_path / "split"), hashing(), 4)
    assert out["turns"] == 4
    assert out["ratio"] > 0


def test_embed_cache_keeps_the_passages_a_run_embedded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``--embed-cache DIR`` (issue 29): a first run saves its misses there, and a second
    run reads them back (no file added), with the same figures."""
    split = _split(tmp_path / "split")
    cache = tmp_path / "cache"
    args = ["--data", str(split), "--embedder", "hashing", "--embed-cache", str(cache)]
    locomo.main(args)
    first = json.loads(capsys.readouterr().out)
    files = sorted(cache.glob("*.npz"))
    assert len(files) == 1
    locomo.main(args)
    again = json.loads(capsys.readouterr().out)
    assert sorted(cache.glob("*.npz")) == files
    assert again["pipeline"] == first["pipeline"]
