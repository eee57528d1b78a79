"""Issue 11, "Export, import, migrate" on PostgreSQL: an import that embeds.

The PostgreSQL loader stores the vectors an import computes itself (an archive without
vectors, or one re-embedded for another embedder) through the shared loader's
``put_vector`` and its own ``_store_vector`` hook, gathered into ``COPY`` batches; the
SQLite round-trip tests cover the same path on SQLite only.
"""

from __future__ import annotations

from pathlib import Path

from tests.archive.helpers import open_store, populate, rows_by_table
from tests.conftest import hashing

from tideline import Memory
from tideline.archive.exchange import archive_digest
from tideline.embed.hashing import HashingEmbedder


def test_an_archive_without_vectors_is_embedded_into_postgres(tmp_path: Path,
                                                                pg_url: str) -> None:
    with open_store(tmp_path / "A") as source:
        populate(source)
        source.export(tmp_path / "a.jsonl", vectors=False)
        digest = archive_digest(source.store)
    with Memory.open(tmp_path / "l", database=pg_url, embedder=hashing(),
                     project="atlas") as pg:
        res = pg.import_archive(tmp_path / "a.jsonl")
        assert res["inserted"]["vectors"] == 4 + 3
        # The hashing embedder is deterministic: the vectors come out as the source's own.
        assert archive_digest(pg.store) == digest
        assert pg.doctor()["ok"]
        hit = pg.recall("E4521 loader", scope="atlas", log=False)
        assert hit.items and "E4521" in hit.items[0].text


def test_a_reembedding_import_into_postgres_stores_the_new_vectors(tmp_path: Path,
                                                                   pg_url: str) -> None:
    with open_store(tmp_path / "A") as source:
        populate(source)
        source.export(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "l", database=pg_url, embedder=HashingEmbedder(dim=128),
                     project="atlas") as pg:
        res = pg.import_archive(tmp_path / "a.jsonl", reembed=True)
        assert res["reembedded"] == 4 + 3
        assert res["inserted"]["vectors"] == 4 + 3
        assert all(len(v["v"]) == 4 * 128 for v in rows_by_table(pg)["vectors"])
        assert pg.doctor()["ok"]
        again = pg.import_archive(tmp_path / "a.jsonl", reembed=True)
        assert again["already_imported"] is True
