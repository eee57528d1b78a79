"""A store's vector search can be warmed before its first search (``vectors.warm()``).

SQLite: every space's local index is opened and synced, as a new host's first search
would. PostgreSQL: the HNSW index is read into the server's shared buffers with
``pg_prewarm`` (after a restart a 1M-vector search otherwise reads ~2,000 pages from the
OS cache, docs/benchmarks.md). Warming changes no answer.
"""

from __future__ import annotations

import pytest
from tests.backend import Backend

from tideline import Memory

pytestmark = pytest.mark.backends

FACTS = ("The kiln in Leeds fires at 1,240 degrees on Tuesdays.",
         "Ilse keeps the otter log in a green notebook.",
         "The replica broker restarts after every snapshot.",
         "Comet tickets for the marathon went on sale in March.")


def _answer(mem: Memory) -> list[tuple[str, int | str, float]]:
    packet = mem.recall("where is the otter log", log=False)
    return [(i.type, i.id, round(i.confidence, 6)) for i in packet.items]


def test_warm_loads_every_space_and_changes_no_answer(mem: Memory, backend: Backend) -> None:
    for text in FACTS:
        mem.remember(text)
    mem.add_turns([{"speaker": "Ilse", "text": "The otter log is green.", "session": "s1"}])
    before = _answer(mem)

    warmed = mem.vectors.warm()

    if backend.is_sqlite:
        assert warmed == {mem.store.space("m", "global"): len(FACTS),
                          mem.store.space("t", "global"): 1}
    else:
        [(name, pages)] = warmed.items()
        assert name == f"vectors_hnsw_{mem.embedder.dim}"
        assert pages >= 1
    assert _answer(mem) == before
    assert before
