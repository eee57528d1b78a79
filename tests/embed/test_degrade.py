"""Embedder faults degrade, never stop: a real HTTP endpoint goes down mid-run and comes back."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.backend import connection, scalar
from tests.conftest import TEST_PROFILE, hashing

from tideline import Memory
from tideline.config import Config
from tideline.embed import HashingEmbedder, HttpEmbedder
from tideline.store import pending

MODEL = "hashing-over-http"


class Endpoint:
    """An OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 serving hashing vectors.

    ``stop()`` closes the socket (connections are refused), ``start()`` binds the
    same port again.
    """

    def __init__(self) -> None:
        self.embedder = HashingEmbedder()
        self.port = 0
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                state.requests += 1
                vectors = state.embedder.embed_passages(list(body["input"]))
                data = json.dumps({"object": "list", "model": body["model"], "data": [
                    {"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in enumerate(vectors)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    ep = Endpoint()
    ep.start()
    try:
        yield ep
    finally:
        if ep._server is not None:
            ep.stop()


def _open(store: Path, ep: Endpoint) -> Memory:
    emb = HttpEmbedder(ep.url, MODEL, dim=384, retries=0, timeout=5, profile=TEST_PROFILE)
    # cooldown 0: every call tries the endpoint again, so "back up" is seen at once.
    return Memory.open(store, embedder=emb, config=Config.load(home=store, embed_cooldown_s=0.0))


def _vector_rows(mem: Memory) -> tuple[int, int, int]:
    with connection(mem) as c:  # pending.count is the store's own view of the log
        waiting = pending.count(c)
    return (int(scalar(mem, "SELECT count(*) FROM memories"))
            + int(scalar(mem, "SELECT count(*) FROM turns")),
            int(scalar(mem, "SELECT count(*) FROM vectors")), waiting)


def test_http_embedder_down_mid_run_degrades_and_heals(tmp_path: Path, endpoint: Endpoint) -> None:
    """Issue 9, item 10: with the ``http`` embedder and its endpoint down, ``remember``
    failed (exit 21, ``embedder_error``) and so did ``recall``. Now writes are stored
    with the vector pending, recall answers from full text marked ``degraded``, both
    are journaled, and the vectors are filled in once the endpoint answers again:
    after the next write, in sleep, and by ``doctor --repair`` — 0 lost."""
    mem = _open(tmp_path / "s", endpoint)
    try:
        deploy = mem.remember("Deploys of atlas never happen on Fridays", scope="atlas").id
        mem.remember("The loader failed with E1234 on the region column", scope="atlas")
        assert not mem.recall("Friday deploys", scope="atlas").degraded

        endpoint.stop()  # ---- down -----------------------------------------------------
        written = mem.remember("PgBouncer runs in session mode for atlas since the outage",
                               scope="atlas")
        assert written.vector_pending and written.decision == "new"
        same = mem.remember("Deploys of atlas never happen on Fridays", scope="atlas",
                            source="cli")  # no replay (other source): the gate by text
        assert same.decision == "potentiate" and same.id == deploy
        near = mem.remember("Deploys of atlas never happen on Fridays or holidays",
                            scope="atlas")
        assert near.decision == "link" and near.nearest == deploy
        turns = mem.add_turns([{"session": "s1", "role": "user", "id": "t1",
                                "text": "the outage came from PgBouncer transaction mode"}],
                              scope="atlas")
        assert turns.inserted == 1
        packet = mem.recall("PgBouncer session mode", scope="atlas")
        assert packet.degraded == "lexical" and packet.to_dict()["degraded"] == "lexical"
        assert packet.items[0].id == written.id and not packet.abstained
        assert all(i.similarity == 0.0 for i in packet.items)
        revised = mem.revise(written.id, "PgBouncer runs in session mode for atlas",
                             scope="atlas")
        assert revised.vector_pending
        report = mem.doctor(repair=True)  # never fails on the embedder; says what is left
        assert not report["ok"] and report["checks"]["embedder"]["pending_left"] >= 4
        rows, vectors, missing = _vector_rows(mem)
        assert missing == rows - vectors >= 4 and pending.flagged(mem.store)
        down = mem.events(kinds=["embedder"])
        assert [e["data"]["state"] for e in down] == ["down"]
        assert "127.0.0.1" in down[0]["data"]["error"]
        assert mem.events(kinds=["recall"], all_scopes=True)[0]["data"]["degraded"] == "lexical"
        assert mem.events(kinds=["write"], all_scopes=True)[0]["data"]["vector"] == "pending"

        endpoint.start()  # ---- back: the next write fills what is pending --------------
        mem.remember("Ines Okafor administers the Kolar cluster", scope="atlas")
        rows, vectors, missing = _vector_rows(mem)
        assert missing == 0 and vectors == rows and not pending.flagged(mem.store)
        assert [e["data"]["state"] for e in mem.events(kinds=["embedder"])] == ["up", "down"]
        again = mem.recall("PgBouncer session mode", scope="atlas")
        assert again.degraded is None and again.items[0].similarity > 0

        endpoint.stop()  # ---- down again: this time sleep fills in --------------------
        mem.remember("The nightly load now retries twice with jitter", scope="atlas")
        endpoint.start()
        steps = mem.sleep(only="vectors")["steps"]["vectors"]
        assert steps["filled"] == 1 and steps["left"] == 0

        endpoint.stop()  # ---- and once more: doctor --repair fills in -----------------
        mem.add_turns([{"session": "s1", "role": "assistant", "id": "t2",
                        "text": "switched PgBouncer back to session mode"}], scope="atlas")
        endpoint.start()
        report = mem.doctor(repair=True)
        assert report["ok"] and "pending_vectors:1" in report["repaired"]
        rows, vectors, missing = _vector_rows(mem)
        assert (rows, missing) == (vectors, 0)
        assert mem.introspect()["memories"] == 7 and mem.introspect()["turns"] == 2  # 0 lost
    finally:
        mem.close()


def test_cli_remember_and_recall_exit_0_with_the_endpoint_down(
        tmp_path: Path, endpoint: Endpoint) -> None:
    """Issue 9, item 10: ``tideline remember`` exited 21 (``embedder_error``) when the
    http embedder's endpoint was down, and so did ``recall``."""
    store = tmp_path / "s"
    mem = _open(store, endpoint)
    mem.remember("atlas uses PostgreSQL 16 behind PgBouncer", scope="atlas")
    mem.close()
    endpoint.stop()
    env = dict(os.environ, TIDELINE_EMBED_URL=endpoint.url, TIDELINE_EMBED_MODEL=MODEL)
    env.pop("TIDELINE_EMBEDDER", None)  # the store's marker picks the http embedder

    def cli(*args: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store),
                               "--json"], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout))

    wrote = cli("remember", "the PgBouncer pool size is 40", "--scope", "atlas")
    assert wrote["vector_pending"] is True and wrote["decision"] == "new"
    got = cli("recall", "PgBouncer pool", "--scope", "atlas")
    assert got["degraded"] == "lexical" and got["items"][0]["id"] == wrote["id"]
    endpoint.start()
    assert cli("recall", "PgBouncer pool", "--scope", "atlas")["degraded"] is None


class Flaky:
    """A hashing embedder whose model raises an arbitrary exception while ``broken``."""

    def __init__(self) -> None:
        self.inner = hashing()
        self.broken = False
        self.name, self.model, self.dim = self.inner.name, self.inner.model, self.inner.dim
        self.profile, self.marker = self.inner.profile, self.inner.marker

    def embed_passages(self, texts: Any) -> np.ndarray:
        if self.broken:
            raise RuntimeError("onnxruntime: bad allocation")
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.broken:
            raise MemoryError("out of memory")
        return self.inner.embed_query(text)


def test_any_embedder_exception_degrades(tmp_path: Path) -> None:
    """Issue 9, item 10, for any embedder: an exception inside the model (not only an
    ``EmbedderError``) must not stop a write or a recall."""
    flaky = Flaky()
    config = dataclasses.replace(Config.load(home=tmp_path / "s"), embed_cooldown_s=0.0)
    with Memory.open(tmp_path / "s", embedder=flaky, config=config) as mem:
        flaky.broken = True
        res = mem.remember("the region column broke the loader", scope="atlas")
        assert res.vector_pending
        assert mem.recall("region column", scope="atlas").items[0].id == res.id
        down = mem.events(kinds=["embedder"])[0]["data"]
        assert down["error"] == "RuntimeError: onnxruntime: bad allocation"
        flaky.broken = False
        mem.remember("schema.yaml maps every column", scope="atlas")
        assert _vector_rows(mem)[2] == 0


def test_none_embedder_store_is_full_text_only(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``--embedder none`` store never makes a vector: recall is lexical from the
    start, doctor is ok, sleep runs, and ``reembed`` gives it vectors later."""
    # The reopen below names no embedder, so the store's marker must choose it; an
    # exported TIDELINE_EMBEDDER would choose instead (and rightly be refused).
    monkeypatch.delenv("TIDELINE_EMBEDDER", raising=False)
    store = tmp_path / "s"
    with Memory.open(store, embedder="none") as mem:
        a = mem.remember("Deploys never happen on Fridays", scope="atlas")
        assert not a.vector_pending  # nothing is pending: there will never be a vector
        assert mem.remember("Deploys never happen on Fridays", scope="atlas",
                            source="cli").decision == "potentiate"
        mem.add_turns([{"session": "s", "role": "user", "text": "why not on Fridays?"}],
                      scope="atlas")
        packet = mem.recall("Fridays deploys", scope="atlas")
        assert packet.degraded == "lexical" and packet.items[0].id == a.id
        assert mem.doctor()["ok"] and mem.events(kinds=["embedder"]) == []
        assert mem.sleep(force=True)["errors"] == {}
        assert mem.introspect()["embedder"]["marker"] == "none:full-text/1"
    with Memory.open(store) as mem:  # the marker brings the none embedder back
        assert mem.embedder.name == "none"
        mem.reembed(hashing())
        assert _vector_rows(mem)[2] == 0
        assert mem.recall("Fridays deploys", scope="atlas").degraded is None


def test_mcp_recall_and_memorize_report_the_degraded_state(tmp_path: Path) -> None:
    """Issue 9, item 10, through MCP: ``memorize`` and ``recall`` answered
    ``embedder_error`` while the embedder was down."""
    from tests.mcp.conftest import run_with, text_of

    from mcp import Client

    flaky = Flaky()
    config = dataclasses.replace(Config.load(home=tmp_path / "s"), embed_cooldown_s=0.0)
    with Memory.open(tmp_path / "s", embedder=flaky, config=config) as mem:
        flaky.broken = True

        async def body(client: Client) -> tuple[Any, Any]:
            wrote = await client.call_tool("memorize", {"text": "E1234 came from the CSV"})
            found = await client.call_tool("recall", {"query": "E1234"})
            return wrote, found

        wrote, found = run_with(mem, body)
        assert not wrote.is_error and wrote.structured_content["memory"]["vector_pending"]
        assert "vector pending" in text_of(wrote)
        assert not found.is_error and found.structured_content["degraded"] == "lexical"
        assert "degraded" in text_of(found) and "E1234" in text_of(found)
