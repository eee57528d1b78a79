"""Standbys and failover: where a connection goes, and reading one's own writes there.

**URLs as PostgreSQL users write them.** ``TIDELINE_DATABASE_URL`` may list several
hosts (``postgresql://h1:5432,h2:5432/db``); libpq tries them in order and
``target_session_attrs`` says which one it takes. Writes (and sleep, dream, every read
a write decides from) need the primary, so the write pool's URL always asks for
``target_session_attrs=read-write`` when it names several hosts or asks for a standby
(:func:`route_urls`). Reads may go elsewhere: to ``TIDELINE_DATABASE_READ_URL``, or,
when the URL itself says ``prefer-standby`` (or ``standby``, ``read-only``), to the
hosts as written. A multi-host URL without either still gets a read route, used only
while no primary answers: recalls keep answering from a standby during a failover.

**Only read-only verbs use the read route** (:mod:`tideline.store.routing`): recall,
the brief, ``read_context``, ``show``, the report. Their connections are opened with
``default_transaction_read_only`` as well, so even a read URL that reaches a primary
by mistake can never be written through.

**Read your own writes.** After a write transaction commits, the process notes the
primary's WAL insert position (one ``SELECT`` after the COMMIT, only when a read route
routes reads). A routed read first checks that the standby has replayed past the
newest position this process wrote (``pg_last_wal_replay_lsn()``), polling a few ms
at a time up to a bound (``TIDELINE_DATABASE_READ_WAIT_MS``); past the bound the read
goes to the primary. Once a standby has been seen past a position, reads do not check
again until the next write.

**Failover.** A connection lost to a dead primary (or a write refused by a standby)
marks the primary :attr:`Endpoint.down`: its pool is closed at once (its connections
are dead, and the pool's own reconnection backs off for seconds), and the failing
call raises :class:`~tideline.errors.PrimaryUnavailable`, typed and retryable. The
next calls probe the write URL with one short connect (at most every
:data:`PROBE_EVERY` seconds, so a storm of writers does not hammer a server that is
coming up); the first probe that finds a primary (libpq skips a host still in
recovery) opens a fresh pool and the store goes on. Meanwhile reads go to the read
route, and :meth:`~tideline.store.postgres.connection.Database.read_only` says so.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg_pool

from tideline.errors import PrimaryUnavailable, StoreBusy

__all__ = ["PROBE_EVERY", "Endpoint", "ReadRoute", "is_lost", "lsn_int", "role_of",
           "route_urls"]

#: Shortest time between two probes of an endpoint that is down (seconds).
PROBE_EVERY = 0.25
#: How long a routed read waits for a free connection of the read pool (seconds).
_READ_GETCONN = 2.0
#: SQLSTATEs that mean the server went away or is not (any more) a primary.
_LOST_STATES = frozenset({"57P01", "57P02", "57P03", "25006", "08000", "08003", "08006",
                          "08001", "08004"})
_STANDBY_ATTRS = frozenset({"prefer-standby", "standby", "read-only"})

# The pool logs each failed reconnection as a warning; with no logging configured
# Python prints warnings to stderr, and a hook must stay silent. The typed error says it.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
logging.getLogger("psycopg.pool").propagate = False


def _query(url: str) -> tuple[Any, list[tuple[str, str]]]:
    parts = urlsplit(url)
    return parts, parse_qsl(parts.query, keep_blank_values=True)


def _with_attr(url: str, value: str) -> str:
    parts, query = _query(url)
    query = [(k, v) for k, v in query if k != "target_session_attrs"]
    query.append(("target_session_attrs", value))
    return str(urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query),
                           parts.fragment)))


def hosts_of(url: str) -> int:
    """How many hosts a libpq URL names (in its authority or ``host=`` parameter)."""
    parts, query = _query(url)
    netloc = parts.netloc.rpartition("@")[2]
    named = max(len([h for h in netloc.split(",") if h]), 1)
    for key, value in query:
        if key == "host":
            named = max(named, len(value.split(",")))
    return named


def target_attrs(url: str) -> str | None:
    """The URL's ``target_session_attrs`` (None when absent)."""
    return next((v for k, v in _query(url)[1] if k == "target_session_attrs"), None)


def route_urls(url: str, read_url: str | None) -> tuple[str, str | None, bool]:
    """Split the configured URLs into the write URL and the read route.

    Args:
        url: ``TIDELINE_DATABASE_URL`` (one host or several).
        read_url: ``TIDELINE_DATABASE_READ_URL``, or None.

    Returns:
        ``(write_url, read_url, routed)``: the URL writes use (asking for the primary
        when it names several hosts or a standby); the URL reads may use, or None;
        whether read-only verbs use it always (True) or only while no primary
        answers (False).
    """
    try:
        attrs = target_attrs(url)
        hosts = hosts_of(url)
    except ValueError:  # not a URL urllib can split (a bad IPv6 literal): libpq says why
        return url, read_url, read_url is not None
    write = url
    if attrs in _STANDBY_ATTRS or (hosts > 1 and attrs in (None, "any")):
        write = _with_attr(url, "read-write")
    if read_url:
        return write, read_url, True
    if attrs in _STANDBY_ATTRS:
        return write, url, True
    if hosts > 1:
        return write, _with_attr(url, "prefer-standby"), False
    # One host: the same server, read-only, for the reads of a store whose URL reaches
    # a standby by mistake (writes refused, recall still answers).
    return write, url, False


def lsn_int(text: str) -> int:
    """A ``pg_lsn`` (``16/B374D848``) as one integer, for comparing."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def role_of(raw: psycopg.Connection[Any]) -> str:
    """``primary`` or ``standby``: what the server behind a connection is now."""
    status = raw.info.parameter_status("in_hot_standby")  # reported by PostgreSQL ≥ 14
    if status is not None:
        return "standby" if status == "on" else "primary"
    row = raw.execute("SELECT pg_is_in_recovery()").fetchone()
    return "standby" if row and row[0] else "primary"


def is_lost(exc: BaseException, raw: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``exc`` means the server went away (or is not a primary any more),
    rather than a statement's own failure."""
    if not isinstance(exc, psycopg.Error):
        return False
    if raw is not None and (raw.closed or raw.broken):
        return True
    state = getattr(exc, "sqlstate", None) or ""
    if state in _LOST_STATES:
        return True
    return isinstance(exc, psycopg.OperationalError) and not state


PoolFactory = Callable[[str, bool], "psycopg_pool.ConnectionPool[psycopg.Connection[Any]]"]


class Endpoint:
    """One URL's pool, closed while its server is unreachable and reopened by a probe.

    Args:
        url: the URL.
        make_pool: builds an unopened pool for a URL (the second argument: read-only).
        read_only: open the sessions read-only (the read route).
        want_primary: a probe that reaches a standby counts as a failure.
    """

    def __init__(self, url: str, make_pool: PoolFactory, *, read_only: bool,
                 want_primary: bool) -> None:
        self.url = url
        self._make_pool = make_pool
        self.read_only = read_only
        self.want_primary = want_primary
        self.pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = None
        #: When the endpoint was found unreachable (monotonic), None while it answers.
        self.down_since: float | None = None
        self._probed = 0.0
        self._lock = threading.Lock()
        self.failovers = 0

    @property
    def down(self) -> bool:
        """Whether the endpoint was last found unreachable."""
        return self.down_since is not None

    def open(self, *, wait: bool, timeout: float = 30.0) -> None:
        """Open the pool (waiting for its first connection with ``wait``).

        Raises:
            psycopg_pool.PoolTimeout: no connection within ``timeout``.
            psycopg.Error: the server refused the connection.
        """
        pool = self._make_pool(self.url, self.read_only)
        try:
            pool.open(wait=wait, timeout=timeout)
        except BaseException:
            pool.close()
            raise
        self.pool = pool
        self.down_since = None

    def mark_down(self) -> None:
        """The server went away: drop the pool (closed in the background) and probe later."""
        with self._lock:
            pool, self.pool = self.pool, None
            if self.down_since is None:
                self.down_since = time.monotonic()
                self.failovers += 1
            self._probed = time.monotonic()
        if pool is not None:
            threading.Thread(target=_close_quietly, args=(pool,), daemon=True,
                             name="tideline-pool-close").start()

    def probe(self) -> bool:
        """One short connect to a down endpoint (rate-limited); reopens the pool when it
        answers as wanted. Returns whether the endpoint is usable now."""
        with self._lock:
            if self.pool is not None:
                return True
            now = time.monotonic()
            if now - self._probed < PROBE_EVERY:
                return False
            self._probed = now
            try:
                with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as raw:
                    if self.want_primary and role_of(raw) != "primary":
                        return False
                self.open(wait=True, timeout=5.0)
            except (psycopg.Error, psycopg_pool.PoolTimeout):
                return False
            return True

    def getconn(self, timeout: float) -> tuple[psycopg_pool.ConnectionPool[Any],
                                               psycopg.Connection[Any]]:
        """A connection and the pool to give it back to.

        Raises:
            PrimaryUnavailable: the endpoint is down and the probe found it still so.
            psycopg_pool.PoolTimeout: no connection free within ``timeout``.
        """
        pool = self.pool
        if pool is None and self.down_since is None:  # opened on first use
            with self._lock:
                if self.pool is None:
                    self.open(wait=False)
            pool = self.pool
        if pool is None:
            if not self.probe():
                raise PrimaryUnavailable(
                    "no PostgreSQL primary answers right now (a failover?); nothing was "
                    "written: retry shortly")
            pool = self.pool
            assert pool is not None  # noqa: S101 - probe() opened it
        try:
            return pool, pool.getconn(timeout=timeout)
        except psycopg_pool.PoolClosed as exc:  # marked down meanwhile by another thread
            raise PrimaryUnavailable("the PostgreSQL connection was lost; retry shortly") \
                from exc

    def close(self) -> None:
        """Close the pool."""
        pool, self.pool = self.pool, None
        if pool is not None:
            _close_quietly(pool)


def _close_quietly(pool: psycopg_pool.ConnectionPool[Any]) -> None:
    with contextlib.suppress(Exception):
        pool.close(timeout=1.0)


class ReadRoute:
    """The standby side: its endpoint, this process's newest write, and counters.

    Args:
        endpoint: the read URL's endpoint.
        routed: read-only verbs use it always (else only while the primary is down).
        wait_ms: how long a read waits for the standby to replay this process's newest
            write before it reads the primary instead.
    """

    def __init__(self, endpoint: Endpoint, *, routed: bool, wait_ms: int) -> None:
        self.endpoint = endpoint
        self.routed = routed
        self.wait_s = max(0, wait_ms) / 1000.0
        self._lock = threading.Lock()
        self.written = 0    # the newest WAL position this process committed at
        self.confirmed = 0  # the newest position a standby was seen past
        # The position a read last gave up waiting for, and when: the reads of the same
        # recall that follow check once without waiting (a recall reads in ~10 sessions).
        self._gave_up = (0, 0.0)
        #: Reads answered by the read route, reads that waited for replay, reads
        #: that went to the primary because the standby stayed behind past the bound.
        self.stats = {"standby_reads": 0, "waited": 0, "primary_fallbacks": 0}

    def wrote(self, lsn: int) -> None:
        """Note a committed write's WAL position."""
        with self._lock:
            self.written = max(self.written, lsn)

    def count(self, key: str) -> None:
        """Add one to a counter of :attr:`stats`."""
        with self._lock:
            self.stats[key] += 1

    def acquire(self) -> tuple[psycopg_pool.ConnectionPool[Any], psycopg.Connection[Any]] | None:
        """A read connection, or None when the endpoint is down or has no free
        connection (the caller reads the primary)."""
        try:
            return self.endpoint.getconn(_READ_GETCONN)
        except (PrimaryUnavailable, StoreBusy):
            return None
        except psycopg_pool.PoolTimeout:
            self.endpoint.mark_down()
            return None

    def caught_up(self, raw: psycopg.Connection[Any]) -> bool:
        """Whether the server behind ``raw`` has replayed this process's newest write,
        waiting up to the bound for it.

        Raises:
            psycopg.Error: the connection failed.
        """
        need = self.written
        if need <= self.confirmed:
            return True
        now = time.monotonic()
        given, when = self._gave_up
        deadline = now if given == need and now - when < max(self.wait_s, 0.05) \
            else now + self.wait_s
        waited = False
        while True:
            row = raw.execute("SELECT pg_is_in_recovery(), "
                              "pg_last_wal_replay_lsn()::text").fetchone()
            if row is None or not row[0] or row[1] is None:
                done = True  # a primary (the read URL fell back to it) has every commit
            else:
                done = lsn_int(str(row[1])) >= need
            if done:
                with self._lock:
                    self.confirmed = max(self.confirmed, need)
                if waited:
                    self.count("waited")
                return True
            if time.monotonic() >= deadline:
                if deadline > now:
                    with self._lock:
                        self._gave_up = (need, time.monotonic())
                return False
            waited = True
            time.sleep(random.uniform(0.002, 0.006))  # noqa: S311 - jitter, not crypto
