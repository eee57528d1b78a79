"""Identity is decided on the raw value and includes the project (issue 33 items 1 and 2).

Item 1: secret redaction ran on idempotency keys, message ids and session ids before
identity was decided, so two different ids that both matched a rule became one
``[REDACTED:…]``: 7 keyed writes acknowledged, 3 stored; 7 turns, 1 stored; two sessions
merged. Item 2: a turn was known by (source, message id) alone, so a turn of project
alpha whose id project bravo held was skipped (its text lost) and alpha was handed
bravo's turn id.

Both backends (tests/backend.py); the SQLite store of schema 7 is migrated in place.
"""

from __future__ import annotations

import json
import sqlite3
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend, rows, schema_version
from tests.conftest import hashing

from tideline import Memory
from tideline.secrets import find_secrets, redact_secrets
from tideline.store.sqlite import schema

pytestmark = pytest.mark.backends

_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits
# Credentials of formats the redactor knows: every one is redacted to the same label
# per vendor, which is what merged distinct ids before.
secret_ids = st.one_of(
    st.text(_ALNUM, min_size=30, max_size=30).map(lambda s: f"sk-proj-{s}"),
    st.text(_ALNUM, min_size=36, max_size=36).map(lambda s: f"ghp_{s}"),
    st.text(_UPPER, min_size=16, max_size=16).map(lambda s: f"AKIA{s}"),
    st.integers(0, 10**6).map(lambda n: f"sk-learn-pipeline-run-2024-11-20-{n:07d}"),
).filter(lambda s: redact_secrets(s)[0] != s)
plain_ids = st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=20)
any_ids = st.one_of(secret_ids, plain_ids)
_SETTINGS = settings(max_examples=8, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


def _stored_text(mem: Memory) -> str:
    """Every id column the store keeps for keys, turns and sessions, as one text."""
    keys = rows(mem, "SELECT key FROM write_keys")
    turns = rows(mem, "SELECT session, message_id FROM turns")
    return "\n".join(str(v) for r in [*keys, *turns] for v in r)


@settings(max_examples=300, deadline=None)
@given(a=any_ids, b=any_ids, padding=st.sampled_from(["", " ", "\n"]))
def test_stored_identity_is_injective_stable_and_holds_no_secret(a: str, b: str,
                                                                 padding: str) -> None:
    """Two raw ids keep two stored forms; the same raw id (as sent again, or after a
    round through the store) keeps its form; no stored form holds a secret."""
    from tideline.write.identity import clean_identity, stored_identity

    sa, sb = stored_identity(a), stored_identity(b)
    assert (sa == sb) == (a == b)
    assert stored_identity(sa) == sa  # idempotent: re-checking a stored form changes nothing
    assert find_secrets(sa) == []
    assert (sa == a) == (redact_secrets(a)[0] == a)  # ids without a secret are kept as given
    assert clean_identity(padding + a + padding, "id", 200) == sa


@_SETTINGS
@given(keys=st.lists(any_ids, min_size=2, max_size=7, unique=True))
def test_keyed_writes_with_secret_like_keys_are_never_merged(
        tmp_path_factory: pytest.TempPathFactory, backend: Backend, keys: list[str]) -> None:
    """Item 1's first reproducer as a property: n distinct keys, n writes stored, each
    retry replays its own write; no key is stored in clear."""
    home = tmp_path_factory.mktemp("keys")
    with backend.open(home, url=backend.fresh(), embedder=hashing(), project="global") as mem:
        first = {}
        for n, key in enumerate(keys):
            res = mem.remember(f"pipeline run {n} found {n * 7 + 3} drifted features {key[-4:]}",
                               idempotency_key=key)
            assert not res.replayed, (key, keys)
            first[key] = res.id
        for key in reversed(keys):
            again = mem.remember("a retry whose text differs", idempotency_key=key)
            assert (again.replayed, again.id) == (True, first[key])
        stored = _stored_text(mem)
        assert not [k for k in keys if k in stored and redact_secrets(k)[0] != k]


@_SETTINGS
@given(ids=st.lists(any_ids, min_size=2, max_size=7, unique=True),
       sessions=st.lists(secret_ids, min_size=2, max_size=3, unique=True),
       secrets=st.lists(secret_ids, min_size=2, max_size=3, unique=True))
def test_turns_and_sessions_with_secret_like_ids_stay_apart(
        tmp_path_factory: pytest.TempPathFactory, backend: Backend, ids: list[str],
        sessions: list[str], secrets: list[str]) -> None:
    """Item 1's second reproducer: n turns with distinct secret-like message ids are n
    turns, sessions named by distinct secrets stay distinct, id-less turns that differ
    only in the credential they quote are two turns; a re-import stores nothing."""
    home = tmp_path_factory.mktemp("turns")
    with backend.open(home, url=backend.fresh(), embedder=hashing(), project="global") as mem:
        batch = [{"session": sessions[n % len(sessions)], "role": "user",
                  "text": f"turn {n}", "id": mid} for n, mid in enumerate(ids)]
        quoted = [{"session": "q", "role": "user", "text": f"the key is {s}"} for s in secrets]
        first = mem.add_turns(batch + quoted)
        assert first.inserted == len(batch) + len(quoted)
        again = mem.add_turns(batch + quoted)
        assert (again.inserted, again.batch_ids) == (0, first.batch_ids)
        # The CLI's path: a JSONL file of the same turns under another source.
        chat = home / "ids.jsonl"
        chat.write_text("".join(json.dumps(t) + "\n" for t in batch), "utf-8")
        assert mem.import_jsonl(chat)["inserted"] == len(batch)
        assert mem.import_jsonl(chat)["inserted"] == 0
        stored_sessions = {r[0] for r in rows(mem, "SELECT DISTINCT session FROM turns "
                                                   "WHERE session != 'q'")}
        assert len(stored_sessions) == len({t["session"] for t in batch})
        got = mem.turns(list(first.batch_ids))
        assert sorted(t.text for t in got) == sorted(
            [t["text"] for t in batch] + [redact_secrets(t["text"])[0] for t in quoted])
        stored = _stored_text(mem)
        assert not [s for s in [*ids, *sessions, *secrets]
                    if s in stored and redact_secrets(s)[0] != s]


_turn_op = st.tuples(
    st.sampled_from(["alpha", "bravo", "global"]),
    st.integers(0, 3),  # the message id, from a small pool every project uses
    st.sampled_from(["add", "jsonl", "capture"]),
)


@_SETTINGS
@given(ops=st.lists(_turn_op, min_size=1, max_size=12))
def test_turn_identity_includes_the_project(tmp_path_factory: pytest.TempPathFactory,
                                            backend: Backend, ops: list) -> None:
    """Item 2 as a property: whatever another project stored under the same (source, id),
    each project's turn is stored once, its own text kept, and every id handed back is
    one of the caller's own turns (no existence oracle)."""
    home = tmp_path_factory.mktemp("proj")
    with backend.open(home, url=backend.fresh(), embedder=hashing(), project="global") as mem:
        model: dict[tuple[str, int], tuple[int, str]] = {}  # (project, id) → (turn id, text)
        for n, (project, pick, via) in enumerate(ops):
            text = f"{project} says {n}"
            turn = {"session": "s", "role": "user", "text": text, "id": f"m{pick}"}
            expect_new = (project, pick) not in model
            if via == "add":
                res = mem.add_turns([turn], scope=project, source="jsonl")
                inserted, handed = res.inserted, list(res.batch_ids)
            elif via == "jsonl":
                chat = home / f"c{n}.jsonl"
                chat.write_text(json.dumps(turn) + "\n", "utf-8")
                got = mem.import_jsonl(chat, scope=project)
                inserted, handed = got["inserted"], list(got["turn_ids"] or [])
            else:
                got = mem.capture_turns([turn], source="jsonl", scope=project)
                inserted, handed = got["inserted"], list(got["turn_ids"])
            assert inserted == int(expect_new), (project, pick, via, model)
            if expect_new:
                (tid,) = handed
                model[(project, pick)] = (tid, text)
            for tid in handed:  # only the caller's own turn, never another project's
                assert tid == model[(project, pick)][0]
        for (project, _pick), (tid, text) in model.items():
            (own,) = mem.turns([tid], scope=project)
            assert (own.scope, own.text) == (project, text)
        assert mem.introspect(all_scopes=True)["turns"] == len(model)


def test_identities_survive_export_and_import(tmp_path: Path, backend: Backend) -> None:
    """A retry after the store moved (export, then import elsewhere) still replays: the
    stored form of an id is the same in every store."""
    key, mid, session = ("sk-proj-" + "a1" * 15, "ghp_" + "B" * 36, "AKIA" + "C" * 16)
    archive = tmp_path / "out.jsonl"
    with backend.open(tmp_path / "a", embedder=hashing(), project="global") as mem:
        other = mem.remember("an unrelated fact about kilns", idempotency_key=key[:-1] + "9")
        written = mem.remember("the nightly run found three drifted features",
                               idempotency_key=key)
        assert not written.replayed and written.id != other.id
        turns = mem.add_turns([{"session": session, "text": "first", "id": mid}])
        mem.export(archive)
    with backend.open(tmp_path / "b", url=backend.fresh(), embedder=hashing(),
                      project="global") as moved:
        moved.import_archive(archive)
        again = moved.remember("the nightly run found three drifted features",
                               idempotency_key=key)
        assert (again.replayed, again.id) == (True, written.id)
        re = moved.add_turns([{"session": session, "text": "first", "id": mid}])
        assert (re.inserted, re.batch_ids) == (0, turns.batch_ids)


def test_a_schema_7_store_takes_the_scoped_turn_identity(tmp_path: Path) -> None:
    """An existing SQLite file of schema 7 migrates in place: its turns stay, and a
    project may then store a message id another project holds. (SQLite only: it rewrites
    an SQLite file into schema 7's shape; PostgreSQL's constraint swap runs on every test
    database the suite creates.)"""
    home = tmp_path / "old"
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        mem.add_turns([{"session": "s", "text": "bravo's", "id": "m1"}], scope="bravo")
    db = sqlite3.connect(home / "tideline.db")
    with db:  # the turns table as schema 7 made it, as a store written before the fix
        db.execute("UPDATE db_meta SET value = '7' WHERE key = 'schema_version'")
        db.execute("ALTER TABLE turns RENAME TO turns_new")
        db.execute("DROP INDEX turns_place")
        db.execute("DROP INDEX turns_ts")
        db.execute("""CREATE TABLE turns (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL,
            scope TEXT NOT NULL, session TEXT NOT NULL, turn_index INTEGER NOT NULL,
            speaker TEXT NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, ts REAL,
            source TEXT NOT NULL, message_id TEXT NOT NULL, recorded_at REAL NOT NULL,
            UNIQUE (namespace, source, message_id))""")
        db.execute("INSERT INTO turns SELECT * FROM turns_new")
        db.execute("DROP TABLE turns_new")
        db.execute("CREATE INDEX turns_ts ON turns(namespace, scope, ts)")
        db.execute("CREATE UNIQUE INDEX turns_place ON turns(namespace, session, turn_index)")
    db.close()
    with Memory.open(home, embedder=hashing(), project="global") as mem:
        assert schema_version(mem) == schema.SCHEMA_VERSION
        res = mem.add_turns([{"session": "s", "text": "alpha's", "id": "m1"}], scope="alpha")
        assert res.inserted == 1
        assert [t.text for t in mem.turns(list(res.batch_ids), scope="alpha")] == ["alpha's"]
        assert mem.add_turns([{"session": "s", "text": "x", "id": "m1"}],
                             scope="bravo").inserted == 0
        assert mem.introspect(all_scopes=True)["turns"] == 2
        assert mem.doctor()["ok"]
