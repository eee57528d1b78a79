"""Issue 11, schema 6: a namespace's lexical search and document frequencies on
PostgreSQL are its own.

The word and substring index rows held no namespace, so a search ranked the matches of
every namespace of the server before keeping its own, and ``document_frequencies``
counted a token's rows in all of them: a tenant's weights (and what the engine drops as
too common) moved with another tenant's rows. Now both run inside the namespace (its
column leads the GIN indexes).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.archive.helpers import rewrite
from tests.backend import schema_version
from tests.conftest import hashing
from tests.postgres.conftest import at_schema, fresh_database

from tideline import Memory
from tideline.models import LexicalQuery, MemoryRecord, Turn
from tideline.store.postgres import open_postgres
from tideline.store.postgres.schema import SCHEMA_VERSION

MARKER = hashing().marker
WORDS = ("kiln", "glaze", "otter", "harbour", "lantern", "quartz", "e4521", "zephyr")
_names = itertools.count()


def _rec(text: str) -> MemoryRecord:
    now = time.time()
    return MemoryRecord(id=0, scope="global", kind="fact", gesture=text, weight=0.5,
                        stability=7.0, last_access=now, recorded_at=now, updated_at=now)


def _turn(i: int, text: str) -> Turn:
    return Turn(id=0, session="s", turn_index=i, speaker="user", role="user", text=text,
                timestamp=1_700_000_000.0 + i, source="test", message_id=f"m-{i}",
                scope="global")


def _write(store: Any, texts: list[str], turns: bool = True) -> list[int]:
    """Memories (one ``COPY`` batch) and, with ``turns``, raw turns of ``texts``;
    returns the memories' ids in order."""
    vecs = [None] * len(texts)
    with store.bulk_load(len(texts)) as c:
        ids = store.insert_memories(c, [_rec(t) for t in texts], vecs)
    if turns:
        with store.transaction() as c:
            store.insert_turns(c, [_turn(i, t) for i, t in enumerate(texts)], vecs)
    return ids


def _view(store: Any, ids: list[int]) -> dict[str, Any]:
    """What the namespace's lexical side answers, with its ids as positions in ``ids``
    (two databases draw different ids for the same rows)."""
    where = {mid: n for n, mid in enumerate(ids)}
    out: dict[str, Any] = {}
    for word in WORDS:
        for substrings in (False, True):
            hits = store.search_memories(LexicalQuery(text=word), substrings=substrings,
                                         scopes=["global"], limit=50)
            out[f"m:{word}:{substrings}"] = [(where[i], round(r, 6)) for i, r in hits]
            turns = store.search_turns(LexicalQuery(text=word), substrings=substrings,
                                       scopes=["global"], limit=50)
            out[f"t:{word}:{substrings}"] = [round(r, 6) for _, r in turns]
    for kind in ("m", "t"):
        df, _ = store.document_frequencies(kind, list(WORDS))
        out[f"df:{kind}"] = df
    return out


@pytest.fixture
def two_databases(pg_server: Any) -> Iterator[tuple[str, str]]:
    """Two empty databases of the session's server: one for a namespace alone, one it
    shares with another namespace."""
    yield fresh_database(pg_server), fresh_database(pg_server)


texts_of = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
                    min_size=1, max_size=12)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a_texts=texts_of, b_texts=texts_of, flood=st.sampled_from(WORDS),
       b_first=st.booleans())
def test_a_namespace_answers_the_same_whatever_another_holds(
        two_databases: tuple[str, str], tmp_path: Path, a_texts: list[str],
        b_texts: list[str], flood: str, b_first: bool) -> None:
    """Namespace A's searches (memories and turns, word and substring index, ranks
    included) and its document frequencies are the same in a database of its own and
    in one where namespace B holds many rows of one of A's words; the frequencies are
    A's own rows' counts. Fails on schema 5: B's rows were counted for A."""
    solo_url, shared_url = two_databases
    a, b = f"a{next(_names)}", f"b{next(_names)}"
    many = b_texts + [f"{flood} {t}" for t in b_texts] * 20
    solo = open_postgres(solo_url, tmp_path / f"{a}-solo", a, MARKER)
    shared_a = open_postgres(shared_url, tmp_path / f"{a}-shared", a, MARKER)
    shared_b = open_postgres(shared_url, tmp_path / f"{b}-shared", b, MARKER)
    try:
        if b_first:
            _write(shared_b, many)
        ids_solo = _write(solo, a_texts)
        ids_shared = _write(shared_a, a_texts)
        if not b_first:
            _write(shared_b, many)
        alone, beside = _view(solo, ids_solo), _view(shared_a, ids_shared)
        assert beside == alone
        expected = {w: sum(w in t.split() for t in a_texts) for w in WORDS}
        assert beside["df:m"] == expected and beside["df:t"] == expected
        # The row-count estimate is A's highest id, whatever B drew after it.
        assert shared_a.document_frequencies("m", ["kiln"])[1] == max(ids_shared)
    finally:
        for store in (solo, shared_a, shared_b):
            store.close()


def test_recall_in_a_namespace_ignores_a_flood_in_another(pg_url: str, tmp_path: Path,
                                                          pg_server: Any) -> None:
    """The engine's view: B holds more rows of a word than the posting budget; A's
    recall of it (items, order and confidence) is what it is without B. On schema 5 B's
    count made the word common for A too (a different weight and search)."""
    alone_url = fresh_database(pg_server)
    facts = ["the zephyr kiln cracked at 1200 degrees", "Ana glazes pots on Sundays",
             "the harbour lantern is blue", "zephyr glaze needs two coats"]
    flood = [f"zephyr note {i} about nothing in particular" for i in range(2_100)]

    def recall(url: str, with_flood: bool) -> list[tuple[str, float]]:
        home = tmp_path / f"{with_flood}"
        with Memory.open(home / "a", database=url, embedder=hashing(), project="global",
                         namespace="tenant-a") as mem:
            for fact in facts:
                mem.remember(fact)
            if with_flood:
                other = open_postgres(url, home / "b", "tenant-b", MARKER)
                try:
                    rng = np.random.default_rng(1)
                    vecs = [(v / np.linalg.norm(v)).astype(np.float32)
                            for v in rng.standard_normal((len(flood), hashing().dim))]
                    with other.bulk_load(len(flood)) as c:
                        other.insert_memories(c, [_rec(t) for t in flood], vecs)
                finally:
                    other.close()
            packet = mem.recall("zephyr kiln", log=False)
            return [(i.text, round(i.confidence, 6)) for i in packet.items]

    assert recall(pg_url, True) == recall(alone_url, False)


def _v5_store(url: str) -> None:
    """A database at schema 5 (the lexical tables without a namespace) holding two
    namespaces' memories and turns, written as schema 5 wrote them."""
    with at_schema(url, 5, MARKER) as c:
        now = time.time()
        for ns, text in (("north", "kiln glaze"), ("south", "kiln otter"),
                         ("north", "harbour"), ("south", "quartz kiln")):
            mid = c.execute(
                "INSERT INTO memories(namespace, scope, kind, gesture, weight, stability, "
                "last_access, recorded_at, updated_at) VALUES (?, 'global', 'fact', ?, 0.5, "
                "7.0, ?, ?, ?) RETURNING id", (ns, text, now, now, now)).fetchone()[0]
            c.execute("INSERT INTO memories_lex(id, words, subs) VALUES (?, ?::tsvector, ?)",
                      (mid, " ".join(f"'{w}'" for w in text.split()), text))
            tid = c.execute(
                "INSERT INTO turns(namespace, scope, session, turn_index, speaker, role, "
                "text, ts, source, message_id, recorded_at) VALUES (?, 'global', 's', ?, "
                "'user', 'user', ?, ?, 'test', ?, ?) RETURNING id",
                (ns, mid, text, now, f"m{mid}", now)).fetchone()[0]
            c.execute("INSERT INTO turns_lex(id, words, subs) VALUES (?, ?::tsvector, ?)",
                      (tid, " ".join(f"'{w}'" for w in text.split()), text))


def test_schema_5_is_migrated_with_each_rows_namespace(pg_url: str, tmp_path: Path) -> None:
    """The migration backfills every lexical row's namespace from its memory or turn,
    makes it NOT NULL, and indexes it first; each namespace then finds and counts only
    its own rows."""
    _v5_store(pg_url)
    north = open_postgres(pg_url, tmp_path / "n", "north", MARKER)
    south = open_postgres(pg_url, tmp_path / "s", "south", MARKER)
    try:
        assert schema_version(north) == SCHEMA_VERSION
        with psycopg.connect(pg_url) as raw:
            for lex, rows in (("memories_lex", "memories"), ("turns_lex", "turns")):
                mismatched = raw.execute(
                    f"SELECT count(*) FROM {lex} l JOIN {rows} x USING (id) "  # noqa: S608
                    "WHERE l.namespace IS DISTINCT FROM x.namespace").fetchone()[0]
                held = raw.execute(f"SELECT count(*) FROM {lex}").fetchone()[0]  # noqa: S608
                assert (mismatched, held) == (0, 4), lex
                not_null = raw.execute(
                    "SELECT attnotnull FROM pg_attribute WHERE attrelid = %s::regclass AND "
                    "attname = 'namespace'", (lex,)).fetchone()[0]
                assert not_null is True
                defs = [str(d) for (d,) in raw.execute(
                    "SELECT indexdef FROM pg_indexes WHERE tablename = %s", (lex,))]
                assert any("gin (namespace, words)" in d for d in defs)
                assert any("gin (namespace, subs gin_trgm_ops)" in d for d in defs)
        for store, mine in ((north, 1), (south, 2)):
            assert store.document_frequencies("m", ["kiln"])[0] == {"kiln": mine}
            assert store.document_frequencies("t", ["kiln"])[0] == {"kiln": mine}
            assert len(store.search_memories(LexicalQuery(text="kiln"), substrings=False,
                                             scopes=["global"], limit=10)) == mine
            assert len(store.search_turns(LexicalQuery(text="kiln"), substrings=False,
                                          scopes=["global"], limit=10)) == mine
        # A memory written after the migration gets its namespace too (the gated path).
        with Memory.open(tmp_path / "m", database=pg_url, embedder=hashing(),
                         project="global", namespace="north") as mem:
            mem.remember("a kiln of the north, written after the migration")
            assert mem.store.document_frequencies("m", ["kiln"])[0] == {"kiln": 2}
    finally:
        north.close()
        south.close()


def test_doctor_finds_and_rebuilds_a_missing_lexical_row_with_its_namespace(
        pg_url: str, tmp_path: Path) -> None:
    """Doctor's parity still sees a missing row; its repair writes every row back with
    the namespace of its own memory or turn (not the namespace doctor runs in)."""
    with Memory.open(tmp_path / "a", database=pg_url, embedder=hashing(),
                     project="global", namespace="left") as left, \
            Memory.open(tmp_path / "b", database=pg_url, embedder=hashing(),
                        project="global", namespace="right") as right:
        kept = right.remember("the right kiln is cold").id
        left.remember("the left kiln is hot")
        turn = right.add_turns([{"session": "s", "role": "user", "text": "a kiln turn",
                                 "id": "t-1"}], source="jsonl")
        assert turn.inserted == 1
        with psycopg.connect(pg_url, autocommit=True) as raw:
            raw.execute("DELETE FROM memories_lex WHERE id = %s", (kept,))
            raw.execute("DELETE FROM turns_lex")
        report = left.doctor()
        assert {"parity:memories_lex", "parity:turns_lex"} <= set(report["problems"])
        fixed = left.doctor(repair=True)
        assert fixed["ok"], fixed["problems"]
        with psycopg.connect(pg_url) as raw:
            wrong = [raw.execute(
                f"SELECT count(*) FROM {lex} l JOIN {rows} x USING (id) "  # noqa: S608
                "WHERE l.namespace != x.namespace").fetchone()[0]
                for lex, rows in (("memories_lex", "memories"), ("turns_lex", "turns"))]
        assert wrong == [0, 0]
        assert right.store.document_frequencies("m", ["kiln"])[0] == {"kiln": 1}
        assert right.store.document_frequencies("t", ["kiln"])[0] == {"kiln": 1}
        assert left.store.document_frequencies("t", ["kiln"])[0] == {"kiln": 0}
        assert [i for i, _ in right.store.search_memories(
            LexicalQuery(text="kiln"), substrings=False, scopes=["global"],
            limit=5)] == [kept]


def test_an_archive_of_schema_5_imports_with_each_rows_namespace(pg_url: str,
                                                                 tmp_path: Path) -> None:
    """An archive written at schema 5 (the derived lexical rows never travel, so only
    its header's number differs) of a store of two namespaces loads onto schema 6: each
    loaded memory's and turn's index row carries its own namespace."""
    with Memory.open(tmp_path / "lite", embedder=hashing(), project="global") as lite:
        lite.remember("the default kiln glaze")
        lite.add_turns([{"session": "s", "role": "user", "text": "kiln turn of default",
                         "id": "d-1"}], source="jsonl")
        with Memory.open(tmp_path / "lite", embedder=hashing(), project="global",
                         namespace="work") as work:
            work.remember("the work kiln")
            work.remember("the work kiln again, hotter")
            work.add_turns([{"session": "s", "role": "user", "text": "kiln turn of work",
                             "id": "w-1"}], source="jsonl")
        archive = tmp_path / "all.jsonl"
        lite.export(archive, all_namespaces=True)
    assert json.loads(archive.read_text("utf-8").splitlines()[0])["schema_version"] == \
        SCHEMA_VERSION

    def at_five(header: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # An archive written at schema 5 says so in its header and its db_meta row alike.
        header["schema_version"] = 5
        for row in rows:
            if row["t"] == "db_meta" and row["r"]["key"] == "schema_version":
                row["r"]["value"] = "5"
        return rows

    rewrite(archive, at_five)
    with Memory.open(tmp_path / "pg", database=pg_url, embedder=hashing(),
                     project="global") as pg:
        loaded = pg.import_archive(archive)
        assert loaded["inserted"]["memories"] == 3
        with psycopg.connect(pg_url) as conn:
            for lex, rows in (("memories_lex", "memories"), ("turns_lex", "turns")):
                pairs = conn.execute(
                    f"SELECT l.namespace = x.namespace, count(*) FROM {lex} l "  # noqa: S608
                    f"JOIN {rows} x USING (id) GROUP BY 1").fetchall()
                assert pairs == [(True, 3 if lex == "memories_lex" else 2)], lex
        assert pg.store.document_frequencies("m", ["kiln"])[0] == {"kiln": 1}
        with Memory.open(tmp_path / "pg-work", database=pg_url, embedder=hashing(),
                         project="global", namespace="work") as work:
            assert work.store.document_frequencies("m", ["kiln"])[0] == {"kiln": 2}
            assert work.store.document_frequencies("t", ["kiln"])[0] == {"kiln": 1}
            assert work.recall("work kiln", log=False).items


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a_texts=texts_of, b_texts=texts_of)
def test_a_namespace_holding_most_rows_searches_past_the_namespace_key(
        pg_server: Any, tmp_path: Path, a_texts: list[str], b_texts: list[str]) -> None:
    """When the planner's statistics give namespace A most of a lexical table's rows,
    A's searches test each match's namespace instead of walking A's posting list in the
    GIN scan (21 ms a search at 1M rows); the answers are the same as in a database of
    its own, and B's (the small namespace, searched through the index key) too."""
    # New databases per example: the shares are of everything a database holds.
    solo_url, shared_url = fresh_database(pg_server), fresh_database(pg_server)
    a, b = f"a{next(_names)}", f"b{next(_names)}"
    many = a_texts + [f"filler {t}" for t in a_texts] * 20
    solo = open_postgres(solo_url, tmp_path / f"{a}-solo", a, MARKER)
    solo_b = open_postgres(solo_url, tmp_path / f"{b}-solo", b, MARKER)
    shared_a = open_postgres(shared_url, tmp_path / f"{a}-shared", a, MARKER)
    shared_b = open_postgres(shared_url, tmp_path / f"{b}-shared", b, MARKER)
    try:
        ids_solo = _write(solo, many)
        ids_shared = _write(shared_a, many)
        ids_b = _write(shared_b, b_texts)
        with psycopg.connect(shared_url, autocommit=True) as conn:
            conn.execute("ANALYZE memories_lex")
            conn.execute("ANALYZE turns_lex")
        for kind in ("m", "t"):
            for store, most in ((shared_a, True), (shared_b, False)):
                store.document_frequencies(kind, ["kiln"])  # reads the share
                alone, share = store._alone(kind)
                assert not alone and (share > 0.5) == most, (kind, most, share)
        assert _view(shared_a, ids_shared) == _view(solo, ids_solo)
        # B in the first database alone (where A now holds many rows: the index key).
        solo_ids_b = _write(solo_b, b_texts)
        assert _view(shared_b, ids_b) == _view(solo_b, solo_ids_b)
    finally:
        for store in (solo, solo_b, shared_a, shared_b):
            store.close()
