"""Transports: stdio, and streamable HTTP behind a bearer token.

HTTP listens on loopback by default. Listening on any other address requires a
token (``TIDELINE_MCP_TOKEN`` or ``--token-file``, never a command-line value, which
``ps`` would show to every user), checked on every request in constant time; a token
given on loopback is enforced too. Host and Origin are checked on every address, and
sessions are bounded per client and expire when idle (:mod:`tideline.mcp.http_guard`).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

# The access rules live in tideline.access (shared with `tideline ui`); imported here
# under their old names too.
from tideline.access import ENV_TOKEN, check_binding, is_loopback, read_token
from tideline.config import HttpTuning
from tideline.mcp.http_guard import SessionBudget, bind, log_config, transport_security

__all__ = ["ENV_TOKEN", "BearerAuth", "check_binding", "is_loopback", "read_token",
           "serve_http", "serve_stdio"]


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan (and websockets, which MCP does not use)
            await self.app(scope, receive, send)
            return
        header = b""
        for key, value in scope.get("headers", []):
            if key.lower() == b"authorization":
                header = value
                break
        scheme, _, given = header.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized",
                           "error_description": "a valid bearer token is required"}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"www-authenticate", b'Bearer realm="tideline"'),
            (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer[Any], *, host: str, token: str | None,
             path: str = "/mcp", tuning: HttpTuning | None = None) -> ASGIApp:
    """The streamable-HTTP ASGI app: Host/Origin checked on every address, sessions
    bounded (:class:`~tideline.mcp.http_guard.SessionBudget`), behind :class:`BearerAuth`
    when a token is set."""
    tuning = tuning or HttpTuning()
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=path, host=host,
        transport_security=transport_security(host, tuning.allowed_hosts),
        session_idle_timeout=tuning.session_idle_s,
        max_sessions=None)  # SessionBudget bounds them, ending the least recent instead of 503
    app = SessionBudget(app, per_client=tuning.sessions_per_client,
                        max_total=tuning.max_sessions, idle_s=tuning.session_idle_s)
    return BearerAuth(app, token) if token else app


def serve_http(server: MCPServer[Any], *, host: str = "127.0.0.1", port: int = 8765,
               token: str | None = None, path: str = "/mcp", tuning: HttpTuning | None = None,
               on_listening: Callable[[int], None] | None = None) -> None:
    """Serve over streamable HTTP until interrupted.

    The socket is bound first; only then is ``on_listening`` called (with the port, the
    real one when ``port`` is 0), so nothing announces a server that cannot listen.

    Raises:
        InvalidInput: see :func:`check_binding`; or the port is in use (the message names
            it) or cannot be bound.
    """
    import uvicorn

    check_binding(host, token)
    sock = bind(host, port)
    try:
        config = uvicorn.Config(http_app(server, host=host, token=token, path=path,
                                         tuning=tuning),
                                log_config=log_config(), log_level="warning", lifespan="on")
        if on_listening is not None:
            on_listening(int(sock.getsockname()[1]))
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve over stdin/stdout until the client closes the stream.

    A line that is not a JSON-RPC message gets a JSON-RPC error (:mod:`.stdio`).
    """
    import anyio

    from tideline.mcp.stdio import run_stdio

    anyio.run(run_stdio, server)
