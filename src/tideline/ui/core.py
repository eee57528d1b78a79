"""What every page of the web app shares: the :class:`UI` over one memory, the view a
request asks for, and the helpers that render values as data.

Every page is rendered by Jinja2 with autoescaping on, so stored text is always data;
:func:`shown` also makes bidirectional-override characters visible instead of letting
them reorder the page. Every page names the namespace and the project it shows
(a project with ``global``, or — an explicit choice — every project of the namespace).
Every action goes through the facade, which journals it like any other surface.
The facade is used from one request at a time (a lock), so reads and writes of the
app never interleave on its connection; other processes may write meanwhile and a page
shows what they wrote on its next load. The pages (:mod:`tideline.ui.pages`) import this
module, and :mod:`tideline.ui.app` imports both, so the arrows run one way.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from tideline.errors import InvalidInput
from tideline.ui.security import csrf_ok, new_csrf_token

if TYPE_CHECKING:
    from tideline.dream.settings import DreamSettings
    from tideline.memory import Memory

__all__ = ["ALL", "UI", "View", "link", "number", "redirect", "short", "shown", "when"]

#: The ``scope`` value that means every project of the namespace.
ALL = "*"
#: How long the list of scopes for the project switcher is kept (seconds).
SCOPES_TTL = 30.0

_BIDI = {c for c in map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E,
                                0x200F, 0x061C])}


def shown(value: object) -> Markup:
    """Stored text as HTML text: escaped, and bidi controls drawn as ``⟨U+202E⟩``."""
    text = "" if value is None else str(value)
    if any(c in _BIDI for c in text):
        text = "".join(f"⟨U+{ord(c):04X}⟩" if c in _BIDI else c for c in text)
    return Markup(escape(text))  # noqa: S704 - escape() made it safe


def short(value: object, n: int = 240) -> Markup:
    """Like :func:`shown`, cut to ``n`` characters."""
    text = "" if value is None else " ".join(str(value).split())
    return shown(text if len(text) <= n else text[: n - 1] + "…")


def number(raw: object) -> int | None:
    """A decimal id or count of 1–19 ASCII digits below 2⁶³, else None (``"²"`` is not one)."""
    if not isinstance(raw, str) or not re.fullmatch(r"[0-9]{1,19}", raw):
        return None
    value = int(raw)
    return value if value < 2**63 else None


def when(ts: object) -> str:
    """An epoch time as ``YYYY-MM-DD HH:MM`` UTC ('' for none)."""
    if ts is None or ts == "":
        return ""
    try:
        if isinstance(ts, str) and not re.fullmatch(r"[0-9]+(\.[0-9]*)?", ts):
            moment = datetime.fromisoformat(ts).astimezone(UTC)
        else:
            moment = datetime.fromtimestamp(float(str(ts)), UTC)
        return moment.strftime("%Y-%m-%d %H:%M")
    except (ValueError, OverflowError, OSError):
        return str(ts)


@dataclass(frozen=True)
class View:
    """The project a page shows: a scope with ``global``, or every scope (:data:`ALL`)."""

    param: str
    scopes: list[str] | None
    label: str

    @property
    def all(self) -> bool:
        """Whether every project of the namespace is shown."""
        return self.scopes is None

    def act_scope(self, memory_scope: str) -> str:
        """The scope an action on a memory of ``memory_scope`` is taken for."""
        return memory_scope if self.scopes is None else self.param


@dataclass
class UI:
    """The app's state: the memory, its lock, the CSRF token, the templates."""

    mem: Memory
    csrf: str = field(default_factory=new_csrf_token)
    lock: threading.RLock = field(default_factory=threading.RLock)
    dream_settings: DreamSettings | None = None
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    _scopes: tuple[float, list[str]] = (0.0, [])
    env: Environment = field(init=False)

    def __post_init__(self) -> None:
        self.env = Environment(loader=PackageLoader("tideline.ui", "templates"),
                               autoescape=select_autoescape(default=True, default_for_string=True))
        self.env.filters.update(shown=shown, short=short, when=when)
        self.env.globals.update(ALL=ALL)

    # -- scope ----------------------------------------------------------------------------

    def default_scope(self) -> str:
        """The project the app opened with (``global`` when none)."""
        return self.mem.project or "global"

    def view(self, request: Request) -> View:
        """The project the request asks for (``?scope=``), validated.

        Raises:
            InvalidInput: a malformed scope name.
        """
        raw = request.query_params.get("scope") or self.default_scope()
        if raw == ALL:
            return View(ALL, None, "all projects")
        from tideline.scopes import visible_scopes
        from tideline.write.validate import clean_name

        name = clean_name(raw, "scope", self.mem.config.caps)
        scopes = visible_scopes(name)
        label = name if name == "global" else f"{name} (with global)"
        return View(name, list(scopes), label)

    def scopes(self) -> list[str]:
        """The scopes of the namespace, for the project switcher (kept a few seconds)."""
        at, known = self._scopes
        if time.monotonic() - at > SCOPES_TTL:
            with self.lock:
                known = self.mem.store.scopes()
            self._scopes = (time.monotonic(), known)
        return known

    # -- rendering ------------------------------------------------------------------------

    def page(self, request: Request, template: str, *, status: int = 200,
             **context: Any) -> HTMLResponse:
        """Render ``template`` with what every page shows (namespace, project, CSRF)."""
        try:
            view = self.view(request)
        except InvalidInput:
            view = View(self.default_scope(), [self.default_scope(), "global"],
                        self.default_scope())
        base = {
            "request": request, "view": view, "namespace": self.mem.config.namespace,
            "csrf": self.csrf, "scopes": self.scopes(), "path": request.url.path,
            "notice": request.query_params.get("notice", ""),
            "link": lambda path, **q: link(path, view, **q),
        }
        html = self.env.get_template(template).render(**base, **context)
        return HTMLResponse(html, status_code=status)

    async def form(self, request: Request, *, files: int = 0) -> FormData:
        """A POSTed form after its CSRF check (``files``: how many uploads it may carry).

        Raises:
            HTTPException: 403 when the CSRF token is missing or wrong.
        """
        form = await request.form(max_files=files, max_fields=200, max_part_size=2_000_000)
        if not csrf_ok(self.csrf, form.get("csrf")):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page")
        return form


def link(path: str, view: View, **query: Any) -> str:
    """A URL inside the app that keeps the page's project."""
    params = {k: v for k, v in query.items() if v is not None and v != ""}
    params.setdefault("scope", view.param)
    return path + "?" + urlencode(params)


def redirect(url: str) -> RedirectResponse:
    """After a POST: see the result with a GET (303)."""
    return RedirectResponse(url, status_code=303)

