"""The standby side of a PostgreSQL database's sessions: which reads a standby answers,
its session, reading one's own writes, and the error that marks an endpoint down.

A base of :class:`~tideline.store.postgres.connection.Database`; the URLs, the read
route and the endpoints are :mod:`tideline.store.postgres.replicas`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg_pool

from tideline.errors import PrimaryUnavailable, TidelineError
from tideline.store.postgres.batch import Columns
from tideline.store.postgres.errors import from_psycopg
from tideline.store.postgres.replicas import Endpoint, ReadRoute, is_lost, lsn_int
from tideline.store.postgres.session import Conn, Counter
from tideline.store.routing import standby_ok

__all__ = ["StandbyReads"]


class StandbyReads:
    """Routing a database's reads to a standby, and what a session on either learns.

    Attributes:
        primary: the primary's endpoint.
        route: the read route (None: every read goes to the primary).
    """

    primary: Endpoint
    route: ReadRoute | None
    _local: threading.local
    _columns: dict[str, Columns | None]
    _counter: Counter

    if TYPE_CHECKING:  # defined by the database
        def _register_vector(self, raw: psycopg.Connection[Any]) -> None: ...

    def _standby_for_read(self) -> tuple[psycopg_pool.ConnectionPool[Any],
                                         psycopg.Connection[Any]] | None:
        """A standby's connection for a read outside any transaction, or None: the
        primary's.

        A read-only verb's reads go to a standby when the reads are routed. Any read
        does while no primary answers (probed first, at most every PROBE_EVERY s: the
        reads of a write are what notices the new primary); a write sent through it
        is refused by the standby and raised as PrimaryUnavailable.
        """
        if self.route is not None and (
                (self.route.routed and standby_ok())
                or (self.primary.down and not self.primary.probe())):
            return self._acquire_standby()
        return None

    def _failed(self, exc: psycopg.Error, raw: psycopg.Connection[Any],
                endpoint: Endpoint) -> TidelineError:
        """The typed error for a failed session; a lost server marks its endpoint down."""
        mapped: TidelineError
        refused = getattr(exc, "sqlstate", None) == "25006"
        if refused and endpoint.read_only:
            # A write reached the read route while no primary answers: the primary's job.
            mapped = PrimaryUnavailable("no PostgreSQL primary answers right now (a "
                                        "failover?); nothing was written: retry shortly")
            mapped.__cause__ = exc
            return mapped
        if is_lost(exc, raw):
            endpoint.mark_down()
            where = "standby" if endpoint.read_only else "primary"
            mapped = PrimaryUnavailable(
                f"the connection to the PostgreSQL {where} was lost or refused the "
                f"statement ({' '.join(str(exc).split())[:300]}); retry shortly")
            mapped.__cause__ = exc
            return mapped
        return from_psycopg(exc)

    def _note_commit(self, raw: psycopg.Connection[Any]) -> None:
        """After a commit, the primary's WAL position, so that this process's next routed
        read waits for a standby to replay past it (read your own writes)."""
        route = self.route
        if route is None or not route.routed or standby_ok():
            # No routed reads; or the write of a read-only verb (a recall's journal),
            # which no later read needs to see.
            return
        row = raw.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        if row is not None:
            route.wrote(lsn_int(str(row[0])))

    def _acquire_standby(self) -> tuple[psycopg_pool.ConnectionPool[Any],
                                        psycopg.Connection[Any]] | None:
        route = self.route
        assert route is not None  # noqa: S101 - only called with a route
        got = route.acquire()
        if got is None:
            return None
        pool, raw = got
        try:
            fresh = route.caught_up(raw)
        except psycopg.Error as exc:
            pool.putconn(raw)
            if is_lost(exc, raw):
                route.endpoint.mark_down()
                return None
            raise from_psycopg(exc) from exc
        if not fresh and not self.primary.down:
            pool.putconn(raw)
            route.count("primary_fallbacks")
            return None
        self._register_vector(raw)
        return pool, raw

    @contextlib.contextmanager
    def _standby_session(self, pool: psycopg_pool.ConnectionPool[Any],
                         raw: psycopg.Connection[Any]) -> Iterator[Conn]:
        route = self.route
        assert route is not None  # noqa: S101 - only called with a route
        route.count("standby_reads")
        conn = Conn(raw, writing=False, columns=self._columns, counter=self._counter)
        conn.standby = True
        self._local.conn = conn
        try:
            yield conn
        except psycopg.Error as exc:
            raise self._failed(exc, raw, route.endpoint) from exc
        finally:
            self._local.conn = None
            pool.putconn(raw)
