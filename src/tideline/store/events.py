"""The journal's one writer, its quiet kinds and the "changed since sleep" checks.

Portable SQL over any backend's connection (``?`` placeholders, ``RETURNING id``):
every event of every path (writes, recalls, hooks, sleep, dream) is appended by
:func:`append_event`, and both questions sleep asks of the journal ("did anything
happen since the last sleep?") are answered here with the same :data:`QUIET_KINDS`.
Light: no driver, no numpy (the hooks and the sleep gate use it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from tideline.secrets import redact_json

__all__ = ["EVENT_INSERT", "QUIET_KINDS", "append_event", "change_marker", "changed_since_sleep",
           "event_insert"]

QUIET_KINDS = ("hook", "hook_error", "inject", "sleep", "sleep_skipped", "sleep_gate")
"""Journal kinds that are bookkeeping, not a change sleep has to consolidate."""

_CHECKPOINT_KINDS = ("sleep", "sleep_gate")


class Executes(Protocol):
    """A connection inside a transaction (SQLite's, or the PostgreSQL wrapper)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


def _in(n: int) -> str:
    return ",".join("?" * n)


#: The statement that appends one event with its memory id given (the ``VALUES`` form of
#: :func:`event_insert`; PostgreSQL's recall journal embeds it in a ``WITH`` query).
_EVENT_HEAD = "INSERT INTO events(ts, namespace, kind, memory_id, data) "
EVENT_INSERT = _EVENT_HEAD + "VALUES (?,?,?,?,?)"


def append_event(
    c: Executes, namespace: str, kind: str, data: dict[str, Any], *,
    memory_id: int | None = None, now: float | None = None,
) -> int:
    """Append one event (its data redacted of secrets) inside the caller's transaction.

    Args:
        c: the transaction's connection.
        namespace: the namespace the event belongs to.
        kind: the event kind (``write``, ``recall``, ``sleep``, …).
        data: the event's details (JSON-serialisable).
        memory_id: the memory the event is about, if one.
        now: the event time (default: now).

    Returns:
        The new event's id.
    """
    sql, params = event_insert(namespace, kind, data, memory_id=memory_id, now=now)
    cur = c.execute(sql + " RETURNING id", params)
    return int(cur.fetchone()[0])


def event_insert(
    namespace: str, kind: str, data: dict[str, Any], *, memory_id: int | None = None,
    now: float | None = None, memory_from: str | None = None,
) -> tuple[str, tuple[Any, ...]]:
    """The statement that appends one event (its data redacted) and its parameters, for a
    caller that sends it as part of a larger statement (a data-modifying ``WITH``).

    Args:
        namespace: the namespace the event belongs to.
        kind: the event kind.
        data: the event's details (JSON-serialisable).
        memory_id: the memory the event is about, if one.
        now: the event time (default: now).
        memory_from: instead of ``memory_id``, the name of a row source (a ``WITH``
            query) whose ``id`` column is the memory's.

    Returns:
        The ``INSERT`` (no ``RETURNING``) and its parameters.
    """
    ts = time.time() if now is None else now
    if memory_from is not None:
        return (f"{_EVENT_HEAD}SELECT ?, ?, ?, id, ? FROM {memory_from}",
                (ts, namespace, kind, redact_json(data)))
    return EVENT_INSERT, (ts, namespace, kind, memory_id, redact_json(data))


def change_marker(c: Executes) -> str:
    """A marker of the whole store that moves whenever a change sleep cares about lands.

    Row ids only grow, and every change a user can make appends an event, a turn or a
    memory row, so three lookups from the end of the id order tell whether anything
    happened (bookkeeping events at the tail are stepped over).
    """
    e, t, m = c.execute(
        f"SELECT (SELECT id FROM events WHERE kind NOT IN ({_in(len(QUIET_KINDS))}) "
        "ORDER BY id DESC LIMIT 1), (SELECT max(id) FROM turns), (SELECT max(id) FROM memories)",
        QUIET_KINDS,
    ).fetchone()
    return f"e{e or 0}:t{t or 0}:m{m or 0}"


def changed_since_sleep(c: Executes, namespace: str) -> bool:
    """Whether anything but bookkeeping was journaled in a namespace after the last sleep
    check: the newest ``sleep`` event (written by sleep itself) or ``sleep_gate`` event
    (written by a hook after it ran the gated sleep)."""
    last = c.execute(
        f"SELECT max(id) FROM events WHERE namespace = ? "
        f"AND kind IN ({_in(len(_CHECKPOINT_KINDS))})",
        (namespace, *_CHECKPOINT_KINDS)).fetchone()[0]
    row = c.execute(
        f"SELECT 1 FROM events WHERE namespace = ? AND id > ? "
        f"AND kind NOT IN ({_in(len(QUIET_KINDS))}) LIMIT 1",
        (namespace, int(last or 0), *QUIET_KINDS)).fetchone()
    return row is not None
