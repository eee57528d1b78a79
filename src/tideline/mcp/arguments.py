"""The catalogue's argument rule in front of every MCP tool (:mod:`tideline.arguments`).

The SDK validates a tool's arguments with pydantic in lax mode, after trying to parse
every string argument as JSON when its parameter is not plainly ``str``. So
``read_context`` took ``memory_id`` ``"6"`` and ``6.0``, ``recall`` took ``limit``
``"5"``, ``true`` and ``5.0``, ``reflect`` took ``reward`` ``"1"`` — and ``memorize``
refused a ``text`` that happened to be valid JSON (``'["a"]'``) and read the text
``"null"`` as no text at all. :func:`install` replaces that with the one rule every
surface shares, and publishes the catalogue's schema as each tool's input schema, so
what a client reads is what is checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

from tideline.arguments import check_arguments
from tideline.tools import TOOLS

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["install"]
class _Checked(FuncMetadata):
    """The SDK's argument model behind :func:`check_arguments`, with no JSON pre-parsing.

    Once the JSON types are right, pydantic only builds the values: a string is never
    parsed as JSON (text stays text) and nothing is coerced.
    """

    tool_name: str

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        """Check the arguments by the catalogue's rule, then build them.

        Raises:
            InvalidInput: an argument breaks the rule.
        """
        check_arguments(TOOLS[self.tool_name], arguments_to_validate)
        known = {k: v for k, v in arguments_to_validate.items() if v is not None}
        parsed = self.arg_model.model_validate(known)
        return parsed.model_dump_one_level()


def install(server: MCPServer[Any]) -> None:
    """Put the rule in front of every catalogue tool of ``server`` and publish its schema.

    The catalogue's schema is what the SDK derives from the tool's signature (a test
    holds them equal) except that an optional parameter is published with its own
    type, not ``anyOf [type, null]``: clients that fill in arguments from a form (the
    MCP Inspector) then send a number as a number.
    """
    for name, spec in TOOLS.items():
        tool = server._tool_manager.get_tool(name)
        if tool is None:
            continue
        meta = tool.fn_metadata
        tool.fn_metadata = _Checked(arg_model=meta.arg_model, output_schema=meta.output_schema,
                                    output_model=meta.output_model,
                                    wrap_output=meta.wrap_output, tool_name=name)
        tool.parameters = spec.input_schema()
