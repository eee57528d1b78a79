"""The write path: validate → embed → novelty gate → one short transaction.

The gate compares a new memory with its nearest neighbour in the same scope, by the
cosine of their vectors and by their whole texts (:mod:`tideline.write.contrast`: the
names, numbers, identifiers, polarity and words of each, past the embedder's window):

* the same sentence with another value in one place (a name, a number, a version,
  tabs → spaces, happen → never happen), cosine ≥ ``min(profile.related,
  profile.abstain)`` → **correct**: a new memory plus an ``updates`` edge from it to
  the neighbour; nothing is merged, recall ranks the newer one first;
* cosine ≥ ``profile.same`` and the texts say the same thing (same slots, same
  polarity, nothing added; two wordings must also share their content:
  :func:`~tideline.write.contrast.restates`) → **potentiate** the existing memory
  (reinforce it, merge tags and source_links; no new row) — rephrasings never pile up;
* otherwise ``profile.related`` ≤ cosine with enough content in common, each shared
  word weighed by what it says (:func:`~tideline.write.contrast.linkable`: a person
  and a common verb are not enough) → **link**: a new memory plus a ``related`` edge
  to the neighbour;
* anything else → **new**.

An idempotency key makes a retried write a no-op that returns the first outcome.
A key the caller gives replays for good. Without one, the key is the hash of the
normalised content, scope, kind and source, and it replays only within the retry
window (``config.write_retry_window_s``, 600 s by default): a client retrying a
write it did not see answered. The same content stated again later is a
restatement and goes through the gate, which potentiates the memory it matches —
that is how spaced reinforcement happens.
When the embedder is unavailable the write is stored all the same, its vector
pending (:mod:`tideline.store.pending`), and the gate judges by text: the same
text (case-folded) in scope potentiates, a memory sharing most of its words
(:func:`lexical_similarity` ≥ ``LEXICAL_RELATED``) is corrected or linked, anything
else is new.
The next write that embeds fills pending vectors in (a batch at a time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from tideline.config import Config
from tideline.dynamics import reinforce
from tideline.embed.base import Embedder
from tideline.embed.guard import EmbedGuard
from tideline.models import (
    EDGE_OF_DECISION,
    Decision,
    LexicalQuery,
    MemoryRecord,
    WriteResult,
    compute_weight,
)
from tideline.store.base import GatedWrite, VectorSearch, WriteRows
from tideline.write.contrast import Contrast, compare, linkable, restates

__all__ = [
    "PreparedWrite", "Writer", "gate_decision", "idempotency_key", "judge", "lexical_similarity",
    "merge_into", "new_details",
]

LEXICAL_RELATED = 0.6
"""Word overlap (Jaccard) at which a write made without a vector links its neighbour."""
FILL_AFTER_WRITE = 256
"""Pending vectors filled in after a write that embedded (the rest: the next ones)."""
GATE_K = 4
"""Neighbours the gate looks at: the nearest of them not superseded is the one judged."""
AT_ONCE_TRIES = 3
"""Judgements of a write stored at once whose target changed meanwhile, before the write
takes the target's lock instead (see :meth:`Writer._commit_at_once`)."""


def idempotency_key(namespace: str, rec: MemoryRecord, source: str) -> str:
    """Default key: hash of the normalised content, scope, kind and source."""
    content = "\x1f".join(
        [namespace, rec.scope, rec.kind, rec.gesture.casefold(), rec.context.casefold(),
         rec.cognition_direction.casefold(), source]
    )
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def gate_decision(similarity: float, same: float, related: float) -> Decision:
    """Map the nearest neighbour's cosine to the gate's decision."""
    if similarity >= same:
        return "potentiate"
    if similarity >= related:
        return "link"
    return "new"


def judge(new: str, old: str, similarity: float, same: float, related: float,
          floor: float | None = None) -> tuple[Decision, Contrast | None]:
    """The gate's decision on ``new`` against its nearest neighbour's text ``old``.

    Args:
        new: the text being written.
        old: the neighbour's text.
        similarity: their cosine (or word overlap, without a vector).
        same: the cosine from which a restatement potentiates.
        related: the cosine from which two memories are linked.
        floor: the cosine from which a one-slot edit counts as a correction
            (default ``related``).

    Returns:
        The decision and the texts' contrast (None when they are too far apart to
        compare).
    """
    floor = related if floor is None else min(floor, related)
    if similarity < floor:
        return "new", None
    contrast = compare(new, old)
    if contrast.verdict == "correction":
        return "correct", contrast
    if similarity >= same and restates(new, old, contrast):
        return "potentiate", contrast
    # Close vectors are not enough for a link: the words must be shared too.
    if similarity >= related and linkable(new, old):
        return "link", contrast
    return "new", contrast


@dataclass(frozen=True)
class PreparedWrite:
    """A draft that has been embedded and judged by the gate, not yet stored.

    Attributes:
        rec: the validated draft.
        key: its idempotency key.
        source: where the write came from.
        vector: its embedding (None: the embedder was unavailable, vector pending).
        nearest: the nearest live memory in scope, if any.
        similarity: cosine to ``nearest``.
        decision: what the gate decided (re-checked at commit).
        explicit_key: the caller gave ``key`` (it replays for good, not only within the
            retry window).
        target: ``nearest`` as the gate read it, with its store token (see
            :meth:`~tideline.store.base.WriteRows.gate_target`), when it was compared.
        contrast: how the texts differ (None: not compared).
    """

    rec: MemoryRecord
    key: str
    source: str
    vector: np.ndarray | None
    nearest: int | None
    similarity: float
    decision: Decision
    explicit_key: bool = False
    target: tuple[MemoryRecord | None, Any] | None = None
    contrast: Contrast | None = None


class Writer:
    """Applies the write path for one store."""

    def __init__(
        self, store: WriteRows, embedder: Embedder, vectors: VectorSearch, config: Config,
        *, guard: EmbedGuard | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = vectors
        self.config = config
        self.guard = guard or EmbedGuard(embedder)
        #: The clock the retry window is measured with (tests may replace it).
        self.clock: Callable[[], float] = time.time

    def _since(self, explicit: bool, now: float) -> float | None:
        """Since when a stored outcome of the key makes this write a replay (None: ever)."""
        return None if explicit else now - float(self.config.write_retry_window_s)

    def _seen(self, key: str, explicit: bool,
              now: float) -> tuple[int, str, float, int | None] | None:
        """The stored outcome this write replays, if it is a retry."""
        return self.store.write_key(key, since=self._since(explicit, now))

    def write(
        self, rec: MemoryRecord, *, key: str | None, source: str, gate: bool = True
    ) -> WriteResult:
        """Store a validated draft (its ``id`` is ignored).

        Args:
            rec: the validated draft.
            key: idempotency key; ``None`` derives one from the content.
            source: where the write came from (api, cli, mcp, hook, dream…).
            gate: run the novelty gate (off for revisions, which always make a new row).

        Returns:
            The gate's decision and the id that now holds the memory.

        Raises:
            StoreBusy: the write lock could not be had.
        """
        prepared = self.prepare(rec, key=key, source=source, gate=gate)
        if isinstance(prepared, WriteResult):
            return prepared
        result = self._commit_at_once(prepared) if self.store.gated_at_once else None
        if result is None:
            with self.store.transaction() as c:
                result = self.commit(c, prepared, self.clock())
        if prepared.vector is not None:
            self.fill_pending()
        return result

    def fill_pending(self, limit: int | None = FILL_AFTER_WRITE) -> int:
        """Embed rows stored while the embedder was down, if any (one meta read if none)."""
        if self.guard.full_text_only or not self.store.vectors_pending():
            return 0
        return int(self.store.fill_pending(self.guard.passages, limit=limit)["filled"])

    def prepare(
        self, rec: MemoryRecord, *, key: str | None, source: str, gate: bool = True,
        vector: np.ndarray | None = None,
    ) -> PreparedWrite | WriteResult:
        """The slow half of a write, outside any transaction: embed and ask the gate.

        Args:
            rec: the validated draft.
            key: idempotency key; ``None`` derives one from the content.
            source: where the write came from.
            gate: run the novelty gate.
            vector: the draft's embedding, if the caller already has it.

        Returns:
            What :meth:`commit` needs, or the stored outcome when the key was seen before.
        """
        explicit = key is not None
        key = key or idempotency_key(self.store.namespace, rec, source)
        # On a database server the key is read with the gate's search, one round trip
        # less per write; a replay then costs an embedding (retries are rare).
        together = gate and self.store.key_with_gate
        if not together:
            seen = self._seen(key, explicit, self.clock())
            if seen is not None:
                return _replayed(seen, rec.scope)
        if vector is None:
            embedded = self.guard.passages([rec.text])
            vector = None if embedded is None else embedded[0]
        if vector is None:  # the embedder is unavailable: judge by the words
            if together and (seen := self._seen(key, explicit, self.clock())) is not None:
                return _replayed(seen, rec.scope)
            nearest, similarity = self._lexical_nearest(rec) if gate else (None, 0.0)
            same, related, floor = 1.0, LEXICAL_RELATED, LEXICAL_RELATED
        else:
            if together:
                seen, (nearest, similarity) = self.store.keyed_nearest_live(
                    self.vectors, rec.scope, vector, GATE_K, key,
                    since=self._since(explicit, self.clock()))
                if seen is not None:
                    return _replayed(seen, rec.scope)
            else:
                nearest, similarity = (self._nearest(rec.scope, vector) if gate
                                       else (None, 0.0))
            profile = self.embedder.profile
            same, related = profile.same, profile.related
            floor = min(profile.related, profile.abstain)
        decision: Decision = "new"
        target: tuple[MemoryRecord | None, Any] | None = None
        contrast = None
        if nearest and similarity >= min(floor, related):
            # The gate reads the neighbour's whole text: the cosine alone cannot tell a
            # restatement from a correction (see tideline.write.contrast).
            target = self.store.gate_target(nearest)
            if target[0] is not None:
                decision, contrast = judge(rec.text, target[0].text, similarity, same,
                                           related, floor)
        return PreparedWrite(rec=rec, key=key, source=source, vector=vector, nearest=nearest,
                             similarity=similarity, decision=decision, explicit_key=explicit,
                             target=target, contrast=contrast)

    def commit(self, c: Any, prepared: PreparedWrite, now: float) -> WriteResult:
        """The fast half of a write, inside the caller's transaction ``c``.

        The idempotency key and the potentiation target are checked again here,
        because the world may have moved since :meth:`prepare`.

        Returns:
            The gate's decision and the id that now holds the memory.
        """
        nearest = prepared.nearest
        # The key's re-check and the potentiation target's lock in one round trip.
        lock = [nearest] if prepared.decision == "potentiate" and nearest is not None else []
        seen, found = self.store.commit_reads(
            c, prepared.key, since=self._since(prepared.explicit_key, now), lock=lock)
        if seen is not None:
            return _replayed(seen, prepared.rec.scope)
        write = self._judged(prepared, found.get(lock[0]) if lock else None, now)
        return self._result(prepared, write, self.store.record_gated(c, write))

    def _commit_at_once(self, prepared: PreparedWrite) -> WriteResult | None:
        """:meth:`commit` without a transaction of the caller's: the potentiation target
        read without a lock and judged, then everything checked and stored in one go
        (:meth:`~tideline.store.base.WriteRows.record_gated_at_once`, one statement on
        PostgreSQL). None when the target kept changing under the judgement: the caller
        then commits in a transaction that locks it."""
        nearest = prepared.nearest
        judged = prepared.decision == "potentiate" and nearest is not None
        held = prepared.target
        for _ in range(AT_ONCE_TRIES):
            now = self.clock()
            if not judged or nearest is None:
                target, token = None, None
            elif held is not None:  # the gate's own read: the first judgement uses it
                (target, token), held = held, None
            else:
                target, token = self.store.gate_target(nearest)
            write = self._judged(prepared, target, now)
            # A memory missing now stays missing (ids are never reused): nothing to check.
            seen, mid = self.store.record_gated_at_once(
                write, since=self._since(prepared.explicit_key, now),
                target=None if target is None or nearest is None else (nearest, token))
            if seen is not None:
                return _replayed(seen, prepared.rec.scope)
            if mid is not None:
                return self._result(prepared, write, mid)
        return None

    def _judged(self, prepared: PreparedWrite, target: MemoryRecord | None,
                now: float) -> GatedWrite:
        """What the write stores, given the potentiation target as it is now (``target``:
        None when the gate chose no potentiation, or the memory is gone)."""
        rec, nearest, similarity = prepared.rec, prepared.nearest, prepared.similarity
        decision, contrast = prepared.decision, prepared.contrast
        if decision == "potentiate" and nearest is not None:
            if target is None or target.status == "superseded":
                decision, target = "new", None
            elif target.text != (prepared.target[0].text if prepared.target
                                 and prepared.target[0] else None):
                # The target's text moved since the gate read it: judge the text it has.
                contrast = compare(rec.text, target.text)
                if not restates(rec.text, target.text, contrast):
                    decision = "correct" if contrast.verdict == "correction" else "link"
                    target = None
        if decision == "potentiate" and target is not None:
            stored = merge_into(reinforce(target, now, self.config.dynamics), rec)
        else:
            stored = dataclasses.replace(rec, recorded_at=now, updated_at=now, last_access=now)
        # A derived key is refreshed on every restatement, so the retry window runs from
        # the latest write of the content, not from the first one.
        return GatedWrite(
            rec=stored, vector=prepared.vector, decision=decision, similarity=similarity,
            nearest=nearest, key=prepared.key, refresh_key=not prepared.explicit_key,
            event={"decision": decision, "similarity": round(similarity, 4),
                   "nearest": nearest, "scope": rec.scope, "kind": rec.kind,
                   "source": prepared.source} | ({"vector": "pending"}
                                                 if self._pending(prepared) else {})
                  | ({"contrast": contrast.summary()}
                     if contrast is not None and decision != "new" else {}),
            now=now)

    def _pending(self, prepared: PreparedWrite) -> bool:
        return prepared.vector is None and not self.guard.full_text_only

    def _result(self, prepared: PreparedWrite, write: GatedWrite, mid: int) -> WriteResult:
        kind = EDGE_OF_DECISION.get(write.decision)
        edge = (None if kind is None or prepared.nearest is None
                else {"type": kind, "src": mid, "dst": prepared.nearest})
        return WriteResult(id=mid, decision=cast(Decision, write.decision),
                           similarity=round(prepared.similarity, 4), nearest=prepared.nearest,
                           scope=prepared.rec.scope, vector_pending=self._pending(prepared),
                           edge=edge)

    def _lexical_nearest(self, rec: MemoryRecord) -> tuple[int | None, float]:
        """The live memory in scope whose words are nearest (1.0: the same text)."""
        rows = self.store.search_memories(LexicalQuery(text=rec.gesture), substrings=False,
                                          scopes=[rec.scope], limit=8)
        if not rows:
            return None, 0.0
        live = self.store.get_memories([key for key, _ in rows])
        best: tuple[int | None, float] = (None, 0.0)
        for mid, other in live.items():
            if other.status == "superseded":
                continue
            sim = lexical_similarity(rec.text, other.text)
            if sim > best[1]:
                best = (mid, sim)
        return best

    def _nearest(self, scope: str, vector: np.ndarray) -> tuple[int | None, float]:
        return self.store.nearest_live(self.vectors, scope, vector, GATE_K)


_WORD = re.compile(r"[^\s,;!?()\[\]{}\"'«»“”„]+")


def new_details(text: str, target: str) -> list[str]:
    """Distinctive tokens of ``text`` that ``target`` lacks: numbers, identifiers, names.

    Embeddings see "the deploy is on Tuesday" and "… on Thursday" as near-identical;
    potentiating one into the other would silently drop a fact. A token counts as a
    detail when it holds a digit, inner punctuation (``ATL-5542``, ``v1.2``,
    ``psycopg2``) or starts with a capital inside a sentence (a name, a weekday).
    """
    hay = target.casefold()
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?。！？])\s+|\n+", text):
        words = _WORD.findall(sentence)
        for pos, raw in enumerate(words):
            word = raw.strip(".:·-–—")
            if len(word) < 2:
                continue
            detail = (any(ch.isdigit() for ch in word)
                      or any(ch in "-_./:@#" for ch in word[1:-1])
                      or (pos > 0 and word[0].isupper()))
            if detail and word.casefold() not in hay:
                out.append(word)
    return out


def lexical_similarity(a: str, b: str) -> float:
    """1.0 for the same text (case-folded, spacing aside), else the Jaccard overlap of words."""
    if " ".join(a.casefold().split()) == " ".join(b.casefold().split()):
        return 1.0
    wa = {w.strip(".:·-–—").casefold() for w in _WORD.findall(a)} - {""}
    wb = {w.strip(".:·-–—").casefold() for w in _WORD.findall(b)} - {""}
    if not wa or not wb:
        return 0.0
    return min(len(wa & wb) / len(wa | wb), 0.999)


def merge_into(target: MemoryRecord, new: MemoryRecord) -> MemoryRecord:
    """Potentiation keeps the old text and folds in the new tags, links and weights."""
    changes: dict[str, Any] = {
        "tags": tuple(dict.fromkeys((*target.tags, *new.tags))),
        "source_links": tuple(dict.fromkeys((*target.source_links, *new.source_links))),
        "related_entities": tuple(dict.fromkeys((*target.related_entities,
                                                 *new.related_entities))),
        "importance": max(target.importance, new.importance),
        "emotional": max(target.emotional, new.emotional),
        "unresolved": max(target.unresolved, new.unresolved),
    }
    if new.entities_role and new.entities_role not in target.entities_role:
        changes["entities_role"] = "; ".join(x for x in (target.entities_role,
                                                         new.entities_role) if x)
    if target.event_time is None and new.event_time is not None:
        changes["event_time"] = new.event_time
    merged = dataclasses.replace(target, **changes)
    return dataclasses.replace(
        merged,
        weight=compute_weight(merged.importance, merged.emotional, merged.recurrence,
                              merged.unresolved),
    )


def _replayed(seen: tuple[int, str, float, int | None], scope: str) -> WriteResult:
    mid, decision, similarity, nearest = seen
    return WriteResult(id=mid, decision=cast(Decision, decision), similarity=similarity,
                       nearest=nearest, replayed=True, scope=scope)
