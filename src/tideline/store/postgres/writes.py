"""A gated write on PostgreSQL in few statements, and vectors sent in pgvector's binary form.

A gated write used to send one statement per row it leaves — the memory, its word and
substring index row, its vector, a link's edge, the idempotency key, the journal entry
— and two reads of ``db_meta`` and ``memories`` besides: 13–15 statements and as many
trips through psycopg, most of a write's client CPU. Here what the gate decided is one
statement of data-modifying ``WITH`` queries (:func:`gated_statement`): every row goes
in at once, the foreign keys are checked at its end (the new memory is visible to them
by then), and the statement also reads the pending-vector flag that the write path
asks for right after (``vectors_pending``). The gate's own search reads the neighbours'
status with them (:func:`gate_sql`), instead of a second query for their records, and
the idempotency key's stored outcome too (:func:`keyed_gate_sql`), instead of a key
read of its own before the embedding. In the transaction the key's re-check and the
potentiation target's row lock go together (``PostgresStore.commit_reads``): a gated
write inside a caller's transaction is 7 statements and waits for the server 4 times
(see :mod:`~tideline.store.postgres.connection` for BEGIN and COMMIT); outside one
(every ``remember``) it is 2 statements and 2 waits: the gate's search, which also
returns the potentiation target's row and digest, and the write (below).

A vector parameter (:class:`~tideline.store.postgres.pgvector.VectorParam`) goes in
pgvector's binary form — a 16-bit dimension count, 16 unused bits, big-endian float32s
— rather than its text form, which printed 384 floats (``repr`` each) on the client and
parsed them on the server.

Outside a transaction a gated write is one statement of its own
(:func:`at_once_statement`, ``PostgresStore.record_gated_at_once``), which PostgreSQL
runs as a transaction of its own: no ``BEGIN``, no ``COMMIT``, no pipeline, one wait.
What the transaction's first reads checked is checked inside that statement instead:

* the idempotency key: the statement takes the key's advisory lock (as every other
  writer of a key does), then *claims* the key — ``INSERT … ON CONFLICT`` into
  ``write_keys``, which sees the latest committed row whatever the statement's
  snapshot, and waits for a writer of the same key still in flight. The new memory's
  id is drawn from its identity's sequence first, so the key row can name it. Only
  when the claim inserted (or refreshed an outcome older than the retry window) do
  the memory and its rows go in; otherwise nothing is written and the stored outcome
  is read by a fresh statement (a replay);
* the potentiation target: the write path judged it as it read it (unlocked, with a
  digest of its whole row, :data:`TARGET_DIGEST`); the statement locks the row
  (``FOR NO KEY UPDATE``, which in READ COMMITTED reads its latest version) and goes
  on only if the digest is the same — the same row, so the same judgement. If it
  moved, nothing is written and the write path judges again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tideline.models import EDGE_OF_DECISION
from tideline.store.events import event_insert
from tideline.store.memories import (
    MEMORY_INSERT,
    MEMORY_UPDATE,
    memory_params,
    update_params,
    write_key_insert,
)
from tideline.store.postgres import lexical as pg_lexical
from tideline.store.postgres.lock_keys import LOCK_KEY
from tideline.store.postgres.pgvector import VectorParam
from tideline.store.rows import MEMORY_COLUMNS, PENDING_FLAG, memory_index_text

if TYPE_CHECKING:

    from tideline.store.base import GatedWrite

__all__ = ["TARGET_COLUMNS", "TARGET_DIGEST", "at_once_statement", "gate_sql", "gated_statement",
           "keyed_gate_sql"]

# The edge's type is one of two constants, written into the text (see _FLAG_KEY).
_EDGE = ("INSERT INTO edges(src, dst, type, weight, created_at, updated_at) "
         "SELECT id, ?, '{type}', ?, ?, ? FROM m")
# Parameters: the namespace, the tsvector literal, the substring text.
_LEX = ("INSERT INTO memories_lex(id, namespace, words, subs) SELECT id, ?, ?::tsvector, ? "
        "FROM {src} ON CONFLICT (id) DO UPDATE SET words = excluded.words, subs = excluded.subs")
_VECTOR = ("INSERT INTO vectors(space, key, v) SELECT ?, id, ?::vector FROM m "
           "ON CONFLICT (space, key) DO UPDATE SET v = excluded.v")
# The constants (the flag's key, the lock class) are written into the text, not sent as
# parameters: an at-once write that links a judged target then takes 48 parameters, under
# psycopg's 50, past which it would split the statement's text again at every write.
_FLAG_KEY = "'" + PENDING_FLAG.replace("'", "''") + "'"
_PENDING = (f"INSERT INTO db_meta(key, value) VALUES ({_FLAG_KEY}, '1') "
            "ON CONFLICT (key) DO UPDATE SET value = '1'")
_FLAG = f"(SELECT value FROM db_meta WHERE key = {_FLAG_KEY})"
#: A digest of a memory's whole row (alias ``x``): equal digests, the same row.
TARGET_DIGEST = "sha256(textsend(x::text))"
# The at-once write's rows come from the key's claim (``k``): the memory row with the id
# drawn before the claim, the pending-vector flag only when a memory went in.
_HEAD, _VALUES = MEMORY_INSERT.split(" VALUES ")
_MEMORY_WITH_ID = (_HEAD.replace("INSERT INTO memories(", "INSERT INTO memories(id, ", 1)
                   + f" SELECT id, {_VALUES.strip()[1:-1]} FROM k")
_PENDING_FROM_M = (f"INSERT INTO db_meta(key, value) SELECT {_FLAG_KEY}, '1' FROM m "
                   "ON CONFLICT (key) DO UPDATE SET value = '1'")


def gate_sql(dim: int, exact: bool) -> str:
    """The gate's search of one memory space: the top k (key, cosine distance, status) —
    the status NULL when no memory of the namespace has that id. Parameters: the
    namespace, the query vector, the space, k.

    The expression and predicate of the distance match the HNSW index of the dimension;
    ``+ 0`` keeps the planner from the index (an exact scan of the space).
    """
    d = int(dim)
    dist = f"(v::vector({d}) <=> ?::vector({d})){' + 0' if exact else ''}"
    inner = (f"SELECT key, {dist} AS distance FROM vectors WHERE space = ? "  # noqa: S608
             f"AND vector_dims(v) = {d} ORDER BY distance LIMIT ?")
    # The namespace is checked on the joined row, not in the join: a join condition on
    # it let a generic plan (a prepared statement, tables not analysed yet) walk a
    # namespace index and filter the id, every row of the namespace per neighbour.
    return (f"SELECT n.key, n.distance, CASE WHEN m.namespace = ? THEN m.status END "  # noqa: S608
            f"AS status FROM ({inner}) AS n LEFT JOIN memories m ON m.id = n.key "
            "ORDER BY n.distance")


#: The columns :func:`keyed_gate_sql` adds after the key's outcome: the nearest live
#: neighbour's whole row (:data:`~tideline.store.rows.MEMORY_COLUMNS`) and its digest.
TARGET_COLUMNS = ", ".join(f"x.{c.strip()}" for c in MEMORY_COLUMNS.split(",")) \
    + f", {TARGET_DIGEST}"


def keyed_gate_sql(dim: int, exact: bool) -> str:
    """:func:`gate_sql` and the idempotency key's stored outcome in one statement: each
    row (key, distance, status, then the key's memory id, decision, similarity, nearest
    — NULL when unseen, then the nearest live neighbour's row and :data:`TARGET_DIGEST`
    on that neighbour's line, NULL on the others), one row of NULL neighbours when the
    space is empty. Parameters: those of :func:`gate_sql`, then the namespace, the key
    and the time it counts from.

    The gate's search stays a query of its own (a materialized ``WITH``), planned as it
    is alone (the HNSW index of a large space). The neighbour's row is the potentiation
    target a write judges when the nearest is close enough: read here, it needs no
    statement of its own (``PostgresStore.gate_target``); the write's statement checks
    its digest under the row's lock as before.
    """
    return (f"WITH g AS MATERIALIZED ({gate_sql(dim, exact)}) "  # noqa: S608
            "SELECT g.key, g.distance, g.status, w.memory_id, w.decision, w.similarity, "
            f"w.nearest, {TARGET_COLUMNS} FROM (SELECT 1) AS one LEFT JOIN g ON true "
            "LEFT JOIN (SELECT memory_id, decision, similarity, nearest "
            "FROM write_keys WHERE namespace = ? AND key = ? AND created_at >= ?) AS w "
            "ON true LEFT JOIN memories x ON x.id = g.key AND x.id = (SELECT key FROM g "
            "WHERE status <> 'superseded' ORDER BY distance LIMIT 1) "
            "ORDER BY g.distance")


def _rows(namespace: str, space: str, write: GatedWrite,
          pending: str) -> tuple[list[str], list[Any]]:
    """The CTEs after the memory's (``m``) of a new or linked memory: its index row, its
    vector or the pending flag (``pending``: that statement), a link's or a correction's edge."""
    body = memory_index_text(write.rec)
    parts = [f"l AS ({_LEX.format(src='m')})"]
    args: list[Any] = [namespace, pg_lexical.words_vector(body),
                       pg_lexical.substring_text(body)]
    if write.vector is not None:
        parts.append(f"v AS ({_VECTOR})")
        args += [space, VectorParam(write.vector)]
    else:
        parts.append(f"p AS ({pending})")
    edge = EDGE_OF_DECISION.get(write.decision)
    if edge is not None and write.nearest is not None:
        parts.append(f"r AS ({_EDGE.format(type=edge)})")
        args += [write.nearest, round(write.similarity, 4), write.now, write.now]
    return parts, args


def at_once_statement(
    namespace: str, space: str, write: GatedWrite, *, since: float | None,
    target: tuple[int, bytes] | None, lock: int, ids: str,
) -> tuple[str, tuple[Any, ...]]:
    """A whole gated write as one statement, run outside a transaction (see the module's
    docstring): the key's lock and claim, the target's check, every row.

    Its one result row: the memory's id (NULL: nothing was written), the ``db_meta``
    pending-vector flag as it was before, and whether the target was as judged (false:
    it moved; true with a NULL id: the key was seen).

    Args:
        namespace: the store's namespace.
        space: the vector space of the memory's scope.
        write: what the gate decided.
        since: a stored outcome of the key at or after this time makes the write a
            replay (None: any outcome; a derived key's older outcome is replaced).
        target: the judged memory's id and its row's :data:`TARGET_DIGEST` then (None:
            nothing judged, or no such memory).
        lock: the key's advisory lock key (``advisory_key(namespace, key)``).
        ids: the memories' id sequence (``pg_get_serial_sequence``).

    Returns:
        The SQL (``?`` placeholders) and its parameters.
    """
    rec = write.rec
    parts = [f"lk AS MATERIALIZED (SELECT pg_advisory_xact_lock({int(LOCK_KEY)}, ?))"]
    args: list[Any] = [lock]
    held = "lk"
    if target is not None:
        parts.append("t AS MATERIALIZED (SELECT 1 FROM memories x, lk WHERE x.id = ? AND "  # noqa: S608
                     f"x.namespace = ? AND {TARGET_DIGEST} = ? FOR NO KEY UPDATE OF x)")
        args += [target[0], namespace, target[1]]
        held = "t"
    potentiate = write.decision == "potentiate"
    drawn = "?::bigint" if potentiate else "nextval(?::regclass)"
    parts.append(f"d AS MATERIALIZED (SELECT {drawn} AS id FROM {held})")
    args.append(rec.id if potentiate else ids)
    claim = write_key_insert(refresh=write.refresh_key, memory_from="d")
    args += [namespace, write.key, write.decision, write.similarity, write.nearest, write.now]
    if write.refresh_key:
        claim += " WHERE write_keys.created_at < ?"
        args.append(float("-inf") if since is None else since)
    parts.append(f"k AS ({claim} RETURNING memory_id AS id)")
    if potentiate:
        body = memory_index_text(rec)
        parts += [f"m AS ({MEMORY_UPDATE} AND EXISTS (SELECT 1 FROM k) RETURNING id)",
                  f"l AS ({_LEX.format(src='m')})"]
        args += [*update_params(namespace, rec), namespace, pg_lexical.words_vector(body),
                 pg_lexical.substring_text(body)]
    else:
        rows, row_args = _rows(namespace, space, write, _PENDING_FROM_M)
        parts += [f"m AS ({_MEMORY_WITH_ID} RETURNING id)", *rows]
        args += [*memory_params(namespace, rec), *row_args]
    event_sql, event_args = event_insert(namespace, "write", write.event, now=write.now,
                                         memory_from="m")
    parts.append(f"e AS ({event_sql})")
    args += [*event_args]
    return (f"WITH {', '.join(parts)} SELECT (SELECT id FROM m), {_FLAG}, "
            f"EXISTS (SELECT 1 FROM {held})"), tuple(args)


def gated_statement(namespace: str, space: str, write: GatedWrite) -> tuple[str, tuple[Any, ...]]:
    """One statement that stores what the gate decided (see the module's docstring).

    Its one result row: the memory's id and the ``db_meta`` pending-vector flag (NULL:
    not set) as it was before the statement.

    Args:
        namespace: the store's namespace.
        space: the vector space of the memory's scope.
        write: what the gate decided.

    Returns:
        The SQL (``?`` placeholders) and its parameters.
    """
    rec = write.rec
    body = memory_index_text(rec)
    lex = (namespace, pg_lexical.words_vector(body), pg_lexical.substring_text(body))
    key = (namespace, write.key)
    outcome = (write.decision, write.similarity, write.nearest, write.now)
    refresh = write.refresh_key
    if write.decision == "potentiate":
        event_sql, event_args = event_insert(namespace, "write", write.event,
                                             memory_id=rec.id, now=write.now)
        sql = (f"WITH m AS ({MEMORY_UPDATE} RETURNING id), "
               f"l AS ({_LEX.format(src='m')}), "
               f"k AS ({write_key_insert(refresh=refresh)}), e AS ({event_sql}) "
               f"SELECT ?::bigint, {_FLAG}")
        return sql, (*update_params(namespace, rec), *lex, *key, rec.id, *outcome,
                     *event_args, rec.id)
    event_sql, event_args = event_insert(namespace, "write", write.event, now=write.now,
                                         memory_from="m")
    rows, row_args = _rows(namespace, space, write, _PENDING)
    parts = [f"m AS ({MEMORY_INSERT} RETURNING id)", *rows]
    args: list[Any] = [*memory_params(namespace, rec), *row_args]
    parts.append(f"k AS ({write_key_insert(refresh=refresh, memory_from='m')})")
    args += [*key, *outcome]
    parts.append(f"e AS ({event_sql})")
    args += [*event_args]
    return f"WITH {', '.join(parts)} SELECT id, {_FLAG} FROM m", tuple(args)
