"""What stands between the network and the MCP HTTP app: names, sessions, the socket, the log.

- **Host and Origin** (:func:`transport_security`): every request must name this server in
  ``Host`` (and, when a browser sends one, in ``Origin``), on every address it listens on,
  loopback or not, with a token or without: a page that rebinds ``evil.example.com`` to
  127.0.0.2 must not reach the memory.
- **Sessions** (:class:`SessionBudget`): each client (peer address) holds at most
  ``sessions_per_client`` sessions and the server at most ``max_sessions``; a session
  idle for ``session_idle_s`` ends. A new session beyond a bound ends the least recently
  used one (its client's own first) instead of being refused, so a flood of abandoned
  sessions costs the flooder its oldest sessions and never locks a new client out.
- **The socket** (:func:`bind`): bound before anything is announced, so a port in use is
  a typed error naming the port, not a "listening" line followed by an exit.
- **The log** (:func:`log_config`): one line per refused, malformed or abandoned request;
  no library traceback reaches the server's log.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import time
from collections import OrderedDict
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tideline.errors import InvalidInput

__all__ = ["OneLineFormatter", "SessionBudget", "bind", "log_config", "transport_security"]

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_SESSION_HEADER = b"mcp-session-id"
log = logging.getLogger("tideline.http")


def _host_form(host: str) -> str:
    """``host`` as it appears in a Host header (IPv6 in brackets)."""
    bare = host.strip("[]")
    try:
        return f"[{bare}]" if ipaddress.ip_address(bare).version == 6 else bare
    except ValueError:
        return host.lower()


def allowed_names(host: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The names a client may use for this server in ``Host`` (without port).

    Args:
        host: the address the server listens on.
        extra: more names (a DNS name or proxy in front of the server).

    Returns:
        The bound address; the loopback names when it is loopback or a wildcard; for a
        wildcard (``0.0.0.0``, ``::``), this machine's host names and addresses too.
    """
    names = [_host_form(host)]
    bare = host.strip("[]")
    try:
        addr = ipaddress.ip_address(bare)
        loopback, wildcard = addr.is_loopback, addr.is_unspecified
    except ValueError:
        loopback, wildcard = host in ("localhost", "localhost.localdomain"), False
    if loopback or wildcard:
        names += _LOOPBACK_NAMES
    if wildcard:
        for name in {socket.gethostname(), socket.getfqdn()}:
            names.append(name.lower())
            try:
                names += [_host_form(str(info[4][0]))
                          for info in socket.getaddrinfo(name, None)]
            except OSError:
                pass  # a host name that does not resolve: its literal name still counts
    names += [_host_form(n.strip()) for n in extra if n.strip()]
    return list(dict.fromkeys(names))


def transport_security(host: str, extra: tuple[str, ...] = ()) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection, on for every address (the SDK turns it on only
    for 127.0.0.1, ``localhost`` and ``::1``, which left 127.0.0.2 open)."""
    names = allowed_names(host, extra)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[f"{scheme}://{n}{port}" for n in names
                         for scheme in ("http", "https") for port in ("", ":*")],
    )


class SessionBudget:
    """ASGI middleware: bounds the MCP sessions per client and in all, least recent out.

    It watches the ``mcp-session-id`` the SDK hands out and the requests that use one.
    To end a session it sends the SDK app the same ``DELETE`` a client would, so the
    SDK's own bookkeeping stays the only truth about which sessions exist.
    """

    def __init__(self, app: ASGIApp, *, per_client: int, max_total: int,
                 idle_s: float) -> None:
        self.app = app
        self.per_client = per_client
        self.max_total = max_total
        self.idle_s = idle_s
        # session id -> (client, last use); least recently used first.
        self.sessions: OrderedDict[bytes, tuple[str, float]] = OrderedDict()
        self.evicted = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("?", 0))[0]
        session = _header(scope, _SESSION_HEADER)
        if session is not None:
            if session in self.sessions:
                self.sessions[session] = (self.sessions[session][0], time.monotonic())
                self.sessions.move_to_end(session)
            status = await _forward(self.app, scope, receive, send)
            if scope["method"] == "DELETE" or status == 404:
                self.sessions.pop(session, None)
            return
        if scope["method"] == "POST":
            await self._make_room(scope, client)
        created: list[bytes] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for key, value in message.get("headers", []):
                    if key.lower() == _SESSION_HEADER:
                        created.append(value)
            await send(message)

        await self.app(scope, receive, watch)
        for sid in created:
            self.sessions[sid] = (client, time.monotonic())

    async def _make_room(self, scope: Scope, client: str) -> None:
        now = time.monotonic()
        # The SDK ends an idle session by itself; forget ours the same way.
        for sid in [s for s, (_, used) in self.sessions.items() if now - used > self.idle_s]:
            del self.sessions[sid]
        mine = [s for s, (c, _) in self.sessions.items() if c == client]
        while len(mine) >= self.per_client:
            await self._end(scope, mine.pop(0), client)
        while len(self.sessions) >= self.max_total:
            await self._end(scope, next(iter(self.sessions)), client)

    async def _end(self, scope: Scope, session: bytes, requester: str) -> None:
        owner = self.sessions.pop(session, ("?", 0.0))[0]
        self.evicted += 1
        log.info("session %s of %s ended to make room for a new session of %s",
                 session[:8].decode("ascii", "replace"), owner, requester)
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() == b"host"]
        delete: Scope = {**scope, "method": "DELETE",
                         "headers": [*headers, (_SESSION_HEADER, session)]}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        await self.app(delete, receive, discard)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None


async def _forward(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        await send(message)

    await app(scope, receive, watch)
    return status


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, bound before the server says it listens.

    Raises:
        InvalidInput: the port is in use, the address is not this machine's, or the
            port needs privileges; the message names the address and port.
    """
    bare = host.strip("[]")
    try:
        infos = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InvalidInput(f"port {port} on {host} is already in use: stop what "
                               f"listens there or pass another --port") from exc
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


class OneLineFormatter(logging.Formatter):
    """``time level logger: message (ExceptionType: text)``: never a traceback.

    A client that goes away mid-request makes the SDK log a multi-line traceback of an
    error that is the client's, not the server's; one line says the same.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info = exc
        if exc and exc[1] is not None:
            cause = exc[1]
            while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
                cause = cause.exceptions[0]  # the one that happened, not its wrapper
            line += f" ({type(cause).__name__}: {cause})" if str(cause) else \
                f" ({type(cause).__name__})"
        return " ".join(line.split())  # a message with newlines stays one line


def log_config(level: str = "WARNING") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn, the MCP SDK and tideline: one line each."""
    handler = {"class": "logging.StreamHandler", "formatter": "oneline",
               "stream": "ext://sys.stderr"}
    one = {"handlers": ["stderr"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"oneline": {"()": OneLineFormatter}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {"uvicorn": one, "uvicorn.error": {"level": level},
                    "uvicorn.access": {"handlers": [], "level": level, "propagate": False},
                    "mcp": one, "tideline": one, "starlette": one},
    }
