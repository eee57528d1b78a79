"""Sentence vectors: a long turn is also found by its best sentence (issue 12, off by default)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.backend import Backend
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.recall.sentences import (
    MAX_SENTENCES,
    Passages,
    group,
    lifted_blend,
    sentence_cap,
    split,
)

pytestmark = pytest.mark.backends

LONG = ("Anyway, the weather is grey again and the bus was late twice. "
        "My sister keeps sending pictures of her new kitchen tiles. "
        "I repaired the old harbour lighthouse lamp. "
        "Tomorrow we are going to visit grandma for her birthday dinner.")
SHORT = "The old lamp by the harbour lighthouse, yes."


def _config(store_dir: Path, share: float, words: int = 0, assisted: bool = False) -> Config:
    """The store's config with ``sentence_share`` and ``passage_words`` (0: the long turn's
    four sentences are four passages); ``assisted``: only sessions with an assistant are
    split (off: the chats of this module's first tests are between two people)."""
    plain = Config.load(home=store_dir)
    return dataclasses.replace(plain, recall=dataclasses.replace(
        plain.recall, sentence_share=share, passage_words=words, passage_assisted=assisted))


def _turns(chat: int = 0) -> list[dict[str, object]]:
    """The long turn, the short one, "ok", and ``chat`` turns of small talk of two
    sentences, the lighthouse lamp mentioned in passing in the second."""
    return [{"session": "s1", "speaker": "Ana", "text": LONG, "id": "long"},
            {"session": "s1", "speaker": "Ben", "text": SHORT, "id": "short"},
            {"session": "s1", "speaker": "Ana", "text": "ok", "id": "ok"},
            *({"session": "s2", "speaker": "Ben", "id": f"chat{i}",
               "text": f"The harbour lighthouse lamp looks old, day {i}. "
                       f"We had soup and bread for lunch on day number {i} again."}
              for i in range(chat))]


def test_split_joins_short_fragments_and_keeps_abbreviations() -> None:
    got = split("Wow! Dr. Smith came to the U.S. office today. It was great. Did you see him?")
    assert got == ("Wow! Dr. Smith came to the U.S. office today.", "It was great.",
                   "Did you see him?")
    assert split("ok") == ("ok",)
    assert split("Haha yes. lol") == ("Haha yes. lol",)


def test_split_cuts_chinese_at_its_full_stops() -> None:
    got = split("我昨天去了北京的公园散步。天气非常好，人也很多！你周末去哪里玩了？")
    assert got == ("我昨天去了北京的公园散步。", "天气非常好，人也很多！", "你周末去哪里玩了？")


@given(st.lists(st.sampled_from(["One two three four.", "Five six seven!", "Eight nine ten?",
                                 "Hi.", "ok"]), min_size=1, max_size=40))
def test_split_keeps_every_word_and_the_cap(parts: list[str]) -> None:
    text = " ".join(parts)
    got = split(text, 5)
    assert 1 <= len(got) <= 5
    assert " ".join(got).split() == text.split()


def test_the_cap_keeps_a_turn_in_one_pgvector_row() -> None:
    assert sentence_cap(384) == MAX_SENTENCES
    assert sentence_cap(1536) * 1536 <= 16_000
    assert sentence_cap(100_000) == 1


def test_lifted_blend_matches_the_means_and_keeps_turns_without_sentences() -> None:
    turn = {1: 0.80, 2: 0.70, 3: 0.60}
    best = {1: 0.90, 2: 0.60}
    got = lifted_blend(turn, best, 0.5)
    lift = (0.80 + 0.70) / 2 - (0.90 + 0.60) / 2
    assert got[1] == pytest.approx(0.5 * 0.80 + 0.5 * (0.90 + lift))
    assert got[2] == pytest.approx(0.5 * 0.70 + 0.5 * (0.60 + lift))
    assert got[3] == 0.60
    assert lifted_blend(turn, best, 0.0) == turn


def test_an_import_stores_one_vector_per_sentence(store_dir: Path, backend: Backend) -> None:
    emb = hashing()
    with backend.open(store_dir, embedder=emb, config=_config(store_dir, 0.5)) as mem:
        mem.add_turns(_turns(), source="chat")
        turns = sorted(mem.store.session_turns("s1"), key=lambda t: t.turn_index)
        got = mem.store.sentence_vectors(turns, emb.dim)
        plain = mem.store.turn_vectors(turns, emb.dim)
    assert set(got) == {turns[0].id}  # one sentence each: the others keep only their turn vector
    want = emb.embed_passages([f"Ana: {s}" for s in split(LONG)])
    assert got[turns[0].id].shape == (4, emb.dim)
    assert np.allclose(got[turns[0].id], want, atol=1e-6)
    assert set(plain) == {t.id for t in turns}


def test_without_the_share_no_sentence_is_embedded(store_dir: Path, backend: Backend) -> None:
    emb = hashing()
    with backend.open(store_dir, embedder=emb, config=_config(store_dir, 0.0)) as mem:
        mem.add_turns(_turns(), source="chat")
        turns = mem.store.session_turns("s1")
        assert mem.store.sentence_vectors(turns, emb.dim) == {}
        assert len(mem.store.turn_vectors(turns, emb.dim)) == 3


def test_the_best_sentence_lifts_a_long_turn(store_dir: Path, backend: Backend) -> None:
    """The long turn says it in one sentence among small talk; the short one only hints."""
    with backend.open(store_dir, embedder=hashing(), config=_config(store_dir, 0.5)) as mem:
        mem.add_turns(_turns(chat=6), source="chat")
    query = "I repaired the old harbour lighthouse lamp"
    score: dict[float, dict[str, float]] = {}
    best: dict[float, float] = {}
    first: dict[float, str] = {}
    for share in (0.0, 1.0):
        with backend.open(store_dir, embedder=hashing(),
                          config=_config(store_dir, share)) as mem:
            packet = mem.recall(query, log=False, limit=3)
        score[share] = {i.text: i.score for i in packet.items}
        best[share] = packet.best_similarity
        first[share] = packet.items[0].text
    assert score[1.0][LONG] > score[0.0][LONG] + 0.1
    assert score[1.0][SHORT] == score[0.0][SHORT]  # one sentence: its turn vector only
    assert first[1.0] == LONG
    assert best[0.0] == best[1.0]  # abstention still reads the turn cosine


def test_a_store_without_sentence_vectors_ranks_as_before(store_dir: Path,
                                                           backend: Backend) -> None:
    """Turned on over turns imported with it off, recall falls back to the turn vectors."""
    with backend.open(store_dir, embedder=hashing(), config=_config(store_dir, 0.0)) as mem:
        mem.add_turns(_turns(), source="chat")
    texts = []
    for share in (0.0, 1.0):
        with backend.open(store_dir, embedder=hashing(),
                          config=_config(store_dir, share)) as mem:
            texts.append([(i.text, i.score) for i in
                          mem.recall("harbour lighthouse lamp", log=False, limit=3).items])
    assert texts[0] == texts[1]


def test_sentence_vectors_survive_an_archive_round_trip(tmp_path: Path, backend: Backend) -> None:
    """An export of a store with sentence vectors used to be refused on import (a row of
    four times the dimension: "vector s:…/1 has 1024 dimensions")."""
    emb = hashing()
    a, b = tmp_path / "a", tmp_path / "b"
    with backend.open(a, embedder=emb, config=_config(a, 0.5)) as mem:
        mem.add_turns(_turns(), source="chat")
        mem.export(tmp_path / "a.jsonl")
        before = mem.store.sentence_vectors(mem.store.session_turns("s1"), emb.dim)
    with Memory.open(b, embedder=hashing(), config=_config(b, 0.5)) as dest:
        dest.import_archive(tmp_path / "a.jsonl")
        turns = dest.store.session_turns("s1")
        after = dest.store.sentence_vectors(turns, emb.dim)
        assert dest.doctor()["ok"]
    assert [m.shape for m in after.values()] == [m.shape for m in before.values()] == [(4, emb.dim)]
    assert np.allclose(next(iter(after.values())), next(iter(before.values())))


# -- passages (issue 29): a few sentences per vector, a person's own turns only --------------


@given(st.lists(st.sampled_from(["One two three four.", "Five six seven!", "Eight nine ten?",
                                 "Eleven twelve thirteen fourteen fifteen sixteen."]),
                min_size=1, max_size=30), st.integers(min_value=-1, max_value=20))
def test_group_keeps_every_word_and_its_bound(parts: list[str], words: int) -> None:
    got = group(parts, words)
    assert " ".join(got).split() == " ".join(parts).split()
    if words <= 0:
        assert got == tuple(parts)
    for passage in got:  # over the bound only a sentence alone
        assert len(passage.split()) <= words or passage in parts


def test_a_plan_splits_user_turns_only_and_only_in_two_or_more_passages() -> None:
    plan = Passages(words=30, roles=frozenset({"user"}))
    assert plan.of_turn(LONG, "assistant") == ()
    assert plan.of_turn(LONG, "system") == ()
    assert plan.of_turn(SHORT, "user") == ()  # one passage: its turn vector is its passage's
    got = plan.of_turn(LONG, "user")
    assert got == (" ".join(split(LONG)[:3]), split(LONG)[3])
    assert Passages(words=0, roles=plan.roles).of_turn(LONG, "user") == split(LONG)
    assert len(Passages(words=0, roles=plan.roles).of_turn(LONG, "user", cap=2)) == 2


def test_by_default_user_turns_of_assisted_sessions_are_split() -> None:
    """Best-passage ranking is on by default, for a user's turns in sessions where an
    assistant speaks (an import pays for those passages only)."""
    plan = Passages.of(Config.load().recall)
    assert plan == Passages(words=30, roles=frozenset({"user"}), assisted=True)
    assert plan.of_turn(ASIDE, "user") != ()
    assert plan.of_turn(ASIDE, "user", assisted=False) == ()
    assert plan.of_turn(ASIDE, "assistant") == ()


def test_a_plan_follows_the_settings() -> None:
    """No plan (nothing embedded beyond the turn) with the share at 0; else user turns,
    and assistant turns too with ``passage_assistant``."""
    base = Config.load().recall
    assert Passages.of(dataclasses.replace(base, sentence_share=0.0)) is None
    plan = Passages.of(dataclasses.replace(base, sentence_share=0.3, passage_words=-5,
                                           passage_assisted=False))
    assert plan == Passages(words=0, roles=frozenset({"user"}))
    both = Passages.of(dataclasses.replace(base, sentence_share=0.3, passage_assistant=True))
    assert both is not None and both.roles == frozenset({"user", "assistant"})


ASIDE = ("I'm looking for some recipe ideas for using up ripe tomatoes from the market. "
         "I have been cooking a lot more at home lately with my friends and family. "
         "By the way, I just replaced my old kitchen faucet with a touchless one.")


ANSWER = ("Here are some tomato recipes you could try this week at home. "
          "A fresh salsa with onions and coriander is quick to make. "
          "Congratulations on the new kitchen faucet, a touchless one is handy. "
          "A slow roasted tomato sauce keeps well in the freezer for months.")


def _chat() -> list[dict[str, object]]:
    """A user's request with a faucet aside, an assistant's long answer that mentions the
    faucet in passing, and user turns of two sentences about an old kitchen."""
    rows: list[dict[str, object]] = [
        {"session": "s1", "speaker": "user", "role": "user", "text": ASIDE, "id": "aside"},
        {"session": "s1", "speaker": "assistant", "role": "assistant",
         "text": "Sure, here are some ideas.", "id": "sure"},
        {"session": "s0", "speaker": "user", "role": "user", "text": "Any tomato recipes?",
         "id": "ask"},
        {"session": "s0", "speaker": "assistant", "role": "assistant", "text": ANSWER,
         "id": "answer"}]
    for i, thing in enumerate(["table", "chair", "lamp", "rug", "clock", "shelf"]):
        rows += [{"session": f"s{i + 2}", "speaker": "user", "role": "user", "id": f"u{i}",
                  "text": f"My old kitchen {thing} is fine, day {i}. "
                          f"We had soup and bread for lunch again today."},
                 {"session": f"s{i + 2}", "speaker": "assistant", "role": "assistant",
                  "id": f"a{i}", "text": "Glad to hear it."}]
    return rows


def test_an_import_embeds_passages_of_user_turns_not_of_assistant_turns(
        store_dir: Path, backend: Backend) -> None:
    emb = hashing()
    with backend.open(store_dir, embedder=emb,
                      config=_config(store_dir, 0.3, 30, assisted=True)) as mem:
        mem.add_turns(_chat(), source="chat")
        turns = {t.message_id: t for s in ("s0", "s1") for t in mem.store.session_turns(s)}
        got = mem.store.sentence_vectors(list(turns.values()), emb.dim)
    assert set(got) == {turns["aside"].id}
    want = emb.embed_passages([f"user: {p}" for p in group(split(ASIDE), 30)])
    assert got[turns["aside"].id].shape == want.shape == (2, emb.dim)  # request | aside
    assert np.allclose(got[turns["aside"].id], want, atol=1e-6)


def test_a_by_the_way_aside_is_lifted_by_its_passage(store_dir: Path,
                                                     backend: Backend) -> None:
    """With passages the user's aside scores by its own sentence, not diluted by the
    request around it; the assistant's answer, not split, keeps its score."""
    score: dict[float, dict[str, float]] = {}
    for share in (0.0, 0.5):
        home = store_dir / f"share{share}"
        with backend.open(home, url=backend.fresh(), embedder=hashing(),
                          config=_config(home, share, assisted=True)) as mem:
            mem.add_turns(_chat(), source="chat")
            packet = mem.recall("did I replace my old kitchen faucet", log=False, limit=20)
            score[share] = {i.text: i.score for i in packet.items}
    assert score[0.5][ASIDE] > score[0.0][ASIDE] + 0.05
    assert score[0.5][ANSWER] == pytest.approx(score[0.0][ANSWER])


def test_only_sessions_where_an_assistant_speaks_are_split(store_dir: Path,
                                                           backend: Backend) -> None:
    """A user's long turn gets passages when an assistant speaks in its session, in the
    same batch or stored before it (a hook hands turns over a few at a time); in a chat
    between people (no assistant) it keeps its turn vector only."""
    emb = hashing()
    user = {"speaker": "user", "role": "user", "text": ASIDE}
    with backend.open(store_dir, embedder=emb,
                      config=_config(store_dir, 0.3, 30, assisted=True)) as mem:
        mem.add_turns([{**user, "session": "people", "id": "a"},
                       {"session": "people", "speaker": "Ben", "role": "user",
                        "text": "Nice, a touchless faucet!", "id": "b"}], source="chat")
        mem.add_turns([{"session": "help", "speaker": "assistant", "role": "assistant",
                        "text": "Hello! How can I help?", "id": "c"}], source="chat")
        mem.add_turns([{**user, "session": "help", "id": "d"}], source="chat")
        turns = {t.message_id: t for s in ("people", "help")
                 for t in mem.store.session_turns(s)}
        got = mem.store.sentence_vectors(list(turns.values()), emb.dim)
    assert set(got) == {turns["d"].id}


def test_a_jsonl_import_uses_the_default_passages(store_dir: Path, backend: Backend) -> None:
    """The streamed import (``tideline import jsonl``) splits as ``add_turns`` does."""
    import json

    path = store_dir / "chat.jsonl"
    store_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"session": "j", "role": "user", "speaker": "user", "text": ASIDE, "id": "1"},
            {"session": "j", "role": "assistant", "speaker": "assistant", "text": ANSWER,
             "id": "2"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    emb = hashing()
    with backend.open(store_dir / "home", embedder=emb) as mem:
        mem.import_jsonl(path, source="chat")
        turns = mem.store.session_turns("j")
        got = mem.store.sentence_vectors(turns, emb.dim)
    assert [t.role for t in turns if t.id in got] == ["user"]


@given(st.text(max_size=400), st.integers(min_value=0, max_value=60),
       st.sampled_from(["user", "assistant", "system", "tool", ""]), st.booleans())
def test_a_plan_never_fails_and_keeps_the_words_of_any_text(text: str, words: int, role: str,
                                                             assisted: bool) -> None:
    got = Passages(words=words, roles=frozenset({"user"}), assisted=True).of_turn(
        text, role, cap=4, assisted=assisted)
    assert got == () or (role == "user" and assisted and 2 <= len(got) <= 4)
    if got:
        assert " ".join(got).split() == text.split()
