"""Validation and storage of raw conversation turns (texture).

Turns are validated as a whole batch before anything is written, embedded
outside any transaction, then inserted in short transactions; a (source,
message id) pair that is already stored is skipped, so an import can be
repeated or resumed safely.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tideline.config import Caps
from tideline.embed.base import Embedder
from tideline.errors import InvalidInput
from tideline.models import ImportResult, Turn
from tideline.store.sqlite import SQLiteStore, turn_index_text
from tideline.store.turn_embedding import embed_turns
from tideline.write.validate import clean_name, clean_text, parse_time

__all__ = ["prepare_turns", "store_turns"]

_ROLES = {"user", "assistant", "system", "tool"}
EMBED_BATCH = 64


def prepare_turns(
    batch: Sequence[Mapping[str, Any]], *, scope: str, source: str, session: str | None,
    caps: Caps, next_index: Callable[[str], int],
) -> list[Turn]:
    """Validate a batch of raw turn mappings into :class:`Turn` values.

    Raises:
        InvalidInput: a turn lacks text or has a malformed field (the message names its position).
    """
    counters: dict[str, int] = {}
    out: list[Turn] = []
    now = time.time()
    for pos, raw in enumerate(batch):
        if not isinstance(raw, Mapping):
            raise InvalidInput(f"turn {pos}: expected an object, got {type(raw).__name__}")
        try:
            sess = raw.get("session") or raw.get("session_id") or session or "default"
            sess = clean_text(str(sess), "session", caps.name_chars, required=True)
            speaker_raw = raw.get("speaker") or raw.get("name") or raw.get("role") or "unknown"
            speaker = clean_text(str(speaker_raw), "speaker", caps.name_chars, required=True)
            role = str(raw.get("role") or "").strip().lower()
            if role not in _ROLES:
                role = "assistant" if speaker.lower() in ("assistant", "agent") else "user"
            text = clean_text(raw.get("text", raw.get("content")), "text", caps.turn_chars,
                              required=True)
            ts = parse_time(raw.get("timestamp", raw.get("ts")), "timestamp")
            index = raw.get("turn_index")
            if index is None:
                if sess not in counters:
                    counters[sess] = next_index(sess)
                index = counters[sess]
                counters[sess] += 1
            elif isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise InvalidInput("turn_index must be a non-negative integer")
            msg = raw.get("id", raw.get("message_id"))
            if msg is None or msg == "":
                digest = hashlib.sha256(f"{sess}\x1f{index}\x1f{text}".encode()).hexdigest()
                msg = f"auto-{digest[:24]}"
            msg_id = clean_text(str(msg), "id", caps.name_chars, required=True)
            turn_scope = scope
            if raw.get("scope"):
                turn_scope = clean_name(raw["scope"], "scope", caps)
        except InvalidInput as exc:
            raise InvalidInput(f"turn {pos}: {exc}") from exc
        out.append(Turn(id=0, session=sess, turn_index=int(index), speaker=speaker, role=role,
                        text=text, timestamp=ts, source=source, message_id=msg_id,
                        scope=turn_scope, recorded_at=now))
    return out


def store_turns(
    store: SQLiteStore, embedder: Embedder, turns: list[Turn], *,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Embed and insert turns that are not stored yet."""

    seen = store.existing_turn_keys([(t.source, t.message_id) for t in turns])
    fresh: list[Turn] = []
    keys: set[tuple[str, str]] = set()
    for t in turns:
        key = (t.source, t.message_id)
        if key in seen or key in keys:
            continue
        keys.add(key)
        fresh.append(t)
    inserted: list[int] = []
    total = len(fresh)
    by_position = {(t.session, t.turn_index): t for t in turns}
    known: dict[str, np.ndarray] = {}  # the previous chunk's own vectors
    for start in range(0, total, EMBED_BATCH):
        chunk = fresh[start:start + EMBED_BATCH]
        own, previous = [], []
        for t in chunk:
            prev = by_position.get((t.session, t.turn_index - 1)) or store.previous_turn(
                t.session, t.turn_index)
            own.append(turn_index_text(t.speaker, t.text))
            previous.append(turn_index_text(prev.speaker, prev.text) if prev else None)
        vectors = embed_turns(embedder, own, previous, known=known)
        with store.db.write() as c:
            for turn, vec in zip(chunk, vectors, strict=True):
                tid = store.insert_turn(c, turn, vec)
                if tid:
                    inserted.append(tid)
            store.log_event(c, "turns", {"inserted": len(inserted), "source": chunk[0].source})
        if progress is not None:
            progress(min(start + EMBED_BATCH, total), total)
    sessions = len({t.session for t in turns})
    return ImportResult(inserted=len(inserted), skipped=len(turns) - len(inserted),
                        sessions=sessions, turn_ids=tuple(inserted))
