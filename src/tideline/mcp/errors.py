"""Stable error codes on the MCP surface.

A failing **tool** answers with ``isError: true`` (the model reads it and can
correct itself): the text is ``<code>: <message>`` and the structured content
``{"error": {"code", "message", "jsonrpc_code"}}``. A failing **resource** or
**prompt** answers with a JSON-RPC error whose ``data.code`` is the same string.
Never a stack trace: an unexpected failure is ``internal`` with the exception's
type only (the traceback goes to the server's stderr log).

==================  ===========  =============================================
code                JSON-RPC     meaning
==================  ===========  =============================================
invalid_input       -32602       a value was rejected; nothing was written
input_too_large     -32602       over a size cap
not_found           -32602       no such memory / turn / session / resource
conflict            -32010       a version check failed; re-read and retry
store_busy          -32011       the database stayed locked; retry later
store_full          -32012       disk full; nothing was written
store_corrupt       -32013       the database failed an integrity check
schema_too_new      -32014       written by a newer Tideline
store_error         -32015       another database failure
embedder_mismatch   -32020       the store was built with another embedder
embedder_error      -32021       the embedding model or endpoint failed
unavailable         -32030       a feature is not installed (e.g. DREAM prompts)
internal            -32603       an unexpected failure (a bug)
==================  ===========  =============================================
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from tideline.errors import TidelineError

__all__ = ["JSONRPC_CODES", "error_result", "mcp_error", "describe"]

JSONRPC_CODES: dict[str, int] = {
    "invalid_input": -32602,
    "input_too_large": -32602,
    "not_found": -32602,
    "conflict": -32010,
    "store_busy": -32011,
    "store_full": -32012,
    "store_corrupt": -32013,
    "schema_too_new": -32014,
    "store_error": -32015,
    "tideline_error": -32015,
    "embedder_mismatch": -32020,
    "embedder_error": -32021,
    "unavailable": -32030,
    "internal": -32603,
}
log = logging.getLogger("tideline.mcp")


def describe(exc: BaseException, where: str) -> tuple[str, str]:
    """The (code, message) an exception shows to a client; unexpected ones are logged here."""
    if isinstance(exc, TidelineError):
        return exc.code, str(exc)
    log.error("%s failed unexpectedly", where, exc_info=exc)
    return "internal", f"internal error in {where} ({type(exc).__name__}); see the server log"


def error_result(exc: BaseException, where: str) -> CallToolResult:
    """A tool result with ``isError`` and the stable code."""
    code, message = describe(exc, where)
    data: dict[str, Any] = {"code": code, "message": message,
                            "jsonrpc_code": JSONRPC_CODES.get(code, -32603)}
    return CallToolResult(content=[TextContent(type="text", text=f"{code}: {message}")],
                          structured_content={"error": data}, is_error=True)


def mcp_error(exc: BaseException, where: str, **data: Any) -> MCPError:
    """A JSON-RPC error (for resources and prompts) carrying the stable code in ``data``."""
    code, message = describe(exc, where)
    return MCPError(JSONRPC_CODES.get(code, -32603), f"{code}: {message}",
                    data={"code": code, **data})
