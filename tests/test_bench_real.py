"""The real-text benchmark: held-out query file, its validation, and the bench's output."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
from tests.conftest import hashing

from tideline.bench import calibrate, real


def _raw(name: str) -> dict[str, Any]:
    return real._read(name)


def test_heldout_file_is_well_formed() -> None:
    dev = _raw("real.json")
    held = _raw("real_heldout.json")
    assert set(held) == {"version", "note", "queries"}
    queries = held["queries"]
    assert real.check_queries(dev["facts"], queries) == []
    assert real.load_heldout() == queries

    # checked here directly too, not only through check_queries
    scope_of = {f["id"]: f["scope"] for f in dev["facts"]}
    for q in queries:
        assert set(q) == {"id", "lang", "type", "scope", "text", "expected"}, q
        assert q["type"] in ("paraphrase", "noise"), q
        assert q["lang"] in ("en", "zh", "ru", "de"), q
        assert q["scope"] in ("global", "atlas", "orchard"), q
        assert q["text"].strip(), q
        if q["type"] == "noise":
            assert q["expected"] == [], q
        else:
            assert q["expected"], q
        for fid in q["expected"]:
            assert fid in scope_of, (q["id"], fid)
            assert scope_of[fid] in (q["scope"], "global"), (q["id"], fid)

    ids = [q["id"] for q in queries]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {q["id"] for q in dev["queries"]}
    # held out means unseen: no query repeats a dev query or a fact verbatim
    seen = {q["text"].casefold() for q in dev["queries"]} | {
        f["text"].casefold() for f in dev["facts"]
    }
    assert not [q["id"] for q in queries if q["text"].casefold() in seen]
    assert Counter(q["type"] for q in queries) == {"paraphrase": 48, "noise": 48}
    assert Counter((q["lang"], q["type"]) for q in queries) == {
        (lang, kind): 12 for lang in ("en", "zh", "ru", "de") for kind in ("paraphrase", "noise")
    }


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("expected", ["f999"], "does not exist"),
        ("type", "noise", "empty exactly for noise"),
        ("expected", [], "empty exactly for noise"),
        ("lang", "fr", "lang 'fr'"),
        ("scope", "nowhere", "holds no fact"),
        ("text", "  ", "empty text"),
        ("expected", "f001", "list of fact ids"),
    ],
)
def test_check_queries_rejects_bad_queries(field: str, value: Any, problem: str) -> None:
    data = real.load()
    queries = copy.deepcopy(real.load_heldout(data.facts))
    para = next(q for q in queries if q["type"] == "paraphrase")
    para[field] = value
    problems = real.check_queries(data.facts, queries)
    assert any(problem in p and para["id"] in p for p in problems), problems


def test_check_queries_rejects_structure_problems() -> None:
    facts = real.load().facts
    queries = copy.deepcopy(real.load_heldout(facts))
    queries[1]["id"] = queries[0]["id"]
    assert any("duplicate id" in p for p in real.check_queries(facts, queries))
    queries = copy.deepcopy(real.load_heldout(facts))
    del queries[0]["scope"]
    queries[1]["extra"] = 1
    problems = real.check_queries(facts, queries)
    assert any("missing keys ['scope']" in p for p in problems), problems
    assert any("unknown keys ['extra']" in p for p in problems), problems
    # a fact of another project is not visible from the query's scope
    atlas = next(f["id"] for f in facts if f["scope"] == "atlas")
    queries = copy.deepcopy(real.load_heldout(facts))
    orchard = next(q for q in queries if q["scope"] == "orchard" and q["type"] == "paraphrase")
    orchard["expected"] = [atlas]
    assert any("outside scope" in p for p in real.check_queries(facts, queries))


def test_dev_queries_pass_the_same_validation() -> None:
    data = real.load()
    assert real.check_queries(data.facts, data.queries) == []


def _check_figures(block: dict[str, Any], types: set[str], n_real: int) -> None:
    assert set(block) == {
        "by_type", "by_lang", "noise_abstention", "false_abstention", "latency_ms_p50",
        "overall",
    }
    assert block["overall"]["n"] == n_real
    assert 0.0 <= block["overall"]["ndcg@10"] <= 1.0
    assert 0.0 <= block["overall"]["recall@10"] <= 1.0
    assert set(block["by_type"]) == types
    assert sum(row["n"] for row in block["by_type"].values()) == n_real
    assert sum(row["n"] for row in block["by_lang"].values()) == n_real
    for table in (block["by_type"], block["by_lang"]):
        for row in table.values():
            assert 0.0 <= row["recall@1"] <= row["recall@5"] <= 1.0
    assert 0.0 <= block["noise_abstention"] <= 1.0
    assert 0.0 <= block["false_abstention"] <= 1.0


def test_run_reports_dev_and_heldout_side_by_side() -> None:
    out = real.run(hashing(), queries="both")
    assert out["facts"] == 175
    assert out["queries"] == 192
    _check_figures(out["pipeline"], {"paraphrase", "exact"}, 158)
    _check_figures(out["baseline_full_scan"], {"paraphrase", "exact"}, 158)
    _check_figures(out["baseline_bm25"], {"paraphrase", "exact"}, 158)
    held = out["heldout"]
    assert set(held) == {"queries", "pipeline", "baseline_full_scan", "baseline_bm25"}
    assert held["queries"] == 96
    for name in ("pipeline", "baseline_full_scan"):
        _check_figures(held[name], {"paraphrase"}, 48)
        assert set(held[name]["by_lang"]) == {"en", "zh", "ru", "de"}
    json.dumps(out)  # the CLI prints it

    # each set runs on its own fresh store: held-out alone gives the same figures
    alone = real.run(hashing(), queries="heldout")
    assert "pipeline" not in alone and "queries" not in alone
    for name in ("pipeline", "baseline_full_scan"):
        a, b = dict(alone["heldout"][name]), dict(held[name])
        a.pop("latency_ms_p50")
        b.pop("latency_ms_p50")
        assert a == b
    with pytest.raises(ValueError, match="queries must be one of"):
        real.run(hashing(), queries="test")


def test_calibration_never_reads_the_heldout_file(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    original = real._read

    def spy(name: str) -> dict[str, Any]:
        read.append(name)
        return original(name)

    monkeypatch.setattr(real, "_read", spy)
    calibrate.calibrate(hashing())
    assert read and set(read) == {"real.json"}


def test_tune_rejects_what_is_not_a_recall_setting() -> None:
    with pytest.raises(SystemExit) as exc:
        real.main(["--embedder", "hashing", "--tune", "answer_lift"])
    assert exc.value.code == 2
