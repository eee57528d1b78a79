"""A small two-person chat for ranking tests: a few named turns among filler, and recall
with one ranking setting changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.models import RecallPacket


def store_chat(store_dir: Path, turns: list[Mapping[str, Any]]) -> None:
    """Store ``turns`` and 30 filler turns of a third speaker in a session of their own."""
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns([*turns, *({"session": "s3", "speaker": "Cy", "text": f"weather note {i}"}
                                 for i in range(30))], source="chat")


def recall_tuned(store_dir: Path, query: str, **recall: Any) -> RecallPacket:
    """``query`` (limit 5, not logged) with the given recall settings changed; with
    ``neighbour_hits=0`` and ``across_question=0`` unless given, so only the turns' own
    scores count."""
    base = Config()
    config = dataclasses.replace(base, recall=dataclasses.replace(
        base.recall, **{"neighbour_hits": 0, "across_question": 0.0, **recall}))
    with Memory.open(store_dir, embedder=hashing(), project="global", config=config) as mem:
        return mem.recall(query, log=False, limit=5)
