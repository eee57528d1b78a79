"""Shared fixtures: a real store in tmp_path with the hashing embedder, on SQLite or PostgreSQL.

See tests/backend.py: modules marked ``backends`` run once per backend.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.backend import BACKENDS, ENV_URL, Backend, PostgresServer

from tideline import Memory
from tideline.embed import Embedder, HashingEmbedder, ThresholdProfile, make_embedder

os.environ.setdefault("OMP_NUM_THREADS", "1")

# Thresholds for the hashing embedder chosen for tests of the gate's three outcomes.
TEST_PROFILE = ThresholdProfile(same=0.9, related=0.55, abstain=0.35, floor=0.1)


def hashing() -> HashingEmbedder:
    """A hashing embedder with the test profile."""
    emb = HashingEmbedder()
    emb.profile = TEST_PROFILE
    return emb


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "backends: run the module's tests once per storage backend (tests/backend.py)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``backends`` that use the ``backend`` fixture run once per backend."""
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("backends"):
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """The embedded PostgreSQL server of this test session (started on first use).

    Its data lives outside pytest's temporary root: pytest prunes all but the newest
    three roots, so another test session starting meanwhile deleted a running server's
    files (seen as "server closed the connection unexpectedly" mid-run).
    """
    root = Path(tempfile.mkdtemp(prefix="tideline-test-pg-"))
    server = PostgresServer(root)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """The storage backend of this test: SQLite unless the module is marked ``backends``.

    On PostgreSQL a fresh database, named by ``TIDELINE_DATABASE_URL`` for the test.
    """
    name = getattr(request, "param", "sqlite")
    if name == "sqlite":
        monkeypatch.delenv(ENV_URL, raising=False)
        yield Backend("sqlite")
        return
    server: PostgresServer = request.getfixturevalue("pg_server")
    url = server.create()
    monkeypatch.setenv(ENV_URL, url)
    b = Backend("postgres", server, url)
    try:
        yield b
    finally:
        b.close()
        server.drop(url)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh store directory."""
    return tmp_path / "store"


@pytest.fixture
def mem(store_dir: Path, backend: Backend) -> Iterator[Memory]:
    """An opened memory on the test's backend with the hashing embedder, in no project.

    (Without ``project="global"`` the project would be detected from pytest's working
    directory — this checkout's name — which no test should depend on.)
    """
    m = backend.open(store_dir, embedder=hashing(), project="global")
    backend.check(m)
    try:
        yield m
    finally:
        m.close()


@pytest.fixture(scope="session")
def e5_embedder() -> Embedder:
    """The real default embedder (e5 with its calibrated profile), loaded once."""
    return make_embedder("e5")


@pytest.fixture
def e5_mem(store_dir: Path, backend: Backend, e5_embedder: Embedder) -> Iterator[Memory]:
    """An opened memory on the test's backend with the real e5 embedder, in no project."""
    m = backend.open(store_dir, embedder=e5_embedder, project="global")
    backend.check(m)
    try:
        yield m
    finally:
        m.close()


ROOT = Path(__file__).resolve().parent.parent


def node_tool(name: str) -> str:
    """A program from the project-local ``node_modules`` that `make test` installs.

    Claude Code and the MCP Inspector are pinned in package.json / package-lock.json and
    installed by ``npm ci`` (the Makefile's ``e2e-tools``), never looked up globally.
    """
    path = ROOT / "node_modules" / ".bin" / name
    assert path.exists(), f"{path} missing: run `make test` (it runs `npm ci`) or `npm ci`"
    return str(path)
