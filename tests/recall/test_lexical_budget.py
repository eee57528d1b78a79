"""The full-text side at scale: posting budget, conjunction of common terms, df cache."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config, RecallTuning
from tideline.models import MemoryRecord
from tideline.store import fts_query as lexical

WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heath")


def _load(mem: Memory, texts: list[str]) -> list[int]:
    """Insert rows without the novelty gate (siblings would be linked, not kept apart)."""
    now = time.time()
    vectors = mem.embedder.embed_passages(texts)
    with mem.store.transaction() as c:
        return [mem.store.insert_memory(c, MemoryRecord(
            id=0, scope="global", kind="fact", gesture=text, weight=0.5, stability=7.0,
            last_access=now, recorded_at=now, updated_at=now), vec)
            for text, vec in zip(texts, vectors, strict=True)]


@pytest.fixture
def small_budget(store_dir: Path) -> Iterator[Memory]:
    """A store whose posting budget is tiny, so a few dozen rows make a term common."""
    cfg = Config.load(home=store_dir)
    cfg = dataclasses.replace(cfg, recall=RecallTuning(posting_budget=10))
    m = Memory.open(store_dir, embedder=hashing(), config=cfg)
    try:
        yield m
    finally:
        m.close()


def test_common_terms_are_searched_together(small_budget: Memory) -> None:
    mem = small_budget
    texts = [f"Tanaka filed report {i} about the {WORDS[i % 8]} survey" for i in range(60)]
    texts += [f"Okafor filed report {i} about the {WORDS[i % 8]} survey" for i in range(60)]
    texts += ["Okafor and Tanaka met in Lisbon to compare notes"]
    ids = _load(mem, texts)
    both = ids[-1]

    weights, common, known, together = mem._rt.engine._terms.stats("m", ["tanaka", "okafor"])
    assert common == {"tanaka", "okafor"}
    assert sorted(together) == ["okafor", "tanaka"]
    assert len(weights) == 2 and known == {"tanaka", "okafor"}
    expr = lexical.match_expression("Tanaka Okafor", drop=common, together=together)
    assert expr is not None and " AND " in expr

    packet = mem.recall("Tanaka Okafor", include_turns=False, log=False)
    top = packet.items[0]
    assert top.id == both
    assert top.source == "lexical"  # found by the conjunction, not only by its vector


def test_one_common_term_alone_is_still_searched(small_budget: Memory) -> None:
    mem = small_budget
    ids = _load(mem, [f"Tanaka filed report {i}" for i in range(40)])
    _, common, _, together = mem._rt.engine._terms.stats("m", ["tanaka"])
    assert common == set() and together == []
    packet = mem.recall("Tanaka", include_turns=False, log=False, limit=5)
    assert {i.source for i in packet.items} == {"lexical"}
    assert {i.id for i in packet.items} <= set(ids)


def test_rare_term_goes_first_and_common_ones_are_left_to_the_conjunction(
    small_budget: Memory,
) -> None:
    mem = small_budget
    _load(mem, [f"Tanaka wrote note {i} on the {WORDS[i % 8]} ridge" for i in range(50)])
    _load(mem, ["Tanaka logged error E7731 on the amber ridge"])
    _, common, _, together = mem._rt.engine._terms.stats("m", ["tanaka", "ridge", "e7731"])
    assert "e7731" not in common
    assert common == {"tanaka", "ridge"} and sorted(together) == ["ridge", "tanaka"]


def test_single_letters_are_not_searched_when_words_remain() -> None:
    assert match_words("Jonas K. Tanaka") == ['"Jonas"', '"Tanaka"']
    assert match_words("K.") == ['"K"']


def match_words(query: str) -> list[str]:
    expr = lexical.match_expression(query)
    assert expr is not None
    return expr.split(" OR ")


def test_document_frequency_cache_follows_growth(mem: Memory) -> None:
    _load(mem, [f"glacier sample {i}" for i in range(600)])
    df, total = mem.store.document_frequencies("m", ["glacier", "sample", "absent"])
    assert df == {"glacier": 600, "sample": 600, "absent": 0} and total == 600
    # Growth by more than 1 % drops the cached large counts.
    _load(mem, [f"glacier core {i}" for i in range(20)])
    df, total = mem.store.document_frequencies("m", ["glacier", "sample"])
    assert df == {"glacier": 620, "sample": 600} and total == 620


def test_small_document_frequencies_are_never_stale(mem: Memory) -> None:
    ids = _load(mem, [f"moraine {i}" for i in range(30)] + [f"filler {i}" for i in range(30)])
    assert mem.store.document_frequencies("m", ["moraine"])[0] == {"moraine": 30}
    for mid in ids[:10]:
        mem.forget(mid)
    assert mem.store.document_frequencies("m", ["moraine"])[0] == {"moraine": 20}



def test_an_initial_narrows_the_conjunction_to_the_person_meant(small_budget: Memory) -> None:
    mem = small_budget
    texts = [f"Jonas {x}. Tanaka filed report {i}" for i in range(30) for x in "KM"]
    texts += ["Jonas M. Tanaka moved to Lisbon", "Jonas K. Tanaka moved to Osaka"]
    ids = _load(mem, texts)
    expr = lexical.match_expression("Where did Jonas K. Tanaka move?",
                                    drop={"jonas", "tanaka"}, together=["jonas", "tanaka"])
    assert expr is not None and '("Jonas" AND "Tanaka" AND "K")' in expr
    assert match_words("Plan K") == ['"Plan"']  # never searched alone
    packet = mem.recall("Where did Jonas K. Tanaka move?", include_turns=False, log=False)
    assert packet.items[0].id == ids[-1]
