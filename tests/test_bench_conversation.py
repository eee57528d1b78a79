"""The conversational recall benchmark: its data file, its validator, and the bench's output."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from typing import Any

import pytest
from tests.conftest import hashing

from tideline.bench import conversation
from tideline.bench.locomo import tuned

Doc = dict[str, Any]


def _raw() -> Doc:
    text = resources.files("tideline.bench").joinpath("data/conversations.json").read_text("utf-8")
    data: Doc = json.loads(text)
    return data


def test_data_file_is_well_formed() -> None:
    data = _raw()
    assert conversation.check(data) == []
    assert conversation.load() == data["conversations"]

    # checked here directly too, not only through check()
    convs = data["conversations"]
    assert len(convs) == 2
    all_ids: list[str] = []
    categories: Counter[str] = Counter()
    total_turns = 0
    for conv in convs:
        speakers = conv["speakers"]
        assert len(set(speakers)) == 2
        assert 6 <= len(conv["sessions"]) <= 8
        turn_session: dict[str, str] = {}
        turn_text: dict[str, str] = {}
        previous: datetime | None = None
        for sess in conv["sessions"]:
            date = datetime.fromisoformat(sess["date"])
            assert date.tzinfo is not None
            if previous is not None:
                assert date > previous, sess["id"]
            previous = date
            assert 15 <= len(sess["turns"]) <= 30, sess["id"]
            all_ids.append(sess["id"])
            for turn in sess["turns"]:
                assert set(turn) == {"id", "speaker", "text"}
                assert turn["id"].startswith(sess["id"] + ":t")
                assert turn["speaker"] in speakers
                assert turn["text"].strip()
                turn_session[turn["id"]] = sess["id"]
                turn_text[turn["id"]] = turn["text"].casefold()
                all_ids.append(turn["id"])
        total_turns += len(turn_session)
        # both speakers talk in every session
        for sess in conv["sessions"]:
            assert {t["speaker"] for t in sess["turns"]} == set(speakers)
        span = datetime.fromisoformat(conv["sessions"][-1]["date"]) - datetime.fromisoformat(
            conv["sessions"][0]["date"])
        assert 150 <= span.days <= 220
        for q in conv["questions"]:
            assert set(q) <= {"id", "category", "question", "evidence", "answer"}
            assert q["category"] in conversation.CATEGORIES
            categories[q["category"]] += 1
            all_ids.append(q["id"])
            assert q["question"].strip()
            assert (q["category"] == "unanswerable") == (q["evidence"] == [])
            assert len(set(q["evidence"])) == len(q["evidence"])
            for e in q["evidence"]:
                assert e in turn_session, (q["id"], e)
                assert turn_text[e] not in q["question"].casefold(), (q["id"], e)
            if q["category"] == "multi_hop":
                assert len({turn_session[e] for e in q["evidence"]}) >= 2, q["id"]
            # questions name the people they ask about
            assert any(name in q["question"] for name in speakers), q["id"]
    assert len(all_ids) == len(set(all_ids))
    assert total_turns >= 350
    assert categories["single_hop"] >= 30
    assert categories["multi_hop"] >= 15
    assert categories["temporal"] >= 20
    assert categories["open"] >= 10
    assert categories["unanswerable"] >= 10
    assert sum(categories.values()) >= 90


def _first_question(doc: Doc, category: str) -> Doc:
    return next(q for q in doc["conversations"][0]["questions"] if q["category"] == category)


def _dup_turn_id(doc: Doc) -> None:
    turns = doc["conversations"][0]["sessions"][0]["turns"]
    turns[1]["id"] = turns[0]["id"]


def _missing_evidence(doc: Doc) -> None:
    _first_question(doc, "single_hop")["evidence"] = ["c1:s1:t999"]


def _evidence_of_other_conversation(doc: Doc) -> None:
    _first_question(doc, "single_hop")["evidence"] = ["c2:s1:t1"]


def _bad_category(doc: Doc) -> None:
    _first_question(doc, "single_hop")["category"] = "adversarial"


def _unanswerable_with_evidence(doc: Doc) -> None:
    _first_question(doc, "unanswerable")["evidence"] = ["c1:s1:t1"]


def _answerable_without_evidence(doc: Doc) -> None:
    _first_question(doc, "temporal")["evidence"] = []


def _dates_out_of_order(doc: Doc) -> None:
    sessions = doc["conversations"][0]["sessions"]
    sessions[2]["date"] = sessions[1]["date"]


def _date_unparsable(doc: Doc) -> None:
    doc["conversations"][1]["sessions"][0]["date"] = "the tenth of September"


def _date_without_offset(doc: Doc) -> None:
    doc["conversations"][1]["sessions"][0]["date"] = "2023-09-10T19:30:00"


def _multi_hop_in_one_session(doc: Doc) -> None:
    _first_question(doc, "multi_hop")["evidence"] = ["c1:s1:t1", "c1:s1:t2"]


def _question_copies_evidence(doc: Doc) -> None:
    q = _first_question(doc, "single_hop")
    turn = doc["conversations"][0]["sessions"][0]["turns"][7]
    q["evidence"] = [turn["id"]]
    q["question"] = f"Nadia said: {turn['text']}?"


def _unknown_speaker(doc: Doc) -> None:
    doc["conversations"][0]["sessions"][0]["turns"][0]["speaker"] = "Sanne"


def _extra_turn_key(doc: Doc) -> None:
    doc["conversations"][0]["sessions"][0]["turns"][0]["date"] = "2024-01-14"


def _dup_question_id(doc: Doc) -> None:
    qs = doc["conversations"][0]["questions"]
    qs[1]["id"] = qs[0]["id"]


@pytest.mark.parametrize(("mutate", "fragment"), [
    (_dup_turn_id, "duplicate id"),
    (_missing_evidence, "not turns of this conversation"),
    (_evidence_of_other_conversation, "not turns of this conversation"),
    (_bad_category, "category 'adversarial'"),
    (_unanswerable_with_evidence, "empty exactly for unanswerable"),
    (_answerable_without_evidence, "empty exactly for unanswerable"),
    (_dates_out_of_order, "does not come after"),
    (_date_unparsable, "not ISO 8601"),
    (_date_without_offset, "not ISO 8601"),
    (_multi_hop_in_one_session, "span two sessions"),
    (_question_copies_evidence, "verbatim"),
    (_unknown_speaker, "speaker 'Sanne'"),
    (_extra_turn_key, "must be an object with keys"),
    (_dup_question_id, "duplicate id"),
])
def test_validator_rejects_malformed_data(mutate: Callable[[Doc], None], fragment: str) -> None:
    doc = copy.deepcopy(_raw())
    mutate(doc)
    problems = conversation.check(doc)
    assert problems, "the validator accepted malformed data"
    assert any(fragment in p for p in problems), problems
    with pytest.raises(ValueError, match="conversations.json"):
        conversation.load(doc)


def test_validator_rejects_wrong_shapes() -> None:
    assert conversation.check([]) == ["the document must be an object"]
    assert conversation.check({"conversations": []})
    assert conversation.check({"conversations": [{"id": "c1"}]})


def test_turn_rows_carry_ids_speakers_and_a_minute_per_turn() -> None:
    conv = conversation.load()[0]
    rows = conversation.turn_rows(conv)
    assert len(rows) == sum(len(s["turns"]) for s in conv["sessions"])
    first, second = rows[0], rows[1]
    assert first["id"] == "c1:s1:t1" and first["session"] == "c1:s1"
    assert first["speaker"] in conv["speakers"] and first["role"] == "user"
    gap = datetime.fromisoformat(second["timestamp"]) - datetime.fromisoformat(first["timestamp"])
    assert gap.total_seconds() == 60
    assert first["timestamp"] == datetime.fromisoformat(conv["sessions"][0]["date"]).isoformat()


def test_bench_runs_on_one_conversation() -> None:
    result = conversation.run(hashing(), ks=(5, 10), conversations=["c1"], details=True)
    c1 = conversation.load()[0]
    n_turns = sum(len(s["turns"]) for s in c1["sessions"])
    assert result["k"] == [5, 10]
    assert result["conversations"] == [{
        "id": "c1", "sessions": len(c1["sessions"]), "turns": n_turns, "inserted": n_turns,
        "questions": len(c1["questions"]), "import_s": result["conversations"][0]["import_s"],
    }]
    assert result["questions"] == len(c1["questions"])
    counts = Counter(q["category"] for q in c1["questions"])
    for name in ("pipeline", "baseline_full_scan", "baseline_bm25"):
        block = result[name]
        assert set(block) == {"by_category", "overall", "unanswerable", "false_abstention",
                              "latency_ms_p50", "latency_ms_p95"}
        assert set(block["by_category"]) == {"single_hop", "multi_hop", "temporal", "open"}
        for cat, row in [*block["by_category"].items(), ("overall", block["overall"])]:
            assert set(row) == {"n", "recall@5", "hit@5", "recall@10", "hit@10", "ndcg@10"}
            assert 0.0 <= row["ndcg@10"] <= 1.0
            expected_n = (sum(counts.values()) - counts["unanswerable"] if cat == "overall"
                          else counts[cat])
            assert row["n"] == expected_n
            for k in (5, 10):
                assert 0.0 <= row[f"recall@{k}"] <= row[f"hit@{k}"] <= 1.0
            assert row["recall@5"] <= row["recall@10"] and row["hit@5"] <= row["hit@10"]
        assert block["unanswerable"]["n"] == counts["unanswerable"]
        assert 0.0 <= block["unanswerable"]["abstained"] <= 1.0
        assert block["latency_ms_p50"] >= 0.0
    # the pipeline finds something: the turns came back with their imported message ids
    assert result["pipeline"]["overall"]["hit@10"] > 0.2
    details = result["details"]
    assert [d["id"] for d in details] == [q["id"] for q in c1["questions"]]
    for d in details:
        assert len(d["pipeline_ranks"]) == len(d["evidence"]) == len(d["baseline_ranks"])
        assert all(r is None or 1 <= r <= 10 for r in d["pipeline_ranks"] + d["baseline_ranks"])


def test_bench_rejects_unknown_conversation_and_bad_k() -> None:
    with pytest.raises(ValueError, match="unknown conversation"):
        conversation.run(hashing(), conversations=["c9"])
    with pytest.raises(ValueError, match="positive"):
        conversation.run(hashing(), ks=(0, 5), conversations=["c1"])


def test_cli_dispatch_prints_json() -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "tideline.bench", "conversation", "--embedder", "hashing",
         "--conversations", "c2", "--k", "20,5"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )
    out = json.loads(proc.stdout)
    assert out["k"] == [5, 20]
    assert [c["id"] for c in out["conversations"]] == ["c2"]
    assert "details" not in out
    assert set(out["pipeline"]["overall"]) == {"n", "recall@5", "hit@5", "recall@20", "hit@20",
                                                  "ndcg@10"}


def test_tune_changes_one_recall_setting_for_an_ablation() -> None:
    """``--tune NAME=VALUE`` (as in the LoCoMo bench) reaches the pipeline's recall."""
    plain = conversation.run(hashing(), ks=(5, 10), conversations=["c1"], details=True)
    changed = conversation.run(
        hashing(), ks=(5, 10), conversations=["c1"], details=True,
        config=tuned(["keyword_boost=0", "lexical_weight=0", "neighbour_hits=0"]))
    assert ([d["pipeline_ranks"] for d in plain["details"]]
            != [d["pipeline_ranks"] for d in changed["details"]])
    assert ([d["baseline_ranks"] for d in plain["details"]]
            == [d["baseline_ranks"] for d in changed["details"]])
    with pytest.raises(SystemExit) as exc:
        conversation.main(["--embedder", "hashing", "--tune", "no_such_setting=1"])
    assert exc.value.code == 2
