"""Schema 7: a SQLite file keeps each vector space's size in ``vector_counts``, by triggers.

The host's vector index checks its size against the store after every catch-up; the
count used to be ``count(*)`` over the space, a walk of every vector on each gated
write. Whatever changes ``vectors`` — a write, a forget, an import of turns, a re-embed,
or SQL that bypasses the change log — the kept count must equal the real one, so the
index still notices a vector deleted behind the log's back.

SQLite only (tests/backend.py): PostgreSQL's schema 7 is a no-op.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import rows, run, schema_version, sqlite_file
from tests.conftest import hashing

from tideline import Memory
from tideline.embed import HashingEmbedder
from tideline.store.sqlite import schema

WORDS = ("harbour", "anchor", "kiln", "otter", "heron", "comet", "violin", "ticket",
         "marathon", "replica", "broker", "snapshot")

OPS = st.lists(st.one_of(
    st.tuples(st.just("remember"), st.lists(st.sampled_from(WORDS), min_size=2, max_size=5)),
    st.tuples(st.just("forget"), st.integers(0, 30)),
    st.tuples(st.just("turns"), st.integers(1, 4)),
    st.tuples(st.just("bypass_delete"), st.integers(0, 30)),
    st.tuples(st.just("rewrite"), st.integers(0, 30)),
    st.tuples(st.just("reembed"), st.just(0)),
), min_size=1, max_size=14)


def _kept(mem: Memory) -> dict[str, int]:
    return {s: n for s, n in rows(mem, "SELECT space, n FROM vector_counts") if n}


def _real(mem: Memory) -> dict[str, int]:
    return dict(rows(mem, "SELECT space, count(*) FROM vectors GROUP BY space"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_the_kept_count_is_the_real_count_after_any_change(tmp_path_factory, ops) -> None:
    home = tmp_path_factory.mktemp("counts")
    turns = 0
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        for op, arg in ops:
            if op == "remember":
                mem.remember(" ".join(arg) + f" {len(_real(mem))}")
            elif op == "forget":
                ids = [r[0] for r in rows(mem, "SELECT id FROM memories WHERE status = 'active' "
                                               "ORDER BY id")]
                if ids:
                    mem.forget(ids[arg % len(ids)])
            elif op == "turns":
                mem.add_turns([{"session": "s", "role": "user", "text": f"turn {turns + i} kiln"}
                               for i in range(arg)], source="jsonl")
                turns += arg
            elif op == "bypass_delete":  # behind the change log's back
                keys = rows(mem, "SELECT id FROM vectors ORDER BY id")
                if keys:
                    run(mem, "DELETE FROM vectors WHERE id = ?", (keys[arg % len(keys)][0],))
            elif op == "rewrite":  # the store's own upsert of a vector it holds
                held = rows(mem, "SELECT space, key, v FROM vectors ORDER BY id")
                if held:
                    space, key, v = held[arg % len(held)]
                    run(mem, "INSERT INTO vectors(space, key, v) VALUES (?, ?, ?) "
                             "ON CONFLICT(space, key) DO UPDATE SET v = excluded.v",
                        (space, key, v))
            else:
                mem.reembed(HashingEmbedder())
            assert _kept(mem) == _real(mem), op


def test_an_older_file_gets_its_counts_at_open(tmp_path: Path) -> None:
    """A file of schema 6 (no counts, no triggers) is counted once when opened."""
    home = tmp_path / "store"
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        for i in range(12):
            mem.remember(f"the {WORDS[i]} note number {i}")
        mem.add_turns([{"session": "s", "role": "user", "text": f"turn {i}"} for i in range(5)],
                      source="jsonl")
        real = _real(mem)
    assert sum(real.values()) == 17
    with sqlite_file(home / "tideline.db") as db:
        for trigger in ("vectors_count_insert", "vectors_count_delete", "vectors_count_move"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE vector_counts")
        db.execute("UPDATE db_meta SET value = '6' WHERE key = 'schema_version'")
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        assert schema_version(mem) == schema.SCHEMA_VERSION >= 7
        assert _kept(mem) == real
        mem.remember("one more after the migration")
        assert _kept(mem) == _real(mem)
        assert mem.recall("the kiln note number 2").items
