"""Helpers for MCP tests: run a coroutine against the in-memory SDK client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from tests.backend import Backend
from tests.conftest import hashing

from mcp import Client
from tideline import Memory
from tideline.mcp.server import build_server
from tideline.project import ProjectInfo

T = TypeVar("T")


def run_with(mem: Memory, body: Callable[[Client], Awaitable[T]]) -> T:
    """Build the server over ``mem`` and run ``body(client)`` through the in-memory client."""

    async def main() -> T:
        async with Client(build_server(mem)) as client:
            return await body(client)

    return anyio.run(main)


@pytest.fixture
def atlas_mem(tmp_path: Path, backend: Backend) -> Iterator[Memory]:
    """A memory in project ``atlas`` (detected as if by the git root), on the test's
    backend (modules marked ``backends`` run on each)."""
    m = backend.open(tmp_path / "store", embedder=hashing())
    backend.check(m)
    m.use_project(ProjectInfo("atlas", "git_root", str(tmp_path)))
    try:
        yield m
    finally:
        m.close()


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
