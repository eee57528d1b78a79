"""A turn's id comes from what identifies it; its index is its place in the session.

Issue 9, items 2 and 3: id-less turns were hashed with their index, and the index was
read outside the write transaction.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend, run
from tests.conftest import hashing

from tideline import Memory
from tideline.errors import InvalidInput, StoreError

pytestmark = pytest.mark.backends


def _write(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def _places(mem: Memory, session: str) -> list[tuple[int, str, str, float | None]]:
    return [(t.turn_index, t.speaker, t.text, t.timestamp)
            for t in mem.store.session_turns(session, limit=10_000)]


def _count(mem: Memory) -> int:
    return int(mem.introspect()["turns"])


CHAT = [{"session": "s1", "role": "user", "text": "the loader died with E1234"},
        {"session": "s1", "role": "assistant", "text": "ok"},
        {"session": "s1", "role": "user", "text": "retry it after the extract"}]


def test_reimporting_an_id_less_file_is_a_no_op(mem: Memory, tmp_path: Path) -> None:
    """Reproducer (issue 9, item 2): the same 3-line JSONL without ids imported twice
    stored 6 turns; it stores 3."""
    file = _write(tmp_path / "chat.jsonl", CHAT)
    first = mem.import_jsonl(file)
    again = mem.import_jsonl(file)
    assert (first["inserted"], again["inserted"], again["skipped"]) == (3, 0, 3)
    assert _count(mem) == 3
    assert mem.add_turns(CHAT, source="jsonl").inserted == 0  # the API derives the same ids
    assert [p[0] for p in _places(mem, "s1")] == [0, 1, 2]


def test_identical_turns_are_kept_apart_and_each_matched_again(mem: Memory,
                                                              tmp_path: Path) -> None:
    """Two genuine "ok" (same speaker, time and text) are two turns, matched on re-import."""
    rows = [{"session": "s", "role": "user", "text": "ok", "timestamp": 1_700_000_000},
            {"session": "s", "role": "user", "text": "ok", "timestamp": 1_700_000_000},
            {"session": "s", "role": "assistant", "text": "ok"}]
    file = _write(tmp_path / "ok.jsonl", rows)
    assert mem.import_jsonl(file)["inserted"] == 3
    assert mem.import_jsonl(file)["inserted"] == 0
    assert mem.add_turns(rows[:2], source="jsonl").inserted == 0
    assert [p[1:3] for p in _places(mem, "s")] == [("user", "ok"), ("user", "ok"),
                                                   ("assistant", "ok")]
    ids = {t.message_id for t in mem.store.session_turns("s")}
    assert len(ids) == 3 and all(i.startswith("auto-") for i in ids)


def test_ids_depend_on_source_session_speaker_time_and_text(mem: Memory) -> None:
    base = {"session": "s", "speaker": "Ana", "text": "ok", "timestamp": 1_700_000_000}
    variants = [base, base | {"session": "t"}, base | {"speaker": "Ben"},
                base | {"timestamp": 1_700_000_001}, base | {"text": "ok!"}]
    assert mem.add_turns(variants).inserted == 5
    assert mem.add_turns([base], source="other").inserted == 1
    assert mem.add_turns(variants).inserted == 0


def test_a_resumed_import_places_turns_contiguously(mem: Memory, tmp_path: Path) -> None:
    """Reproducer (issue 9, item 3): import part.jsonl (id 1), then full.jsonl (ids 1, 2, 3):
    indexes were 0, 2, 3; they are 0, 1, 2."""
    full = [{"session": "s", "role": "user", "text": f"line {i}", "id": str(i)}
            for i in (1, 2, 3)]
    mem.import_jsonl(_write(tmp_path / "part.jsonl", full[:1]))
    res = mem.import_jsonl(_write(tmp_path / "full.jsonl", full))
    assert (res["inserted"], res["skipped"]) == (2, 1)
    assert [(p[0], p[2]) for p in _places(mem, "s")] == [(0, "line 1"), (1, "line 2"),
                                                         (2, "line 3")]


def test_an_explicit_turn_index_is_checked_then_ignored(mem: Memory) -> None:
    """The store places every turn; a given turn_index (even 2**63 - 1) never collides or
    overflows, and a malformed or out-of-range one (2**63 raised OverflowError) is refused."""
    res = mem.add_turns([{"session": "s", "text": "a", "turn_index": 2**63 - 1},
                         {"session": "s", "text": "b", "turn_index": 0}])
    assert res.inserted == 2
    assert [(p[0], p[2]) for p in _places(mem, "s")] == [(0, "a"), (1, "b")]
    for bad in (-1, 1.5, True, "3", 2**63):
        with pytest.raises(InvalidInput, match="turn_index"):
            mem.add_turns([{"session": "s", "text": "c", "turn_index": bad}])
    assert _count(mem) == 2


def test_the_store_refuses_two_turns_in_one_place(mem: Memory) -> None:
    mem.add_turns([{"session": "s", "text": "a"}])
    with pytest.raises(StoreError):
        run(mem, "INSERT INTO turns(namespace, scope, session, turn_index, speaker, role, "
                 "text, source, message_id, recorded_at) "
                 "VALUES ('default', 'global', 's', 0, 'x', 'user', 'b', 'api', 'b', 0)")


def test_batch_ids_name_every_turn_of_the_batch(mem: Memory) -> None:
    first = mem.add_turns(CHAT[:2])
    both = mem.add_turns(CHAT)
    assert both.inserted == 1 and len(both.turn_ids) == 1
    assert both.batch_ids[:2] == first.turn_ids and both.batch_ids[2] == both.turn_ids[0]


def test_the_idempotency_key_names_id_less_turns(mem: Memory) -> None:
    once = mem.add_turns(CHAT, idempotency_key="k1")
    assert once.inserted == 3
    assert mem.add_turns(CHAT, idempotency_key="k1").inserted == 0
    assert mem.add_turns(CHAT, idempotency_key="k2").inserted == 3  # another call's turns


_SEQ = count()
_turn = st.fixed_dictionaries({
    "session": st.sampled_from(["a", "b"]),
    "role": st.sampled_from(["user", "assistant"]),
    "text": st.sampled_from(["ok", "yes", "E1234 again", "hello"]),
    "timestamp": st.sampled_from([None, 1_700_000_000, 1_700_000_060]),
})


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(turns=st.lists(_turn, min_size=1, max_size=30), cut=st.integers(0, 30),
       batch=st.integers(1, 8))
def test_prefix_then_whole_file_then_again_stores_each_turn_once_in_order(
    backend: Backend, turns: list[dict[str, Any]], cut: int, batch: int,
) -> None:
    """Any id-less file, imported in part (a killed or earlier import), then whole, then
    whole again, in any batch size: every turn stored once, in file order, indexes
    0..n-1 per session."""
    tag = f"x{next(_SEQ)}-"
    rows = [t | {"session": tag + t["session"]} for t in turns]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        part = _write(root / "part.jsonl", rows[:cut])
        whole = _write(root / "whole.jsonl", rows)
        with backend.open(root / "store", url=backend.fresh(), embedder=hashing()) as mem:
            mem.import_jsonl(part, batch=batch)
            mem.import_jsonl(whole, batch=batch)
            assert mem.import_jsonl(whole, batch=batch)["inserted"] == 0
            for session in {r["session"] for r in rows}:
                want = [(r["role"], r["text"], r["timestamp"]) for r in rows
                        if r["session"] == session]
                got = _places(mem, session)
                assert [p[0] for p in got] == list(range(len(want)))
                assert [(p[1], p[2], None if p[3] is None else int(p[3])) for p in got] == want
