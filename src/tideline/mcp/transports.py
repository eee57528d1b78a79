"""Transports: stdio, and streamable HTTP behind a bearer token.

HTTP listens on loopback by default. Listening on any other address requires a
token (``TIDELINE_MCP_TOKEN`` or ``--token-file``, never a command-line value, which
``ps`` would show to every user), checked on every request in constant time; a token
given on loopback is enforced too. The SDK's DNS
rebinding protection stays on for loopback hosts.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

# The access rules live in tideline.access (shared with `tideline ui`); imported here
# under their old names too.
from tideline.access import ENV_TOKEN, check_binding, is_loopback, read_token

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
             path: str = "/mcp") -> ASGIApp:
    """The streamable-HTTP ASGI app, behind :class:`BearerAuth` when a token is set."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=path, host=host)
    return BearerAuth(app, token) if token else app


def serve_http(server: MCPServer[Any], *, host: str = "127.0.0.1", port: int = 8765,
               token: str | None = None, path: str = "/mcp") -> None:
    """Serve over streamable HTTP until interrupted.

    Raises:
        InvalidInput: see :func:`check_binding`.
    """
    import uvicorn

    check_binding(host, token)
    config = uvicorn.Config(http_app(server, host=host, token=token, path=path), host=host,
                            port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    server.run("stdio")
