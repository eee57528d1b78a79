"""The store seam (issue 11, "Shape"): one factory, lexical search by terms, one event
writer, portable SQL in the shared views, and no database handle outside ``store/``."""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline.errors import BackendUnavailable
from tideline.models import LexicalQuery, MemoryRecord
from tideline.store import backend_of, open_store, peek_gate, peek_meta
from tideline.store.consolidation import ConsolidationStore
from tideline.store.sqlite import SQLiteStore

SRC = Path(__file__).resolve().parents[2] / "src" / "tideline"
SHARED_VIEWS = ("agent.py", "cognition.py", "dream.py", "events.py",
                "reporting.py", "rows.py", "view.py", "base.py", "memories.py", "turns.py",
                "namespace.py", "meta.py", "dump.py",
                *(f"consolidation/{p.name}"
                  for p in sorted((SRC / "store" / "consolidation").glob("*.py"))))


def _record(text: str, *, kind: str = "fact", scope: str = "global") -> MemoryRecord:
    now = time.time()
    return MemoryRecord(id=0, scope=scope, kind=kind, gesture=text, weight=0.5, stability=7.0,
                        last_access=now, recorded_at=now, updated_at=now)


def _insert(store: SQLiteStore, texts: list[str], **kw: str) -> list[int]:
    with store.transaction() as c:
        return [store.insert_memory(c, _record(t, **kw), None) for t in texts]


# -- the factory ----------------------------------------------------------------------------


def test_open_store_builds_the_sqlite_store_by_default(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s", "default", "hashing:x/8")
    try:
        assert isinstance(store, SQLiteStore)
        info = store.describe()
        assert info["backend"] == "sqlite"
        assert info["database"] == str(tmp_path / "s" / "tideline.db")
        assert info["schema_version"] >= 1 and info["bytes"] > 0
    finally:
        store.close()
    assert peek_meta(tmp_path / "s", "embedder") == "hashing:x/8"


@pytest.mark.parametrize("url", ["postgresql://u@localhost/db", "postgres://localhost/x"])
def test_a_postgresql_url_without_the_backend_is_backend_unavailable(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without store/postgres (or psycopg) a URL is refused with a typed error naming the
    extra, and the store directory stays untouched. The backend is made unimportable here
    (a None entry in sys.modules), so the refusal is checked where it is installed too."""
    import tideline.store

    assert backend_of(url) == "postgresql"
    monkeypatch.setitem(sys.modules, "tideline.store.postgres", None)
    monkeypatch.delattr(tideline.store, "postgres", raising=False)
    with pytest.raises(BackendUnavailable, match=r"tideline-memory\[postgres\]"):
        open_store(tmp_path / "s", "default", "hashing:x/8", database=url)
    with pytest.raises(BackendUnavailable, match="postgres extra"):
        peek_meta(tmp_path / "s", "embedder", database=url)
    with pytest.raises(BackendUnavailable, match="postgres extra"):
        peek_gate(tmp_path / "s", "default", database=url)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("url", ["mysql://localhost/x", "sqlite:///tmp/x", "nope"])
def test_an_unknown_database_url_is_backend_unavailable(tmp_path: Path, url: str) -> None:
    with pytest.raises(BackendUnavailable, match="backend"):
        open_store(tmp_path / "s", "default", "hashing:x/8", database=url)
    assert not (tmp_path / "s").exists()
    assert backend_of(None) == backend_of("") == "sqlite"


# -- lexical search takes terms ----------------------------------------------------------


def test_search_memories_takes_terms_not_fts5_syntax(mem: Memory) -> None:
    ids = _insert(mem.store, ["the loader died with errE4521x at night",
                              "whale-listen port is 7001", "nothing to see"])
    words = mem.store.search_memories(LexicalQuery(text="loader"), substrings=False,
                                      scopes=["global"], limit=5)
    assert [k for k, _ in words] == [ids[0]]
    # An identifier inside a longer token: only the substring index finds it.
    assert mem.store.search_memories(LexicalQuery(text="E4521"), substrings=False,
                                     scopes=["global"], limit=5) == []
    sub = mem.store.search_memories(LexicalQuery(text="E4521"), substrings=True,
                                    scopes=["global"], limit=5)
    assert [k for k, _ in sub] == [ids[0]]
    # FTS5 operators are plain words: no syntax error, no match-all.
    for text in ['NEAR(loader', 'body:loader', '"', '*', 'loader OR', "- ^"]:
        found = mem.store.search_memories(LexicalQuery(text=text), substrings=False,
                                          scopes=["global"], limit=5)
        assert {k for k, _ in found} <= {ids[0]}
    # Scopes and kinds filter; another scope finds nothing.
    assert mem.store.search_memories(LexicalQuery(text="loader"), substrings=False,
                                     scopes=["other"], limit=5) == []
    assert mem.store.search_memories(LexicalQuery(text="loader"), substrings=False,
                                     scopes=["global"], limit=5, kind="preference") == []


def test_search_turns_takes_terms(mem: Memory) -> None:
    mem.add_turns([{"session": "s1", "role": "user", "text": "the psycopg2-binary wheel broke"},
                   {"session": "s1", "role": "assistant", "text": "pin it then"}])
    words = mem.store.search_turns(LexicalQuery(text="wheel"), substrings=False,
                                   scopes=["global"], limit=5)
    sub = mem.store.search_turns(LexicalQuery(text="psycopg"), substrings=True,
                                 scopes=["global"], limit=5)
    assert len(words) == 1 and [k for k, _ in sub] == [k for k, _ in words]


def test_known_terms_skip_the_substring_index(mem: Memory) -> None:
    _insert(mem.store, ["otters hold hands while sleeping"])
    query = LexicalQuery(text="sleeping", known=frozenset({"sleeping"}))
    assert mem.store.search_memories(query, substrings=True, scopes=["global"], limit=5) == []
    assert mem.store.search_memories(query, substrings=False, scopes=["global"], limit=5)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60), substrings=st.booleans())
def test_any_query_text_is_a_safe_search(mem: Memory, text: str, substrings: bool) -> None:
    """Whatever the user types, lexical search answers stored ids (or nothing); it never
    raises a driver error."""
    if not mem.store.list_memories(limit=1):
        _insert(mem.store, ["alpha beta E1234 边界问题", "gamma-delta v1.2.3 ключ"])
    stored = {r.id for r in mem.store.list_memories(limit=10)}
    hits = mem.store.search_memories(LexicalQuery(text=text), substrings=substrings,
                                     scopes=["global"], limit=10)
    assert {k for k, _ in hits} <= stored
    turns = mem.store.search_turns(LexicalQuery(text=text), substrings=substrings,
                                   scopes=["global"], limit=10)
    assert turns == []


# -- one event writer ---------------------------------------------------------------------


def test_every_event_goes_through_one_writer(mem: Memory) -> None:
    first = mem.store.log_event(None, "probe", {"n": 1})
    second = mem.store.log_event(None, "probe", {"n": 2})
    assert second > first
    mid = mem.write("the kiln runs at 1200 degrees", kind="fact").id
    rid = ConsolidationStore(mem.store).record_recall(
        {"scope": "global", "tier": "test"}, [(mid, 0.9, 0.8)], "test", time.time())
    assert rid > second
    assert mem.events(kinds=["recall"], limit=1)[0]["id"] == rid
    elig = ConsolidationStore(mem.store).eligibility()
    assert [(e[1], e[2], e[3], e[6]) for e in elig] == [(rid, mid, 0, "global")]
    inserts = [p for p in SRC.rglob("*.py") if "INSERT INTO events" in p.read_text()]
    assert [p.relative_to(SRC).as_posix() for p in inserts] == ["store/events.py"]


def test_one_quiet_kinds_and_one_change_marker() -> None:
    hits = [p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")
            if "QUIET_KINDS = (" in p.read_text()]
    assert hits == ["store/events.py"]


# -- portable SQL and no database handle outside store/ -----------------------------------


def test_backends_keep_only_what_differs() -> None:
    """The row, archive and db_meta code both backends share is written once: neither
    backend's store, archive reader/loader or database object defines a shared method
    again (duplicates: issue 11 "Shape")."""
    from tideline.store.dump import ArchiveLoader, ArchiveSnapshot
    from tideline.store.meta import MetaRows
    from tideline.store.namespace import NamespaceRows
    from tideline.store.postgres import connection as pg_connection
    from tideline.store.postgres import dump as pg_dump
    from tideline.store.postgres.store import PostgresStore
    from tideline.store.postgres.turns import TurnRows as PostgresTurns
    from tideline.store.sqlite import connection as sqlite_connection
    from tideline.store.sqlite import dump as sqlite_dump

    def own(cls: type) -> set[str]:
        return {n for n, v in vars(cls).items() if callable(v) or isinstance(v, property)}

    def shared(base: type) -> set[str]:
        return {n for k in base.__mro__ if k is not object for n in own(k)}

    pairs = [(NamespaceRows, SQLiteStore), (NamespaceRows, PostgresStore),
             (NamespaceRows, PostgresTurns),
             (ArchiveSnapshot, sqlite_dump.SQLiteSnapshot),
             (ArchiveSnapshot, pg_dump.PostgresSnapshot),
             (ArchiveLoader, sqlite_dump.SQLiteLoader), (ArchiveLoader, pg_dump.PostgresLoader),
             (MetaRows, sqlite_connection.Database), (MetaRows, pg_connection.Database)]
    hooks = {n for base, _ in pairs for k in base.__mro__
             for n, v in vars(k).items() if getattr(v, "__isabstractmethod__", False)}
    again = {f"{cls.__name__}.{n}" for base, cls in pairs
             for n in (own(cls) & shared(base)) - hooks if not n.startswith("__")}
    assert again == _DIFFERS_BY_DESIGN


#: Shared methods PostgreSQL overrides because its bulk path does something else, not a
#: copy: its archive loader gathers rows and vectors into ``COPY`` batches (every method
#: that reads the store or writes db_meta flushes them first, then calls the shared one),
#: and its store loads memories through ``COPY`` with the derived indexes built at the end;
#: a gated write is one statement of the same rows (``record_gated``, the shared SQL
#: fragments), and the gate's search reads the neighbours' status in the same statement,
#: and the idempotency key with it (``keyed_nearest_live``); in the transaction the key's
#: re-check and the neighbour's row lock go in one round trip (``commit_reads``).
#: (Storing a re-embedded vector and writing the new rows' index rows are hooks of the
#: shared loader, ``_store_vector`` and ``_index_memories``/``_index_turns``, not overrides.)
_DIFFERS_BY_DESIGN = {
    "PostgresLoader._add_row", "PostgresLoader._add_checked_vector",
    "PostgresLoader._add_meta", "PostgresLoader.meta", "PostgresLoader.set_meta",
    "PostgresLoader.is_new", "PostgresLoader.finish",
    "PostgresStore.bulk_load", "PostgresStore.insert_memories",
    "PostgresStore.record_gated", "PostgresStore.nearest_live",
    "PostgresStore.keyed_nearest_live", "PostgresStore.commit_reads",
    "PostgresStore.gate_target", "PostgresStore.record_gated_at_once",
}


def test_lock_holding_writes_and_the_df_cache_are_written_once() -> None:
    """``insert_turns``, ``write_key`` (alike but for a lock) and ``_df_cache_for``
    (identical) stood in both backends' stores (``duplicates``: issue 11 "Shape"); now one
    shared copy serves both, and only the locks and the cache's lifetime differ."""
    from tideline.store.namespace import NamespaceRows
    from tideline.store.postgres.store import PostgresStore

    for name in ("insert_turns", "write_key", "_df_cache_for"):
        assert getattr(SQLiteStore, name) is getattr(PostgresStore, name), name
        assert getattr(SQLiteStore, name) is getattr(NamespaceRows, name), name
    for hook in ("_lock_session", "_hold_write_key"):
        assert getattr(SQLiteStore, hook) is not getattr(PostgresStore, hook), hook
    assert (SQLiteStore._df_cache_seconds, PostgresStore._df_cache_seconds) == (60.0, 300.0)


@pytest.mark.parametrize("name", SHARED_VIEWS)
def test_shared_views_are_portable_sql(name: str) -> None:
    """The views run the same text on SQLite and PostgreSQL (CONTRACTS.md)."""
    text = (SRC / "store" / name).read_text()
    for banned in ("OR IGNORE", "OR REPLACE", "lastrowid", "json_extract", "json_each",
                   "PRAGMA", "sqlite_master", "total_changes", "rowid", "import sqlite3",
                   "sqlite3.", "temp.", "+namespace", "+scope"):
        assert banned not in text, (name, banned)


def test_no_database_handle_or_driver_outside_the_store() -> None:
    """Nothing outside store/ reaches into ``.db`` or imports a driver. The exceptions
    read or measure something that is not a Tideline store: Hermes' own state.db
    (ingest/hermes.py), pgvector's raw index figures (bench/pgvector_scale.py), and the
    replication bench, which sets up a primary and a standby and reads their WAL positions
    (bench/pgpair.py, bench/replicas.py)."""
    foreign = {"ingest/hermes.py", "bench/pgvector_scale.py", "bench/pgpair.py",
               "bench/replicas.py"}
    leaks: list[str] = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("store/"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "db":
                leaks.append(f"{rel}:{node.lineno} .db")
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                for n in names:
                    if n.split(".")[0] in ("sqlite3", "psycopg", "psycopg_pool") \
                            and rel not in foreign:
                        leaks.append(f"{rel}:{node.lineno} import {n}")
    assert leaks == []


def test_backup_is_a_store_method(mem: Memory) -> None:
    made = mem.store.backup("probe", keep=2)
    assert made is not None and made.is_file() and made.parent.name == "backups"


def test_hermes_reader_lives_in_ingest() -> None:
    import tideline.ingest.hermes as hermes
    import tideline.store.agent as agent

    assert hasattr(hermes, "read_hermes_sessions")
    assert not hasattr(agent, "read_hermes_sessions")


def test_reopening_after_the_move_reads_an_old_store(tmp_path: Path) -> None:
    """The subpackage move changes no schema: a store written and reopened answers the same."""
    with Memory.open(tmp_path / "s", embedder=hashing(), project="global") as m:
        mid = m.write("the otter sleeps holding hands", kind="fact").id
        version = m.store.describe()["schema_version"]
    with Memory.open(tmp_path / "s", embedder=hashing(), project="global") as m:
        assert m.store.describe()["schema_version"] == version
        assert m.recall("otter", include_turns=False, log=False).items[0].id == mid
