"""The PostgreSQL backend: psycopg 3 with psycopg-pool, pgvector and pg_trgm.

Chosen by a ``postgresql://`` URL (``TIDELINE_DATABASE_URL``, ``--database`` or
``Memory.open(database=…)``); the store directory stays this host's local state
(caches only). Install with ``pip install 'tideline-memory[postgres]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tideline.errors import BackendUnavailable
from tideline.store.postgres.urls import is_database_url

if TYPE_CHECKING:
    from tideline.store.gate import GateView
    from tideline.store.postgres.store import PostgresStore

__all__ = ["open_postgres", "peek_database_gate", "peek_database_meta"]

def open_postgres(url: str, directory: Path, namespace: str, marker: str, *,
                  retries: int = 6, lock_timeout_ms: int = 5_000,
                  check_marker: bool = True, pool_size: int = 4,
                  read_url: str | None = None, read_wait_ms: int = 500) -> PostgresStore:
    """Open (and create or migrate) the PostgreSQL store at ``url``.

    Args:
        url: ``postgresql://…``.
        directory: this host's local state directory.
        namespace: the namespace.
        marker: the embedder marker the caller writes with.
        retries: attempts to get a connection before StoreBusy.
        lock_timeout_ms: longest wait of one statement for a lock.
        check_marker: refuse a store built with another embedder.
        pool_size: most connections this process keeps open to the server.
        read_url: where read-only verbs may read (a standby; see
            :mod:`tideline.store.postgres.replicas`).
        read_wait_ms: longest wait for a standby to replay this process's own writes.

    Raises:
        BackendUnavailable: psycopg is not installed, or the server cannot be reached.
        EmbedderMismatch: the store was built with another embedder.
        SchemaTooNew: written by a newer Tideline.
    """
    if not is_database_url(url):
        raise BackendUnavailable(f"not a PostgreSQL URL: {url.split('://', 1)[0]}://…")
    try:
        from tideline.store.postgres.store import PostgresStore
    except ImportError as exc:
        raise BackendUnavailable(
            "the PostgreSQL backend needs psycopg: pip install 'tideline-memory[postgres]'"
        ) from exc
    return PostgresStore(url, directory, namespace, marker, retries=retries,
                         lock_timeout_ms=lock_timeout_ms, check_marker=check_marker,
                         pool_size=pool_size, read_url=read_url, read_wait_ms=read_wait_ms)


def peek_database_meta(url: str, key: str) -> str | None:
    """One ``db_meta`` value of the database at ``url`` without opening the store
    (no pool, no migration); None when absent or unreadable (the open that follows
    reports why). While no primary answers (a failover), a standby is read instead:
    ``$TIDELINE_DATABASE_READ_URL``, or the hosts of a multi-host ``url``."""
    import os

    try:
        import psycopg

        from tideline.store.postgres.replicas import route_urls
    except ImportError:
        return None
    write, fallback, _routed = route_urls(url, os.environ.get("TIDELINE_DATABASE_READ_URL"))
    for where in dict.fromkeys(u for u in (write, fallback) if u):
        try:
            with psycopg.connect(where, connect_timeout=10) as conn:
                if conn.execute("SELECT to_regclass('db_meta')").fetchone() in (None, (None,)):
                    return None
                row = conn.execute("SELECT value FROM db_meta WHERE key = %s",
                                   (key,)).fetchone()
        except psycopg.Error:
            continue
        return None if row is None else str(row[0])
    return None


def peek_database_gate(url: str, namespace: str) -> GateView | None:
    """The sleep gate of a PostgreSQL store without opening it (no pool, no numpy);
    None when it cannot be read (the sleep that follows opens the store and says why)."""
    try:
        import psycopg

        from tideline.store.events import change_marker
        from tideline.store.gate import GateView
        from tideline.store.postgres.session import Conn
    except ImportError:
        return None
    try:
        with psycopg.connect(url, connect_timeout=10) as raw:
            if raw.execute("SELECT to_regclass('sleep_state')").fetchone() in (None, (None,)):
                return None
            conn = Conn(raw, writing=False)
            rows = dict(conn.execute(
                "SELECT key, value FROM sleep_state WHERE namespace = ? AND key IN "
                "('marker', 'last_sleep')", (namespace,)).fetchall())
            marker = change_marker(conn)
    except psycopg.Error:
        return None
    last = rows.get("last_sleep")
    return GateView(marker=marker, stored=rows.get("marker"),
                    last_sleep=float(last) if last is not None else None)
