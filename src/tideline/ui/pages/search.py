"""Search: a query over the real recall path, with filters, why each result came up,
and an abstention said plainly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.errors import InvalidInput
from tideline.models import KINDS, RecallItem, RecallPacket
from tideline.ui.core import number

if TYPE_CHECKING:
    from tideline.ui.core import UI

__all__ = ["routes"]

#: The most projects one "all projects" search asks (each with ``global``).
ALL_SCOPES_CAP = 12


def _why(item: RecallItem, packet: RecallPacket) -> list[str]:
    """The signals that brought an item up, in words."""
    out = [f"found by {item.source}"]
    if item.similarity:
        out.append(f"vector similarity {item.similarity:.3f}")
    if item.score:
        out.append(f"score {item.score:.3f}")
    if packet.filters.get("since") or packet.filters.get("until"):
        out.append("inside the date filter")
    elif item.event_time:
        out.append(f"event time {item.event_time[:10]}")
    if packet.degraded:
        out.append(f"degraded: {packet.degraded} only")
    return out


def search(ui: UI, request: Request) -> Response:
    q = request.query_params
    query = (q.get("q") or "").strip()
    view = ui.view(request)
    kind = q.get("kind") or None
    since, until = q.get("since") or None, q.get("until") or None
    results: list[dict[str, Any]] = []
    packets: list[RecallPacket] = []
    if query:
        scopes = ([s for s in ui.scopes() if s != "global"][:ALL_SCOPES_CAP] or ["global"]
                  if view.all else [view.param])
        limit = number(q.get("limit") or "10")
        if limit is None:
            raise InvalidInput("limit must be a number")
        with ui.lock:
            packets.extend(ui.mem.recall(query, scope=scope, kind=kind, since=since,
                                         until=until, limit=limit, tier="ui")
                           for scope in scopes)
        seen: set[tuple[str, Any]] = set()
        for packet in packets:
            for item in packet.items:
                key = (item.type, item.turn_id if item.type == "turn" else item.id)
                if key in seen:
                    continue
                seen.add(key)
                results.append({"item": item, "why": _why(item, packet)})
        results.sort(key=lambda r: -r["item"].confidence)
    abstained = bool(packets) and all(p.abstained for p in packets)
    latency = sum(p.latency_ms for p in packets)
    signals = packets[0].signals if len(packets) == 1 else {}
    return ui.page(request, "search.html", kinds=KINDS, query=query, kind=kind or "",
                   since=since or "", until=until or "", results=results, abstained=abstained,
                   latency=latency, signals=signals, searched=bool(query))


def routes(ui: UI) -> list[BaseRoute]:
    """The search page at ``/``."""
    return [Route("/", lambda r: search(ui, r), name="search")]
