"""The PostgreSQL connection: ? translation, transactions, typed errors, migrations."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.backend import schema_version

from tideline.errors import InvalidInput, SchemaTooNew, StoreBusy, StoreError
from tideline.store.dialect import POSTGRES
from tideline.store.postgres import open_postgres
from tideline.store.postgres.connection import Database
from tideline.store.postgres.schema import SCHEMA_VERSION
from tideline.store.postgres.session import translate
from tideline.store.postgres.urls import redact_url

MARKER = "hashing:hashing-v1/384"


def test_translate_placeholders_outside_quotes_only() -> None:
    assert translate("SELECT ? FROM t WHERE a = ? AND b LIKE 'x?%'") == \
        "SELECT %s FROM t WHERE a = %s AND b LIKE 'x?%%'"
    assert translate("SELECT 'it''s ?', \"col?\" , ?") == "SELECT 'it''s ?', \"col?\" , %s"
    assert translate("SELECT 5 % 2") == "SELECT 5 %% 2"


@given(st.text(alphabet=st.sampled_from("?%'\"ab s"), max_size=30))
def test_translate_keeps_everything_but_placeholders_and_percents(sql: str) -> None:
    out = translate(sql)
    back = out.replace("%%", "\x00").replace("%s", "?").replace("\x00", "%")
    assert back == sql
    assert out.replace("%%", "").count("%") == out.replace("%%", "").count("%s")


def test_shared_view_sql_runs_with_params_and_literals(tmp_path: Path, pg_url: str) -> None:
    db = Database(pg_url, tmp_path)
    try:
        with db.read() as c:
            assert c.dialect is POSTGRES
            row = c.execute("SELECT ?, '50%', 'who?', ? + 1", ("a", 41)).fetchone()
            assert tuple(row) == ("a", "50%", "who?", 42)
            row = c.execute(f"SELECT {POSTGRES.json_text('?', 'k')}", ('{"k": "v"}',))
            assert row.fetchone()[0] == "v"
    finally:
        db.close()


def test_write_is_one_transaction_nested_use_joins_errors_roll_back(tmp_path: Path,
                                                                    pg_url: str) -> None:
    db = Database(pg_url, tmp_path)
    try:
        with pytest.raises(StoreError):
            with db.write() as c:
                c.execute("INSERT INTO db_meta(key, value) VALUES ('a', '1')")
                with db.write() as inner:
                    assert inner is c
                    inner.execute("INSERT INTO db_meta(key, value) VALUES ('b', '2')")
                c.execute("INSERT INTO db_meta(key, value) VALUES ('a', 'again')")
        assert db.get_meta("a") is None and db.get_meta("b") is None
        db.set_meta("a", "1")
        assert db.get_meta("a") == "1"
    finally:
        db.close()


@pytest.mark.parametrize("failure", ["unread", "unread-late", "read", "python"])
def test_a_failed_write_ends_its_own_transaction(tmp_path: Path, pg_url: str, failure: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """BEGIN and COMMIT travel with the write's statements (no wait of their own): a
    write that fails — a statement whose result nobody read, one that was read, or
    the caller's own error — is rolled back by the write itself, nothing of it is
    kept, and the connection goes back to the pool idle (the pool would warn about
    rolling one back) and works."""
    caplog.set_level(logging.WARNING)
    db = Database(pg_url, tmp_path, pool_size=1)
    try:
        with pytest.raises(StoreError if failure != "python" else RuntimeError):
            with db.write() as c:
                c.execute("INSERT INTO db_meta(key, value) VALUES ('a', '1')")
                if failure.startswith("unread"):
                    c.execute("INSERT INTO db_meta(key, value) VALUES ('a', 'again')")
                    if failure == "unread-late":
                        # The failure reaches the client before COMMIT is sent (on a
                        # loaded machine it does without the pause): COMMIT raises it.
                        time.sleep(0.3)
                elif failure == "read":
                    c.execute("INSERT INTO db_meta(key, value) VALUES ('a', 'again') "
                              "RETURNING key").fetchone()
                else:
                    raise RuntimeError("the caller's own error")
        assert db.get_meta("a") is None
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        db.set_meta("b", "2")
        assert db.get_meta("b") == "2"
    finally:
        db.close()


def test_nul_in_text_is_invalid_input_and_nothing_is_written(tmp_path: Path,
                                                             pg_url: str) -> None:
    db = Database(pg_url, tmp_path)
    try:
        with pytest.raises(InvalidInput, match="NUL"):
            with db.write() as c:
                c.execute("INSERT INTO db_meta(key, value) VALUES ('ok', 'fine')")
                c.execute("INSERT INTO db_meta(key, value) VALUES (?, ?)", ("bad", "a\x00b"))
        assert db.get_meta("ok") is None
    finally:
        db.close()


def test_a_lock_held_too_long_is_store_busy(tmp_path: Path, pg_url: str) -> None:
    holder = Database(pg_url, tmp_path / "a")
    waiter = Database(pg_url, tmp_path / "b", lock_timeout_ms=200)
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.write() as c:
            # rowcount syncs the pipeline: the row (and its lock) is on the server now,
            # not only queued, before the waiter is let go (a race under load).
            assert c.execute("INSERT INTO db_meta(key, value) VALUES ('row', '1')").rowcount == 1
            held.set()
            done.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        held.wait(30)
        with pytest.raises(StoreBusy):
            with waiter.write() as c:
                c.execute("INSERT INTO db_meta(key, value) VALUES ('row', '2')")
    finally:
        done.set()
        thread.join()
        holder.close()
        waiter.close()
    assert Database(pg_url, tmp_path / "c").get_meta("row") == "1"


def test_hosts_starting_at_once_migrate_once(tmp_path: Path, pg_url: str) -> None:
    errors: list[BaseException] = []
    versions: list[int] = []

    def start(i: int) -> None:
        try:
            store = open_postgres(pg_url, tmp_path / f"h{i}", "default", MARKER)
            versions.append(schema_version(store))
            store.close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and versions == [SCHEMA_VERSION] * 4


def test_a_newer_schema_is_refused(tmp_path: Path, pg_url: str) -> None:
    open_postgres(pg_url, tmp_path, "default", MARKER).close()
    db = Database(pg_url, tmp_path)
    db.set_meta("schema_version", "99")
    db.close()
    with pytest.raises(SchemaTooNew):
        open_postgres(pg_url, tmp_path, "default", MARKER)


def test_urls_are_shown_without_their_password() -> None:
    assert redact_url("postgresql://ann:s3cret@db.example:5433/mem") == \
        "postgresql://ann:***@db.example:5433/mem"
    assert redact_url("postgresql://ann@db/mem") == "postgresql://ann@db/mem"
