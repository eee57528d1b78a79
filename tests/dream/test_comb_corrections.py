"""DREAM's comb layer (conflict detection) is shown the corrections the gate kept."""

from __future__ import annotations

import pytest
from tests.dream.helpers import LLMServer, answer, openai, settings

from tideline import Memory

pytestmark = pytest.mark.backends


def test_comb_prompt_names_the_correction(mem: Memory, openai_server: LLMServer) -> None:
    old = mem.remember("Deploys of atlas happen on Fridays", scope="atlas")
    new = mem.remember("Deploys of atlas never happen on Fridays", scope="atlas")
    assert new.decision == "correct"
    openai_server.replies.append(answer({"weights": [], "conflicts": [], "profiles": [],
                                         "self_concept": [], "threads": []}))
    mem.dream(["comb"], provider=openai(openai_server), settings=settings())
    messages = openai_server.requests[-1].get("messages", [])
    prompt = "\n".join(m["content"] for m in messages if m["role"] == "user")
    assert f"#{new.id} updates #{old.id}" in prompt
    assert "Deploys of atlas happen on Fridays" in prompt
