"""`memorize` with `turns`: a retried call replays the turn writes too (issue 9, item 2)."""

from __future__ import annotations

from typing import Any

from tests.mcp.conftest import run_with

from mcp import Client
from tideline import Memory

TURNS = [{"role": "user", "text": "why does the nightly load fail?"},
         {"role": "assistant", "text": "the DB connection opens before the extract"},
         {"role": "user", "text": "ok"}]


def _memorize(key: str | None, text: str = "open the DB connection only after the extract"
              ) -> dict[str, Any]:
    args: dict[str, Any] = {"text": text, "turns": TURNS, "session": "night"}
    if key is not None:
        args["idempotency_key"] = key
    return args


def test_the_same_idempotency_key_twice_stores_the_turns_once(atlas_mem: Memory) -> None:
    """Reproducer (issue 9, item 2): `memorize` with `turns` and the same
    `idempotency_key` twice replayed the memory but inserted the turns again."""

    async def body(c: Client) -> list[Any]:
        return [await c.call_tool("memorize", _memorize("k-1")) for _ in range(2)]

    first, again = (r.structured_content for r in run_with(atlas_mem, body))
    assert first["turns"]["inserted"] == 3
    assert again["turns"]["inserted"] == 0 and again["turns"]["skipped"] == 3
    assert again["memory"]["replayed"] is True
    assert again["memory"]["id"] == first["memory"]["id"]
    assert atlas_mem.introspect()["turns"] == 3
    assert [t.turn_index for t in atlas_mem.store.session_turns("night")] == [0, 1, 2]
    assert len(atlas_mem.get(first["memory"]["id"]).source_links) == 3


def test_a_retry_after_the_turns_were_stored_links_them(atlas_mem: Memory) -> None:
    """A call that stored its turns and died before its memory: the retry links them."""
    stored = atlas_mem.add_turns(TURNS, scope="atlas", source="mcp", session="night",
                                 idempotency_key="k-2")

    async def body(c: Client) -> Any:
        return await c.call_tool("memorize", _memorize("k-2"))

    res = run_with(atlas_mem, body).structured_content
    assert res["turns"]["inserted"] == 0
    links = atlas_mem.get(res["memory"]["id"]).source_links
    assert sorted(links) == sorted(stored.turn_ids)


def test_without_a_key_the_same_turns_are_not_stored_twice(atlas_mem: Memory) -> None:
    async def body(c: Client) -> list[Any]:
        return [await c.call_tool("memorize", {"turns": TURNS, "session": "night"})
                for _ in range(2)]

    first, again = (r.structured_content for r in run_with(atlas_mem, body))
    assert (first["turns"]["inserted"], again["turns"]["inserted"]) == (3, 0)
    assert atlas_mem.introspect()["turns"] == 3


def test_turns_handed_over_get_passage_vectors_of_the_users_long_turn(atlas_mem: Memory) -> None:
    """Issue 29: a user's long request in a session with an assistant is stored with the
    vectors of its passages too (the default best-passage ranking), the assistant's not."""
    aside = ("I'm looking for some recipe ideas for using up ripe tomatoes from the market. "
             "I have been cooking a lot more at home lately with my friends and family. "
             "By the way, I just replaced my old kitchen faucet with a touchless one.")
    turns = [{"role": "user", "text": aside},
             {"role": "assistant", "text": f"{aside} Here is a salsa and a sauce to try."}]

    async def body(c: Client) -> Any:
        return await c.call_tool("memorize", {"turns": turns, "session": "kitchen"})

    assert run_with(atlas_mem, body).structured_content["turns"]["inserted"] == 2
    stored = atlas_mem.store.session_turns("kitchen")
    got = atlas_mem.store.sentence_vectors(stored, atlas_mem.embedder.dim)
    assert [t.role for t in stored if t.id in got] == ["user"]
    assert len(next(iter(got.values()))) == 2
