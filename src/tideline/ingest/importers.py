"""Raw turns into the store: ``add_turns`` and the importers built on it.

The facade's ``add_turns``, ``import_claude``, ``import_hermes``, ``import_jsonl`` and
``capture_turns`` delegate here; each function takes the memory's
:class:`~tideline.runtime.Runtime` (and, where known message ids are looked up, the
store's :class:`~tideline.store.agent.AgentReader`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tideline.errors import InputTooLarge, InvalidInput
from tideline.write.identity import clean_identity, normalise_text
from tideline.write.validate import (
    clean_callback,
    clean_flag,
    clean_name,
    clean_paths,
    clean_seq,
)

if TYPE_CHECKING:
    from tideline.ingest.hermes import HermesSessions
    from tideline.models import ImportResult
    from tideline.runtime import Runtime
    from tideline.store.agent import AgentReader

__all__ = ["add_turns", "capture_turns", "import_claude", "import_hermes", "import_jsonl"]

Progress = Callable[[int, int], None]


def add_turns(
    rt: Runtime, turns: Iterable[Mapping[str, Any]], *, scope: str | None = None,
    source: str = "api", session: str | None = None, progress: Progress | None = None,
    idempotency_key: str | None = None,
) -> ImportResult:
    """Store one batch of raw turns whole (see :meth:`tideline.Memory.add_turns`).

    Returns:
        Inserted and skipped counts, the new ids and the id of every turn of the batch.

    Raises:
        InvalidInput: a turn is malformed (nothing of the batch is written).
        InputTooLarge: the batch or a turn is over its cap.
    """
    from tideline.ingest.turns import prepare_turns, store_turns
    from tideline.recall.sentences import Passages

    batch = clean_seq(turns, "turns")
    caps = rt.config.caps
    if len(batch) > caps.batch:
        raise InputTooLarge(f"batch of {len(batch)} turns; the cap is {caps.batch}")
    if session is not None:
        session = clean_identity(session, "session", caps.name_chars)
    clean_callback(progress)
    rows = cast("list[Mapping[str, Any]]", batch)  # each item is checked there
    salt = ""
    if idempotency_key is not None:
        salt = clean_identity(idempotency_key, "idempotency_key", 200)
    prepared = prepare_turns(
        rows, scope=rt.scope(scope, write=True), source=clean_name(source, "source", caps),
        session=session, caps=caps, next_index=rt.store.next_turn_index, salt=salt,
    )
    result = store_turns(rt.store, rt.embedder, prepared, progress=progress,
                         txn_turns=caps.import_batch, embed=rt.guard.passages,
                         passages=Passages.of(rt.config.recall))
    if result.inserted and not rt.guard.down:
        rt.writer.fill_pending()
    return result


def _turn_key(rt: Runtime, turn: Mapping[str, Any], scope: str | None) -> tuple[str, str]:
    """The (scope, raw message id) a turn about to be imported is looked up by: its own
    scope, else the import's (the scope :func:`add_turns` will store it in)."""
    own = turn.get("scope")
    where = str(own) if own else rt.scope(scope, write=True)
    return where, str(turn.get("id"))


def _import_turns(rt: Runtime, turns: list[dict[str, Any]], *, source: str, scope: str | None,
                  progress: Progress | None, done: int = 0,
                  total: int | None = None) -> tuple[int, int, set[str], list[int]]:
    """Store ``turns`` a batch at a time; progress counts from ``done`` up to ``total``."""
    batch = rt.config.caps.batch
    inserted = skipped = 0
    sessions: set[str] = set()
    ids: list[int] = []
    whole = len(turns) if total is None else total
    for start in range(0, len(turns), batch):
        chunk = turns[start:start + batch]

        def step(finished: int, _n: int, base: int = done + start) -> None:
            if progress is not None:
                progress(base + finished, whole)

        res = add_turns(rt, chunk, scope=scope, source=source, progress=step)
        inserted += res.inserted
        skipped += res.skipped
        ids.extend(res.turn_ids)
        sessions.update(str(t.get("session")) for t in chunk)
    if progress is not None and total is None:
        progress(whole, whole)
    return inserted, skipped, sessions, ids


def import_claude(
    rt: Runtime, reader: AgentReader, paths: Sequence[str | Path] | None, *,
    scope: str | None, tool_results: bool, progress: Progress | None,
) -> dict[str, Any]:
    """Import Claude Code transcripts (see :meth:`tideline.Memory.import_claude`).

    One transcript at a time: a file is parsed, its unseen turns are stored, and only
    then is the next one read, so memory holds one file's turns however many files
    there are. With ``progress``, a first pass reads only the message ids (parsing
    costs little beside embedding) so the number of turns to store is known up front.

    Raises:
        InvalidInput: malformed paths, ``tool_results`` or ``progress``.
        NotFound: a given path does not exist.
    """
    from tideline.ingest.claude import SOURCE, find_transcripts, parse_transcript

    tool_results = clean_flag(tool_results, "tool_results")
    clean_callback(progress)
    files = find_transcripts(clean_paths(paths, "paths"))
    total = 0
    if progress is not None:
        ids_seen: set[tuple[str, str]] = set()
        for f in files:
            ids_seen.update(_turn_key(rt, t, scope) for t in
                            parse_transcript(f, scope=scope, tool_results=tool_results).turns)
        total = len(ids_seen - reader.existing_message_ids(SOURCE, ids_seen))
    seen = done = inserted = skipped = 0
    sessions: set[str] = set()
    dropped: Counter[str] = Counter()
    ids: list[int] = []
    for f in files:
        parsed = parse_transcript(f, scope=scope, tool_results=tool_results)
        dropped.update(parsed.skipped)
        sessions.update(t["session"] for t in parsed.turns)
        known = reader.existing_message_ids(SOURCE, [_turn_key(rt, t, scope)
                                                     for t in parsed.turns])
        fresh: list[dict[str, Any]] = []
        for t in parsed.turns:  # a message copied into several transcripts is stored once
            key = _turn_key(rt, t, scope)
            if key not in known:
                known.add(key)
                fresh.append(t)
        # A live transcript may have grown since the first pass: the total grows with it.
        total = max(total, done + len(fresh))
        more, again, _sessions, new_ids = _import_turns(
            rt, fresh, source=SOURCE, scope=scope, progress=progress, done=done, total=total)
        inserted += more
        skipped += again + len(parsed.turns) - len(fresh)
        ids.extend(new_ids)
        seen += len(parsed.turns)
        done += len(fresh)
    if progress is not None:
        progress(total, total)
    return {"source": SOURCE, "files": len(files), "turns": seen,
            "inserted": inserted, "skipped": skipped, "sessions": len(sessions),
            "dropped": dict(dropped), "turn_ids": ids}


def import_hermes(
    rt: Runtime, reader: AgentReader, paths: Sequence[str | Path] | None, *,
    scope: str | None, session: str | None, tool_results: bool, progress: Progress | None,
) -> dict[str, Any]:
    """Import Hermes Agent sessions (see :meth:`tideline.Memory.import_hermes`).

    One session at a time: its messages are read, its unseen turns stored, then the
    next is read. With ``progress``, a first pass finds the turns to store (a read
    of the sessions, cheap beside embedding) so the total is known up front.

    Raises:
        InvalidInput: malformed paths, session, ``tool_results`` or ``progress``.
        NotFound: no sessions at a path.
        StoreCorrupt: a database is not Hermes'.
    """
    from tideline.ingest.hermes import SOURCE, hermes_turns, read_hermes, unseen_turns

    tool_results = clean_flag(tool_results, "tool_results")
    clean_callback(progress)
    if session is not None:
        # A filter on Hermes' own session names: matched raw, never stored.
        session = normalise_text(session, "session", rt.config.caps.name_chars, required=True)
    where = clean_paths(paths, "paths")

    def unseen(sess: dict[str, Any]) -> tuple[HermesSessions, list[dict[str, Any]], int]:
        parsed = hermes_turns([sess], scope=scope, tool_results=tool_results)
        known = reader.existing_message_ids(SOURCE, [_turn_key(rt, t, scope)
                                                     for t in parsed.turns if "id" in t])
        fresh, live = unseen_turns([t for t in parsed.turns if "id" not in t
                                    or _turn_key(rt, t, scope) not in known],
                                   reader.session_fingerprints)
        return parsed, fresh, live

    sessions = read_hermes(where, session=session)
    total = 0
    if progress is not None:
        total = sum(len(unseen(s)[1]) for s in read_hermes(where, session=session))
    done = inserted = skipped = turns = captured = 0
    named: set[str] = set()
    dropped: Counter[str] = Counter()
    ids: list[int] = []
    for sess in sessions:
        parsed, fresh, live = unseen(sess)
        named |= parsed.sessions
        dropped.update(parsed.skipped)
        total = max(total, done + len(fresh))
        more, again, _sessions, new_ids = _import_turns(
            rt, fresh, source=SOURCE, scope=scope, progress=progress, done=done, total=total)
        inserted += more
        skipped += again + len(parsed.turns) - len(fresh)
        captured += live
        turns += len(parsed.turns)
        ids.extend(new_ids)
        done += len(fresh)
    if progress is not None:
        progress(total, total)
    return {"source": SOURCE, "sessions": len(named), "turns": turns, "inserted": inserted,
            "skipped": skipped, "captured_live": captured, "dropped": dict(dropped),
            "turn_ids": ids}


def import_jsonl(
    rt: Runtime, path: str | Path, *, scope: str | None, source: str,
    progress: Progress | None, batch: int | None,
) -> dict[str, Any]:
    """Import a JSONL chat, ``batch`` lines per transaction (see ``Memory.import_jsonl``).

    Raises:
        NotFound: no such file.
        InvalidInput: a line is not a JSON object or a turn is malformed, or a bad
            path, ``batch`` or ``progress``.
        InputTooLarge: a line or a turn is over its cap, or ``batch`` over the batch cap.
    """
    from tideline.ingest.jsonl import count_lines, iter_jsonl
    from tideline.ingest.turns import Occurrences, prepare_turns, store_turns
    from tideline.recall.sentences import Passages

    clean_callback(progress)
    given = clean_paths([path], "path")
    caps = rt.config.caps
    size = caps.import_batch if batch is None else batch
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InvalidInput(f"batch must be a positive integer, got {size!r}")
    if size > caps.batch:
        raise InputTooLarge(f"batch of {size} turns; the cap is {caps.batch}")
    file = Path(given[0]) if given else Path("")
    total = count_lines(file)
    where = rt.scope(scope, write=True)
    src = clean_name(source, "source", caps)
    occurrences = Occurrences()
    sessions: set[str] = set()
    ids: list[int] = []
    read = inserted = skipped = batches = 0
    rows: list[tuple[int, dict[str, Any]]] = []

    def flush() -> None:
        nonlocal read, inserted, skipped, batches
        turns = prepare_turns([obj for _, obj in rows], scope=where, source=src,
                              session=None, caps=caps, next_index=rt.store.next_turn_index,
                              occurrences=occurrences,
                              labels=[f"{file}:{n}" for n, _ in rows])
        res = store_turns(rt.store, rt.embedder, turns, txn_turns=size,
                          passages=Passages.of(rt.config.recall))
        read += len(turns)
        inserted += res.inserted
        skipped += res.skipped
        batches += 1
        ids.extend(res.turn_ids)
        sessions.update(t.session for t in turns)
        if progress is not None:
            progress(rows[-1][0], total)
        rows.clear()

    for item in iter_jsonl(file, line_bytes=caps.line_bytes):
        rows.append(item)
        if len(rows) >= size:
            flush()
    if rows:
        flush()
    if progress is not None:
        progress(total, total)
    return {"source": src, "files": 1, "turns": read, "inserted": inserted,
            "skipped": skipped, "sessions": len(sessions), "batches": batches,
            "turn_ids": ids}


def capture_turns(
    rt: Runtime, reader: AgentReader, turns: Sequence[Mapping[str, Any]], *, source: str,
    scope: str | None = None,
) -> dict[str, Any]:
    """Store turns handed over live, skipping known ids (see ``Memory.capture_turns``).

    Raises:
        InvalidInput: a turn is not an object, or a malformed source.
    """
    rows = []
    for pos, t in enumerate(clean_seq(turns, "turns")):
        if not isinstance(t, Mapping):
            raise InvalidInput(f"turn {pos}: expected an object, got {type(t).__name__}")
        rows.append(dict(t))
    source = clean_name(source, "source", rt.config.caps)
    known = reader.existing_message_ids(source, [_turn_key(rt, t, scope) for t in rows
                                                 if t.get("id")])
    fresh = [t for t in rows if not t.get("id") or _turn_key(rt, t, scope) not in known]
    if not fresh:
        return {"inserted": 0, "skipped": len(rows), "turn_ids": []}
    inserted, skipped, _s, ids = _import_turns(rt, fresh, source=source, scope=scope,
                                               progress=None)
    return {"inserted": inserted, "skipped": skipped + len(rows) - len(fresh),
            "turn_ids": ids}
