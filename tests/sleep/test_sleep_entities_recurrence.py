"""Entity graph from entities_role (feeding profiles); recurrence, weights, anti-inflation."""

from __future__ import annotations

from tideline import Memory
from tideline.models import compute_weight
from tideline.sleep.entities import ROLE_PREFIX, WITH_PREFIX, build_graph, parse_roles
from tideline.sleep.recurrence import recurrence_from_count


def test_parse_roles_variants() -> None:
    assert parse_roles("A=判断+执行; B=审查") == {"A": ("判断", "执行"), "B": ("审查",)}
    assert parse_roles("照照＝审查／架构；甜心=设计") == {"照照": ("审查", "架构"),
                                                      "甜心": ("设计",)}
    assert parse_roles(" Mira = review + deploy ;; Bo\nCarla=ops|Dan=") == {
        "Mira": ("review", "deploy"), "Bo": (), "Carla": ("ops",), "Dan": ()}
    assert parse_roles("") == {}


def test_graph_counts_cooccurrence_and_role_pairs() -> None:
    nodes, edges = build_graph([
        (1, "A=判断+执行; B=审查", "[]"),
        (2, "A=判断+执行; B=审查", '["C"]'),
        (3, "B=审查; C=设计", "[]"),
    ])
    by = {n["entity"]: n for n in nodes}
    assert by["B"]["mentions"] == 3 and by["B"]["roles"] == {"审查": 3}
    assert by["C"]["roles"] == {"设计": 1} and by["C"]["memories"] == [2, 3]
    e = {(x["a"], x["b"]): x for x in edges}
    assert e[("A", "B")]["count"] == 2
    assert e[("A", "B")]["role_pairs"] == {"判断+执行 ↔ 审查": 2}
    assert e[("B", "C")]["role_pairs"] == {"审查 ↔ ·": 1, "审查 ↔ 设计": 1}


def test_entities_step_feeds_profiles_once_and_keeps_other_lines(mem: Memory) -> None:
    mem.update_profile("照照", "fact", "Joined the project in spring.")
    for i, what in enumerate(["schema change", "api design", "release plan", "perf fix"]):
        mem.write(f"照照 reviewed the {what} while 甜心 decided and shipped it",
                  entities_role="甜心=判断+执行; 照照=审查", tags=[f"t{i}"])
    res = mem.sleep(only="entities")["steps"]["entities"]
    assert res["entities"] == 2 and res["edges"] == 1 and res["profiles_written"] == 4
    prof = {(p["entity"], p["facet"]): p for p in mem.profiles()}
    fact = prof[("照照", "fact")]["content"].splitlines()
    assert fact[0] == "Joined the project in spring."
    assert fact[1] == ROLE_PREFIX + "审查 ×4 (100 %) — in 4 memories"
    rel = prof[("照照", "relationship")]["content"]
    assert rel == WITH_PREFIX + "甜心 ×4 (审查 ↔ 判断+执行 ×4)"
    other = prof[("甜心", "relationship")]["content"]
    assert other == WITH_PREFIX + "照照 ×4 (判断+执行 ↔ 审查 ×4)"
    versions = {k: p["version"] for k, p in prof.items()}
    again = mem.sleep(only="entities")["steps"]["entities"]
    assert again["profiles_written"] == 0 and again["profiles_unchanged"] == 4
    assert {(p["entity"], p["facet"]): p["version"] for p in mem.profiles()} == versions
    graph = mem.entity_graph()
    assert graph["edges"][0]["count"] == 4


def test_recurrence_mapping() -> None:
    steps = (1, 3, 6, 11)
    assert [recurrence_from_count(n, steps) for n in (0, 1, 2, 3, 5, 6, 10, 11, 500)] == \
        [1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_recurrence_refresh_recomputes_weights(mem: Memory) -> None:
    lonely = mem.write("a note nobody else shares a tag with", tags=["solo"]).id
    shared = [mem.write(f"deploy incident {w} needed a rollback", tags=["deploy", w]).id
              for w in ("alpha", "bravo", "charlie", "delta")]
    untagged = mem.write("a memory without tags keeps its recurrence", recurrence=4).id
    res = mem.sleep(only="recurrence")["steps"]["recurrence"]
    assert res["recurrence_changed"] == 4
    assert mem.get(lonely).recurrence == 1
    for mid in shared:
        rec = mem.get(mid)
        assert rec.recurrence == 3  # 3 others share "deploy"
        assert rec.weight == compute_weight(rec.importance, rec.emotional, 3, rec.unresolved)
    assert mem.get(untagged).recurrence == 4
    assert mem.sleep(only="recurrence")["steps"]["recurrence"]["weights_updated"] == 0


def test_anti_inflation_normalises_recent_weights_once(mem: Memory) -> None:
    ids = [mem.write(f"crucial event number {w}", importance=5, emotional=5, unresolved=5,
                     recurrence=5).id for w in ("one", "two", "three", "four", "five")]
    before = [mem.get(i).weight for i in ids]
    assert sum(before) / len(before) > 0.7
    res = mem.sleep(only="recurrence")["steps"]["recurrence"]
    infl = res["inflation"]
    assert infl["normalised"] is True and infl["mean"] > 0.7
    after = [mem.get(i).weight for i in ids]
    assert abs(sum(after) / len(after) - mem.config.sleep.inflation_target) < 1e-3
    again = mem.sleep(only="recurrence")["steps"]["recurrence"]
    assert again["inflation"]["normalised"] is False and again["weights_updated"] == 0
