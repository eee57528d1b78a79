"""The report: JSON contents, text rendering, HTML escaping."""

from __future__ import annotations

import json

import pytest
from tests.sleep.conftest import age

from tideline import Memory
from tideline.report.html import render_html
from tideline.report.text import render_text

pytestmark = pytest.mark.backends


def activity(mem: Memory) -> dict[str, int]:
    a = mem.remember("atlas runs PostgreSQL 16 on pg-atlas-01", tags=["atlas"]).id
    mem.remember("atlas runs PostgreSQL 16 on pg-atlas-01.")  # potentiate
    b = mem.write("the loader broke on a new CSV column, error E1234", kind="episode",
                  scope="atlas", tags=["atlas"], entities_role="Mira=审查; Bo=执行").id
    c = mem.remember("the office plant was watered on monday").id
    for q in ("atlas database", "E1234 loader", "atlas database host", "zzqx unknown thing"):
        mem.recall(q, scope="atlas")
    mem.reflect([a], 1.0)
    mem.store.log_event(None, "hook_error", {"hook": "stop", "error": "boom"})
    mem.store.log_event(None, "dream_call", {"tokens_in": 1200, "tokens_out": 300})
    mem.store.log_event(None, "dream_call", {"tokens_in": 800, "tokens_out": 200})
    age(mem, [c], 25)
    mem.sleep()
    return {"a": a, "b": b, "c": c}


def test_report_json_contents(mem: Memory) -> None:
    ids = activity(mem)
    r = mem.report(days=7, all_scopes=True)  # the operator's view: "atlas" and global
    json.dumps(r)
    assert r["totals"]["memories"] == 3 and r["totals"]["by_kind"] == {"fact": 2, "episode": 1}
    assert r["growth"]["cumulative_by_kind"]["fact"][-1] == 2
    assert r["gate"]["totals"] == {"new": 3, "link": 0, "correct": 0, "potentiate": 1}
    assert r["recall"]["count"] == 4 and r["recall"]["abstained"] >= 1  # the nonsense query
    assert r["recall"]["abstention_share"] == r["recall"]["abstained"] / 4
    assert 0 < r["recall"]["p50_ms"] <= r["recall"]["p95_ms"]
    assert r["feedback"]["reflects"] == 1 and r["feedback"]["reflect_recall_ratio"] == 0.25
    assert r["feedback"]["warning"] is None
    reinforced = {m["id"]: m for m in r["reinforced"]["in_window"]}
    assert reinforced[ids["a"]]["rewarded"] == 1.0 and reinforced[ids["a"]]["potentiated"] == 1
    assert r["fading"]["lowest_retention"][0]["id"] == ids["c"]
    assert r["fading"]["lowest_retention"][0]["retention"] < 0.15
    assert len(r["retention"]["snapshots"]) == 1 and r["retention"]["current"]["memories"] == 3
    assert "never reinforced (episodic)" in r["retention"]["model"]
    assert r["sleeps"]["count"] == 1 and r["sleeps"]["recent"][0]["steps_ms"]["plasticity"] >= 0
    assert r["associations"]["co_recall_edges"] >= 1
    assert r["hooks"]["errors"] == 1 and r["hooks"]["recent"][0]["error"] == "boom"
    assert r["dream"]["tokens_in"] == 2000 and r["dream"]["tokens_out"] == 500
    assert r["dream"]["calls"] == 2
    assert r["attention"]["total_hits"] > 0 and r["clusters"]["points"]
    assert r["entities"]["nodes"][0]["entity"] in ("Mira", "Bo")
    assert any("hook error" in w for w in r["warnings"])
    assert r["unindexed"]["memories_without_source_links"] == 3


def test_low_reflect_ratio_warns(mem: Memory) -> None:
    mem.remember("the cache is Redis 7")
    for _ in range(12):
        mem.recall("which cache")
    r = mem.report(all_scopes=True)
    assert r["feedback"]["reflect_recall_ratio"] == 0.0
    assert "reflect/recall ratio is 0.000 (< 0.1)" in r["feedback"]["warning"]
    assert r["feedback"]["warning"] in r["warnings"]
    assert any("no sleep has run yet" in w for w in r["warnings"])


def test_text_report_has_every_section(mem: Memory) -> None:
    activity(mem)
    text = render_text(mem.report(all_scopes=True))
    for heading in ("MEMORY", "NOVELTY GATE", "RECALL", "DYNAMICS", "SLEEP", "ATTENTION",
                    "HOOKS, DREAM, CONTEXT", "WARNINGS"):
        assert heading in text
    assert "potentiate 1" in text and "tokens in 2000" in text


def test_html_escapes_stored_text(mem: Memory) -> None:
    evil = mem.remember('</script><script>alert("x")</script> {{script}} '
                        '<img src=x onerror=alert(1)>', tags=["evil"])
    mem.recall("script alert")
    mem.reflect([evil.id], 1.0)  # listed as reinforced: its text is on the page
    mem.sleep()
    page = render_html(mem.report(all_scopes=True))
    assert page.startswith("<!DOCTYPE html>") and page.count("<script") == 2
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert page.count("small interactivity on top of the inline SVG") == 1  # never re-expanded
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_one_heatmap_groups_by_tag_until_sleep_clusters(mem: Memory) -> None:
    """Issue 11 "one attention heatmap": the MCP tool used a second, tag-grouped heatmap
    (`Memory.attention_summary`, found through a getattr fallback) whenever sleep had not
    clustered yet; `Memory.attention_heatmap` itself then answered with no grouping at
    all. Now the one heatmap carries the tag grouping itself until clusters exist."""
    mem.remember("atlas nightly job exports CSV", tags=["csv"])
    mem.remember("kafka keeps seven days", tags=["kafka"])
    mem.recall("atlas nightly CSV export")
    for heat in (mem.attention_heatmap(), mem.attention_heatmap(all_scopes=True, days=1)):
        assert heat["clusters_total"] == 0
        by_tag = heat["by_tag"]
        assert by_tag["hits"] >= 1 and {g["label"] for g in by_tag["lit"]} == {"csv"}
        assert {g["label"] for g in by_tag["deserts"]} == {"kafka"}
        json.dumps(heat)
    assert not hasattr(mem, "attention_summary")


def test_report_read_in_a_project_keeps_to_its_scopes(mem: Memory) -> None:
    """Issue 33 item 3: read outside project "atlas", the report names none of its
    memories, clusters, topics or entities; its counts stay in the time series."""
    ids = activity(mem)
    whole = mem.report(days=7, all_scopes=True)
    r = mem.report(days=7)  # the fixture's project: global only
    text = json.dumps(r, ensure_ascii=False)
    assert "E1234" not in text and "loader" not in text  # the atlas memory's words
    assert "Mira" not in text and r["entities"]["nodes"] == []
    assert "atlas" in json.dumps(whole, ensure_ascii=False)
    assert r["totals"]["memories"] == 2 and r["totals"]["by_scope"] == {"global": 2}
    assert all(p["scope"] == "global" for p in r["clusters"]["points"])
    shown = {i["id"] for part in r["reinforced"].values() for i in part}
    assert ids["b"] not in shown and ids["c"] in {i["id"] for i in
                                                   r["fading"]["lowest_retention"]}
    assert r["gate"] == whole["gate"] and r["recall"]["count"] == whole["recall"]["count"]
    assert r["hooks"]["errors"] == 0 and whole["hooks"]["errors"] == 1
