"""Stable error codes on the MCP surface.

A failing **tool** answers with ``isError: true`` (the model reads it and can
correct itself): the text is ``<code>: <message>`` and the structured content
``{"error": {"code", "message", "jsonrpc_code"}}``. A failing **resource** or
**prompt** answers with a JSON-RPC error whose ``data.code`` is the same string.
Never a stack trace: an unexpected failure is ``internal`` with the exception's
type only (the traceback goes to the server's stderr log).

========================  ========  ==============================================
code                      JSON-RPC  meaning
========================  ========  ==============================================
invalid_input             -32602    a value was rejected (argument validation too);
                                    nothing was written
input_too_large           -32602    over a size cap
archive_invalid           -32602    an export archive is malformed, truncated or tampered
unsafe_path               -32602    a target path runs through a symlink or leaves its root
not_found                 -32602    no such memory / turn / session / resource / tool
conflict                  -32010    a version check failed; re-read and retry
store_busy                -32011    the database stayed locked; retry later
store_full                -32012    disk full; nothing was written
store_corrupt             -32013    the database failed an integrity check
schema_too_new            -32014    written by a newer Tideline
store_error               -32015    another database failure
backend_unavailable       -32016    a database URL whose backend this Tideline lacks
store_closed              -32017    the Memory was closed (Python API)
primary_unavailable       -32018    no PostgreSQL primary right now (failover);
                                    nothing written, retry shortly
embedder_mismatch         -32020    the store was built with another embedder
embedder_error            -32021    the embedding model or endpoint failed
tideline_error            -32015    any other Tideline error (the base class)
unavailable               -32030    a feature is not installed (e.g. DREAM prompts)
dream_error               -32040    a dream could not run (no provider, unknown layer)
llm_output_invalid        -32041    a DREAM answer failed validation; nothing applied
provider_error            -32042    the LLM provider failed
dream_too_large           -32043    a DREAM layer would change too much; rerun with force
internal                  -32603    an unexpected failure (a bug)
========================  ========  ==============================================

Each code and its JSON-RPC number are attributes of the error class
(:mod:`tideline.errors`, :mod:`tideline.dream.errors`); :data:`JSONRPC_CODES` is
built from them, so a new error class reaches clients with its own code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import ValidationError

from tideline.errors import InputTooLarge, InvalidInput, NotFound, TidelineError

__all__ = ["JSONRPC_CODES", "CodedServer", "argument_error", "describe", "error_result",
           "mcp_error"]

def _codes() -> dict[str, int]:
    import tideline.dream.errors  # noqa: F401  # registers the DREAM classes

    out: dict[str, int] = {}
    todo: list[type[TidelineError]] = [TidelineError]
    while todo:
        cls = todo.pop()
        out[cls.code] = cls.jsonrpc_code
        todo.extend(cls.__subclasses__())
    return out | {"unavailable": -32030, "internal": -32603}


#: Every stable code and its JSON-RPC error number, from the error classes.
JSONRPC_CODES: dict[str, int] = _codes()
log = logging.getLogger("tideline.mcp")


def describe(exc: BaseException, where: str) -> tuple[str, str, int]:
    """The (code, message, JSON-RPC number) an exception shows to a client.

    Unexpected exceptions are logged here with their traceback and shown as
    ``internal`` with their type only.
    """
    if isinstance(exc, TidelineError):
        return exc.code, str(exc), exc.jsonrpc_code
    log.error("%s failed unexpectedly", where, exc_info=exc)
    return ("internal", f"internal error in {where} ({type(exc).__name__}); see the server log",
            JSONRPC_CODES["internal"])


def error_result(exc: BaseException, where: str, **extra: Any) -> CallToolResult:
    """A tool result with ``isError``, the text ``<code>: <message>`` and the code structured."""
    code, message, number = describe(exc, where)
    data: dict[str, Any] = {"code": code, "message": message, "jsonrpc_code": number, **extra}
    return CallToolResult(content=[TextContent(type="text", text=f"{code}: {message}")],
                          structured_content={"error": data}, is_error=True)


def mcp_error(exc: BaseException, where: str, **data: Any) -> MCPError:
    """A JSON-RPC error (for resources and prompts) carrying the stable code in ``data``."""
    code, message, number = describe(exc, where)
    return MCPError(number, f"{code}: {message}", data={"code": code, **data})


def argument_error(tool: str, exc: ValidationError) -> CallToolResult:
    """The tool error for arguments that failed the input schema, in the tool's own names.

    Pydantic's report (model names, ``input_value`` dumps, documentation URLs) stays
    on the server; the client reads ``invalid_input: recall: limit must be …``.
    """
    problems: list[str] = []
    fields: list[str] = []
    for err in exc.errors(include_url=False, include_input=False):
        name = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
        fields.append(name)
        problems.append(f"{name} {_explain(err)}")
    shown = "; ".join(problems[:5]) + (f"; … {len(problems) - 5} more" if len(problems) > 5
                                       else "")
    too_large = all(err.get("type") in _TOO_LARGE for err in exc.errors())
    error: TidelineError = (InputTooLarge if too_large else InvalidInput)(f"{tool}: {shown}")
    return error_result(error, tool, fields=fields)


_TOO_LARGE = {"string_too_long", "too_long"}
_PLAIN = {
    "missing": "is required",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "none_required": "must be null",
}


def _explain(err: Mapping[str, Any]) -> str:
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if kind in _PLAIN:
        return _PLAIN[kind]
    bounds = {"greater_than_equal": "at least", "greater_than": "more than",
              "less_than_equal": "at most", "less_than": "less than"}
    if kind in bounds and ctx:
        limit = next(iter(ctx.values()))
        return f"must be {bounds[kind]} {limit}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind == "literal_error" and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    if kind in ("string_too_long", "too_long") and ctx:
        return f"is over its cap of {ctx.get('max_length')}"
    # Anything else: pydantic's one-line message, which names no model and no URL.
    return str(err.get("msg", "is invalid")).replace("Input should be", "must be").lower()


class CodedServer(MCPServer[Any]):
    """The SDK's server, with every tool failure answered as ``<code>: <message>``.

    The tools themselves turn Tideline's errors into coded results; what the SDK
    raises before or after a tool runs (arguments that fail the input schema, an
    unknown tool name, a result that fails its output schema) is coded here.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; never lets the SDK's own error text reach the client."""
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:  # the result failed its own schema: a bug
            return error_result(exc.__cause__ or exc, name)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return argument_error(name, exc.__cause__)
            known = sorted(t.name for t in self._tool_manager.list_tools())
            if name not in known:
                return error_result(NotFound(f"no tool named {name[:80]!r}; the tools are "
                                             f"{', '.join(known)}"), name)
            return error_result(exc.__cause__ or exc, name)
