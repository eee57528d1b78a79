"""Shared fixtures: a real SQLite store in tmp_path with the hashing embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tideline import Memory
from tideline.embed import HashingEmbedder, ThresholdProfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

# Thresholds for the hashing embedder chosen for tests of the gate's three outcomes.
TEST_PROFILE = ThresholdProfile(same=0.9, related=0.55, abstain=0.35, floor=0.1)


def hashing() -> HashingEmbedder:
    """A hashing embedder with the test profile."""
    emb = HashingEmbedder()
    emb.profile = TEST_PROFILE
    return emb


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh store directory."""
    return tmp_path / "store"


@pytest.fixture
def mem(store_dir: Path) -> Iterator[Memory]:
    """An opened memory on a real SQLite file with the hashing embedder, in no project.

    (Without ``project="global"`` the project would be detected from pytest's working
    directory — this checkout's name — which no test should depend on.)
    """
    m = Memory.open(store_dir, embedder=hashing(), project="global")
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
