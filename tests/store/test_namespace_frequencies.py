"""Issue 11, schema 6: a namespace's document frequencies and recall are its own, on
each backend (tests/backend.py).

Two namespaces of one store (one SQLite file, one PostgreSQL database): the weights a
recall gives its terms come from the document frequencies of its namespace alone, so
namespace B storing many rows of a word changes nothing A recalls. On PostgreSQL the
lexical tables hold the namespace (schema 6); a SQLite file that holds several
namespaces counts each token's rows of the namespace instead of reading the FTS5
vocabulary of the whole file.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend, rows

from tideline.models import MemoryRecord

pytestmark = pytest.mark.backends
WORDS = ("kiln", "glaze", "otter", "harbour", "lantern", "e4521")

texts = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
                 min_size=1, max_size=6)


def _rec(text: str) -> MemoryRecord:
    now = time.time()
    return MemoryRecord(id=0, scope="global", kind="fact", gesture=text, weight=0.5,
                        stability=7.0, last_access=now, recorded_at=now, updated_at=now)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a_texts=texts, b_texts=texts, flood=st.sampled_from(WORDS))
def test_another_namespace_moves_nothing_a_namespace_recalls(
        backend: Backend, tmp_path_factory: pytest.TempPathFactory, a_texts: list[str],
        b_texts: list[str], flood: str) -> None:
    """A's document frequencies are its own rows' counts and its row-count estimate its
    highest id, and its recalls are the same before and after B stores 40 rows of each
    of its texts with ``flood``. Fails on schema 5: both backends counted B's rows."""
    home: Path = tmp_path_factory.mktemp("ns") / "store"
    url = backend.fresh()
    with backend.open(home, url=url, namespace="tenant-a", project="global") as a:
        for text in a_texts:
            a.remember(text)
        before = {w: [(i.id, round(i.confidence, 6)) for i in a.recall(w, log=False).items]
                  for w in WORDS}
    with backend.open(home, url=url, namespace="tenant-b", project="global") as b:
        many = [_rec(f"{flood} {t}") for t in b_texts * 40]
        with b.store.bulk_load(len(many)) as c:
            b.store.insert_memories(c, many, list(b.embedder.embed_passages(
                [r.gesture for r in many])))
    # A fresh handle: no frequency cached from before B wrote.
    with backend.open(home, url=url, namespace="tenant-a", project="global") as a:
        stored = rows(a, "SELECT id, gesture FROM memories WHERE namespace = ?",
                      ("tenant-a",))
        df, total = a.store.document_frequencies("m", list(WORDS))
        assert df == {w: sum(w in str(g).split() for _, g in stored) for w in WORDS}
        assert total == max(int(i) for i, _ in stored)
        after = {w: [(i.id, round(i.confidence, 6)) for i in a.recall(w, log=False).items]
                 for w in WORDS}
        # The same items in the same order; a confidence may move in its fourth decimal
        # from the time B's load took (retention decays with the seconds since access).
        assert {w: [i for i, _ in hits] for w, hits in after.items()} == \
            {w: [i for i, _ in hits] for w, hits in before.items()}
        for w, hits in after.items():
            assert [c for _, c in hits] == pytest.approx([c for _, c in before[w]], abs=1e-3)
