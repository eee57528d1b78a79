"""Raw turns behind memories (texture): a memory's source turns, a search, a session window.

:func:`read_context` answers ``Memory.read_context`` (and the MCP tool of the same
name) from the project's scopes and ``global`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tideline.errors import InputTooLarge, InvalidInput
from tideline.recall.request import recall
from tideline.write.identity import clean_identity
from tideline.write.validate import clean_int

if TYPE_CHECKING:
    from tideline.runtime import Runtime
    from tideline.store.agent import AgentReader

__all__ = ["read_context"]


def read_context(
    rt: Runtime, reader: AgentReader, *, memory_id: int | None, query: str | None,
    session: str | None, around: int | None, radius: int, limit: int, scope: str | None,
) -> dict[str, Any]:
    """Raw turns in exactly one of three modes.

    Args:
        rt: the memory's parts.
        reader: SQL access to the store (session tails).
        memory_id: the turns this memory came from, each with ``radius`` turns around it.
        query: search raw context by words and meaning.
        session: a window of this session around turn ``around``, or its end.
        around: the turn index the session window is centred on (None: the end).
        radius: turns on each side of a linked turn.
        limit: at most this many turns (or linked turns).
        scope: the project reading (None: the current one).

    Returns:
        ``{"mode": "memory" | "query" | "session", …, "turns": [...]}``.

    Raises:
        InvalidInput: none or several modes, bad numbers, a malformed session or scope.
        InputTooLarge: ``limit`` over the cap.
        NotFound: no such memory in the project or ``global``.
    """
    if sum(m is not None for m in (memory_id, query, session)) != 1:
        raise InvalidInput("give exactly one of memory_id, query or session")
    radius = clean_int(radius, "radius", lo=0, hi=50)
    limit = clean_int(limit, "limit", lo=1)
    if limit > rt.config.caps.limit:
        raise InputTooLarge(f"limit must be 1–{rt.config.caps.limit}")
    if around is not None:
        around = clean_int(around, "around", lo=0)
    current, visible = rt.scopes(scope)
    if memory_id is not None:
        rec = rt.get(memory_id, scope=current)
        linked = rt.turns(rec.source_links, scope=current)
        windows: list[dict[str, Any]] = []
        for t in linked[:limit]:
            near = rt.store.session_turns(t.session, around=t.turn_index, radius=radius,
                                          limit=2 * radius + 1, scopes=[t.scope])
            windows.append({"turn": t.to_dict(), "window": [w.to_dict() for w in near]})
        return {"mode": "memory", "memory": rec.to_dict(), "linked": len(linked),
                "turns": windows}
    if query is not None:
        packet = recall(rt, query, scope=current, limit=min(rt.config.caps.limit, limit * 3),
                        include_turns=True, abstain=False, log=False)
        hits = [i.to_dict() for i in packet.items
                if i.type == "turn" and i.scope in visible][:limit]
        return {"mode": "query", "query": packet.query, "scope": packet.scope,
                "turns": hits, "best_similarity": round(packet.best_similarity, 4)}
    name = clean_identity(session, "session", rt.config.caps.name_chars)
    if around is None:
        from tideline.models import iso

        rows = [t | {"timestamp": iso(t["timestamp"]), "recorded_at": iso(t["recorded_at"])}
                for t in reader.session_tail(name, limit, visible)]
        return {"mode": "session", "session": name, "scope": current, "turns": rows}
    near = rt.store.session_turns(name, around=around, radius=radius, limit=limit,
                                  scopes=visible)
    return {"mode": "session", "session": name, "scope": current,
            "turns": [t.to_dict() for t in near]}
