"""Scan for unindexed context (tracks A and B) and the source_links backfill."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tideline import Memory
from tideline.sleep.scan import Chunk, ScanResult, scan_unindexed

T0 = 1_790_000_000.0


def turns(session: str, start: float, texts: list[str], gap_s: float = 60) -> list[dict]:
    return [{"session": session, "role": "user" if i % 2 == 0 else "assistant", "text": t,
             "timestamp": start + i * gap_s, "id": f"{session}-{start + i * gap_s}"}
            for i, t in enumerate(texts)]


def test_scan_interface_is_the_documented_one(mem: Memory) -> None:
    res = scan_unindexed(mem.store, gap_minutes=30, max_turns=400)
    assert isinstance(res, ScanResult) and res.track_a == [] and res.track_b == []
    assert [f.name for f in dataclasses.fields(ScanResult)] == ["track_a", "track_b", "markdown"]
    assert [f.name for f in dataclasses.fields(Chunk)] == ["session", "scope", "start", "end",
                                                          "turns"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.markdown = "x"  # type: ignore[misc]
    assert "Track A" in res.markdown and "Track B" in res.markdown


def test_tracks_chunks_and_markdown(mem: Memory) -> None:
    linked = mem.add_turns(turns("s0", T0 - 86_400, ["we picked Redis for the cache"]))
    mem.write("the team picked Redis for the cache", source_links=list(linked.turn_ids),
              scope="global")
    plain = mem.remember("the user likes short answers").id
    mem.add_turns(turns("s1", T0, ["first question about the loader", "answer one",
                                   "follow-up on E1234", "answer two"]))
    mem.add_turns(turns("s1", T0 + 3 * 3600, ["back after lunch: the CSV again", "fixed"]))
    mem.add_turns(turns("s2", T0 + 600, ["<b>other</b> session > quoted"]), scope="atlas")
    res = mem.scan_unindexed(gap_minutes=30)
    assert [m.id for m in res.track_a] == [plain]
    shape = [(c.session, c.scope, len(c.turns)) for c in res.track_b]
    assert shape == [("s1", "global", 4), ("s2", "atlas", 1), ("s1", "global", 2)]
    first = res.track_b[0]
    assert first.start == T0 and first.end == T0 + 180
    all_ids = {t.id for c in res.track_b for t in c.turns}
    assert not set(linked.turn_ids) & all_ids
    md = res.markdown
    assert f"memory #{plain}" in md and "Chunk 3" in md
    assert f"turn {first.turns[0].id} ·" in md and "> first question about the loader" in md
    assert "> <b>other</b> session > quoted" in md
    limited = mem.scan_unindexed(max_turns=2)
    assert sum(len(c.turns) for c in limited.track_b) == 2
    assert limited.track_b[-1].turns[-1].text == "fixed"  # the newest are kept
    atlas = mem.scan_unindexed(scope="atlas", all_scopes=False)
    assert {c.scope for c in atlas.track_b} == {"atlas", "global"}  # the project + global
    orchard = mem.scan_unindexed(scope="orchard", all_scopes=False)
    assert {c.scope for c in orchard.track_b} == {"global"}


def test_a_plain_remember_does_not_hide_the_conversation(mem: Memory) -> None:
    mem.add_turns(turns("s1", time.time() - 600, ["we should rotate the api keys monthly"]))
    mem.remember("unrelated: the office plant needs water")
    res = mem.scan_unindexed()
    assert sum(len(c.turns) for c in res.track_b) == 1
    assert mem.sleep(only="scan")["steps"]["scan"]["track_b_turns"] == 1


def test_backfill_links_the_matching_turns(mem: Memory) -> None:
    now = time.time()
    imp = mem.add_turns(turns("s1", now - 1800, [
        "the nightly export to the warehouse failed with error E4711",
        "i will bump the export timeout to 30 minutes",
        "what should we order for lunch",
    ]))
    a = mem.write("nightly warehouse export failed with E4711; timeout bumped to 30 minutes").id
    b = mem.write("a completely different topic about tennis rackets").id
    res = mem.sleep(only="backfill")["steps"]["backfill"]
    assert res["linked"] == 1
    links = mem.get(a).source_links
    assert set(links) == set(imp.turn_ids[:2])  # the lunch question is not linked
    assert mem.get(b).source_links == ()
    # Incremental: a turn imported later is matched against the old memory.
    later = mem.add_turns(turns("s9", now - 60, ["tennis rackets: a completely different topic"]))
    res = mem.sleep(only="backfill")["steps"]["backfill"]
    assert res["examined"] == 1 and mem.get(b).source_links == tuple(later.turn_ids)
    assert mem.get(a).source_links == links  # never overwritten


def test_backfill_respects_the_time_window_and_scope(mem: Memory) -> None:
    mem.add_turns(turns("old", time.time() - 10 * 86_400, ["the nightly export failed again"]))
    mem.add_turns(turns("other", time.time() - 60, ["the nightly export failed again"]),
                  scope="orchard")
    a = mem.write("the nightly export failed again").id
    mem.sleep(only="backfill")
    assert mem.get(a).source_links == ()
