"""Transports: stdio, and streamable HTTP behind a bearer token.

HTTP listens on loopback by default. Listening on any other address requires a
token (``TIDELINE_MCP_TOKEN`` or ``--token-file``, never a command-line value, which
``ps`` would show to every user), checked on every request in constant time; a token
given on loopback is enforced too. Host and Origin are checked on every address, and
sessions are bounded per client and expire when idle (:mod:`tideline.mcp.http_guard`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from tideline.config import HttpTuning
from tideline.errors import InvalidInput
from tideline.mcp.http_guard import SessionBudget, bind, log_config, transport_security

__all__ = ["BearerAuth", "is_loopback", "read_token", "serve_http", "serve_stdio"]

ENV_TOKEN = "TIDELINE_MCP_TOKEN"  # noqa: S105 - the variable's name, not a secret
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


def read_token(token_file: str | Path | None = None,
               env: Mapping[str, str] | None = None) -> str | None:
    """The bearer token: from ``token_file`` when given, else ``$TIDELINE_MCP_TOKEN``.

    Surrounding whitespace (a trailing newline) is dropped. Neither source puts the
    secret into the process's command line.

    Raises:
        InvalidInput: the file cannot be read or holds no token.
    """
    if token_file is not None:
        path = Path(token_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read the token file {path}: {exc}") from exc
        token = text.strip()
        if not token:
            raise InvalidInput(f"the token file {path} is empty")
        return token
    value = ((os.environ if env is None else env).get(ENV_TOKEN) or "").strip()
    return value or None


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token.

    Raises:
        InvalidInput: a non-loopback host without a token, or a token that is too short.
    """
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"the bearer token must have at least {MIN_TOKEN_CHARS} characters")
    if not is_loopback(host) and not token:
        raise InvalidInput(f"listening on {host} (not loopback) requires a bearer token: "
                           f"set {ENV_TOKEN} or pass --token-file")


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
