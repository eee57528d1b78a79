"""`tideline serve --http` over real HTTP: Host/Origin on every address, bounded sessions,
one log line per bad request, and a port in use (issue 33 items 6, 7, 12; issue 28 §2.8).

Each test starts the real server process on loopback and talks to it with httpx.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config, HttpTuning
from tideline.errors import InvalidInput

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def server(store: Path, host: str = "127.0.0.1", **env: str
           ) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port(host)
    full = dict(os.environ, TIDELINE_HOME=str(store), TIDELINE_EMBEDDER="hashing", **env)
    full.pop("TIDELINE_MCP_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "tideline", "serve", "--http", "--host",
                             host, "--port", str(port), "--scope", "global"], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        yield f"http://{host}:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _rpc(body: str) -> dict[str, object]:
    """The JSON-RPC message of a JSON or SSE response body."""
    for line in body.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(json.loads(body))


def _open_session(http: httpx.Client, url: str) -> str:
    r = http.post(url, json=INIT, headers=ACCEPT, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    sid = r.headers["mcp-session-id"]
    done = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                     headers=ACCEPT | {"mcp-session-id": sid}, timeout=30)
    assert done.status_code == 202
    return sid


def _tools(http: httpx.Client, url: str, sid: str) -> int:
    r = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                  headers=ACCEPT | {"mcp-session-id": sid}, timeout=30)
    return r.status_code


def test_host_and_origin_are_checked_on_any_loopback_address(tmp_path: Path) -> None:
    """Item 6: on 127.0.0.2 (loopback, but not one of the SDK's three names) a request
    naming ``evil.example.com`` wrote a memory. Now it is refused (403) like on 127.0.0.1;
    the server's own address still works."""
    with server(tmp_path / "s", host="127.0.0.2") as (url, _proc):
        port = url.split(":")[2].split("/")[0]
        rebound = httpx.post(url, json=INIT, timeout=30,
                             headers=ACCEPT | {"Host": f"evil.example.com:{port}"})
        assert rebound.status_code in (403, 421), rebound.text
        assert "mcp-session-id" not in rebound.headers
        foreign = httpx.post(url, json=INIT, timeout=30,
                             headers=ACCEPT | {"Origin": "http://evil.example.com"})
        assert foreign.status_code == 403, foreign.text
        with httpx.Client() as http:
            sid = _open_session(http, url)
            assert _tools(http, url, sid) == 200
            memorize = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "memorize", "arguments": {"text": "rebinding probe wrote this"}}}
            evil = http.post(url, json=memorize, timeout=30, headers=ACCEPT | {
                "mcp-session-id": sid, "Host": f"evil.example.com:{port}"})
            assert evil.status_code in (403, 421)
    mem = Memory.open(tmp_path / "s", embedder=hashing(), project="global")
    try:
        assert mem.introspect()["memories"] == 0  # nothing came through the foreign Host
    finally:
        mem.close()


def test_a_session_flood_never_locks_out_a_new_client(tmp_path: Path) -> None:
    """Item 7: 10,000 abandoned sessions answered every new client 503 for 30 minutes.
    Now a client holds a bounded number of sessions (its least recently used ends when it
    opens one more), idle sessions end within seconds here (minutes by default), and a
    client from another address is untouched by the flood. The flood is bounded: 40."""
    env = {"TIDELINE_HTTP_SESSIONS_PER_CLIENT": "8", "TIDELINE_HTTP_MAX_SESSIONS": "12",
           "TIDELINE_HTTP_SESSION_IDLE_S": "5"}
    with server(tmp_path / "s", **env) as (url, _proc):
        # A client on another loopback address opens its session before the flood.
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3")) as other:
            kept = _open_session(other, url)
            with httpx.Client() as flood:
                sids = []
                for n in range(40):
                    sids.append(flood.post(url, json=INIT, headers=ACCEPT, timeout=30))
                    if n % 2:  # the other client keeps working meanwhile (no idle gap)
                        assert _tools(other, url, kept) == 200
                assert all(r.status_code == 200 for r in sids), {r.status_code for r in sids}
                ids = [r.headers["mcp-session-id"] for r in sids]
                # The flooder's oldest sessions ended; its newest are alive.
                assert _tools(flood, url, ids[0]) == 404
                assert _tools(flood, url, ids[-1]) != 404
                # A fresh client on the flooder's own address still gets in.
                fresh = _open_session(flood, url)
                assert _tools(flood, url, fresh) == 200
            # The other client's session survived the flood.
            assert _tools(other, url, kept) == 200
            # Idle sessions end: after the idle time, the session is gone.
            time.sleep(7)
            assert _tools(other, url, kept) == 404
            assert _tools(other, url, _open_session(other, url)) == 200


def _send(port: int, data: bytes, linger: float = 0.0) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        if linger:
            time.sleep(linger)


def test_refused_malformed_and_abandoned_requests_log_one_line_each(tmp_path: Path) -> None:
    """Item 12: clients that disconnected mid-request left multi-line tracebacks from the
    SDK's streamable_http handler in the server log. Each is one line now."""
    with server(tmp_path / "s") as (url, proc):
        port = int(url.split(":")[2].split("/")[0])
        body = json.dumps(INIT).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, "
                "text/event-stream\r\n")
        sent = 0
        for _ in range(3):
            _send(port, (head + f"Content-Length: {len(body) + 50}\r\n\r\n").encode()
                  + body[:20])  # the body stops short and the client leaves
            _send(port, (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
            _send(port, b"NOT HTTP AT ALL\r\n\r\n", linger=0.05)
            _send(port, (head + "Content-Length: 5\r\n\r\n{bad}").encode(), linger=0.05)
            sent += 4
        refused = httpx.post(url, json=INIT, headers=ACCEPT | {"Host": "evil.example.com"},
                             timeout=30)
        assert refused.status_code in (403, 421)
        time.sleep(1.0)
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "│" not in err, err[-2000:]
    assert len(lines) <= sent + 3, lines  # the "listening" line, a shutdown line at most


def test_a_port_in_use_is_named_and_nothing_is_announced(tmp_path: Path) -> None:
    """Issue 28 §2 item 8: the "listening" line came before the exit (3)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = dict(os.environ, TIDELINE_HOME=str(tmp_path / "s"), TIDELINE_EMBEDDER="hashing")
        proc = subprocess.run([sys.executable, "-m", "tideline", "serve", "--http", "--port",
                               str(port), "--scope", "global"], env=env, capture_output=True,
                              text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert f"port {port}" in proc.stderr and "in use" in proc.stderr
    assert "MCP over HTTP at" not in proc.stderr and "Traceback" not in proc.stderr


def test_http_settings_come_from_the_config_and_are_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert Config().http == HttpTuning()
    assert HttpTuning().session_idle_s <= 600  # minutes, not the SDK's 30
    monkeypatch.setenv("TIDELINE_HTTP_SESSION_IDLE_S", "90")
    monkeypatch.setenv("TIDELINE_HTTP_SESSIONS_PER_CLIENT", "4")
    monkeypatch.setenv("TIDELINE_HTTP_ALLOWED_HOSTS", "mem.example.org, proxy")
    http = Config.load().http
    assert (http.session_idle_s, http.sessions_per_client) == (90.0, 4)
    assert http.allowed_hosts == ("mem.example.org", "proxy")
    for bad in ({"session_idle_s": 0}, {"sessions_per_client": 0}, {"max_sessions": True}):
        with pytest.raises(InvalidInput):
            HttpTuning(**bad)  # type: ignore[arg-type]
    monkeypatch.setenv("TIDELINE_HTTP_MAX_SESSIONS", "many")
    with pytest.raises(InvalidInput):
        Config.load()
