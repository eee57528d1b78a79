"""The MCP surface: :func:`build_server` (tools, resources, prompts) and the transports.

``tideline serve`` runs it over stdio; ``tideline serve --http`` over streamable HTTP
(loopback by default; any other address requires a bearer token).
"""

from __future__ import annotations

__all__ = ["build_server", "serve_http", "serve_stdio"]

from tideline.mcp.server import build_server
from tideline.mcp.transports import serve_http, serve_stdio
