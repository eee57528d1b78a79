"""The stdio transport, with a JSON-RPC error for every message it cannot read.

The SDK's stdio reader hands a line that is not JSON, or not a JSON-RPC message, to
the server as an exception, and the server drops it: the client waits for an answer
that never comes. JSON-RPC 2.0 (§5) says what is due instead — ``-32700 Parse error``
for text that is not JSON, ``-32600 Invalid Request`` for JSON that is not a request,
with the request's ``id`` when one can be read and ``null`` when not. Here a pump
between the SDK's reader and the server answers those lines and passes the rest on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from pydantic import ValidationError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["error_reply", "run_stdio"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def error_reply(exc: BaseException) -> JSONRPCError:
    """The JSON-RPC error answering a line the reader could not read as a message."""
    errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else []
    if not errors or any(e.get("type") == "json_invalid" for e in errors):
        return JSONRPCError(jsonrpc="2.0", id=None,
                            error=ErrorData(code=PARSE_ERROR, message="Parse error: not JSON"))
    return JSONRPCError(jsonrpc="2.0", id=_request_id(errors),
                        error=ErrorData(code=INVALID_REQUEST,
                                        message="Invalid Request: not a JSON-RPC 2.0 message"))


def _request_id(errors: list[Any]) -> str | int | None:
    # The message itself is the input of a field error one level down (a missing
    # `jsonrpc`, a `method` that is not text): its id, if it is a valid one, is named.
    for err in errors:
        raw = err.get("input")
        if isinstance(raw, dict):
            ident = raw.get("id")
            if isinstance(ident, str) or (isinstance(ident, int)
                                          and not isinstance(ident, bool)):
                return ident
    return None


def _blank(exc: BaseException) -> bool:
    if not isinstance(exc, ValidationError):
        return False
    return all(isinstance(e.get("input"), str) and not e["input"].strip()
               for e in exc.errors(include_url=False))


async def run_stdio(server: MCPServer[Any]) -> None:
    """Serve ``server`` over stdin/stdout until the client closes stdin."""
    low = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        if not _blank(item):  # an empty line asks nothing
                            await write_stream.send(SessionMessage(error_reply(item)))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await low.run(receive, write_stream, low.create_initialization_options())
            tg.cancel_scope.cancel()
