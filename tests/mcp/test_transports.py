"""`tideline serve` as a real subprocess: over stdio, and over HTTP with and without a token.

The round trips run on both backends (tests/backend.py): on PostgreSQL the server process
finds the database through ``TIDELINE_DATABASE_URL`` alone, and another host (another
local directory) reads back what the server stored."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests.backend import Backend
from tests.conftest import hashing

from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.backends

TOKEN = "s3cret-token-for-tests-0123456789"


def env_for(store: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, TIDELINE_HOME=str(store), TIDELINE_EMBEDDER="hashing")
    env.pop("TIDELINE_MCP_TOKEN", None)
    env.update(extra)
    return env


async def round_trip(client: Client) -> tuple[Any, Any]:
    await client.call_tool("memorize", {"text": "orchard exports run nightly at 02:00",
                                        "scope": "global"})
    return (await client.call_tool("recall", {"query": "when do orchard exports run"}),
            await client.list_tools())


def stored_where_the_backend_keeps_it(backend: Backend, tmp_path: Path) -> None:
    """The memory the server wrote is in the store: on PostgreSQL seen from another host's
    local directory (nothing of it lives in the server's own directory)."""
    home = tmp_path / "s" if backend.is_sqlite else tmp_path / "another-host"
    with backend.open(home, embedder=hashing(), project="global") as other:
        backend.check(other)
        hits = other.recall("orchard exports nightly", scope="global", log=False).items
        assert hits and "02:00" in hits[0].text
    if not backend.is_sqlite:
        assert not (tmp_path / "s" / "tideline.db").exists()


def test_stdio_subprocess(tmp_path: Path, backend: Backend) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tideline", "serve", "--scope", "orchard"],
                                   env=env_for(tmp_path / "s"), cwd=str(tmp_path))

    async def main() -> tuple[Any, Any]:
        async with Client(params) as client:
            return await round_trip(client)

    recalled, tools = anyio.run(main)
    assert not recalled.is_error
    assert "02:00" in recalled.structured_content["items"][0]["text"]
    assert recalled.structured_content["scope"] == "orchard"
    assert len(tools.tools) >= 14
    stored_where_the_backend_keeps_it(backend, tmp_path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(store: Path, *args: str, **env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tideline", "serve", "--http", "--port",
                             str(port), *args], env=env_for(store, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def test_http_on_loopback_without_token(tmp_path: Path, backend: Backend) -> None:
    with http_server(tmp_path / "s") as (url, _proc):
        async def main() -> tuple[Any, Any]:
            async with Client(url) as client:
                return await round_trip(client)

        recalled, _tools = anyio.run(main)
    assert "02:00" in recalled.structured_content["items"][0]["text"]
    stored_where_the_backend_keeps_it(backend, tmp_path)


def test_http_with_token(tmp_path: Path, backend: Backend) -> None:
    with http_server(tmp_path / "s", TIDELINE_MCP_TOKEN=TOKEN) as (url, _proc):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        for auth in (None, "Bearer wrong-token-wrong-token", f"Basic {TOKEN}"):
            h = headers | ({"Authorization": auth} if auth else {})
            denied = httpx.post(url, json=init, headers=h, timeout=30)
            assert denied.status_code == 401
            assert denied.headers["www-authenticate"].startswith("Bearer")
        ok = httpx.post(url, json=init, headers=headers | {"Authorization": f"Bearer {TOKEN}"},
                        timeout=30)
        assert ok.status_code == 200

        async def main() -> tuple[Any, Any]:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                return await round_trip(client)

        recalled, _tools = anyio.run(main)
    assert "02:00" in recalled.structured_content["items"][0]["text"]
    stored_where_the_backend_keeps_it(backend, tmp_path)


def test_non_loopback_requires_a_token(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tideline", "serve", "--http", "--host",
                           "0.0.0.0", "--port", str(free_port())],  # noqa: S104
                          env=env_for(tmp_path / "s"), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3
    assert "requires a bearer token" in proc.stderr and "Traceback" not in proc.stderr
    short = subprocess.run([sys.executable, "-m", "tideline", "serve", "--http",
                            "--port", str(free_port())],
                           env=env_for(tmp_path / "s", TIDELINE_MCP_TOKEN="short"),
                           capture_output=True, text=True, timeout=120)
    assert short.returncode == 3 and "at least 16" in short.stderr


def test_token_never_on_the_command_line(tmp_path: Path) -> None:
    """Issue 9 item 11: the MCP token given as `--token` showed in `ps`. It comes from
    `--token-file` (or $TIDELINE_MCP_TOKEN); `--token VALUE` is refused."""
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    os.chmod(secret, 0o600)
    with http_server(tmp_path / "s", "--token-file", str(secret)) as (url, proc):
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
        assert TOKEN not in cmdline and str(secret) in cmdline
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=init, headers=headers, timeout=30).status_code == 401
        ok = httpx.post(url, json=init, headers=headers | {"Authorization": f"Bearer {TOKEN}"},
                        timeout=30)
        assert ok.status_code == 200
    refused = subprocess.run([sys.executable, "-m", "tideline", "serve", "--http", "--token",
                              TOKEN, "--port", str(free_port())], env=env_for(tmp_path / "s"),
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 3 and "TIDELINE_MCP_TOKEN" in refused.stderr
    assert "--token-file" in refused.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path in (empty, tmp_path / "missing"):
        bad = subprocess.run([sys.executable, "-m", "tideline", "serve", "--http",
                              "--token-file", str(path), "--port", str(free_port())],
                             env=env_for(tmp_path / "s"), capture_output=True, text=True,
                             timeout=120)
        assert bad.returncode == 3 and "token file" in bad.stderr, bad.stderr
