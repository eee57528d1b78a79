"""What every sleep step's SQL shares: the namespace's sleep state, the gate, the lock,
and which memories still exist.

The gate and the lock are what the lean ``tideline sleep`` path reads before it decides
whether to open the store at all, so nothing heavy is imported here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tideline.processes import pid_alive
from tideline.secrets import redact_json, redact_secrets
from tideline.store.database import Connection
from tideline.store.events import change_marker
from tideline.store.gate import GateView
from tideline.store.sql import placeholders as _ph
from tideline.store.view import NamespaceView

__all__ = ["CHUNK", "LockHolder", "SleepView", "changed"]

#: Ids per ``IN (…)`` list.
CHUNK = 900


def changed(cur: Any) -> int:
    """Rows a statement changed (``executemany``: summed over its parameter sets)."""
    return max(int(cur.rowcount), 0)


@dataclass(frozen=True)
class LockHolder:
    """Who holds the sleep lock."""

    holder: str
    pid: int
    host: str
    expires: float

    def abandoned(self, now: float) -> bool:
        """True when the lease ran out or the holder's process is gone (same host)."""
        if now > self.expires:
            return True
        if self.host != socket.gethostname():
            return False
        return not pid_alive(self.pid)


class SleepView(NamespaceView):
    """The sleep state and lock of one namespace, and the existence check every
    version-checked write of sleep makes first.

    Args:
        store: the opened store.
    """

    def _scoped(self, select: str, scopes: Sequence[str] | None) -> tuple[str, list[Any]]:
        """``select`` (ending in ``WHERE namespace = ?``) limited to ``scopes`` (None:
        all), and its arguments."""
        args: list[Any] = [self.ns]
        if scopes is not None:
            select += f" AND scope IN ({_ph(len(scopes))})"
            args.extend(scopes)
        return select, args

    # -- state, gate, lock --------------------------------------------------------------

    def get_state(self, key: str) -> str | None:
        """One value of this namespace's sleep state."""
        with self.db.read() as c:
            row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? AND key = ?",
                            (self.ns, key)).fetchone()
        return None if row is None else str(row[0])

    def get_json(self, key: str, default: Any = None) -> Any:
        """A JSON value of the sleep state (``default`` when absent)."""
        raw = self.get_state(key)
        return default if raw is None else json.loads(raw)

    def set_state(self, c: Connection, key: str, value: Any) -> None:
        """Set a sleep-state value inside the caller's transaction (JSON unless a str)."""
        text = redact_secrets(value)[0] if isinstance(value, str) else redact_json(value)
        c.execute(
            "INSERT INTO sleep_state(namespace, key, value, updated_at) VALUES (?,?,?,?) "
            "ON CONFLICT(namespace, key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at", (self.ns, key, text, time.time()))

    def put_state(self, key: str, value: Any) -> None:
        """Set a sleep-state value in its own transaction."""
        with self.db.write() as c:
            self.set_state(c, key, value)

    def gate(self) -> GateView:
        """The gate's view through the open connection."""
        with self.db.read() as c:
            marker = change_marker(c)
            rows = dict(c.execute(
                "SELECT key, value FROM sleep_state WHERE namespace = ? AND key IN "
                "('marker', 'last_sleep')", (self.ns,)).fetchall())
        last = rows.get("last_sleep")
        return GateView(marker=marker, stored=rows.get("marker"),
                        last_sleep=float(last) if last is not None else None)

    def mark_slept(self, now: float) -> str:
        """Store the current marker and time as the last sleep's; returns the marker."""
        with self.db.write() as c:
            marker = change_marker(c)
            self.set_state(c, "marker", marker)
            self.set_state(c, "last_sleep", repr(now))
        return marker

    def try_lock(self, holder: str, lease_s: float, now: float) -> LockHolder | None:
        """Take the sleep lock unless someone alive holds it.

        On PostgreSQL the lock is an advisory lock across every host (it dies with its
        holder's connection); the row then only says who holds it.

        Returns:
            None when taken (or already ours), else the current holder.
        """
        advisory = self.store.acquire_sleep_lock(holder)
        if advisory is False:
            with self.db.read() as c:
                row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? "
                                "AND key = 'lock'", (self.ns,)).fetchone()
            return LockHolder(**json.loads(row[0])) if row is not None else LockHolder(
                holder="?", pid=0, host="?", expires=now + lease_s)
        with self.db.write() as c:
            row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? AND key = 'lock'",
                            (self.ns,)).fetchone()
            if row is not None and advisory is None:  # no backend lock: the lease decides
                cur = LockHolder(**json.loads(row[0]))
                if cur.holder != holder and not cur.abandoned(now):
                    return cur
            mine = {"holder": holder, "pid": os.getpid(), "host": socket.gethostname(),
                    "expires": now + lease_s}
            self.set_state(c, "lock", mine)
        return None

    def renew_lock(self, holder: str, lease_s: float) -> None:
        """Extend our lease (between steps)."""
        with self.db.write() as c:
            row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? AND key = 'lock'",
                            (self.ns,)).fetchone()
            if row is None:
                return
            cur = json.loads(row[0])
            if cur.get("holder") == holder:
                cur["expires"] = time.time() + lease_s
                self.set_state(c, "lock", cur)

    def release_lock(self, holder: str) -> None:
        """Drop the lock if we hold it."""
        try:
            with self.db.write() as c:
                row = c.execute("SELECT value FROM sleep_state WHERE namespace = ? "
                                "AND key = 'lock'", (self.ns,)).fetchone()
                if row is not None and json.loads(row[0]).get("holder") == holder:
                    c.execute("DELETE FROM sleep_state WHERE namespace = ? AND key = 'lock'",
                              (self.ns,))
        finally:
            self.store.release_sleep_lock(holder)

    # -- which memories still exist -----------------------------------------------------

    def existing_ids(self, c: Connection, ids: Iterable[int]) -> set[int]:
        """Which of ``ids`` are still memories of this namespace (inside ``c``)."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        out: set[int] = set()
        if len(wanted) > 4 * CHUNK:  # one scan beats hundreds of IN (...) lookups
            every = {int(r[0]) for r in c.execute(
                "SELECT id FROM memories WHERE namespace = ?", (self.ns,)).fetchall()}
            return every.intersection(wanted)
        for lo in range(0, len(wanted), CHUNK):
            chunk = wanted[lo:lo + CHUNK]
            out.update(int(r[0]) for r in c.execute(
                f"SELECT id FROM memories WHERE id IN ({_ph(len(chunk))}) AND namespace || '' = ?",
                (*chunk, self.ns)).fetchall())
        return out
