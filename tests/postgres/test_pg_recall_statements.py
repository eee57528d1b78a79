"""How many statements a recall sends to PostgreSQL, and that reading ahead changes no result.

Each statement is a round trip to the server (1-3 ms on two busy cores), so their number
bounds recall latency on PostgreSQL (issue 11: PostgreSQL recall p50 within 2x of SQLite).
They are counted by the connection wrapper (``Database.statements``), not timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import hashing

from tideline import Memory
from tideline.store.postgres.connection import GIN_PENDING_KB

#: The most statements one journal-less recall of memories below may send (the code
#: before sent 13, 12 and 15 for the three queries; now 8, 8 and 10).
MAX_STATEMENTS = 10

_FACTS = [
    "Aiko Schulz uses PostgreSQL at work for the billing datastore",
    "Selin Weber prefers the Helix text editor over Vim",
    "The deploy pipeline for whale-listen runs every Friday at noon",
    "Error E4521 means the token rotation job lost its lease",
    "Marta keeps her sourdough starter in the fridge on weekdays",
    "The office coffee machine is descaled every second Monday",
]


def _fill(mem: Memory) -> list[int]:
    ids = [int(mem.remember(text).id) for text in _FACTS]
    with mem.store.transaction() as c:
        mem.store.add_edge(c, ids[0], ids[1], "related", 0.8, now=1.0)
        mem.store.add_edge(c, ids[2], ids[3], "related", 0.8, now=1.0)
    mem.sleep(force=True)
    return ids


def test_a_recall_sends_at_most_max_statements(pg_mem: Memory) -> None:
    """One recall of memories (journal off) after sleep built clusters: document
    frequencies of the terms and of their other word forms are one statement, the
    graph spread's first hop reads no edges of its own, and cluster routing reads the
    adjacent clusters and the members of all routed clusters in one statement each."""
    _fill(pg_mem)
    pg_mem.recall("warm up", include_turns=False, log=False)
    for query in ("which datastore does Aiko use at work?", "E4521 token rotation",
                  "what editor does Selin prefer"):
        before = pg_mem.store.statements_sent()
        packet = pg_mem.recall(query, include_turns=False, log=False)
        sent = pg_mem.store.statements_sent() - before
        assert packet.items, query
        assert 0 < sent <= MAX_STATEMENTS, (query, sent)


def test_reading_ahead_in_threads_gives_the_same_packets(pg_mem: Memory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The reads started beside each other give the packet the one-by-one reads give."""
    _fill(pg_mem)
    queries = ["which datastore does Aiko use at work?", "whale-listen deploy",
               "E4521", "sourdough", "nothing like this was ever said"]

    def packets() -> list[list[tuple[str, float, str]]]:
        return [[(str(i.id), i.score, i.source) for i in
                 pg_mem.recall(q, include_turns=True, log=False).items] for q in queries]

    assert pg_mem.store.parallel_reads()
    ahead = packets()
    monkeypatch.setattr(type(pg_mem.store), "parallel_reads", lambda self: False)
    assert packets() == ahead
    assert any(ahead)


def test_sessions_keep_the_gin_pending_list_small(pg_mem: Memory) -> None:
    """Every pooled session sets gin_pending_list_limit (see tideline.store.postgres.connection):
    at the server's 4 MB default each word or substring search read up to 512 pages more."""
    with pg_mem.store.db.read() as c:
        assert c.execute("SHOW gin_pending_list_limit").fetchone()[0] == f"{GIN_PENDING_KB}kB"


def test_inside_a_transaction_reads_are_not_parallel(pg_url: str, tmp_path: Path) -> None:
    """A recall made inside a write transaction keeps its reads on that transaction's
    connection (another thread would not see its uncommitted rows)."""
    with Memory.open(tmp_path / "local", database=pg_url, embedder=hashing(),
                     project="global") as mem:
        assert mem.store.parallel_reads()
        with mem.store.db.write():
            assert not mem.store.parallel_reads()
        assert mem.store.parallel_reads()


def test_the_recall_journal_commits_without_waiting_for_the_disk(
        pg_mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal of a recall (event, attention, eligibility) is one transaction whose
    commit does not wait for the WAL flush, as SQLite's synchronous = NORMAL; its rows
    are all there after the recall."""
    from tideline.store.postgres import connection

    _fill(pg_mem)
    sent: list[tuple[bool, str]] = []
    plain = connection.Conn.execute

    def execute(self: connection.Conn, sql: str, params: Any = ()) -> Any:
        sent.append((self.in_transaction, " ".join(sql.split())))
        return plain(self, sql, params)

    monkeypatch.setattr(connection.Conn, "execute", execute)
    packet = pg_mem.recall("which datastore does Aiko use at work?", include_turns=False)
    monkeypatch.setattr(connection.Conn, "execute", plain)
    assert packet.items
    relaxed = [i for i, (inside, sql) in enumerate(sent)
               if sql == "SET LOCAL synchronous_commit = off"]
    assert len(relaxed) == 1 and sent[relaxed[0]][0]
    assert sent[relaxed[0] + 1][1].startswith("INSERT INTO events")
    with pg_mem.store.db.read() as c:
        kinds = [r[0] for r in c.execute(
            "SELECT kind FROM events WHERE namespace = ? ORDER BY id DESC LIMIT 1",
            (pg_mem.store.namespace,))]
        eligible = c.execute("SELECT count(*) FROM eligibility").fetchone()[0]
    assert kinds == ["recall"] and eligible >= 1
