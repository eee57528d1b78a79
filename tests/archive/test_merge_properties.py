"""Issue 28 §2.4, property: for any two stores a sequence of operations can build, A's
archive imported into a non-empty B leaves every reference of B resolving, adds exactly
A's rows that B does not hold, and a second import adds nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.archive.helpers import open_store
from tests.archive.integrity import counts, dangling
from tests.archive.test_properties import _apply, ops
from tests.backend import rows, run

from tideline.archive.exchange import archive_digest


def _turn_keys(mem) -> set[tuple[str, str, str, str]]:
    return {tuple(map(str, r)) for r in rows(  # type: ignore[misc]
        mem, "SELECT namespace, scope, source, message_id FROM turns")}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a_plan=ops, b_plan=ops, sleep_a=st.booleans(), sleep_b=st.booleans(),
       shared=st.lists(st.text(st.characters(whitelist_categories=("L", "N")), min_size=1,
                               max_size=20), max_size=3))
def test_merge_property(a_plan, b_plan, sleep_a: bool, sleep_b: bool,
                        shared: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with open_store(root / "A") as a, open_store(root / "B") as b:
            for mem, plan, sleep in ((a, a_plan, sleep_a), (b, b_plan, sleep_b)):
                # the same transcript imported into both: its turns are one set of turns
                if shared:
                    mem.add_turns([{"session": "shared", "role": "user", "text": t,
                                    "id": f"id-{i}"} for i, t in enumerate(shared)],
                                  scope="atlas", source="jsonl")
                _apply(mem, plan)
                if sleep:
                    mem.sleep(force=True)
            b.remember("B always holds something of its own")
            a.export(root / "a.jsonl")
            before, broken = counts(b), set(dangling(b))
            a_count, a_turns, b_turns = counts(a), _turn_keys(a), _turn_keys(b)
            res = b.import_archive(root / "a.jsonl")
            assert res["merged"] is True
            assert set(dangling(b)) <= broken  # B's own forgotten ids stay as they were
            after = counts(b)
            assert after["memories"] == before["memories"] + a_count["memories"]
            assert _turn_keys(b) == a_turns | b_turns
            assert after["turns"] == before["turns"] + len(a_turns - b_turns)
            assert after["threads"] == before["threads"] + a_count["threads"]
            assert len(res["ids"]["memories"]) == a_count["memories"]
            assert len(set(res["ids"]["memories"].values())) == a_count["memories"]
            # every memory of A is in B under its mapped id, with its text
            a_text = dict(rows(a, "SELECT id, gesture FROM memories"))
            b_text = dict(rows(b, "SELECT id, gesture FROM memories"))
            assert all(b_text[res["ids"]["memories"][str(k)]] == v for k, v in a_text.items())
            digest = archive_digest(b.store)
            run(b, "DELETE FROM db_meta WHERE key LIKE 'archive:%'")
            again = b.import_archive(root / "a.jsonl")
            assert again["inserted"] == {}, again["inserted"]
            assert archive_digest(b.store) == digest
