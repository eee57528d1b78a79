"""A recall's reads and its journal on PostgreSQL, each one statement.

Every statement is a round trip to the server and, in the client, a pass through
psycopg (parameters dumped, the result parsed, a pooled connection taken and given
back); on two shared cores that client work is most of what PostgreSQL adds to a
recall. So where a recall used to send several statements that need nothing of each
other's results, it sends one here:

- :func:`candidate_rows`: the memory candidates' records, the graph edges touching
  them and the stored vectors of the lexical-only ones (three reads, formerly one
  each in three threads) as one ``UNION ALL`` whose first column says which part a
  row belongs to. Each part is the same query the separate reads ran, so the rows
  are the same.
- :func:`record_recall`: the recall's event, its attention rows (with each memory's
  home cluster) and its eligibility rows in one ``INSERT`` with data-modifying CTEs,
  sent with ``BEGIN``, ``SET LOCAL synchronous_commit = off`` and ``COMMIT`` in one
  pipeline: one round trip instead of three (the event id and the home clusters were
  each read back before the next insert).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tideline.models import Edge, MemoryRecord
from tideline.store.events import EVENT_INSERT, event_insert
from tideline.store.rows import MEMORY_COLUMNS, memory_from_row

if TYPE_CHECKING:
    import numpy as np

    from tideline.store.postgres.host import PostgresHost

__all__ = ["JOURNAL_SQL", "ROWS_SQL", "candidate_rows", "record_recall"]

_WIDTH = len(MEMORY_COLUMNS.split(","))
_NO_MEMORY = ", ".join(["NULL"] * _WIDTH)

#: Part 0: records by id; part 1: edges touching the ids, of the given types; part 2:
#: vectors of the given keys in the given spaces. Parameters: namespace, ids; ids, ids,
#: types; spaces, keys.
ROWS_SQL = (
    f"SELECT 0 AS part, {MEMORY_COLUMNS}, NULL::bigint AS a, NULL::bigint AS b, "  # noqa: S608
    "NULL::text AS t, NULL::double precision AS w, NULL::vector AS v FROM memories "
    "WHERE namespace = ? AND id = ANY(?::bigint[]) "
    f"UNION ALL SELECT 1, {_NO_MEMORY}, src, dst, type, weight, NULL FROM edges "
    "WHERE (src = ANY(?::bigint[]) OR dst = ANY(?::bigint[])) AND type = ANY(?::text[]) "
    f"UNION ALL SELECT 2, {_NO_MEMORY}, key, NULL, space, NULL, v FROM vectors "
    "WHERE space = ANY(?::text[]) AND key = ANY(?::bigint[])"
)

#: The event, then per hit (memory, similarity, score; best first) an attention row
#: with the memory's home cluster and an eligibility row ranked from 0.
JOURNAL_SQL = (
    f"WITH ev AS ({EVENT_INSERT} RETURNING id), "
    "hit AS (SELECT h.mid, h.sim, h.score, h.ord FROM unnest(?::bigint[], "
    "?::double precision[], ?::double precision[]) WITH ORDINALITY AS h(mid, sim, score, ord)), "
    "att AS (INSERT INTO attention_log(namespace, memory_id, cluster, similarity, tier, ts) "
    "SELECT ?, hit.mid, (SELECT e.cluster_id FROM emb_members e WHERE e.rank = 0 "
    "AND e.memory_id = hit.mid), hit.sim, ?, ? FROM hit ORDER BY hit.ord), "
    "eli AS (INSERT INTO eligibility(namespace, recall_id, memory_id, rank, score, ts) "
    "SELECT ?, ev.id, hit.mid, hit.ord - 1, hit.score, ? FROM ev, hit ORDER BY hit.ord) "
    "SELECT id FROM ev"
)


def candidate_rows(
    store: PostgresHost, ids: Sequence[int], edge_types: Sequence[str],
    lexical_only: Sequence[int], scopes: Sequence[str], dim: int,
) -> tuple[dict[int, MemoryRecord], list[Edge], dict[tuple[str, int], np.ndarray]]:
    """What :meth:`get_memories`, :meth:`edges_of` and :meth:`memory_vectors_in` give for
    these arguments, read in one statement.

    Args:
        store: the store.
        ids: the memory candidates (at most the store's id chunk).
        edge_types: the edge types the graph spread follows.
        lexical_only: candidates whose vector the vector search did not return.
        scopes: the scopes whose memory spaces hold those vectors.
        dim: the embedder's dimension (vectors of another length are left out).

    Returns:
        Records by id, edges touching ``ids`` (sorted by source, target and type), and
        (scope, memory id) → vector of ``lexical_only``.
    """
    import numpy as np

    wanted = sorted(dict.fromkeys(int(i) for i in ids))
    spaces = {store.space("m", scope): scope for scope in scopes} if lexical_only else {}
    keys = [int(i) for i in lexical_only] if spaces else []
    with store.db.read() as c:
        rows = c.execute(ROWS_SQL, (store.namespace, wanted, wanted, wanted, list(edge_types),
                                    list(spaces), keys)).fetchall()
    recs: dict[int, MemoryRecord] = {}
    edges: list[Edge] = []
    vectors: dict[tuple[str, int], np.ndarray] = {}
    for row in rows:
        part = row[0]
        if part == 0:
            rec = memory_from_row(row[1:_WIDTH + 1])
            recs[rec.id] = rec
        elif part == 1:
            a, b, t, w = row[_WIDTH + 1:_WIDTH + 5]
            edges.append(Edge(int(a), int(b), str(t), float(w)))
        else:
            key, space, blob = row[_WIDTH + 1], row[_WIDTH + 3], row[_WIDTH + 5]
            vec = np.frombuffer(bytes(blob), dtype=np.float32)
            if vec.shape[0] == dim:
                vectors[(spaces[str(space)], int(key))] = vec
    edges.sort(key=lambda e: (e.src, e.dst, e.type))
    return recs, edges, vectors


def record_recall(store: PostgresHost, data: dict[str, Any],
                  hits: Sequence[tuple[int, float, float]], tier: str, now: float) -> int:
    """Journal one recall as the shared view
    (:meth:`~tideline.store.consolidation.ConsolidationStore.record_recall`) does: the
    same rows, in one round trip (see the module docstring). Its commit does not wait
    for the WAL flush either.

    Returns:
        The recall event's id.
    """
    ns = store.namespace
    params = (*event_insert(ns, "recall", data, now=now)[1], [int(m) for m, _, _ in hits],
              [float(s) for _, s, _ in hits], [float(x) for _, _, x in hits],
              ns, tier, now, ns, now)
    with store.db.write() as c:
        if c.dialect.relaxed_commit:
            c.execute(c.dialect.relaxed_commit)
        cur = c.execute(JOURNAL_SQL, params)
    return int(cur.fetchone()[0])
