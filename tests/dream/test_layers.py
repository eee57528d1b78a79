"""The four layers end to end: real SQLite, hashing embedder, an LLM over loopback HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.dream.helpers import (
    LLMServer,
    answer,
    anthropic,
    demo_turns,
    events,
    openai,
    settings,
)

from tideline import Memory
from tideline.dream.prompts import render_prompt

pytestmark = pytest.mark.backends


def _import_demo(mem: Memory) -> dict[str, int]:
    """The demo conversation, one project per session family; message id → turn id."""
    ids: dict[str, int] = {}
    rows = demo_turns()
    for scope in ("atlas", "orchard"):
        part = [r for r in rows if scope in r["session"]]
        res = mem.add_turns(part, scope=scope, source="demo")
        ids.update(zip((r["id"] for r in part), res.turn_ids, strict=True))
    return ids


def _user_prompt(server: LLMServer, i: int = -1) -> str:
    messages = server.requests[i].get("messages", [])
    return "\n".join(m["content"] for m in messages if m["role"] == "user")


def test_solidify_turns_a_day_into_memories_with_source_links(
        mem: Memory, openai_server: LLMServer) -> None:
    t = _import_demo(mem)
    ts = {tid: mem.store.get_turns([tid])[tid].timestamp for tid in t.values()}
    memories = [
        {"gesture": "Atlas nightly load failed: PgBouncer drops the idle connection; we open it "
                    "only after the extract (ATL-5542).",
         "context": "atlas ETL, PostgreSQL 16 on pg-atlas-01", "kind": "decision",
         "tags": ["atlas", "pgbouncer"], "entities_role": "Mira=decided; agent=diagnosed",
         "related_entities": ["Mira", "atlas"],
         "source_links": [t[f"msg-000{i}"] for i in range(1, 7)],
         "importance": 4, "emotional": 2, "recurrence": 2, "unresolved": 2},
        {"gesture": "E1234 heißt: die Lieferanten-CSV passt nicht zum Header; neue Spalten nur "
                    "noch als Warnung.", "kind": "fact", "related_entities": ["Nordfracht"],
         "source_links": [t["msg-0007"], t["msg-0008"], t["msg-0009"], t["msg-0010"]],
         "importance": 3, "emotional": 1, "recurrence": 1, "unresolved": 1},
        {"gesture": "Mira prefers concise, to-the-point answers.", "kind": "preference",
         "related_entities": ["Mira"], "source_links": [t["msg-0013"], t["msg-0014"]],
         "importance": 4, "emotional": 2, "recurrence": 3, "unresolved": 1,
         "event_time": "2026-11-20T09:27:43+01:00"},
        {"gesture": "Orchard 2.5 ships on 9 December; Lena designs the battery-optimisation "
                    "screen.", "kind": "decision", "related_entities": ["Lena", "Orchard"],
         "source_links": [t["msg-0019"], t["msg-0020"]],
         "importance": 4, "emotional": 1, "recurrence": 1, "unresolved": 2},
        {"gesture": "No Friday deploys for atlas: deploy Tuesday 1 December 11:00, Deniz "
                    "reviews.", "kind": "decision", "related_entities": ["Deniz", "atlas"],
         "source_links": [t["msg-0028"], t["msg-0029"], t["msg-0030"]],
         "importance": 4, "emotional": 2, "recurrence": 2, "unresolved": 1},
        # A rephrasing of the first: the gate folds it in instead of piling up a copy.
        {"gesture": "Atlas nightly load failed: PgBouncer drops the idle connection; we open it "
                    "only after the extract (ATL-5542)!", "kind": "decision",
         "context": "atlas ETL, PostgreSQL 16 on pg-atlas-01", "source_links": [t["msg-0012"]],
         "importance": 3, "emotional": 1, "recurrence": 1, "unresolved": 1},
    ]
    skipped = [{"source_links": [t["msg-0011"], t["msg-0033"]], "reason": "small talk"}]
    openai_server.replies.append(answer({"memories": memories, "skipped": skipped}))

    run = mem.dream("solidify", provider=openai(openai_server), settings=settings())

    prompt = _user_prompt(openai_server)
    assert f"turn {t['msg-0001']} ·" in prompt and "PgBouncer" in prompt
    assert "tideline-recalled-data" in prompt and '"source_links"' in prompt  # data + schema
    layer = run["layers"][0]
    assert layer["status"] == "applied"
    assert layer["counts"]["written"] == 5 and layer["counts"]["potentiated"] == 1
    written = [c for c in layer["changes"] if c["op"] == "write"]
    ids = [c["id"] for c in written]
    first = mem.store.get_memory(ids[0])
    assert ids[5] == ids[0]  # the rephrasing potentiated the first memory
    assert set(first.source_links) == {t[f"msg-000{i}"] for i in range(1, 7)} | {t["msg-0012"]}
    assert first.reinforcements == 1 and first.scope == "atlas" and first.kind == "decision"
    assert first.event_time == ts[t["msg-0001"]]  # when it happened, from the turns
    orchard = mem.store.get_memory(ids[3])
    assert orchard.scope == "orchard" and orchard.related_entities == ("Lena", "Orchard")
    pref = mem.store.get_memory(ids[2])
    assert pref.kind == "preference" and pref.importance == 4
    # Each memory leads back to its raw turns (the texture).
    shown = mem.show(ids[1], scope=mem.store.get_memory(ids[1]).scope)
    assert [x["text"][:5] for x in shown["turns"]] == ["Noch ", "E1234", "Ja, N", "Dann "]
    calls = events(mem, "dream_call")
    assert calls[0]["layer"] == "solidify" and calls[0]["ok"] is True
    assert calls[0]["tokens_in"] > 1000 and calls[0]["provider"] == "openai"
    applied = events(mem, "dream_apply")[0]
    assert applied["layer"] == "solidify" and applied["written"] == 5
    assert set(applied["skipped_turns"]) == {t["msg-0011"], t["msg-0033"]}
    # What was solidified is not put before the model again.
    again = render_prompt(mem, "solidify", settings=settings())
    assert f"turn {t['msg-0001']} ·" not in again


def test_solidify_runs_on_anthropic_too(mem: Memory, anthropic_server: LLMServer) -> None:
    t = _import_demo(mem)
    anthropic_server.replies.append(answer({"memories": [
        {"gesture": "iOS build fixed by regenerating the expired provisioning profile with "
                    "eas credentials.", "kind": "procedure",
         "source_links": [t["msg-0024"], t["msg-0025"], t["msg-0026"]],
         "importance": 3, "emotional": 1, "recurrence": 1, "unresolved": 1}]}))
    run = mem.dream(["solidify"], provider=anthropic(anthropic_server), settings=settings())
    mid = run["layers"][0]["changes"][0]["id"]
    stored = mem.store.get_memory(mid)
    assert stored.kind == "procedure" and stored.scope == "orchard"
    assert events(mem, "dream_call")[0]["provider"] == "anthropic"


def _deploy_memories(mem: Memory) -> dict[str, int]:
    return {
        "friday": mem.write("We deploy atlas on Fridays after the standup.", kind="decision",
                            scope="atlas", related_entities=["Mira"]).id,
        "tuesday": mem.write("No Friday deploys for atlas; next deploy Tuesday 1 December.",
                             kind="decision", scope="atlas", importance=3,
                             related_entities=["Mira", "Deniz"]).id,
        "dec2": mem.write("Orchard 2.5 is released on 2 December.", kind="decision",
                          scope="orchard", unresolved=3).id,
        "dec9": mem.write("Orchard 2.5 ships on 9 December, not earlier.", kind="decision",
                          scope="orchard").id,
    }


def test_comb_reweighs_marks_conflicts_and_updates_the_self_model(
        mem: Memory, openai_server: LLMServer) -> None:
    m = _deploy_memories(mem)
    before = {k: mem.store.get_memory(v) for k, v in m.items()}
    openai_server.replies.append(answer({
        "weights": [{"memory_id": m["tuesday"], "version": 1, "importance": 5, "recurrence": 3,
                     "reason": "a standing rule now"},
                    {"memory_id": m["dec2"], "unresolved": 1, "reason": "date settled"}],
        "conflicts": [
            {"memory_id": m["tuesday"], "other_id": m["friday"], "relation": "contradicts",
             "reason": "Friday deploys vs no Friday deploys"},
            {"memory_id": m["dec9"], "other_id": m["dec2"], "relation": "supersedes",
             "reason": "the release date moved to 9 December"}],
        "profiles": [{"entity": "Mira", "facet": "impression",
                      "content": "Decides quickly; wants short answers.", "version": 0},
                     {"entity": "Deniz", "facet": "fact", "content": "Reviews atlas releases."}],
        "self_concept": [{"facet": "terrain", "content": "ETL for atlas, mobile app Orchard."}],
        "threads": [{"title": "Is the Friday rule written down for the team?",
                     "body": "Only in chat so far.", "source_memories": [m["tuesday"]]}],
    }))
    run = mem.dream(["comb"], provider=openai(openai_server), settings=settings())

    prompt = _user_prompt(openai_server)
    assert f"#{m['friday']} v1" in prompt and "Recent dreams" in prompt
    counts = run["layers"][0]["counts"]
    assert (counts["updated"], counts["contradicts"], counts["superseded"], counts["profiles"],
            counts["self_concept"], counts["threads"], counts["conflicts"]) == (2, 1, 1, 2, 1,
                                                                                1, 0)
    tuesday = mem.store.get_memory(m["tuesday"])
    assert (tuesday.importance, tuesday.recurrence, tuesday.version) == (5, 3, 2)
    assert tuesday.weight > before["tuesday"].weight
    edges = {(e.src, e.dst, e.type) for e in mem.store.edges_of(list(m.values()))}
    assert (m["tuesday"], m["friday"], "contradicts") in edges
    assert (m["dec9"], m["dec2"], "supersedes") in edges
    old = mem.store.get_memory(m["dec2"])  # superseded, never deleted
    assert old.status == "superseded" and old.gesture == before["dec2"].gesture
    assert old.unresolved == 1  # re-weighed before it became history
    assert mem.store.get_memory(m["friday"]).status != "superseded"  # a contradiction keeps both
    recalled = mem.recall("Orchard 2.5 release date", scope="orchard", log=False)
    assert m["dec2"] not in [i.id for i in recalled.memories]
    assert {(p["entity"], p["facet"]) for p in mem.profiles()} == {("Mira", "impression"),
                                                                   ("Deniz", "fact")}
    assert mem.self_concept()[0]["content"].startswith("ETL for atlas")
    assert mem.threads()[0]["source_memories"] == [m["tuesday"]]


def test_comb_sees_recent_dreams(mem: Memory, openai_server: LLMServer) -> None:
    m = _deploy_memories(mem)
    openai_server.replies += [
        answer({"symbols": [{"symbol": "a locked door on Friday", "memory_ids": [m["friday"]]},
                            {"symbol": "a calendar that keeps moving",
                             "memory_ids": [m["tuesday"]]},
                            {"symbol": "a reviewer's red pen", "memory_ids": [m["tuesday"]]}],
                "story": "I walk toward the deploy button but every Friday the door is locked.",
                "reflection": "I keep guarding the end of the week.",
                "emotional": 3, "recurrence": 2, "unresolved": 2}),
        answer({"weights": [], "conflicts": [], "profiles": [], "self_concept": [],
                "threads": []}),
    ]
    provider = openai(openai_server)
    mem.dream(["dream"], provider=provider, settings=settings(), scope="atlas")
    mem.write("Deniz asked for a release checklist.", scope="atlas")
    mem.dream(["comb"], provider=provider, settings=settings())
    comb_prompt = _user_prompt(openai_server, 1)
    assert "every Friday the door is locked" in comb_prompt
    assert "I keep guarding the end of the week." in comb_prompt


def test_dream_importance_is_fixed_at_one(mem: Memory, openai_server: LLMServer) -> None:
    m = _deploy_memories(mem)
    mem.write("Deniz reviews every atlas release.", scope="atlas", importance=5, emotional=3)
    story = "We deploy atlas on Fridays after the standup."  # the very text of a real memory
    openai_server.replies.append(answer({
        "symbols": [{"symbol": "lighthouse", "memory_ids": [m["friday"], m["tuesday"]]},
                    {"symbol": "tide table", "memory_ids": [m["tuesday"]]},
                    {"symbol": "red ticket", "memory_ids": [m["friday"]]}],
        "story": story, "reflection": story, "importance": 5,
        "emotional": 4, "recurrence": 3, "unresolved": 5, "tags": ["deploys", "time"]}))
    run = mem.dream("dream", provider=openai(openai_server), settings=settings())

    change = run["layers"][0]["changes"][0]
    assert change["decision"] == "new"  # never folded into a real memory
    dream = mem.store.get_memory(change["id"])
    assert dream.kind == "dream" and dream.importance == 1
    assert (dream.emotional, dream.recurrence, dream.unresolved) == (4, 3, 5)
    assert dream.scope == "atlas" and dream.tags[0] == "dream"
    assert f"lighthouse (#{m['friday']}, #{m['tuesday']})" in dream.cognition_direction
    real = mem.store.get_memory(m["friday"])
    assert real.kind == "decision" and real.reinforcements == 0 and real.importance == 3
    prompt = _user_prompt(openai_server)
    assert "Orchard" not in prompt  # one dream, in the day's weightiest project (+ global)


def _wander_world(mem: Memory) -> dict[str, int]:
    return {
        "seed": mem.write("PgBouncer drops idle connections during the long Oracle extract.",
                          kind="episode", scope="atlas", importance=5, emotional=4,
                          unresolved=4, related_entities=["Mira", "atlas"]).id,
        "near": mem.write("Open the database connection only after the extract finishes.",
                          scope="atlas", importance=4, related_entities=["atlas"]).id,
        "far": mem.write("Xiaomi and Huawei kill background apps to save battery.",
                         scope="atlas", tags=["battery"]).id,
        "quiet": mem.write("Team dinner in the Südvorstadt next Thursday at 19:00.",
                           scope="atlas").id,
        "other": mem.write("Lena designs the onboarding screen.", scope="orchard").id,
    }


def test_wander_finds_a_connection(mem: Memory, openai_server: LLMServer) -> None:
    w = _wander_world(mem)
    openai_server.replies.append(answer({
        "found": True,
        "connections": [{"from_id": w["seed"], "to_id": w["far"], "strength": 0.7,
                         "insight": "Both failures are something killing an idle process to "
                                    "save resources."}],
        "reflection": {"gesture": "Idle things get killed: connections by PgBouncer, apps by "
                                  "phone vendors.", "importance": 3, "emotional": 2,
                       "recurrence": 2, "unresolved": 2, "tags": ["pattern"]},
        "note": "from pooling to phones"}))
    run = mem.dream(["wander"], provider=openai(openai_server), settings=settings())

    prompt = _user_prompt(openai_server)
    assert f"#{w['seed']} v1" in prompt.split("## Close by")[0]  # the seed is the heaviest
    assert "Lena designs" not in prompt  # another project is not terrain for this wander
    layer = run["layers"][0]
    assert layer["seed"] == w["seed"] and layer["counts"]["related"] == 3
    refl_id = next(c["id"] for c in layer["changes"] if c["op"] == "write")
    refl = mem.store.get_memory(refl_id)
    assert refl.kind == "reflection" and refl.scope == "atlas"
    edges = {(e.src, e.dst, e.type) for e in mem.store.edges_of([refl_id, w["seed"]])}
    assert {(w["seed"], w["far"], "related"), (refl_id, w["seed"], "related"),
            (refl_id, w["far"], "related")} <= edges
    assert events(mem, "dream_apply")[0]["seed"] == w["seed"]


def test_wander_may_find_nothing_and_rests_its_seed(mem: Memory,
                                                    openai_server: LLMServer) -> None:
    w = _wander_world(mem)
    openai_server.replies += [answer({"found": False, "note": "only fog tonight"}),
                              answer({"found": False})]
    provider = openai(openai_server)
    first = mem.dream(["wander"], provider=provider, settings=settings())
    assert first["layers"][0]["changes"] == [] and first["layers"][0]["status"] == "applied"
    assert any("only fog" in n for n in first["layers"][0]["notes"])
    second = mem.dream(["wander"], provider=provider, settings=settings())
    assert second["layers"][0]["seed"] != w["seed"]  # yesterday's seed rests


def test_layers_can_be_chosen_and_empty_layers_cost_nothing(
        mem: Memory, openai_server: LLMServer, monkeypatch: Any) -> None:
    provider = openai(openai_server)
    run = mem.dream(provider=provider, settings=settings())  # an empty store: nothing to do
    assert [r["status"] for r in run["layers"]] == ["empty"] * 4
    assert openai_server.requests == [] and run["tokens_in"] == 0
    _wander_world(mem)
    monkeypatch.setenv("TIDELINE_DREAM_LAYERS", "wander")
    openai_server.replies.append(answer({"found": False}))
    run = mem.dream(provider=provider)
    assert [r["layer"] for r in run["layers"]] == ["wander"]
    assert len(openai_server.requests) == 1
    assert json.loads(openai_server.requests[0]["messages"][1]["content"].split("```json")[
        -1].split("```")[0])["required"] == ["found"]
