"""Nothing half-applied, nothing lost: invalid answers, retries, races, dry runs, the guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import hashing
from tests.dream.helpers import LLMServer, answer, dump, events, openai, settings

from tideline import Memory
from tideline.dream.apply import apply_plan
from tideline.dream.context import gather
from tideline.dream.errors import DreamTooLarge, LLMOutputInvalid
from tideline.dream.plan import plan_layer
from tideline.dream.schemas import parse_answer, validate

pytestmark = pytest.mark.backends

EMPTY_COMB: dict[str, Any] = {"weights": [], "conflicts": [], "profiles": [],
                              "self_concept": [], "threads": []}


def _world(mem: Memory) -> dict[str, int]:
    mem.add_turns([{"session": "s1", "role": "user", "text": "We deploy on Tuesdays now.",
                    "timestamp": "2026-11-27T15:00:00Z", "id": "u1"},
                   {"session": "s1", "role": "assistant", "text": "Noted: Tuesdays.",
                    "timestamp": "2026-11-27T15:01:00Z", "id": "a1"}], scope="atlas")
    return {
        "friday": mem.write("We deploy atlas on Fridays.", scope="atlas").id,
        "tuesday": mem.write("Atlas deploys move to Tuesdays.", scope="atlas").id,
    }


def _comb(m: dict[str, int], **weights: int) -> dict[str, Any]:
    return {**EMPTY_COMB, "weights": [{"memory_id": m["tuesday"], "reason": "rule",
                                       **(weights or {"importance": 5})}],
            "conflicts": [{"memory_id": m["tuesday"], "other_id": m["friday"],
                           "relation": "contradicts", "reason": "Friday vs Tuesday"}],
            "profiles": [{"entity": "Mira", "facet": "fact", "content": "Runs atlas."}]}


def _solidify_bad_link() -> str:
    return answer({"memories": [{"gesture": "x", "kind": "fact", "source_links": [999_999],
                                 "importance": 3, "emotional": 1, "recurrence": 1,
                                 "unresolved": 1}]})


BAD = {
    "malformed": ("comb", "Sure! Here is the JSON: {weights: [}"),
    "truncated": ("comb", '{"weights": [{"memory_id": 2, "importance": 5, "reas'),
    "schema_violation": ("comb", answer({**EMPTY_COMB, "weights": [
        {"memory_id": 2, "importance": 7, "reason": "too much"}]})),
    "wrong_types": ("comb", answer({**EMPTY_COMB, "threads": "none"})),
    "unknown_memory": ("comb", answer({**EMPTY_COMB, "conflicts": [
        {"memory_id": 2, "other_id": 4242, "relation": "contradicts", "reason": "?"}]})),
    "unknown_turn": ("solidify", _solidify_bad_link()),
    "not_an_object": ("comb", "[1, 2, 3]"),
    "empty": ("comb", "   "),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_answers_leave_the_store_unchanged(mem: Memory, openai_server: LLMServer,
                                                   case: str) -> None:
    _world(mem)
    layer, text = BAD[case]
    openai_server.replies += [text, text]  # wrong twice: retried once, then a typed error
    before = dump(mem)
    with pytest.raises(LLMOutputInvalid) as err:
        mem.dream([layer], provider=openai(openai_server), settings=settings())
    assert dump(mem) == before
    assert err.value.exit_code == 31 and err.value.layer == layer and err.value.problems
    assert len(openai_server.requests) == 2
    calls = events(mem, "dream_call")
    assert [(c["attempt"], c["ok"]) for c in calls] == [(1, False), (2, False)]
    assert events(mem, "dream_error")[0]["code"] == "llm_output_invalid"
    assert events(mem, "dream_apply") == []


def test_truncation_reported_by_the_provider_is_invalid(mem: Memory,
                                                        openai_server: LLMServer) -> None:
    m = _world(mem)
    openai_server.finish = "length"
    openai_server.replies += [answer(_comb(m))] * 2  # complete JSON, but cut per finish_reason
    before = dump(mem)
    with pytest.raises(LLMOutputInvalid, match="truncated"):
        mem.dream(["comb"], provider=openai(openai_server), settings=settings())
    assert dump(mem) == before


def test_retry_once_with_the_problems_then_apply(mem: Memory, openai_server: LLMServer) -> None:
    m = _world(mem)
    openai_server.replies += [
        answer({**_comb(m), "weights": [{"memory_id": m["tuesday"], "importance": 9,
                                         "reason": "x"}]}),
        answer(_comb(m))]
    run = mem.dream(["comb"], provider=openai(openai_server), settings=settings())
    assert run["layers"][0]["counts"]["contradicts"] == 1
    assert mem.get(m["tuesday"], scope="atlas").importance == 5
    retry = openai_server.requests[1]["messages"]
    assert [x["role"] for x in retry] == ["system", "user", "assistant", "user"]
    assert '"importance": 9' in retry[2]["content"]
    assert "$.weights[0].importance: 9 is above the maximum 5" in retry[3]["content"]
    calls = events(mem, "dream_call")
    assert [(c["attempt"], c["ok"]) for c in calls] == [(1, False), (2, True)]
    assert run["calls"] == 2 and run["tokens_in"] == sum(c["tokens_in"] for c in calls)


def test_a_memory_written_during_the_llm_call_survives(mem: Memory, store_dir: Path,
                                                       openai_server: LLMServer) -> None:
    m = _world(mem)
    written: list[int] = []

    def slow_model(request: dict[str, Any]) -> str:
        # Another process writes while the model thinks: no lock is held meanwhile.
        with Memory.open(store_dir, embedder=hashing()) as other:
            written.append(other.write("Hotfix deployed on a Friday after all.",
                                       scope="atlas").id)
            other.update_profile("Deniz", "fact", "Reviews releases.")
        return answer(_comb(m))

    openai_server.replies.append(slow_model)
    mem.dream(["comb"], provider=openai(openai_server), settings=settings())
    assert mem.get(written[0], scope="atlas").gesture == "Hotfix deployed on a Friday after all."
    assert {p["entity"] for p in mem.profiles()} == {"Mira", "Deniz"}
    assert mem.get(m["tuesday"], scope="atlas").importance == 5


def test_a_memory_revised_between_plan_and_apply_is_skipped_as_a_conflict(
        mem: Memory, openai_server: LLMServer) -> None:
    m = _world(mem)
    openai_server.replies.append(answer(_comb(m, importance=5, unresolved=4)))
    cfg = settings()
    ctx = gather(mem._rt, "comb", cfg)
    plan = plan_layer(mem._rt, ctx, openai(openai_server), journal=lambda rec: None)
    revised = mem.revise(m["tuesday"], "Atlas deploys move to Tuesdays at 11:00.",
                         scope="atlas")
    mem.update_profile("Mira", "fact", "Leads atlas.")  # written meanwhile: version 1
    newcomer = mem.write("Deniz reviews the atlas release.", scope="atlas")
    result = apply_plan(mem._rt, plan, cfg)

    assert result["status"] == "applied"
    reasons = " | ".join(c["reason"] for c in result["conflicts"])
    assert f"memory #{m['tuesday']} was superseded since the plan" in reasons
    assert "Mira/fact changed since the plan" in reasons
    assert result["counts"]["updated"] == 0 and result["counts"]["conflicts"] == 3
    new = mem.get(revised.id, scope="atlas")
    assert (new.importance, new.unresolved) == (3, 1)  # the revision's own weights stand
    assert mem.get(newcomer.id, scope="atlas").gesture == "Deniz reviews the atlas release."
    assert mem.profiles("Mira")[0]["content"] == "Leads atlas."


def test_a_reinforced_memory_is_not_overwritten(mem: Memory, openai_server: LLMServer) -> None:
    m = _world(mem)
    openai_server.replies.append(answer(_comb(m)))
    cfg = settings()
    plan = plan_layer(mem._rt, gather(mem._rt, "comb", cfg), openai(openai_server),
                      journal=lambda rec: None)
    mem.reflect([m["tuesday"]], 1.0, scope="atlas")  # used meanwhile: version 2
    result = apply_plan(mem._rt, plan, cfg)
    assert result["counts"]["updated"] == 0
    assert "changed since the plan (v1 → v2)" in result["conflicts"][0]["reason"]
    assert mem.get(m["tuesday"], scope="atlas").reinforcements == 1


def test_dry_run_prints_the_diff_and_changes_nothing(mem: Memory,
                                                     openai_server: LLMServer) -> None:
    m = _world(mem)
    openai_server.replies.append(answer(_comb(m)))
    before = dump(mem)
    run = mem.dream(["comb"], provider=openai(openai_server), settings=settings(), dry_run=True)
    assert dump(mem) == before
    layer = run["layers"][0]
    assert layer["status"] == "dry_run" and run["dry_run"] is True
    ops = {(c["op"], c.get("id")) for c in layer["changes"]}
    assert {("weights", m["tuesday"]), ("contradicts", m["tuesday"])} <= ops
    assert events(mem, "dream_apply") == []
    assert events(mem, "dream_call")[0]["dry_run"] is True  # the tokens were spent all the same


def test_a_run_that_would_touch_too_much_stops_and_asks(mem: Memory,
                                                        openai_server: LLMServer) -> None:
    words = ["harbour", "violin", "glacier", "spreadsheet", "orchid", "tram", "lantern",
             "compiler", "meadow", "invoice"]
    ids = [mem.write(f"The {w} matters.", scope="atlas").id for w in words]
    assert len(set(ids)) == 10
    reweigh = answer({**EMPTY_COMB, "weights": [
        {"memory_id": i, "importance": 4, "reason": "r"} for i in ids[:6]]})
    cfg = settings(guard_floor=2, max_share=0.3)
    openai_server.replies += [reweigh, reweigh, reweigh]
    before = dump(mem)
    with pytest.raises(DreamTooLarge, match="would change 6 of 10 memories") as err:
        mem.dream(["comb"], provider=openai(openai_server), settings=cfg)
    assert err.value.exit_code == 33 and dump(mem) == before
    dry = mem.dream(["comb"], provider=openai(openai_server), settings=cfg, dry_run=True)
    assert dry["layers"][0]["status"] == "blocked" and dump(mem) == before
    run = mem.dream(["comb"], provider=openai(openai_server), settings=cfg, force=True)
    assert run["layers"][0]["counts"]["updated"] == 6


def test_schema_checker_and_parser() -> None:
    schema = {"type": "object", "required": ["a"], "additionalProperties": False,
              "properties": {"a": {"type": "array", "maxItems": 1,
                                   "items": {"type": "integer", "minimum": 1}},
                             "b": {"type": ["string", "null"], "enum": ["x", None]}}}
    assert validate({"a": [1], "b": None}, schema) == []
    assert validate({"a": [0, True], "c": 1, "b": "y"}, schema) == [
        "$: unknown field(s) 'c'", "$.a: at most 1 item(s), got 2",
        "$.a[0]: 0 is below the minimum 1", "$.a[1]: expected integer, got boolean",
        "$.b: 'y' is not one of ['x', None]"]
    assert parse_answer('```json\n{"a": [1]}\n```') == ({"a": [1]}, [])
    assert parse_answer('Here you go: {"a": [1]} Hope that helps.') == ({"a": [1]}, [])
    value, problems = parse_answer('{"a": [1, ')
    assert value is None and "truncated" in problems[0]
