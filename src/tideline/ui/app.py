"""The local web app: one :class:`~tideline.Memory`, server-rendered pages, our own script.

:func:`build_app` puts the pages (:mod:`tideline.ui.pages`) over the shared
:class:`~tideline.ui.core.UI` behind the :class:`~tideline.ui.security.Guard`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from tideline.dream.errors import DreamError, LLMOutputInvalid, ProviderError
from tideline.errors import Conflict, InvalidInput, NotFound, TidelineError
from tideline.ui.core import UI
from tideline.ui.security import Guard, allowed_hosts

if TYPE_CHECKING:
    from tideline.dream.settings import DreamSettings
    from tideline.memory import Memory

__all__ = ["build_app"]

# An agent's answer that fails the layer's checks is bad input, as `dream apply` says; a
# provider that failed is a bad gateway; any other DREAM error (no provider configured) is
# the request's to fix. First match wins, so the subclasses stand before DreamError.
_STATUS = {NotFound: 404, Conflict: 409, InvalidInput: 400, LLMOutputInvalid: 400,
           ProviderError: 502, DreamError: 400}


def build_app(mem: Memory, *, host: str = "127.0.0.1", port: int = 8766,
              token: str | None = None, dream_settings: DreamSettings | None = None) -> Guard:
    """The ASGI app over ``mem``, behind the :class:`~tideline.ui.security.Guard`.

    Args:
        mem: the opened memory (the app does not close it).
        host: the address it is served on (for the Host and Origin checks).
        port: the port it is served on.
        token: the access token (required beyond loopback; see :func:`check_binding`).
        dream_settings: the DREAM provider settings (default: from the environment).

    Returns:
        The ASGI application.

    Raises:
        InvalidInput: a non-loopback host without a token, or a token that is too short.
    """
    from tideline.access import check_binding
    from tideline.ui.pages import routes

    check_binding(host, token)
    ui = UI(mem, dream_settings=dream_settings)

    async def error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return ui.page(request, "error.html", status=exc.status_code, message=exc.detail)
        assert isinstance(exc, TidelineError)  # noqa: S101 - registered for it only
        status = next((s for cls, s in _STATUS.items() if isinstance(exc, cls)), 500)
        return ui.page(request, "error.html", status=status, message=f"{exc.code}: {exc}")

    static = StaticFiles(directory=str(Path(__file__).parent / "static"))
    app = Starlette(routes=[*routes(ui), Mount("/static", static, name="static")],
                    exception_handlers={HTTPException: error, TidelineError: error})
    return Guard(app, hosts=allowed_hosts(host, port), token=token)
