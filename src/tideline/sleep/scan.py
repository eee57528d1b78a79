"""Scan for unindexed context — the input of DREAM's solidify layer (the seed's layer 0).

Two tracks, no LLM:

* **Track A** — live memories with empty ``source_links``: narratives with no
  path back to the raw context they came from (newest first, at most
  ``max_memories``). The ``backfill`` step links what it can find.
* **Track B** — raw turns recorded after the newest *solidified* memory of
  their scope (one that links raw context) and linked by no memory, grouped per
  session into time-proximity chunks (a gap over ``gap_minutes`` starts a new
  chunk); the newest ``max_turns`` turns at most. A plain ``remember`` does not
  count as solidification, so it never hides the day's conversation.

The Markdown rendering fences every turn as a quote with its turn id (what the
solidify prompt puts into ``source_links``); turn text is untrusted data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tideline.models import MemoryRecord, Turn, iso
from tideline.store.base import ViewHost
from tideline.store.consolidation import ConsolidationStore

__all__ = ["Chunk", "ScanResult", "run", "scan_unindexed"]

_TURN_CHARS = 2_000
_GESTURE_CHARS = 300


@dataclass(frozen=True)
class Chunk:
    """Consecutive raw turns of one session with no gap longer than the scan's limit."""

    session: str
    scope: str
    start: float
    end: float
    turns: list[Turn]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"session": self.session, "scope": self.scope, "start": iso(self.start),
                "end": iso(self.end), "turns": [t.to_dict() for t in self.turns]}


@dataclass(frozen=True)
class ScanResult:
    """What the scanner found: unlinked memories, unindexed turn chunks, and the Markdown."""

    track_a: list[MemoryRecord]
    track_b: list[Chunk]
    markdown: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"track_a": [m.to_dict() for m in self.track_a],
                "track_b": [c.to_dict() for c in self.track_b], "markdown": self.markdown}


def _when(t: Turn) -> float:
    return t.timestamp if t.timestamp is not None else t.recorded_at


def scan_unindexed(
    store: ViewHost, *, gap_minutes: int = 30, max_turns: int = 400,
    max_memories: int = 200, scopes: Sequence[str] | None = None,
) -> ScanResult:
    """Find unindexed context (track A and track B) and render it as Markdown.

    Args:
        store: the store to scan.
        gap_minutes: a longer silence inside a session starts a new chunk.
        max_turns: at most this many (newest) turns in track B.
        max_memories: at most this many (newest) memories in track A.
        scopes: only these scopes (default: all).

    Returns:
        The :class:`ScanResult`.
    """
    cons = ConsolidationStore(store)
    wanted = set(scopes) if scopes is not None else None
    track_a = [m for m in cons.unlinked(limit=max_memories * (4 if wanted else 1))
               if wanted is None or m.scope in wanted][:max_memories]
    linked = cons.linked_turn_ids()
    turns = [t for t in cons.recent_turns(cons.solidified_cutoffs(), max_turns)
             if t.id not in linked and (wanted is None or t.scope in wanted)]
    groups: dict[tuple[str, str], list[Turn]] = {}
    for t in turns:
        groups.setdefault((t.scope, t.session), []).append(t)
    chunks: list[Chunk] = []
    gap = gap_minutes * 60.0
    for (scope, session), items in groups.items():
        items.sort(key=lambda t: (_when(t), t.turn_index, t.id))
        current: list[Turn] = []
        for t in items:
            if current and _when(t) - _when(current[-1]) > gap:
                chunks.append(Chunk(session, scope, _when(current[0]), _when(current[-1]),
                                    current))
                current = []
            current.append(t)
        if current:
            chunks.append(Chunk(session, scope, _when(current[0]), _when(current[-1]), current))
    chunks.sort(key=lambda c: (c.start, c.session))
    return ScanResult(track_a=track_a, track_b=chunks, markdown=_markdown(track_a, chunks))


def _quote(text: str, limit: int) -> str:
    body = text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more chars]"
    return "\n".join("> " + line for line in body.splitlines() or [""])


def _markdown(track_a: list[MemoryRecord], chunks: list[Chunk]) -> str:
    out = ["# Unindexed context", ""]
    out.append(f"## Track A — memories without source_links ({len(track_a)})")
    out.append("")
    if not track_a:
        out.append("_None._")
    for m in track_a:
        gesture = m.gesture.replace("\n", " ")
        if len(gesture) > _GESTURE_CHARS:
            gesture = gesture[:_GESTURE_CHARS] + " …"
        when = iso(m.event_time or m.recorded_at)
        out.append(f"- memory #{m.id} · {m.scope} · {m.kind} · {when}: {gesture}")
    n_turns = sum(len(c.turns) for c in chunks)
    out += ["", f"## Track B — raw turns after the newest solidified memory "
                f"({n_turns} turns in {len(chunks)} chunks)", ""]
    if not chunks:
        out.append("_None._")
    for i, c in enumerate(chunks, 1):
        out.append(f"### Chunk {i} — session `{c.session}` · scope {c.scope} · "
                   f"{iso(c.start)} → {iso(c.end)} ({len(c.turns)} turns)")
        out.append("")
        for t in c.turns:
            who = t.speaker or t.role
            out.append(f"turn {t.id} · {iso(_when(t))} · {who}:")
            out.append(_quote(t.text, _TURN_CHARS))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def run(ctx: Any) -> dict[str, Any]:
    """Sleep step ``scan``: count what is still unindexed (read-only).

    Returns:
        Metrics: track A memories and track B turns and chunks.
    """
    t = ctx.tuning
    res = scan_unindexed(ctx.rt.store, gap_minutes=t.scan_gap_minutes,
                         max_turns=t.scan_max_turns)
    return {"track_a": len(res.track_a), "track_b_turns": sum(len(c.turns) for c in res.track_b),
            "track_b_chunks": len(res.track_b)}
