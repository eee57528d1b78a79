"""What every request to the local web app passes: token, Host, Origin, CSRF, CSP.

The rules are those of ``tideline serve --http`` (:mod:`tideline.mcp.transports`):
loopback by default; any other address only with a token of at least 16 characters
from ``$TIDELINE_MCP_TOKEN`` or ``--token-file`` (never a command-line value), and a
token given on loopback is enforced too. A browser presents the token once as
``?token=…`` (answered with an ``HttpOnly``, ``SameSite=Strict`` cookie and a redirect
that drops it from the address bar) or on every request as ``Authorization: Bearer``.

DNS rebinding: the ``Host`` header must name the address the app listens on (on
loopback also ``localhost``), so a page of another site whose name was made to point
at this machine is refused. Every ``Origin`` a browser sends must be this app's own,
and a state-changing request is a ``POST`` carrying the process's CSRF token and an
``Origin`` or ``Referer`` of this app. Every answer carries a strict
Content-Security-Policy: scripts and styles only from this app, no inline script,
no frames, forms only to this app.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tideline.access import is_loopback

__all__ = ["CSP", "Guard", "allowed_hosts", "new_csrf_token"]

#: The page's Content-Security-Policy: nothing runs but this app's own script file.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

TOKEN_COOKIE = "tideline_ui_token"  # noqa: S105 - the cookie's name, not a secret
SAFE_METHODS = {"GET", "HEAD"}


def new_csrf_token() -> str:
    """A fresh random CSRF token (one per server process)."""
    return secrets.token_urlsafe(32)


def allowed_hosts(host: str, port: int) -> set[str]:
    """The ``Host`` header values this app answers to when bound to ``host:port``.

    Empty when bound to every address (``0.0.0.0``, ``::``): any name may reach it, and
    the required token is what keeps other sites out.
    """
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - naming the wildcard, not binding it
        return set()
    names = {host}
    if ":" in host and not host.startswith("["):
        names = {f"[{host}]"}
    if is_loopback(host):
        names |= {"localhost", "127.0.0.1", "[::1]"}
    return {n.lower() for n in names} | {f"{n}:{port}".lower() for n in names}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie") or ""
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class Guard:
    """ASGI middleware: token, Host and Origin checks, and the security headers.

    Args:
        app: the application.
        hosts: allowed ``Host`` values (empty: any).
        token: the access token, or None on loopback without one.
    """

    def __init__(self, app: ASGIApp, *, hosts: Iterable[str], token: str | None) -> None:
        self.app = app
        self.hosts = {h.lower() for h in hosts}
        self.token = token

    def origin_ok(self, origin: str, host: str) -> bool:
        """Whether ``origin`` (an ``Origin`` or ``Referer`` value) is this app itself."""
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        netloc = parts.netloc.lower()
        return netloc == host.lower() and (not self.hosts or netloc in self.hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = (_header(scope, b"host") or "").strip()
        if self.hosts and host.lower() not in self.hosts:
            await _refuse(send, 421, "this address does not serve the Tideline UI "
                                     "(Host header refused: DNS rebinding protection)")
            return
        origin = _header(scope, b"origin")
        if origin is not None and origin != "null" and not self.origin_ok(origin, host):
            await _refuse(send, 403, "cross-origin request refused")
            return
        method = scope["method"]
        if method not in SAFE_METHODS:
            if origin is None:
                referer = _header(scope, b"referer")
                if referer is None or not self.origin_ok(referer, host):
                    await _refuse(send, 403, "a state change must come from this app's own "
                                             "page (no matching Origin or Referer)")
                    return
            elif origin == "null":
                await _refuse(send, 403, "cross-origin request refused")
                return
        if self.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = query.get("token", [None])[0]
            if given is not None and method in SAFE_METHODS and self._match(given):
                rest = {k: v for k, v in query.items() if k != "token"}
                location = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
                await _redirect_with_cookie(send, location, given)
                return
            if not self._authorised(scope):
                await _refuse(send, 401, "a valid token is required: open the URL that "
                                         "`tideline ui` printed")
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += _SECURITY_HEADERS
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)

    def _match(self, given: str) -> bool:
        assert self.token is not None  # noqa: S101 - callers check
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def _authorised(self, scope: Scope) -> bool:
        auth = _header(scope, b"authorization") or ""
        scheme, _, given = auth.partition(" ")
        if scheme.lower() == "bearer" and self._match(given.strip()):
            return True
        cookie = _cookie(scope, TOKEN_COOKIE)
        return cookie is not None and self._match(cookie)


_SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


async def _refuse(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode("utf-8")
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()), *_SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, location: str, token: str) -> None:
    cookie = f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303, "headers": [
        (b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode("latin-1")),
        (b"content-length", b"0"), *_SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": b""})


def csrf_ok(expected: str, given: object) -> bool:
    """Whether a form's CSRF field matches the process's token (constant time)."""
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())
