"""Conversations: sessions by day, a session's turns, and the memories linking to each turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.errors import InvalidInput
from tideline.ui.core import number

if TYPE_CHECKING:
    from tideline.ui.core import UI

__all__ = ["routes"]

#: Turns on one page of a session.
PAGE = 100


def _day(raw: str | None, latest: float | None) -> datetime:
    if raw:
        try:
            return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            raise InvalidInput("day must be YYYY-MM-DD") from None
    base = datetime.fromtimestamp(latest, UTC) if latest is not None else datetime.now(UTC)
    return base.replace(hour=0, minute=0, second=0, microsecond=0)


def days(ui: UI, request: Request) -> Response:
    view = ui.view(request)
    # "All projects" names them (the switcher's list): the turns' time index leads with
    # the scope, so a read without one would walk every turn of the namespace.
    scopes = ui.scopes() if view.scopes is None else view.scopes
    with ui.lock:
        browse = ui.mem.browse
        latest = None if request.query_params.get("day") else browse.last_turn_time(
            scopes, 1e15)
        day = _day(request.query_params.get("day"), latest)
        start = day.timestamp()
        end = (day + timedelta(days=1)).timestamp()
        sessions = browse.sessions_between(scopes, start, end)
        before = browse.last_turn_time(scopes, start)
        after = browse.first_turn_time(scopes, end)

    def fmt(ts: float | None) -> str | None:
        return None if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")

    return ui.page(request, "conversations.html", day=day.strftime("%Y-%m-%d"),
                   sessions=sessions, before=fmt(before), after=fmt(after))


def session(ui: UI, request: Request) -> Response:
    view = ui.view(request)
    name = request.query_params.get("id") or ""
    raw = request.query_params.get("from") or "0"
    if not name or len(name) > 500:
        raise InvalidInput("a session id is required")
    start = number(raw)
    if start is None:
        raise InvalidInput("from must be a turn index")
    with ui.lock:
        turns = ui.mem.browse.session_turns(name, scopes=view.scopes, from_index=start,
                                            limit=PAGE + 1)
        links = ui.mem.browse.linking(turns[:PAGE], scopes=view.scopes)
    more = turns[PAGE].turn_index if len(turns) > PAGE else None
    mark = request.query_params.get("turn")
    return ui.page(request, "session.html", session=name, turns=turns[:PAGE], links=links,
                   more=more, start=start, mark=number(mark),
                   earlier=max(0, start - PAGE) if start else None)


def routes(ui: UI) -> list[BaseRoute]:
    """Sessions by day and one session's turns."""
    return [Route("/conversations", lambda r: days(ui, r), name="conversations"),
            Route("/session", lambda r: session(ui, r), name="session")]
