"""Issue 28 §2.3: a new store whose http embedder has never answered accepts writes.

On ``ed15f9c`` ``tideline remember`` on a new store with ``TIDELINE_EMBEDDER=http`` and
an endpoint that is down exited 21: the store could not be created without the
endpoint's dimension. Now it is created provisionally (``http-pending:<model>/1``),
writes are stored full-text with their vectors pending, and the first open that
reaches the endpoint fixes the marker; a sleep then fills the pending vectors. A real
OpenAI-compatible endpoint on loopback is down, then comes up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.backend import Backend, scalar
from tests.embed.test_degrade import MODEL, Endpoint

from tideline import Memory


def test_a_store_whose_endpoint_never_answered_is_written_then_healed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint()
    endpoint.start()
    endpoint.stop()  # the port is known and nothing listens on it
    store = tmp_path / "s"
    env = dict(os.environ, TIDELINE_EMBEDDER="http", TIDELINE_EMBED_URL=endpoint.url,
               TIDELINE_EMBED_MODEL=MODEL)

    def cli(*args: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store),
                               "--json"], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout))

    first = cli("remember", "atlas uses PostgreSQL 16 behind PgBouncer", "--scope", "atlas")
    assert first["decision"] == "new" and first["vector_pending"] is True
    second = cli("remember", "the PgBouncer pool size is 40", "--scope", "atlas")
    assert second["vector_pending"] is True and second["id"] != first["id"]
    got = cli("recall", "PgBouncer pool size", "--scope", "atlas")
    assert got["degraded"] == "lexical" and got["items"][0]["id"] == second["id"]
    assert cli("introspect")["embedder"]["marker"] == f"http-pending:{MODEL}/1"
    endpoint.start()
    try:
        third = cli("remember", "deploys happen on Tuesdays", "--scope", "atlas")
        assert third["vector_pending"] is False
        assert cli("introspect")["embedder"]["marker"] == f"http:{MODEL}/384"
        cli("sleep")
        monkeypatch.setenv("TIDELINE_EMBED_URL", endpoint.url)
        monkeypatch.delenv("TIDELINE_EMBEDDER", raising=False)
        with Memory.open(store) as mem:
            assert mem.embedder.marker == f"http:{MODEL}/384"
            assert scalar(mem, "SELECT count(*) FROM vectors WHERE key IN (?, ?, ?)",
                          (first["id"], second["id"], third["id"])) == 3
        found = cli("recall", "which database does atlas use", "--scope", "atlas")
        assert found["degraded"] is None and found["items"]
    finally:
        endpoint.stop()


@pytest.mark.backends
def test_the_provisional_marker_is_fixed_on_both_backends(
        tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through the API, on SQLite and PostgreSQL: the marker lives in the
    database's ``db_meta`` and is fixed there once the endpoint answers."""
    endpoint = Endpoint()
    endpoint.start()
    endpoint.stop()
    monkeypatch.setenv("TIDELINE_EMBED_URL", endpoint.url)
    monkeypatch.setenv("TIDELINE_EMBED_MODEL", MODEL)
    monkeypatch.delenv("TIDELINE_EMBEDDER", raising=False)
    home = tmp_path / "s"
    with backend.open(home, embedder="http", project="global") as mem:
        backend.check(mem)
        wrote = mem.remember("the nightly export runs at 02:00", scope="atlas")
        assert wrote.vector_pending and mem.embedder.marker == f"http-pending:{MODEL}/1"
    with backend.open(home, project="global") as mem:  # still down: still provisional
        assert mem.embedder.marker == f"http-pending:{MODEL}/1"
        assert mem.recall("nightly export", scope="atlas").items[0].id == wrote.id
    endpoint.start()
    try:
        with backend.open(home, project="global") as mem:
            assert mem.embedder.marker == f"http:{MODEL}/384"
            mem.sleep()
            packet = mem.recall("when does the nightly export run", scope="atlas")
            assert packet.degraded is None and packet.items[0].id == wrote.id
        with backend.open(home, project="global") as mem:
            assert mem.embedder.marker == f"http:{MODEL}/384"
    finally:
        endpoint.stop()
