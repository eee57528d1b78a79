"""Journal: the namespace's events, newest first, with filters (kind, memory) and pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.errors import InvalidInput
from tideline.ui.core import number

if TYPE_CHECKING:
    from tideline.ui.core import UI

__all__ = ["routes"]

PAGE = 50
#: Filters offered as one click: the issue's writes, recalls, feedback and hook errors.
GROUPS = {
    "writes": ["write", "revise", "forget", "merge"],
    "recalls": ["recall"],
    "feedback": ["reflect"],
    "hooks": ["hook_error"],
    "dream": ["dream_call", "dream_apply", "dream_error"],
    "conflicts": ["conflict_resolved"],
}


def _number(raw: str | None, name: str) -> int | None:
    if not raw:
        return None
    value = number(raw)
    if value is None:
        raise InvalidInput(f"{name} must be a positive integer")
    return value


def summary(event: dict[str, Any]) -> str:
    """The event's data as short ``key=value`` pairs (the page escapes them)."""
    data = event["data"] if isinstance(event["data"], dict) else {"data": event["data"]}
    parts = []
    for key, value in list(data.items())[:12]:
        text = str(value)
        parts.append(f"{key}={text if len(text) <= 80 else text[:79] + '…'}")
    return " · ".join(parts)


def journal(ui: UI, request: Request) -> Response:
    q = request.query_params
    kind = q.get("kind") or ""
    group = q.get("group") or ""
    kinds = GROUPS.get(group) or ([kind] if kind else None)
    memory_id = _number(q.get("memory"), "memory")
    before = _number(q.get("before"), "before")
    with ui.lock:
        events = ui.mem.browse.events(kinds=kinds, memory_id=memory_id, before_id=before,
                                      limit=PAGE)
        known = ui.mem.browse.event_kinds()
    rows = [{**e, "summary": summary(e)} for e in events]
    return ui.page(request, "journal.html", events=rows, kind=kind, group=group,
                   groups=list(GROUPS), kinds=known, memory=memory_id or "",
                   older=events[-1]["id"] if len(events) == PAGE else None)


def routes(ui: UI) -> list[BaseRoute]:
    """The journal page."""
    return [Route("/journal", lambda r: journal(ui, r), name="journal")]
