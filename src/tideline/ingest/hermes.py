"""Hermes Agent sessions: its ``state.db`` or a ``hermes sessions export`` JSONL file.

Hermes keeps every session in ``$HERMES_HOME/state.db`` (SQLite: ``sessions`` and
``messages`` tables); ``hermes sessions export out.jsonl`` writes the same data as
one JSON object per session with a ``messages`` list. Both are read here:

* user and assistant messages with text are kept (system prompts, tool-call-only
  assistant messages and — unless ``tool_results=True`` — tool results are
  skipped and counted), inactive (rewound) messages are skipped;
* the message id becomes ``<session>:<message id>`` (idempotent re-import) and
  the message's own timestamp the event time;
* the project scope is named after the session's ``git_repo_root`` or ``cwd``.

Sessions already captured live by the Hermes plugin (same session, same role and
text) are not stored twice, and the plugin does not capture again what an import
stored: both ask :func:`unseen_turns`.

``state.db`` is Hermes' own file, not a Tideline store, so it is read here with
:mod:`sqlite3` directly (read-only), not through :mod:`tideline.store`.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tideline.errors import InvalidInput, NotFound, StoreCorrupt
from tideline.project import project_for_directory
from tideline.store.sqlite.errors import from_sqlite
from tideline.write.validate import clean_text, parse_time

__all__ = ["HermesSessions", "hermes_home", "hermes_turns", "read_hermes",
           "read_hermes_sessions", "unseen_turns"]

SOURCE = "hermes"
TURN_CHARS = 90_000
TOOL_RESULT_CHARS = 2_000
MAX_FILE_BYTES = 512 * 1024 * 1024


@dataclass
class HermesSessions:
    """Turns read from Hermes sessions, and what was skipped."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    skipped: Counter[str] = field(default_factory=Counter)


def hermes_home() -> Path:
    """Hermes' home directory: ``$HERMES_HOME`` or ``~/.hermes``."""
    env = (os.environ.get("HERMES_HOME") or "").strip()
    return Path(env).expanduser() if env else Path.home() / ".hermes"


def read_hermes_sessions(path: Path, *, session: str | None = None,
                         limit: int = 100_000) -> list[dict[str, Any]]:
    """Read Hermes Agent sessions and their messages from its ``state.db`` (read-only).

    Only columns that exist are read, so older and newer Hermes schemas both work.

    Args:
        path: the ``state.db`` file.
        session: only this session id (or unique prefix).
        limit: at most this many sessions, newest first.

    Returns:
        Session dicts (``id``, ``source``, ``started_at``, ``cwd``, ``git_repo_root``,
        ``title``) each with ``messages`` (``id``, ``role``, ``content``, ``tool_name``,
        ``timestamp``), oldest message first.

    Raises:
        NotFound: no such file or session.
        StoreCorrupt: not a Hermes session database.
    """
    return list(_database_sessions(path, session=session, limit=limit))


def _database_sessions(path: Path, *, session: str | None,
                       limit: int = 100_000) -> Iterator[dict[str, Any]]:
    """:func:`read_hermes_sessions` one session at a time: the file, its schema and the
    session filter are checked now; each session's messages are read when it is reached.

    Raises:
        NotFound: no such file or session.
        StoreCorrupt: not a Hermes session database.
    """
    if not path.is_file():
        raise NotFound(f"no such file: {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise from_sqlite(exc) from exc
    try:
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        if not {"sessions", "messages"} <= tables:
            raise StoreCorrupt(f"{path} is not a Hermes session database")
        scols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)").fetchall()}
        mcols = {r[1] for r in conn.execute("PRAGMA table_info(messages)").fetchall()}
        want_s = [c for c in ("id", "source", "started_at", "ended_at", "cwd", "git_repo_root",
                              "title", "parent_session_id") if c in scols]
        want_m = [c for c in ("id", "role", "content", "tool_name", "timestamp", "active")
                  if c in mcols]
        if "id" not in want_s or not {"id", "role", "content"} <= set(want_m):
            raise StoreCorrupt(f"{path}: unexpected Hermes schema")
        order = "started_at DESC" if "started_at" in scols else "rowid DESC"
        sql = f"SELECT {', '.join(want_s)} FROM sessions"  # noqa: S608
        args: list[Any] = []
        if session:
            sql += " WHERE id = ? OR substr(id, 1, ?) = ?"
            args += [session, len(session), session]
        rows = conn.execute(sql + f" ORDER BY {order} LIMIT ?", (*args, limit)).fetchall()
        if session and not rows:
            raise NotFound(f"no Hermes session {session!r} in {path}")
    except sqlite3.Error as exc:
        conn.close()
        raise from_sqlite(exc) from exc
    except BaseException:
        conn.close()
        raise
    msg_sql = (f"SELECT {', '.join(want_m)} FROM messages WHERE session_id = ? "  # noqa: S608
               "ORDER BY " + ("timestamp, id" if "timestamp" in mcols else "id"))
    return _with_messages(conn, rows, want_s, want_m, msg_sql)


def _with_messages(conn: sqlite3.Connection, rows: list[tuple[Any, ...]], want_s: list[str],
                   want_m: list[str], msg_sql: str) -> Iterator[dict[str, Any]]:
    try:
        for row in rows:
            sess = dict(zip(want_s, row, strict=True))
            sess["messages"] = [dict(zip(want_m, m, strict=True))
                                for m in conn.execute(msg_sql, (sess["id"],)).fetchall()]
            yield sess
    except sqlite3.Error as exc:
        raise from_sqlite(exc) from exc
    finally:
        conn.close()


def _read_export(path: Path) -> list[dict[str, Any]]:
    from tideline.ingest.jsonl import iter_jsonl

    if path.stat().st_size > MAX_FILE_BYTES:
        from tideline.errors import InputTooLarge

        raise InputTooLarge(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    out: list[dict[str, Any]] = []
    for number, obj in iter_jsonl(path, line_bytes=MAX_FILE_BYTES):
        if not isinstance(obj.get("messages"), list):
            raise InvalidInput(f"{path}:{number}: not a Hermes session export "
                               "(expected an object with a 'messages' list)")
        out.append(obj)
    return out


def read_hermes(paths: Sequence[str | Path] | None = None, *,
                session: str | None = None) -> Iterator[dict[str, Any]]:
    """Hermes sessions from ``state.db`` files, export JSONL files or Hermes home dirs.

    Every path is checked (and an export file read) before the first session is
    yielded; a ``state.db``'s sessions come one at a time, each with its messages, so
    a whole history is never held in memory at once.

    Args:
        paths: files or directories (default: ``$HERMES_HOME/state.db``).
        session: only this session id (or unique prefix).

    Raises:
        NotFound: a path does not exist or holds no ``state.db``.
        InvalidInput: an export line is malformed.
        StoreCorrupt: a database is not a Hermes session database.
    """
    targets = [Path(p).expanduser() for p in paths] if paths else [hermes_home()]
    sources: list[Iterable[dict[str, Any]]] = []
    for target in targets:
        path = target / "state.db" if target.is_dir() else target
        if not path.is_file():
            raise NotFound(f"no Hermes sessions at {target} (expected state.db or an export)")
        if path.suffix in (".jsonl", ".json", ".ndjson"):
            rows = _read_export(path)
            if session:
                rows = [r for r in rows if str(r.get("id", "")).startswith(session)]
            sources.append(rows)
        else:
            sources.append(_database_sessions(path, session=session))
    return itertools.chain.from_iterable(sources)


def _text(value: Any) -> str:
    if isinstance(value, list):  # multimodal content parts
        value = "\n".join(str(p.get("text", "")) for p in value
                          if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    if not isinstance(value, str):
        return ""
    text: str = value.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8").strip()
    return text[:TURN_CHARS] + " …[truncated]" if len(text) > TURN_CHARS else text


def hermes_turns(sessions: Iterable[dict[str, Any]], *, scope: str | None = None,
                 tool_results: bool = False) -> HermesSessions:
    """Turn Hermes session dicts into raw-turn mappings for :meth:`tideline.Memory.add_turns`.

    Args:
        sessions: sessions with ``messages`` (from :func:`read_hermes`).
        scope: the project for every turn (default: named after each session's repo/cwd).
        tool_results: keep tool results (shortened).
    """
    out = HermesSessions()
    for sess in sessions:
        sid = str(sess.get("id") or "").strip()
        if not sid:
            out.skipped["no_session_id"] += 1
            continue
        where = sess.get("git_repo_root") or sess.get("cwd") or ""
        turn_scope = scope if scope is not None else (
            (project_for_directory(where).name or "global") if where else None)
        index = 0
        for msg in sess.get("messages") or []:
            if not isinstance(msg, dict):
                out.skipped["malformed"] += 1
                continue
            role = str(msg.get("role") or "")
            if msg.get("active") == 0:
                out.skipped["inactive"] += 1
                continue
            if role == "system":
                out.skipped["system"] += 1
                continue
            text = _text(msg.get("content"))
            if role == "tool":
                if not tool_results:
                    out.skipped["tool_result"] += 1
                    continue
                name = msg.get("tool_name") or "tool"
                text = f"[{name} result] {text[:TOOL_RESULT_CHARS]}" if text else ""
            elif role not in ("user", "assistant"):
                out.skipped[f"role:{role}"] += 1
                continue
            if not text:
                out.skipped["empty"] += 1
                continue
            try:
                when = parse_time(msg.get("timestamp"), "timestamp")
            except InvalidInput:
                when = None
            mid = msg.get("id")
            turn: dict[str, Any] = {
                "id": f"{sid}:{mid}" if mid is not None else None, "session": sid,
                "role": "tool" if role == "tool" else role, "speaker": role, "text": text,
                "timestamp": when, "turn_index": index,
            }
            if turn["id"] is None:
                turn.pop("id")
            if turn_scope:
                turn["scope"] = turn_scope
            out.turns.append(turn)
            out.sessions.add(sid)
            index += 1
    return out


def unseen_turns(
    turns: Iterable[dict[str, Any]], stored: Callable[[str], Iterable[tuple[str, str]]],
) -> tuple[list[dict[str, Any]], int]:
    """Drop the turns whose (session, role, text) is stored already.

    Hermes' live capture (ids ``live:<session>:<position>``) and an import of its
    ``state.db`` (ids ``<session>:<message id>``) name the same message differently, so
    the message id cannot tell them apart; the session, role and text can. A turn's
    text is compared in the form it would be stored in (stripped, NFC, secrets
    redacted: :func:`tideline.write.validate.clean_text`), so a message holding a
    credential or typed in decomposed Unicode is recognised too. A text repeated
    within ``turns`` is kept each time: only what is stored counts.

    Args:
        turns: raw-turn mappings with ``session``, ``role`` and ``text``.
        stored: a session's stored (role, text) pairs
            (:meth:`tideline.store.agent.AgentReader.session_fingerprints`); asked once
            per session.

    Returns:
        The turns not stored yet, in their order, and how many were dropped.
    """
    prints: dict[str, set[tuple[str, str]]] = {}
    fresh: list[dict[str, Any]] = []
    dropped = 0
    for t in turns:
        sid = str(t["session"])
        if sid not in prints:
            prints[sid] = {(str(role), str(text).strip()) for role, text in stored(sid)}
        if (str(t["role"]), _as_stored(t["text"])) in prints[sid]:
            dropped += 1
        else:
            fresh.append(t)
    return fresh, dropped


def _as_stored(text: object) -> str:
    if not isinstance(text, str):
        return str(text).strip()
    try:  # a cap the text cannot exceed: only the normalisation matters here
        return clean_text(text, "text", 4 * len(text) + 16)
    except InvalidInput:  # NUL or a lone surrogate: storing it will refuse it anyway
        return text.strip()
