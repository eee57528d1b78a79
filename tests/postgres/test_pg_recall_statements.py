"""How many statements a recall sends to PostgreSQL, and that reading ahead changes no result.

Each statement is a round trip to the server (1-3 ms on two busy cores), so their number
bounds recall latency on PostgreSQL (issue 11: PostgreSQL recall p50 within 2x of SQLite).
They are counted by the connection wrapper (``Database.statements``), not timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.backend import rows, scalar
from tests.conftest import hashing

from tideline import Memory
from tideline.recall.graph import GRAPH_EDGES
from tideline.recall.journal import RecallJournal
from tideline.store.consolidation import ConsolidationStore
from tideline.store.postgres.connection import GIN_PENDING_KB

#: The most statements one journal-less recall of memories below may send (the code
#: before sent 13, 12 and 15 for the three queries, then 8, 8 and 10; now 6, 6 and 8:
#: records, edges and vectors are one read, routing's version comes with the counts).
MAX_STATEMENTS = 8

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
    graph spread's first hop reads no edges of its own, the candidates' records, edges
    and lexical-only vectors are one statement, cluster routing reads its version with
    the document frequencies, and the adjacent clusters and the members of all routed
    clusters in one statement each."""
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
    assert scalar(pg_mem, "SHOW gin_pending_list_limit") == f"{GIN_PENDING_KB}kB"


def test_inside_a_transaction_reads_are_not_parallel(pg_url: str, tmp_path: Path) -> None:
    """A recall made inside a write transaction keeps its reads on that transaction's
    connection (another thread would not see its uncommitted rows)."""
    with Memory.open(tmp_path / "local", database=pg_url, embedder=hashing(),
                     project="global") as mem:
        assert mem.store.parallel_reads()
        with mem.store.transaction():
            assert not mem.store.parallel_reads()
        assert mem.store.parallel_reads()


def test_the_recall_journal_commits_without_waiting_for_the_disk(
        pg_mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal of a recall (event, attention, eligibility) is one transaction whose
    commit does not wait for the WAL flush, as SQLite's synchronous = NORMAL; its rows
    are all there after the recall."""
    from tideline.store.postgres import session

    _fill(pg_mem)
    sent: list[tuple[bool, str]] = []
    plain = session.Conn.execute

    def execute(self: session.Conn, sql: str, params: Any = ()) -> Any:
        sent.append((self.in_transaction, " ".join(sql.split())))
        return plain(self, sql, params)

    monkeypatch.setattr(session.Conn, "execute", execute)
    packet = pg_mem.recall("which datastore does Aiko use at work?", include_turns=False)
    monkeypatch.setattr(session.Conn, "execute", plain)
    assert packet.items
    relaxed = [i for i, (inside, sql) in enumerate(sent)
               if sql == "SET LOCAL synchronous_commit = off"]
    assert len(relaxed) == 1 and sent[relaxed[0]][0]
    assert sent[relaxed[0] + 1][1].startswith("WITH ev AS (INSERT INTO events")
    kinds = [r[0] for r in rows(
        pg_mem, "SELECT kind FROM events WHERE namespace = ? ORDER BY id DESC LIMIT 1",
        (pg_mem.store.namespace,))]
    eligible = scalar(pg_mem, "SELECT count(*) FROM eligibility")
    assert kinds == ["recall"] and eligible >= 1


def _journal_rows(mem: Memory, recall_id: int) -> tuple[Any, ...]:
    (event,) = rows(mem, "SELECT namespace, kind, memory_id, data, ts FROM events WHERE id = ?",
                    (recall_id,))
    eligible = rows(mem, "SELECT namespace, memory_id, rank, score, ts FROM eligibility "
                         "WHERE recall_id = ? ORDER BY id", (recall_id,))
    attention = rows(mem, "SELECT namespace, memory_id, cluster, similarity, tier, ts "
                          "FROM attention_log WHERE ts = ? ORDER BY id", (event[4],))
    return event, eligible, attention


def test_the_journal_statement_writes_what_the_shared_view_writes(pg_mem: Memory) -> None:
    """PostgreSQL journals a recall in one statement (tideline.store.postgres.recall):
    the same event, attention rows (with each memory's home cluster, none for a memory
    without one) and eligibility rows as the shared view's three statements."""
    ids = _fill(pg_mem)
    late = int(pg_mem.remember("A memory sleep has not clustered yet: the kiln").id)
    hits = [(ids[2], 0.81, 0.7), (late, 0.5, 0.45), (ids[0], 0.62, 0.4)]
    data = {"latency_ms": 3.2, "abstained": False, "scope": "global", "tier": "test",
            "note": "api_key=sk-abcdefghijklmnopqrstuvwx"}
    shared = ConsolidationStore(pg_mem.store).record_recall(data, hits, "test", 100.0)
    own = pg_mem.store.record_recall(data, hits, "test", 200.0)
    a, b = _journal_rows(pg_mem, shared), _journal_rows(pg_mem, own)
    assert own > shared
    assert a[0][:4] == b[0][:4] and (a[0][4], b[0][4]) == (100.0, 200.0)
    assert [r[:4] for r in a[1]] == [r[:4] for r in b[1]] == [
        (pg_mem.store.namespace, m, rank, score) for rank, (m, _, score) in enumerate(hits)]
    assert [r[:5] for r in a[2]] == [r[:5] for r in b[2]]
    homes = [r[2] for r in b[2]]
    assert homes[0] is not None and homes[1] is None and homes[2] is not None
    assert "sk-abcdefghijklmnopqrstuvwx" not in b[0][3]


def test_a_journaled_recall_costs_one_statement_more_than_begin_and_commit(
        pg_mem: Memory) -> None:
    """The journal of a recall is BEGIN, SET LOCAL synchronous_commit, one INSERT and
    COMMIT, sent as one pipeline (the code before sent the event, read it back, read the
    home clusters, then the two inserts: 7 statements, 3 round trips)."""
    _fill(pg_mem)
    packet = pg_mem.recall("which datastore does Aiko use at work?", include_turns=False,
                           log=False)
    assert packet.items and not packet.abstained
    before = pg_mem.store.statements_sent()
    RecallJournal(pg_mem.store, "recall").record(packet)
    assert pg_mem.store.statements_sent() - before == 4
    assert pg_mem.events(kinds=["recall"], limit=1)[0]["data"]["items"] == len(packet.items)


def test_one_read_gives_what_the_three_reads_give(pg_mem: Memory) -> None:
    """recall_rows (one statement) returns what get_memories, edges_of and
    memory_vectors_in return for the same arguments."""
    ids = _fill(pg_mem)
    other = int(pg_mem.remember("Kenji tunes the piano in the hall", scope="band").id)
    wanted = [*ids, other, 10**9]
    store = pg_mem.store
    dim = pg_mem.embedder.dim
    recs, edges, vectors = store.recall_rows(wanted, GRAPH_EDGES, [ids[1], other, 10**9],
                                             ["global", "band"], dim)
    assert recs == store.get_memories(wanted) and len(recs) == len(ids) + 1
    assert edges == sorted(store.edges_of(wanted, GRAPH_EDGES),
                           key=lambda e: (e.src, e.dst, e.type))
    assert len(edges) >= 2
    expected = store.memory_vectors_in([ids[1], other, 10**9], ["global", "band"], dim)
    assert vectors.keys() == expected.keys() == {("global", ids[1]), ("band", other)}
    assert all((vectors[k] == expected[k]).all() for k in expected)
    assert store.recall_rows(wanted, GRAPH_EDGES, [], ["global"], dim)[2] == {}


def test_another_hosts_sleep_is_seen_by_the_next_recall_without_a_read_of_its_own(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cluster routing takes the clusters' version from the document-frequency
    statement the recall sends anyway (PostgresStore.state_seen), not from a read of
    its own; a sleep on a second host (its own pool and local state) that rebuilds the
    clusters is seen by the very next recall here, which reloads the centroids."""
    from tideline.store.postgres import session

    with Memory.open(tmp_path / "a", database=pg_url, embedder=hashing(),
                     project="global") as here, \
            Memory.open(tmp_path / "b", database=pg_url, embedder=hashing(),
                        project="global") as there:
        _fill(here)
        router = here._rt.engine._router
        query = "which datastore does Aiko use at work?"
        assert here.recall(query, include_turns=False, log=False).items
        before = router._version
        assert before is not None
        for text in ("Aiko Schulz moved the billing datastore to a new cluster",
                     "The Helix editor gained a plugin system this spring",
                     "Marta bakes rye bread on Sundays with her starter"):
            there.remember(text)
        there.sleep(force=True)
        now = scalar(there, "SELECT value FROM sleep_state WHERE namespace = ? AND key = ?",
                     (there.store.namespace, "clusters.version"))
        assert now != before
        sent: list[str] = []
        plain = session.Conn.execute

        def execute(self: session.Conn, sql: str, params: Any = ()) -> Any:
            sent.append(" ".join(sql.split()))
            return plain(self, sql, params)

        monkeypatch.setattr(session.Conn, "execute", execute)
        assert here.recall(query, include_turns=False, log=False).items
        monkeypatch.setattr(session.Conn, "execute", plain)
        assert router._version == now
        assert not [s for s in sent if s.startswith("SELECT value FROM sleep_state")]
        assert any("FROM emb_clusters" in s for s in sent)  # the centroids, reloaded
