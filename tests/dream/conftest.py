"""Fixtures for DREAM tests (the helpers live in ``helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.dream.helpers import LLMServer, serve


@pytest.fixture
def openai_server() -> Iterator[LLMServer]:
    """A loopback OpenAI-compatible chat-completions server."""
    yield from serve("openai")


@pytest.fixture
def anthropic_server() -> Iterator[LLMServer]:
    """A loopback server speaking the Anthropic Messages API."""
    yield from serve("anthropic")
