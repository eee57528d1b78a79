"""Validation and storage of raw conversation turns (texture).

Turns are validated as a whole batch before anything is written, embedded
outside any transaction, then inserted in one short transaction per batch of at
most ``Caps.import_batch`` turns; a (scope, source, message id) triple that is
already stored is skipped, so an import can be repeated or resumed safely. The same
message id in another project is another turn: an import never learns whether another
project holds it.

Session and message ids are compared as given, never as redacted: one that holds a
secret is stored as its redacted text and a digest of the raw value
(:mod:`tideline.write.identity`), and a derived id hashes the turn's raw text, so two
turns that differ only in a secret stay two.

A turn without a message id gets one derived from what identifies it — source,
session, speaker, timestamp and text (:func:`tideline.models.derived_turn_id`) —
never from its position. Genuinely identical turns (the same speaker saying the
same text at the same timestamp, or both without one, in one session) are told
apart by their occurrence in the file or batch: the first "ok" is occurrence 0,
the second occurrence 1, so importing the file again still matches each to its
stored copy, and neither is merged into the other. The count runs over what one
call (or one streamed file) holds: the same identical turn sent in two separate
calls without a timestamp or id is stored once.

The turn's place in its session (``turn_index``) is assigned by the store inside
the write transaction (:meth:`tideline.store.base.WriteRows.insert_turns`):
the next free index, in input order. A ``turn_index`` in the input is checked
(a non-negative integer) and otherwise ignored.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tideline.config import Caps
from tideline.embed.base import Embedder, Vectors
from tideline.errors import InvalidInput
from tideline.models import ImportResult, Turn, derived_turn_id
from tideline.recall.sentences import Passages, sentence_cap
from tideline.secrets import redact_secrets
from tideline.store.base import WriteRows
from tideline.store.rows import turn_index_text
from tideline.store.turn_embedding import embed_turns
from tideline.write.identity import clean_identity, normalise_text
from tideline.write.validate import INT64_MAX, clean_name, parse_time

__all__ = ["Occurrences", "prepare_turns", "store_turns"]

_ROLES = {"user", "assistant", "system", "tool"}
EMBED_BATCH = 64


@dataclass
class Occurrences:
    """How often each identifying tuple was seen so far in one file or batch.

    Keys are 16-byte digests, so a long file costs a few dozen bytes per turn, not its
    text. One instance spans every batch of a streamed file.
    """

    seen: dict[bytes, int] = field(default_factory=dict)

    def derive(self, source: str, session: str, speaker: str, timestamp: float | None,
               text: str, salt: str = "") -> str:
        """The derived message id of the next turn with these fields."""
        key = hashlib.blake2b(repr((source, session, speaker, timestamp, text, salt)).encode(
            "utf-8", "surrogatepass"), digest_size=16).digest()
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        return derived_turn_id(source, session, speaker, timestamp, text, n, salt)


def prepare_turns(
    batch: Sequence[Mapping[str, Any]], *, scope: str, source: str, session: str | None,
    caps: Caps, next_index: Callable[[str], int], occurrences: Occurrences | None = None,
    salt: str = "", labels: Sequence[str] | None = None,
) -> list[Turn]:
    """Validate a batch of raw turn mappings into :class:`Turn` values.

    Args:
        batch: the raw mappings, in conversation order.
        scope: the scope of turns that name none.
        source: the system they came from.
        session: the session of turns that name none.
        caps: size caps.
        next_index: a session's next free index now; only places the batch's turns
            relative to what is stored (for the embedding's context) — the stored index
            is assigned inside the write transaction.
        occurrences: the counter of identical turns (shared by all batches of one file).
        salt: an idempotency key that id-less turns' ids are derived with.
        labels: what error messages call each turn (default ``turn <position>``), e.g.
            ``chat.jsonl:1234`` for a streamed file.

    Raises:
        InvalidInput: a turn lacks text or has a malformed field (the message names its position).
    """
    counters: dict[str, int] = {}
    occurrences = occurrences if occurrences is not None else Occurrences()
    out: list[Turn] = []
    now = time.time()
    for pos, raw in enumerate(batch):
        if not isinstance(raw, Mapping):
            label = labels[pos] if labels is not None else f"turn {pos}"
            raise InvalidInput(f"{label}: expected an object, got {type(raw).__name__}")
        try:
            sess = raw.get("session") or raw.get("session_id") or session or "default"
            # Ids are decided on the raw values, never on redacted text: two sessions
            # or message ids that both hold a secret stay two (issue 33 item 1).
            sess = clean_identity(str(sess), "session", caps.name_chars)
            speaker_raw = raw.get("speaker") or raw.get("name") or raw.get("role") or "unknown"
            speaker_plain = normalise_text(str(speaker_raw), "speaker", caps.name_chars,
                                           required=True)
            speaker = redact_secrets(speaker_plain)[0]
            role = str(raw.get("role") or "").strip().lower()
            if role not in _ROLES:
                role = "assistant" if speaker.lower() in ("assistant", "agent") else "user"
            plain = normalise_text(raw.get("text", raw.get("content")), "text",
                                   caps.turn_chars, required=True)
            text = redact_secrets(plain)[0]
            ts = parse_time(raw.get("timestamp", raw.get("ts")), "timestamp")
            given = raw.get("turn_index")
            if given is not None and (isinstance(given, bool) or not isinstance(given, int)
                                      or not 0 <= given <= INT64_MAX):
                raise InvalidInput("turn_index must be a non-negative integer")
            if sess not in counters:
                counters[sess] = next_index(sess)
            index = counters[sess]
            counters[sess] += 1
            msg = raw.get("id", raw.get("message_id"))
            if msg is None or msg == "":
                msg = occurrences.derive(source, sess, speaker_plain, ts, plain, salt)
            msg_id = clean_identity(str(msg), "id", caps.name_chars)
            turn_scope = scope
            if raw.get("scope"):
                turn_scope = clean_name(raw["scope"], "scope", caps)
        except InvalidInput as exc:
            label = labels[pos] if labels is not None else f"turn {pos}"
            raise InvalidInput(f"{label}: {exc}") from exc
        out.append(Turn(id=0, session=sess, turn_index=index, speaker=speaker, role=role,
                        text=text, timestamp=ts, source=source, message_id=msg_id,
                        scope=turn_scope, recorded_at=now))
    return out


def store_turns(
    store: WriteRows, embedder: Embedder, turns: list[Turn], *,
    progress: Callable[[int, int], None] | None = None, txn_turns: int = 500,
    embed: Callable[[Sequence[str]], Vectors | None] | None = None,
    passages: Passages | None = None,
) -> ImportResult:
    """Embed and insert turns that are not stored yet, ``txn_turns`` per transaction.

    ``embed`` (default: the embedder's) may return None when the embedder is
    unavailable: the turns are stored all the same, their vectors pending. With
    ``passages`` a turn that plan splits in two or more passages also gets one vector
    per passage (:mod:`tideline.recall.sentences`; a derived extra that recall does
    without when it is missing, so it is not filled in later for turns stored while the
    embedder was down).

    Embedding happens before each transaction, never inside one; each transaction
    stores its turns whole or not at all, so an import killed at any point leaves a
    prefix of its input stored and a re-run completes it.
    """
    # A turn is known by its project, source and message id (namespace: the store's):
    # the same message id in another project is another turn (issue 33 item 2).
    seen = store.existing_turn_keys([(t.scope, t.source, t.message_id) for t in turns])
    ids: dict[tuple[str, str, str], int] = dict(seen)
    fresh: list[Turn] = []
    keys: set[tuple[str, str, str]] = set()
    for t in turns:
        key = (t.scope, t.source, t.message_id)
        if key in seen or key in keys:
            continue
        keys.add(key)
        fresh.append(t)
    inserted: list[int] = []
    total = len(fresh)
    # New turns are appended to their session in input order (insert_turns assigns the
    # indexes), so a turn leans towards the new turn before it in its session, or for the
    # first one towards the session's last stored turn; never towards an input turn that
    # was stored already and is skipped (a re-import embeds each turn as an import of the
    # whole session does).
    before: list[Turn | None] = []
    last: dict[str, Turn | None] = {}
    first_before: dict[str, Turn | None] = {}
    for t in fresh:
        if t.session not in last:
            last[t.session] = store.previous_turn(t.session, store.next_turn_index(t.session))
            first_before[t.session] = last[t.session]
        before.append(last[t.session])
        last[t.session] = t
    # Sessions where an assistant speaks: in this input, or the turn stored just before it.
    assisted = {t.session for t in turns if t.role == "assistant"}
    assisted |= {s for s, prev in first_before.items() if prev is not None
                 and prev.role == "assistant"}
    known: dict[str, np.ndarray] = {}  # the previous chunk's own vectors
    for part_start in range(0, total, max(1, txn_turns)):
        part = fresh[part_start:part_start + max(1, txn_turns)]
        vectors: list[Any] = []
        split: list[Any] = []
        for start in range(0, len(part), EMBED_BATCH):
            chunk = part[start:start + EMBED_BATCH]
            own, previous = [], []
            for i, t in enumerate(chunk, part_start + start):
                prev = before[i]
                own.append(turn_index_text(t.speaker, t.text))
                previous.append(turn_index_text(prev.speaker, prev.text) if prev else None)
            got = embed_turns(embedder, own, previous, known=known, passages=embed)
            vectors.extend(got if got is not None else [None] * len(chunk))
            split.extend(_sentence_vectors(embedder, chunk, embed, passages, assisted)
                         if passages is not None and got is not None
                         else [None] * len(chunk))
            if progress is not None:
                progress(part_start + start + len(chunk), total)
        with store.transaction() as c:
            new = store.insert_turns(c, part, vectors)
            for t, tid, matrix in zip(part, new, split, strict=True):
                if tid and matrix is not None:
                    store.put_sentence_vectors(c, t.scope, tid, matrix)
            store.log_event(c, "turns", {"inserted": sum(1 for i in new if i),
                                         "source": part[0].source})
        for t, tid in zip(part, new, strict=True):
            if tid:
                inserted.append(tid)
                ids[(t.scope, t.source, t.message_id)] = tid
    raced = [k for k in keys if k not in ids]  # stored by another writer meanwhile
    if raced:
        ids.update(store.existing_turn_keys(raced))
    sessions = len({t.session for t in turns})
    return ImportResult(inserted=len(inserted), skipped=len(turns) - len(inserted),
                        sessions=sessions, turn_ids=tuple(inserted),
                        batch_ids=tuple(ids.get((t.scope, t.source, t.message_id), 0)
                                        for t in turns))


def _sentence_vectors(
    embedder: Embedder, chunk: Sequence[Turn],
    embed: Callable[[Sequence[str]], Vectors | None] | None, plan: Passages,
    assisted: set[str],
) -> list[np.ndarray | None]:
    """Per turn of ``chunk``, its passage vectors (None for a turn ``plan`` does not split,
    or for all when the embedder is unavailable); every passage in one embedding call.
    ``assisted``: the sessions where an assistant speaks."""
    cap = sentence_cap(embedder.dim)
    parts = [plan.of_turn(t.text, t.role, cap, t.session in assisted) for t in chunk]
    texts = [turn_index_text(t.speaker, s) for t, p in zip(chunk, parts, strict=True)
             if len(p) > 1 for s in p]
    if not texts:
        return [None] * len(chunk)
    got = (embed or embedder.embed_passages)(texts)
    if got is None:
        return [None] * len(chunk)
    rows = np.asarray(got, dtype=np.float32)
    out: list[np.ndarray | None] = []
    at = 0
    for p in parts:
        if len(p) > 1:
            out.append(rows[at:at + len(p)])
            at += len(p)
        else:
            out.append(None)
    return out
