"""Append-only schema migrations, one function each.

A migration never edits an earlier one: to change the schema, append a new
function to :data:`MIGRATIONS`. ``db_meta.schema_version`` records how many
have run. Before migrating a store that already holds data, the store takes a
safety copy (see :meth:`tideline.store.sqlite.SQLiteStore.open`).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable

from tideline.models import derived_turn_id

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]


def _m001_core(db: sqlite3.Connection) -> None:
    """Memories, raw turns, edges, vectors, the journal and the idempotency keys."""
    statements = [
        """CREATE TABLE IF NOT EXISTS db_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
        """CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            scope TEXT NOT NULL,
            kind TEXT NOT NULL,
            gesture TEXT NOT NULL,
            context TEXT NOT NULL DEFAULT '',
            cognition_direction TEXT NOT NULL DEFAULT '',
            tags TEXT NOT NULL DEFAULT '[]',
            entities_role TEXT NOT NULL DEFAULT '',
            related_entities TEXT NOT NULL DEFAULT '[]',
            source_links TEXT NOT NULL DEFAULT '[]',
            importance INTEGER NOT NULL DEFAULT 3 CHECK (importance BETWEEN 1 AND 5),
            emotional INTEGER NOT NULL DEFAULT 1 CHECK (emotional BETWEEN 1 AND 5),
            recurrence INTEGER NOT NULL DEFAULT 1 CHECK (recurrence BETWEEN 1 AND 5),
            unresolved INTEGER NOT NULL DEFAULT 1 CHECK (unresolved BETWEEN 1 AND 5),
            weight REAL NOT NULL,
            strength REAL NOT NULL DEFAULT 1.0,
            stability REAL NOT NULL,
            reinforcements INTEGER NOT NULL DEFAULT 0,
            last_access REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'episodic'
                CHECK (status IN ('episodic', 'semantic', 'superseded', 'dormant')),
            version INTEGER NOT NULL DEFAULT 1,
            supersedes INTEGER REFERENCES memories(id) ON DELETE SET NULL,
            event_time REAL,
            recorded_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX memories_scope ON memories(namespace, scope, status)",
        "CREATE INDEX memories_recorded ON memories(namespace, recorded_at)",
        "CREATE INDEX memories_weight ON memories(namespace, weight)",
        """CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            scope TEXT NOT NULL,
            session TEXT NOT NULL,
            turn_index INTEGER NOT NULL,
            speaker TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            ts REAL,
            source TEXT NOT NULL,
            message_id TEXT NOT NULL,
            recorded_at REAL NOT NULL,
            UNIQUE (namespace, source, message_id)
        )""",
        "CREATE INDEX turns_session ON turns(namespace, session, turn_index)",
        "CREATE INDEX turns_ts ON turns(namespace, scope, ts)",
        """CREATE TABLE edges (
            src INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            dst INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            type TEXT NOT NULL
                CHECK (type IN ('related', 'co_recall', 'supersedes', 'contradicts')),
            weight REAL NOT NULL DEFAULT 1.0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (src, dst, type)
        )""",
        "CREATE INDEX edges_dst ON edges(dst)",
        """CREATE TABLE vectors (
            id INTEGER PRIMARY KEY,
            space TEXT NOT NULL,
            key INTEGER NOT NULL,
            v BLOB NOT NULL,
            UNIQUE (space, key)
        )""",
        """CREATE TABLE vector_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL,
            key INTEGER NOT NULL,
            present INTEGER NOT NULL
        )""",
        "CREATE INDEX vector_log_space ON vector_log(space, seq)",
        """CREATE TABLE write_keys (
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            memory_id INTEGER NOT NULL,
            decision TEXT NOT NULL,
            similarity REAL NOT NULL DEFAULT 0,
            nearest INTEGER,
            created_at REAL NOT NULL,
            PRIMARY KEY (namespace, key)
        )""",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            ts REAL NOT NULL,
            namespace TEXT NOT NULL,
            kind TEXT NOT NULL,
            memory_id INTEGER,
            data TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX events_kind ON events(namespace, kind, ts)",
        """CREATE VIRTUAL TABLE memories_fts USING fts5(
            body, tokenize = "unicode61 remove_diacritics 2")""",
        """CREATE VIRTUAL TABLE memories_tri USING fts5(body, tokenize = "trigram")""",
        """CREATE VIRTUAL TABLE turns_fts USING fts5(
            body, tokenize = "unicode61 remove_diacritics 2")""",
        """CREATE VIRTUAL TABLE turns_tri USING fts5(body, tokenize = "trigram")""",
    ]
    for sql in statements:
        db.execute(sql)


def _m002_cognition(db: sqlite3.Connection) -> None:
    """Profiles, self-concept, threads, recall traces (attention and eligibility)."""
    statements = [
        """CREATE TABLE profiles (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            entity TEXT NOT NULL,
            facet TEXT NOT NULL CHECK (facet IN ('fact', 'impression', 'relationship')),
            content TEXT NOT NULL,
            updated_at REAL NOT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            UNIQUE (namespace, entity, facet)
        )""",
        """CREATE TABLE self_concept (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            facet TEXT NOT NULL CHECK (facet IN ('fact', 'terrain', 'reflection')),
            content TEXT NOT NULL,
            updated_at REAL NOT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            UNIQUE (namespace, facet)
        )""",
        """CREATE TABLE threads (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            title TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
            source_memories TEXT NOT NULL DEFAULT '[]',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        """CREATE TABLE attention_log (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            memory_id INTEGER NOT NULL,
            cluster INTEGER,
            similarity REAL NOT NULL,
            tier TEXT NOT NULL,
            ts REAL NOT NULL
        )""",
        "CREATE INDEX attention_memory ON attention_log(namespace, memory_id)",
        "CREATE INDEX attention_ts ON attention_log(namespace, ts)",
        """CREATE TABLE eligibility (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            recall_id INTEGER NOT NULL,
            memory_id INTEGER NOT NULL,
            rank INTEGER NOT NULL,
            score REAL NOT NULL,
            ts REAL NOT NULL
        )""",
        "CREATE INDEX eligibility_ts ON eligibility(namespace, ts)",
    ]
    for sql in statements:
        db.execute(sql)


def _m003_sleep(db: sqlite3.Connection) -> None:
    """Sleep: state and lock, topic and embedding clusters, entity graph, retention snapshots."""
    statements = [
        """CREATE TABLE sleep_state (
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (namespace, key)
        )""",
        """CREATE TABLE memory_keywords (
            memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
            version INTEGER NOT NULL,
            keywords TEXT NOT NULL
        )""",
        """CREATE TABLE topic_clusters (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            scope TEXT NOT NULL,
            label TEXT NOT NULL,
            keywords TEXT NOT NULL DEFAULT '[]',
            size INTEGER NOT NULL,
            df REAL NOT NULL DEFAULT 0,
            built_at REAL NOT NULL
        )""",
        "CREATE INDEX topic_clusters_scope ON topic_clusters(namespace, scope, size)",
        """CREATE TABLE topic_members (
            cluster_id INTEGER NOT NULL REFERENCES topic_clusters(id) ON DELETE CASCADE,
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            score REAL NOT NULL,
            PRIMARY KEY (cluster_id, memory_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX topic_members_memory ON topic_members(memory_id)",
        """CREATE TABLE emb_clusters (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            scope TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            keywords TEXT NOT NULL DEFAULT '[]',
            size INTEGER NOT NULL DEFAULT 0,
            centroid BLOB NOT NULL,
            built_at REAL NOT NULL
        )""",
        "CREATE INDEX emb_clusters_scope ON emb_clusters(namespace, scope)",
        """CREATE TABLE emb_members (
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            rank INTEGER NOT NULL,
            cluster_id INTEGER NOT NULL REFERENCES emb_clusters(id) ON DELETE CASCADE,
            similarity REAL NOT NULL,
            PRIMARY KEY (memory_id, rank)
        ) WITHOUT ROWID""",
        "CREATE INDEX emb_members_cluster ON emb_members(cluster_id, rank)",
        """CREATE TABLE emb_adjacency (
            a INTEGER NOT NULL REFERENCES emb_clusters(id) ON DELETE CASCADE,
            b INTEGER NOT NULL REFERENCES emb_clusters(id) ON DELETE CASCADE,
            shared INTEGER NOT NULL,
            PRIMARY KEY (a, b)
        ) WITHOUT ROWID""",
        """CREATE TABLE entity_nodes (
            namespace TEXT NOT NULL,
            entity TEXT NOT NULL,
            mentions INTEGER NOT NULL,
            roles TEXT NOT NULL DEFAULT '{}',
            memories TEXT NOT NULL DEFAULT '[]',
            updated_at REAL NOT NULL,
            PRIMARY KEY (namespace, entity)
        )""",
        """CREATE TABLE entity_edges (
            namespace TEXT NOT NULL,
            a TEXT NOT NULL,
            b TEXT NOT NULL,
            count INTEGER NOT NULL,
            role_pairs TEXT NOT NULL DEFAULT '{}',
            updated_at REAL NOT NULL,
            PRIMARY KEY (namespace, a, b)
        )""",
        """CREATE TABLE retention_snapshots (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            ts REAL NOT NULL,
            memories INTEGER NOT NULL,
            mean REAL NOT NULL,
            p10 REAL NOT NULL,
            p50 REAL NOT NULL,
            p90 REAL NOT NULL,
            by_status TEXT NOT NULL DEFAULT '{}',
            histogram TEXT NOT NULL DEFAULT '[]'
        )""",
        "CREATE INDEX retention_snapshots_ts ON retention_snapshots(namespace, ts)",
        "CREATE INDEX edges_type ON edges(type, weight)",
    ]
    for sql in statements:
        db.execute(sql)


def _legacy_turn_id(session: str, index: int, text: str) -> str:
    # The id-less turn's id before schema 4: it hashed the turn's position.
    digest = hashlib.sha256(f"{session}\x1f{index}\x1f{text}".encode()).hexdigest()
    return f"auto-{digest[:24]}"


def _m004_turn_identity(db: sqlite3.Connection) -> None:
    """Turn ids from what identifies a turn; one place per turn in its session.

    1. A turn whose message id was derived from its position (``auto-`` + the hash of
       session, index and text — before schema 4) gets the id an import now derives for
       it (:func:`tideline.models.derived_turn_id`), so importing its file again skips
       it. Identical turns of one session are numbered in their stored order, as an
       import numbers them in its file. Copies a re-import already made stay (they can
       not be told from genuine repeats), but no further copy is made.
    2. Turn indexes are renumbered 0, 1, 2… per (namespace, session) in their stored
       order (index, then id): concurrent imports could give one index to several turns.
    3. A unique index on (namespace, session, turn_index) keeps it so.
    """
    seen: dict[bytes, int] = {}
    after: tuple[str, str, int, int] = ("", "", -1, -1)
    while True:  # in pages, so a large store's texts are never all in memory at once
        rows = db.execute(
            "SELECT id, namespace, source, session, turn_index, speaker, ts, text, "
            "message_id FROM turns WHERE message_id LIKE 'auto-%' "
            "AND (namespace, session, turn_index, id) > (?, ?, ?, ?) "
            "ORDER BY namespace, session, turn_index, id LIMIT 2000", after,
        ).fetchall()
        if not rows:
            break
        for tid, ns, source, session, index, speaker, ts, text, mid in rows:
            if mid != _legacy_turn_id(session, index, text):
                continue  # a source's own id that merely starts with "auto-"
            key = hashlib.blake2b(repr((ns, source, session, speaker, ts, text)).encode(
                "utf-8", "surrogatepass"), digest_size=16).digest()
            occurrence = seen.get(key, 0)
            seen[key] = occurrence + 1
            new = derived_turn_id(source, session, speaker, ts, text, occurrence)
            db.execute("UPDATE OR IGNORE turns SET message_id = ? WHERE id = ?", (new, tid))
        last = rows[-1]
        after = (last[1], last[3], last[4], last[0])
    db.execute(
        "CREATE TEMP TABLE turn_places AS SELECT id, row_number() OVER ("
        "PARTITION BY namespace, session ORDER BY turn_index, id) - 1 AS place FROM turns"
    )
    db.execute(
        "UPDATE turns SET turn_index = (SELECT place FROM temp.turn_places p "
        "WHERE p.id = turns.id) WHERE turn_index != (SELECT place FROM temp.turn_places p "
        "WHERE p.id = turns.id)"
    )
    db.execute("DROP TABLE temp.turn_places")
    db.execute("DROP INDEX turns_session")
    db.execute("CREATE UNIQUE INDEX turns_place ON turns(namespace, session, turn_index)")


def _m005_one_vector(db: sqlite3.Connection) -> None:
    """Nothing here: schema 5 stores each vector once on PostgreSQL, as SQLite always
    did (one ``BLOB``). The version moves with it, so an archive's schema version means
    the same on both backends."""
    del db


def _m006_lexical_namespace(db: sqlite3.Connection) -> None:
    """Nothing here: schema 6 gives PostgreSQL's word and substring index rows their
    namespace (a search and a document frequency there stay inside one namespace). The
    FTS5 tables of a SQLite file are left as they are: their rows are found through the
    memory's or turn's rowid and filtered by its namespace, and a file usually holds one
    tenant (one store directory each). The version moves with PostgreSQL's, so an
    archive's schema version means the same on both backends."""
    del db


def _m007_vector_counts(db: sqlite3.Connection) -> None:
    """How many vectors each space holds, kept by triggers on ``vectors``.

    The host's vector index checks its size against the store after every catch-up
    (store/sqlite/vector_index.py). It did so with ``count(*)`` over the space's entries of
    ``(space, key)``, a walk of the whole space: 3.3 ms of a gated write's 6.5 at
    100,000 vectors, since every write moves the log and the gate's search catches up.
    A count kept by the triggers costs one row read. The triggers see every change to the
    table, however it is made, so the check still finds a vector deleted without its
    log entry. (``INSERT … ON CONFLICT DO UPDATE`` fires only the update trigger when it
    updates; ``INSERT OR REPLACE`` into ``vectors`` is not used, and would skip the
    delete trigger.)
    """
    # Safe to run again (a file whose version was set back): the counts are recounted.
    db.execute("CREATE TABLE IF NOT EXISTS vector_counts (space TEXT PRIMARY KEY, "
               "n INTEGER NOT NULL) WITHOUT ROWID")
    db.execute("DELETE FROM vector_counts")
    db.execute("INSERT INTO vector_counts(space, n) "
               "SELECT space, count(*) FROM vectors GROUP BY space")
    db.execute("""CREATE TRIGGER IF NOT EXISTS vectors_count_insert AFTER INSERT ON vectors BEGIN
        INSERT INTO vector_counts(space, n) VALUES (NEW.space, 1)
            ON CONFLICT(space) DO UPDATE SET n = n + 1;
    END""")
    db.execute("""CREATE TRIGGER IF NOT EXISTS vectors_count_delete AFTER DELETE ON vectors BEGIN
        UPDATE vector_counts SET n = n - 1 WHERE space = OLD.space;
    END""")
    db.execute("""CREATE TRIGGER IF NOT EXISTS vectors_count_move AFTER UPDATE OF space ON vectors
        WHEN NEW.space IS NOT OLD.space BEGIN
        UPDATE vector_counts SET n = n - 1 WHERE space = OLD.space;
        INSERT INTO vector_counts(space, n) VALUES (NEW.space, 1)
            ON CONFLICT(space) DO UPDATE SET n = n + 1;
    END""")


def _m008_turn_scope_identity(db: sqlite3.Connection) -> None:
    """A turn is known by (namespace, scope, source, message id): the project is part of it.

    Before, a message id stored by one project made the same id of another project
    "stored already": the second project's turn was skipped (its text lost) and the
    import handed it the first project's turn id (issue 33 item 2). SQLite cannot
    change a table's UNIQUE constraint in place, so the table is rebuilt with the same
    columns and ids (the full-text rows and vectors refer to the ids and stay valid),
    then its indexes are made again. No stored row changes: what was unique under the
    narrower key is unique under the wider one.
    """
    db.execute("""CREATE TABLE turns_scoped (
            id INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            scope TEXT NOT NULL,
            session TEXT NOT NULL,
            turn_index INTEGER NOT NULL,
            speaker TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            ts REAL,
            source TEXT NOT NULL,
            message_id TEXT NOT NULL,
            recorded_at REAL NOT NULL,
            UNIQUE (namespace, scope, source, message_id)
        )""")
    db.execute("INSERT INTO turns_scoped (id, namespace, scope, session, turn_index, speaker, "
               "role, text, ts, source, message_id, recorded_at) SELECT id, namespace, scope, "
               "session, turn_index, speaker, role, text, ts, source, message_id, recorded_at "
               "FROM turns ORDER BY id")
    db.execute("DROP TABLE turns")
    db.execute("ALTER TABLE turns_scoped RENAME TO turns")
    db.execute("CREATE INDEX turns_ts ON turns(namespace, scope, ts)")
    db.execute("CREATE UNIQUE INDEX turns_place ON turns(namespace, session, turn_index)")



def _m009_journal_order(db: sqlite3.Connection) -> None:
    """The journal read newest first by id within a namespace, from an index.

    ``events_kind`` (namespace, kind, ts) served every journal read, which then sorted
    all of the namespace's events to return the newest 50 (0.1 s at 20,000 events); a
    project's reader pages back through the journal (``tideline.journal``) and paid
    that per page.
    """
    db.execute("CREATE INDEX IF NOT EXISTS events_recent ON events(namespace, id)")


def _m010_updates_edges(db: sqlite3.Connection) -> None:
    """Edges of kind ``updates``: the novelty gate's correction (a new memory that states
    an older one with another value) points at the memory it updates. SQLite cannot
    change a CHECK constraint in place, so the table is rebuilt with its rows and indexes."""
    db.execute("""CREATE TABLE edges_next (
            src INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            dst INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            type TEXT NOT NULL CHECK (type IN ('related', 'co_recall', 'supersedes',
                                                'contradicts', 'updates')),
            weight REAL NOT NULL DEFAULT 1.0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (src, dst, type)
        )""")
    db.execute("INSERT INTO edges_next(src, dst, type, weight, created_at, updated_at) "
               "SELECT src, dst, type, weight, created_at, updated_at FROM edges")
    db.execute("DROP TABLE edges")
    db.execute("ALTER TABLE edges_next RENAME TO edges")
    db.execute("CREATE INDEX edges_dst ON edges(dst)")
    db.execute("CREATE INDEX edges_type ON edges(type, weight)")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _m001_core, _m002_cognition, _m003_sleep, _m004_turn_identity, _m005_one_vector,
    _m006_lexical_namespace, _m007_vector_counts, _m008_turn_scope_identity,
    _m009_journal_order, _m010_updates_edges,
]
#: The schema version this Tideline writes: one per migration.
SCHEMA_VERSION = len(MIGRATIONS)
