"""Sleep's one-at-a-time lock on PostgreSQL: a session-level advisory lock.

Every host that shares the database sees it, and it needs no lease: it is held by one
open connection and goes away with it, so a sleep that crashed (or whose host lost
power) never leaves a lock that others must wait out.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psycopg

from tideline.errors import PrimaryUnavailable
from tideline.store.postgres.errors import from_psycopg
from tideline.store.postgres.lock_keys import LOCK_SLEEP, advisory_key
from tideline.store.postgres.replicas import is_lost

__all__ = ["SleepLocks"]


class SleepLocks:
    """Advisory sleep locks per namespace, each held on its own connection.

    Args:
        url: the database URL.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._held: dict[tuple[str, str], psycopg.Connection[Any]] = {}
        self._lock = threading.Lock()

    def acquire(self, namespace: str, holder: str) -> bool:
        """Take the lock of ``namespace`` for ``holder`` unless another session holds it.

        Raises:
            PrimaryUnavailable: no primary answers (a failover); retry.
        """
        with self._lock:
            if (namespace, holder) in self._held:
                return True
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10,
                                   application_name="tideline-sleep")
            row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                               (LOCK_SLEEP, advisory_key(namespace))).fetchone()
        except psycopg.Error as exc:
            if is_lost(exc):
                raise PrimaryUnavailable(f"no PostgreSQL primary for the sleep lock: "
                                         f"{' '.join(str(exc).split())[:300]}") from exc
            raise from_psycopg(exc) from exc
        if not row or not row[0]:
            conn.close()
            return False
        with self._lock:
            self._held[(namespace, holder)] = conn
        return True

    def release(self, namespace: str, holder: str) -> None:
        """Drop the lock if ``holder`` holds it (closing its connection releases it)."""
        with self._lock:
            conn = self._held.pop((namespace, holder), None)
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock(%s, %s)",
                             (LOCK_SLEEP, advisory_key(namespace)))
            conn.close()

    def close(self) -> None:
        """Release every lock this process holds."""
        with self._lock:
            held = list(self._held)
        for namespace, holder in held:
            self.release(namespace, holder)
