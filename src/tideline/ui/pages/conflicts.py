"""Corrections and conflicts: pairs the gate (``updates``) or DREAM (``contradicts``)
flagged, side by side, with "keep both" and "supersede"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.errors import InvalidInput
from tideline.ui.core import link, redirect

if TYPE_CHECKING:
    from tideline.ui.core import UI

__all__ = ["routes"]


def listing(ui: UI, request: Request) -> Response:
    view = ui.view(request)
    with ui.lock:
        pairs = ui.mem.conflicts(scope=None if view.all else view.param, all_scopes=view.all)
    return ui.page(request, "conflicts.html", pairs=pairs)


async def resolve(ui: UI, request: Request) -> Response:
    form = await ui.form(request)
    view = ui.view(request)
    try:
        src, dst = int(str(form.get("src"))), int(str(form.get("dst")))
        keep = int(str(form["keep"])) if form.get("keep") else None
    except ValueError:
        raise InvalidInput("src, dst and keep must be memory ids") from None
    action = str(form.get("action") or "")

    def work() -> dict[str, Any]:
        with ui.lock:
            return ui.mem.resolve_conflict(src, dst, action, keep=keep,
                                           scope=None if view.all else view.param,
                                           all_scopes=view.all)

    result = await run_in_threadpool(work)
    done = ("kept both" if action == "keep_both"
            else f"#{result['kept'][0]} supersedes #{result['superseded']}")
    return redirect(link("/conflicts", view, notice=f"#{src} / #{dst}: {done}"))


def routes(ui: UI) -> list[BaseRoute]:
    """The conflicts page and its resolution."""

    async def do_resolve(r: Request) -> Response:
        return await resolve(ui, r)

    return [Route("/conflicts", lambda r: listing(ui, r), name="conflicts"),
            Route("/conflicts/resolve", do_resolve, methods=["POST"])]
