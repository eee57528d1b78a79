"""The facade end to end on a real store, on each backend: write path, recall path, edits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.backend import Backend, rows, run

from tideline import InputTooLarge, InvalidInput, Memory, NotFound
from tideline.errors import Conflict

pytestmark = pytest.mark.backends


def test_remember_gate_decisions(mem: Memory) -> None:
    first = mem.remember("The atlas project uses PostgreSQL 16 with pgbouncer in front")
    assert first.decision == "new"
    same = mem.remember("The atlas project uses PostgreSQL 16 with pgbouncer in front!")
    assert same.decision == "potentiate" and same.id == first.id
    related = mem.remember("The atlas project uses PostgreSQL 16 and the nightly load is slow")
    assert related.decision == "link" and related.id != first.id
    other = mem.remember("Mira is vegetarian")
    assert other.decision == "new"
    rec = mem.get(first.id)
    assert rec.reinforcements == 1
    assert mem.introspect()["memories"] == 3
    edges = mem.show(related.id)["edges"]
    assert {"src": related.id, "dst": first.id, "type": "related"}.items() <= edges[0].items()


def test_retry_is_a_noop(mem: Memory) -> None:
    a = mem.remember("deploys happen on Tuesdays", idempotency_key="k1")
    b = mem.remember("deploys happen on Tuesdays", idempotency_key="k1")
    assert b.replayed and b.id == a.id and b.decision == a.decision
    assert mem.get(a.id).reinforcements == 0
    c = mem.remember("deploys happen on Tuesdays")  # default key: content hash
    d = mem.remember("deploys happen on Tuesdays")
    assert d.replayed and d.id == c.id


def test_potentiate_merges_tags_and_links(mem: Memory) -> None:
    turns = mem.add_turns([{"session": "s", "role": "user", "text": "we use Rust", "id": "m1"}])
    a = mem.remember("The team writes the engine in Rust", tags=["lang"])
    b = mem.remember("The team writes the engine in Rust.", tags=["rust"],
                     source_links=list(turns.turn_ids))
    assert b.decision == "potentiate" and b.id == a.id
    rec = mem.get(a.id)
    assert set(rec.tags) == {"lang", "rust"}
    assert rec.source_links == turns.turn_ids


def test_structured_write_roundtrip(mem: Memory) -> None:
    res = mem.write("我们讨论了边界的问题，她很坚定", context="深夜的对话",
                    cognition_direction="边界感是信任的前提", kind="narrative",
                    tags=["边界"], entities_role="A=判断+执行; B=审查",
                    related_entities=["照照"], importance=5, emotional=4, recurrence=2,
                    unresolved=3, event_time="2026-11-01T22:00:00+08:00", scope="atlas")
    rec = mem.get(res.id, scope="atlas")
    assert rec.entities_role == "A=判断+执行; B=审查"
    assert rec.weight == pytest.approx((0.35 * 5 + 0.25 * 4 + 0.25 * 2 + 0.15 * 3 - 1) / 4)
    assert rec.event_time is not None and rec.event_time < rec.recorded_at
    hit = mem.recall("边界", scope="atlas")
    assert not hit.abstained and hit.items[0].id == res.id
    assert hit.items[0].source == "lexical"


def test_exact_tokens_found(mem: Memory) -> None:
    ids = {
        "E1234": mem.remember("loader fails with error E1234 when columns move").id,
        "whale-listen": mem.remember("the whale-listen service streams hydrophone audio").id,
        "psycopg2": mem.remember("pip install psycopg2-binary fixed the import").id,
    }
    for _ in range(20):
        mem.remember(f"unrelated filler memory number {_} about gardening and tea")
    for token, mid in ids.items():
        packet = mem.recall(token)
        assert not packet.abstained, token
        assert packet.items[0].id == mid, token


def test_scope_rule(mem: Memory) -> None:
    a = mem.remember("atlas uses PostgreSQL", scope="atlas")
    o = mem.remember("orchard uses SQLite", scope="orchard")
    g = mem.remember("Mira prefers concise answers")
    seen = {i.id for i in mem.recall("uses PostgreSQL SQLite concise", scope="atlas",
                                     abstain=False).items}
    assert a.id in seen and o.id not in seen
    seen = {i.id for i in mem.recall("concise answers", scope="orchard").items}
    assert g.id in seen and a.id not in seen


def test_filters_kind_and_time(mem: Memory) -> None:
    old = mem.remember("the kiln reached 1200 degrees", kind="episode",
                       event_time="2020-05-01T10:00:00Z")
    new = mem.remember("the kiln reached 1250 degrees today", kind="fact")
    assert {i.id for i in mem.recall("kiln degrees", kind="episode").items} == {old.id}
    since = mem.recall("kiln degrees", since="2024-01-01T00:00:00Z")
    assert {i.id for i in since.items} == {new.id}
    until = mem.recall("kiln degrees", until="2021-01-01", include_turns=False)
    assert {i.id for i in until.items} == {old.id}


def test_abstains_on_noise(mem: Memory) -> None:
    mem.remember("Mira lives in Leipzig")
    strict = mem.recall("boiling point of tungsten", abstain=True)
    assert strict.abstained and strict.items == ()
    loose = mem.recall("boiling point of tungsten")
    assert loose.abstained and all(i.confidence < 0.5 for i in loose.items)
    assert not mem.recall("Mira Leipzig").abstained


def test_turns_idempotent_and_recalled(mem: Memory) -> None:
    rows = [
        {"session": "2026-11-20", "speaker": "Mira", "role": "user",
         "text": "The nightly load died with psycopg2.OperationalError again",
         "timestamp": "2026-11-20T09:14:03+01:00", "id": "msg-1"},
        {"session": "2026-11-20", "speaker": "agent", "role": "assistant",
         "text": "PgBouncer drops idle connections", "timestamp": 1763626500, "id": "msg-2"},
    ]
    first = mem.add_turns(rows, scope="atlas", source="chat")
    again = mem.add_turns(rows, scope="atlas", source="chat")
    assert (first.inserted, again.inserted, again.skipped) == (2, 0, 2)
    packet = mem.recall("psycopg2", scope="atlas")
    turn = packet.texture[0]
    assert turn.id == "msg-1" and turn.session == "2026-11-20" and turn.speaker == "Mira"
    assert turn.turn_index == 0 and turn.timestamp.startswith("2026-11-20T08:14")
    assert mem.recall("psycopg2", scope="orchard").texture == ()
    d = packet.to_dict()["items"][0]
    assert d["id"] == "msg-1" and d["session"] == "2026-11-20"


def test_reflect_revise_forget(mem: Memory) -> None:
    a = mem.remember("the staging server is called kestrel")
    before = mem.get(a.id)
    mem.reflect([a.id], 1.0)
    assert mem.get(a.id).stability > before.stability
    mem.reflect([a.id], -1.0)
    assert mem.get(a.id).strength < 1.0
    rev = mem.revise(a.id, "the staging server is called osprey")
    assert mem.get(a.id).status == "superseded"
    assert mem.get(rev.id).supersedes == a.id
    assert [h["id"] for h in mem.show(rev.id)["history"]] == [a.id]
    assert all(i.id != a.id for i in mem.recall("staging server", abstain=False).items)
    with pytest.raises(Conflict):
        mem.revise(a.id, "again")
    mem.forget(rev.id)
    with pytest.raises(NotFound):
        mem.get(rev.id)
    assert mem.recall("osprey", abstain=True).items == ()
    assert all(i.id != rev.id for i in mem.recall("osprey").items)
    assert mem.events(kinds=["forget"])[0]["memory_id"] == rev.id
    with pytest.raises(NotFound):
        mem.forget(rev.id)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"gesture": "nul \x00 byte"}, InvalidInput),
        ({"gesture": "lone \ud800 surrogate"}, InvalidInput),
        ({"gesture": ""}, InvalidInput),
        ({"gesture": "x" * 20_000}, InputTooLarge),
        ({"gesture": "ok", "importance": 6}, InvalidInput),
        ({"gesture": "ok", "emotional": 0}, InvalidInput),
        ({"gesture": "ok", "kind": "nonsense"}, InvalidInput),
        ({"gesture": "ok", "scope": "bad\nscope"}, InvalidInput),
        ({"gesture": "ok", "tags": ["t"] * 100}, InputTooLarge),
        ({"gesture": "ok", "source_links": [999]}, InvalidInput),
        ({"gesture": "ok", "event_time": "yesterday-ish"}, InvalidInput),
    ],
)
def test_bad_input_is_typed_and_writes_nothing(mem: Memory, kwargs: dict, error: type) -> None:
    keep = mem.remember("a memory that must survive bad input")
    with pytest.raises(error):
        mem.write(**kwargs)
    stats = mem.introspect()
    assert stats["memories"] == 1 and mem.get(keep.id).gesture.startswith("a memory")
    assert mem.doctor()["ok"]


def test_bad_turn_batch_writes_nothing(mem: Memory) -> None:
    rows = [{"session": "s", "role": "user", "text": "fine", "id": "a"},
            {"session": "s", "role": "user", "text": "", "id": "b"}]
    with pytest.raises(InvalidInput, match="turn 1"):
        mem.add_turns(rows)
    assert mem.introspect()["turns"] == 0


def test_unicode_roundtrip(mem: Memory) -> None:
    texts = ["Ünïcödé café — naïve", "Привет, мир: ёжик", "边界感 🌊 潮痕", "e\u0301 composed",
             "RTL \u202eevil\u202c text", "tab\tand\nnewline"]
    for t in texts:
        res = mem.remember(t)
        import unicodedata

        assert mem.get(res.id).gesture == unicodedata.normalize("NFC", t).strip()


def test_secrets_are_redacted(mem: Memory) -> None:
    res = mem.remember("the key is sk-proj-abcdefghijklmnopqrstuvwxyz123456 keep it")
    assert "sk-proj" not in mem.get(res.id).gesture
    assert "[REDACTED:openai-key]" in mem.get(res.id).gesture


def test_recall_validates(mem: Memory) -> None:
    with pytest.raises(InputTooLarge):
        mem.recall("x", limit=10_000)
    with pytest.raises(InvalidInput):
        mem.recall("x", limit=0)
    assert mem.recall("   ").abstained


def test_namespaces_are_separate(store_dir: Path, backend: Backend) -> None:
    from tests.conftest import hashing

    with backend.open(store_dir, namespace="a", embedder=hashing()) as a:
        a.remember("alpha secret plan for the garden")
    with backend.open(store_dir, namespace="b", embedder=hashing()) as b:
        backend.check(b)
        assert b.recall("alpha secret plan", abstain=False).items == ()
        assert b.introspect()["memories"] == 0


def test_journal_and_attention(mem: Memory) -> None:
    a = mem.remember("Leipzig has good vegetarian food")
    mem.recall("vegetarian food Leipzig")
    kinds = [e["kind"] for e in mem.events(limit=10)]
    assert "recall" in kinds and "write" in kinds
    assert (a.id,) in rows(mem, "SELECT memory_id FROM attention_log")


def test_retention_is_in_the_score(mem: Memory) -> None:
    fresh = mem.remember("the blue notebook holds the kiln recipes")
    stale = mem.remember("kiln recipes also sit in the red notebook on the shelf")
    # Not a correction (which would rank the newer statement first whatever its retention).
    assert stale.decision != "correct"
    run(mem, "UPDATE memories SET last_access = ?, stability = 1 WHERE id = ?",
        (time.time() - 60 * 86400, stale.id))
    items = mem.recall("notebook kiln recipes").items
    order = [i.id for i in items]
    assert order.index(fresh.id) < order.index(stale.id)


def test_gate_never_merges_away_a_new_detail(mem: Memory) -> None:
    from tideline.write.path import new_details

    a = mem.remember("The atlas deploy happens on Tuesday at 11:00")
    b = mem.remember("The atlas deploy happens on Thursday at 11:00")
    # Another day in the same sentence: a correction, kept beside the old one.
    assert b.decision == "correct" and b.id != a.id
    assert b.edge == {"type": "updates", "src": b.id, "dst": a.id}
    c = mem.remember("the atlas deploy happens on tuesday at 11:00.")
    assert c.decision == "potentiate" and c.id == a.id
    assert new_details("Ticket ATL-5542 is open", "Ticket ATL-5521 is open") == ["ATL-5542"]
    assert new_details("Mira likes tea", "mira likes tea") == []
