"""The sleep gate's read of a SQLite store: read-only, no migration, no numpy."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tideline.store.events import change_marker
from tideline.store.gate import GateView
from tideline.store.sqlite.connection import connect_readonly

__all__ = ["peek_gate"]


def peek_gate(directory: Path, namespace: str) -> GateView | None:
    """Read the gate without opening the store for writing (no migration, no numpy).

    Args:
        directory: the store directory.
        namespace: the namespace.

    Returns:
        The gate's view, or None when the store does not exist yet or predates sleep.
    """
    try:
        conn = connect_readonly(directory)
        if conn is None:
            return None
        try:
            has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                               "AND name = 'sleep_state'").fetchone()
            if not has:
                return None
            rows = dict(conn.execute(
                "SELECT key, value FROM sleep_state WHERE namespace = ? AND key IN "
                "('marker', 'last_sleep')", (namespace,)).fetchall())
            marker = change_marker(conn)
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    last = rows.get("last_sleep")
    return GateView(marker=marker, stored=rows.get("marker"),
                    last_sleep=float(last) if last is not None else None)
