"""User ↔ assistant histories: the asker's own turns for a question of their own, and a
user's request is not discounted as small talk (issue 29)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import hashing
from tests.recall.chat import recall_tuned

from tideline import Memory
from tideline.recall.roles import asks_of_self


def test_asks_of_self_reads_the_persons_of_the_question() -> None:
    assert asks_of_self("How long have I been working in my current role?")
    assert asks_of_self("Where did I attend my cousin\u2019s wedding?")
    assert not asks_of_self("Can you remind me of the designer you recommended?")
    assert not asks_of_self("What did we finally decide to name it, as I recall?")
    assert not asks_of_self("What does Melanie paint?")  # third person: no one's own
    assert not asks_of_self("")


@given(st.text(max_size=120))
def test_asks_of_self_is_total(text: str) -> None:
    assert asks_of_self(text) in (True, False)


def _store(store_dir: Path) -> None:
    with Memory.open(store_dir, embedder=hashing(), project="global") as mem:
        mem.add_turns([
            {"session": "a", "role": "user", "id": "ask",
             "text": "Can you suggest kitchen shelves recipes for my kitchen shelves?"},
            {"session": "a", "role": "assistant", "id": "echo",
             "text": "Kitchen shelves recipes: congratulations on your kitchen shelves."},
            *({"session": "f", "role": "user", "text": f"weather note {i}"} for i in range(30)),
        ], source="chat")


def _order(store_dir: Path, query: str, **tune: object) -> list[str]:
    return [i.message_id or "" for i in recall_tuned(store_dir, query, **tune).items]


def test_a_question_of_ones_own_puts_the_users_turn_before_the_assistants(
    store_dir: Path,
) -> None:
    _store(store_dir)
    query = "What did I say about my kitchen shelves recipes?"
    off = _order(store_dir, query, assistant_discount=0.0, request_tells=False)
    assert off[:2] == ["echo", "ask"]  # the echo asks nothing back; the request is discounted
    # The request is not discounted as a question when it is put to an assistant.
    def score(**tune: object) -> float:
        items = recall_tuned(store_dir, query, assistant_discount=0.0, **tune).items
        return next(i.score for i in items if i.message_id == "ask")
    assert score(request_tells=True) > score(request_tells=False)
    assert _order(store_dir, query, request_tells=False, assistant_discount=0.5)[:2] == [
        "ask", "echo"]
    # Addressed to the assistant: no one is discounted for their role.
    spoken = "What kitchen shelves recipes did you give me?"
    assert _order(store_dir, spoken, request_tells=False)[:2] == ["echo", "ask"]
