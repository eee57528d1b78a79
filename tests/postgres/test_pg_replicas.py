"""Issue 31: a primary and a hot standby. Multi-host URLs, read-only verbs on the standby,
reading one's own writes there, and a standby never written to.

The pair is real (``pg_pair``: the wheel's initdb, pg_basebackup -R, two loopback
ports, synchronous replication); the standby is delayed with
``recovery_min_apply_delay`` where the test needs it behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline.errors import PrimaryUnavailable
from tideline.store.postgres.replicas import hosts_of, route_urls, target_attrs


def _open(pair: Any, name: str, tmp_path: Path, *, read: bool = True,
          wait_ms: int = 2000) -> Memory:
    return Memory.open(tmp_path / "local", embedder=hashing(), project="global",
                       database=pair.write_url(name),
                       config=None if not read else _config(pair, name, tmp_path, wait_ms))


def _config(pair: Any, name: str, tmp_path: Path, wait_ms: int) -> Any:
    from tideline.config import Config

    return Config.load(home=tmp_path / "local", database=pair.write_url(name),
                       database_read_url=pair.read_url(name), database_read_wait_ms=wait_ms,
                       embedder="hashing")


@pytest.fixture
def delayed(pg_pair: Any, pair_db: str) -> Iterator[Any]:
    """The standby replays every commit 1 s late for the test (then on time again)."""
    pg_pair.set_apply_delay(1000)
    try:
        yield pg_pair
    finally:
        pg_pair.set_apply_delay(0)


# -- URLs ----------------------------------------------------------------------------------

def test_a_multi_host_url_writes_to_the_primary_and_reads_a_standby_only_in_a_failover() -> None:
    write, read, routed = route_urls("postgresql://u:pw@h1:5432,h2:5433/db", None)
    assert target_attrs(write) == "read-write" and hosts_of(write) == 2
    assert read is not None and target_attrs(read) == "prefer-standby"
    assert not routed  # reads stay on the primary until it is gone


def test_prefer_standby_in_the_url_routes_the_reads_and_still_writes_the_primary() -> None:
    url = "postgresql://h1,h2/db?target_session_attrs=prefer-standby&sslmode=disable"
    write, read, routed = route_urls(url, None)
    assert target_attrs(write) == "read-write" and "sslmode=disable" in write
    assert read == url and routed


def test_a_read_url_routes_the_reads_and_a_single_host_url_is_left_alone() -> None:
    write, read, routed = route_urls("postgresql://h1/db", "postgresql://h2/db")
    assert write == "postgresql://h1/db" and read == "postgresql://h2/db" and routed
    # One host: the same URL serves reads only while it refuses writes (not routed).
    one = "postgresql://h1/db"
    assert route_urls(one, None) == (one, one, False)


_HOST = st.from_regex(r"[a-z][a-z0-9]{0,8}(:[1-9][0-9]{0,3})?", fullmatch=True)
_ATTRS = st.sampled_from([None, "any", "read-write", "primary", "prefer-standby", "standby",
                          "read-only"])


@settings(max_examples=200, deadline=None)
@given(hosts=st.lists(_HOST, min_size=1, max_size=4), attrs=_ATTRS,
       read=st.none() | st.just("postgresql://r/db"))
def test_writes_never_go_where_a_standby_may_answer(hosts: list[str], attrs: str | None,
                                                    read: str | None) -> None:
    url = f"postgresql://u@{','.join(hosts)}/db" + (
        f"?target_session_attrs={attrs}" if attrs else "")
    write, route, routed = route_urls(url, read)
    # Several hosts, or a URL asking for a standby: the write URL asks for the primary.
    if len(hosts) > 1 or attrs in ("prefer-standby", "standby", "read-only"):
        assert target_attrs(write) in ("read-write", "primary")
    assert hosts_of(write) == len(hosts)
    assert routed == (read is not None or attrs in ("prefer-standby", "standby", "read-only"))
    assert route is not None


@settings(max_examples=300, deadline=None)
@given(rest=st.text(max_size=60), read=st.none() | st.text(max_size=20))
def test_any_url_text_splits_without_an_untyped_error(rest: str, read: str | None) -> None:
    write, route, routed = route_urls("postgresql://" + rest, read or None)
    assert write.startswith("postgresql://")
    assert route is not None or not routed  # a routed read URL is always there


# -- routing -------------------------------------------------------------------------------

def test_recall_show_and_brief_read_the_standby_and_writes_reach_the_primary(
        pg_pair: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(pg_pair, pair_db, tmp_path) as mem:
        wrote = mem.remember("the staging cluster lives in the Frankfurt region")
        before = mem.store.replication()
        assert before["routed"] and before["standby_reads"] == 0
        packet = mem.recall("where is the staging cluster")
        assert packet.memories and packet.memories[0].id == wrote.id
        assert not packet.read_only
        mem.show(wrote.id)
        mem.inject_brief()
        after = mem.store.replication()
        assert after["standby_reads"] > 0
        assert after["primary_fallbacks"] == 0
    # The write is on the primary itself (the standby only replays it).
    rows = pg_pair.sql(pg_pair.primary, "SELECT count(*) FROM memories WHERE gesture LIKE "
                       "'%Frankfurt%'", pair_db)
    assert rows == [(1,)]


def test_a_read_waits_for_the_standby_to_replay_its_own_write(
        delayed: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(delayed, pair_db, tmp_path, wait_ms=10_000) as mem:
        mem.recall("warm up the read pool")
        wrote = mem.remember("the deploy key rotates every ninety days")
        packet = mem.recall("how often does the deploy key rotate")
        assert [m.id for m in packet.memories][:1] == [wrote.id]
        stats = mem.store.replication()
        assert stats["waited"] >= 1 and stats["primary_fallbacks"] == 0


def test_past_the_bound_a_read_goes_to_the_primary_and_still_sees_the_write(
        delayed: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(delayed, pair_db, tmp_path, wait_ms=50) as mem:
        wrote = mem.remember("the on-call rotation changes on Mondays")
        packet = mem.recall("when does the on-call rotation change")
        assert [m.id for m in packet.memories][:1] == [wrote.id]
        assert mem.store.replication()["primary_fallbacks"] >= 1


def test_a_recall_journal_write_does_not_make_the_next_recall_wait(
        delayed: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(delayed, pair_db, tmp_path, wait_ms=50) as mem:
        mem.recall("the opening's own writes (the schema) may still be replaying")
        delayed.wait_replayed()
        before = mem.store.replication()
        mem.recall("nothing stored yet")  # journals the recall on the primary
        mem.recall("nothing stored yet either")
        after = mem.store.replication()
        assert after["primary_fallbacks"] == before["primary_fallbacks"]
        assert after["standby_reads"] >= before["standby_reads"] + 2


# -- a standby is never written to -----------------------------------------------------------

def test_a_write_url_at_a_standby_refuses_writes_with_a_typed_retryable_error(
        pg_pair: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(pg_pair, pair_db, tmp_path, read=False) as seed:
        seed.remember("seeded on the primary")
    pg_pair.wait_replayed()
    with Memory.open(tmp_path / "other", embedder=hashing(), project="global",
                     database=pg_pair.standby.url(pair_db)) as mem:
        with pytest.raises(PrimaryUnavailable) as caught:
            mem.remember("this must never reach a standby")
        assert caught.value.retryable
        assert mem.recall("seeded").memories  # reads still answer
    rows = pg_pair.sql(pg_pair.primary, "SELECT count(*) FROM memories WHERE gesture LIKE "
                       "'%never reach%'", pair_db)
    assert rows == [(0,)]


# -- doctor and introspect ----------------------------------------------------------------

def test_doctor_and_introspect_show_a_healthy_synchronous_pair(
        pg_pair: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(pg_pair, pair_db, tmp_path) as mem:
        found = mem.doctor()
        assert found["ok"], found["problems"]
        topo = mem.introspect()["replication"]
        assert topo["write"]["role"] == "primary" and topo["read"]["role"] == "standby"
        assert [s["sync_state"] for s in topo["write"]["standbys"]] == ["sync"]
        assert topo["problems"] == [] and not topo["read_only"]


def test_doctor_reports_a_write_url_at_a_standby(
        pg_pair: Any, pair_db: str, tmp_path: Path) -> None:
    with _open(pg_pair, pair_db, tmp_path, read=False) as seed:
        seed.remember("seeded on the primary")
    pg_pair.wait_replayed()
    with Memory.open(tmp_path / "other", embedder=hashing(), project="global",
                     database=pg_pair.standby.url(pair_db)) as mem:
        found = mem.doctor()
        assert not found["ok"]
        assert any("reaches a standby" in p for p in found["problems"])
        assert mem.introspect()["replication"]["write"]["role"] == "standby"


def test_doctor_reports_a_read_url_at_the_primary(
        pg_pair: Any, pair_db: str, tmp_path: Path) -> None:
    from tideline.config import Config

    cfg = Config.load(home=tmp_path / "local", database=pg_pair.primary.url(pair_db),
                      database_read_url=pg_pair.primary.url(pair_db), embedder="hashing")
    with Memory.open(tmp_path / "local", embedder=hashing(), project="global",
                     config=cfg) as mem:
        found = mem.doctor()
        assert not found["ok"]
        assert any("read URL reaches the primary" in p for p in found["problems"])
        assert mem.introspect()["replication"]["read"]["role"] == "primary"
