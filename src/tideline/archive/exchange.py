"""Export a store to an archive, import one, migrate a whole store: backend-neutral.

Rows are read and written only through a store's ``archive_snapshot`` and
``archive_loader`` (the SQLite ones are in :mod:`tideline.store.sqlite.dump`); this module
holds the order of the work and the rules:

- **Checked like a write.** Every row is checked (:mod:`tideline.archive.checks`: one
  namespace, the header's schema, positive ids, real times, ranges) before anything is
  written, and its texts pass the write path's secret redaction.
- **Merged.** A row the store holds already (same content) is skipped; the others keep
  their ids where free and get new ones where taken, and every reference follows
  (:mod:`tideline.archive.merge`). Into a fresh store an archive loads exactly as it was.
- **Idempotent.** A finished import records the archive's sha256 in ``db_meta``
  (``archive:<sha256>``, never exported); importing the same archive again is a no-op,
  and its rows (or a later archive's) are recognised row by row anyway.
- **All or nothing.** The archive is verified whole before the one write transaction;
  embeddings (when the import re-embeds) are computed before it, never inside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tideline.archive.checks import check_row, redact_row
from tideline.archive.format import (
    EMBEDDING_TABLES,
    FORMAT,
    FORMAT_VERSION,
    TABLES,
    ArchiveReader,
    BodyWriter,
    Header,
    Sink,
)
from tideline.archive.merge import REDACTED_IDENTITY, MergePlan
from tideline.archive.paths import atomic_file, one_path, safe_dir, safe_target
from tideline.errors import ArchiveInvalid, BackendUnavailable, EmbedderMismatch, InvalidInput
from tideline.write.validate import clean_flag

if TYPE_CHECKING:
    from tideline.embed.base import Embedder
    from tideline.runtime import Runtime
    from tideline.store import ArchiveStore

__all__ = ["archive_digest", "export", "export_archive", "import_archive", "migrate_store"]

Progress = Callable[[int, int], None]
IMPORT_KEY = "archive:"
# Tables whose rows a store already holds win over the archive's (see archive.merge).
KEEP_EXISTING = frozenset({"edges", "vectors", "write_keys", "memory_keywords", "sleep_state",
                           "topic_members", "emb_members", "emb_adjacency", "entity_nodes",
                           "entity_edges"})
_EMBED_BATCH = 64


def _schema_version() -> int:
    from tideline.store.sqlite.schema import SCHEMA_VERSION

    return SCHEMA_VERSION


def _write_body(store: ArchiveStore, out: Sink, namespace: str | None,
                vectors: bool) -> tuple[Header, str]:
    from tideline._version import __version__

    tables = [t for t in TABLES if vectors or t != "vectors"]
    with store.archive_snapshot(namespace) as snap:
        counts = {t: snap.count(t) for t in tables}
        header = Header(
            tideline=__version__, schema_version=int(snap.meta("schema_version") or 0),
            embedder=snap.meta("embedder") or "", namespace=namespace, vectors=vectors,
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), counts=counts)
        writer = BodyWriter(out, header)
        for table in tables:
            for row in snap.rows(table):
                writer.row(table, row)
        return header, writer.close()


def export_archive(store: ArchiveStore, path: Path, *, namespace: str | None,
                   vectors: bool = True) -> dict[str, Any]:
    """Write one namespace (or, with ``namespace=None``, the whole store) to ``path``.

    Returns:
        Where, the row counts per table and the body's sha256.

    Raises:
        UnsafePath: ``path`` or a parent is a symlink.
        InvalidInput: the file cannot be written (the old one, if any, is kept).
    """
    target = safe_target(path)
    with atomic_file(target) as f:
        header, digest = _write_body(store, f, namespace, vectors)
    return {"path": str(target), "format": FORMAT, "version": FORMAT_VERSION,
            "namespace": namespace, "vectors": vectors, "embedder": header.embedder,
            "counts": header.counts, "rows": sum(header.counts.values()), "sha256": digest,
            "bytes": target.stat().st_size}


def export(rt: Runtime, path: object, *, format: object = "jsonl",
           all_namespaces: object = False, vectors: object = True) -> dict[str, Any]:
    """``Memory.export``: this namespace (or the whole store) as a ``jsonl`` archive or
    as ``markdown`` for people to read.

    Raises:
        UnsafePath: the target or one of its parents is a symlink.
        InvalidInput: not one target path, unknown format, or the target cannot be written.
    """
    target = one_path(path, "path")
    namespace = None if clean_flag(all_namespaces, "all_namespaces") else rt.config.namespace
    with_vectors = clean_flag(vectors, "vectors")
    if format == "jsonl":
        return export_archive(rt.store, target, namespace=namespace, vectors=with_vectors)
    if format == "markdown":
        from tideline.archive.markdown import export_markdown

        return export_markdown(rt.store, target, namespace=namespace)
    raise InvalidInput(f"export format must be jsonl or markdown, got {format!r:.80}")


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)


def archive_digest(store: ArchiveStore, namespace: str | None = None) -> str:
    """The sha256 an archive of the store's current rows would carry (nothing written)."""
    _, digest = _write_body(store, _Discard(), namespace, True)
    return digest


def _embed(embedder: Embedder, jobs: list[tuple[str, int, str, str | None]],
           progress: Progress | None) -> list[Any]:
    from tideline.store.turn_embedding import embed_jobs

    out: list[Any] = []
    for start in range(0, len(jobs), _EMBED_BATCH):
        chunk = jobs[start:start + _EMBED_BATCH]
        out.extend(embed_jobs(embedder, chunk))
        if progress:
            progress(min(start + _EMBED_BATCH, len(jobs)), len(jobs))
    return out


def import_archive(store: ArchiveStore, embedder: Embedder, path: Path, *,
                   reembed: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Load an archive into ``store`` in one transaction (see the module's rules).

    Args:
        store: the target store.
        embedder: the target's embedder (its marker must match the archive's, unless
            ``reembed``).
        path: the archive.
        reembed: embed every imported memory and turn with ``embedder`` instead of
            loading the archive's vectors (and leave out its embedding clusters, which
            the next sleep rebuilds).
        progress: called with (done, total) while embedding.

    Returns:
        Rows inserted and skipped per table, whether it had been imported before,
        ``merged``, ``remapped`` and ``ids`` (the id map of memories and turns).

    Raises:
        ArchiveInvalid: malformed, unknown format version, truncated or tampered.
        InputTooLarge: a line over the cap.
        SchemaTooNew: written by a newer Tideline.
        EmbedderMismatch: made with another embedder and ``reembed`` is off.
        Conflict: a turn's identity is taken by a turn of another scope (nothing
            written).
    """
    try:
        return _import(store, embedder, path, reembed=reembed, progress=progress)
    except RecursionError:  # a JSON value nested past the parser's stack: no real archive
        raise ArchiveInvalid("the archive holds a value nested too deeply") from None


def _import(store: ArchiveStore, embedder: Embedder, path: Path, *,
            reembed: bool, progress: Progress | None) -> dict[str, Any]:
    from tideline.store.dump import archive_embedding_jobs

    known_schema = _schema_version()
    reader = ArchiveReader(Path(path), known_schema)

    plan = MergePlan()

    def check(header: Header, table: str, row: dict[str, Any]) -> None:
        check_row(table, row, namespace=header.namespace,
                  header_schema=header.schema_version, known_schema=known_schema)
        if table in REDACTED_IDENTITY:  # its identity holds a text redaction may change
            row = redact_row(table, row)
        plan.observe(table, row)

    reader.check = check
    head = reader.read_header()
    if head.embedder != embedder.marker and not reembed:
        exc = EmbedderMismatch(head.embedder, embedder.marker)
        exc.args = (f"the archive was made with embedder {head.embedder!r} but this store "
                    f"uses {embedder.marker!r}; import it with --reembed to embed its texts "
                    "again",)
        raise exc
    known = reader.body_digest()
    if known is not None:
        with store.archive_snapshot(None) as snap:
            if snap.meta(IMPORT_KEY + known) is not None:
                return {"archive": str(path), "sha256": known, "namespace": head.namespace,
                        "embedder": head.embedder, "reembedded": 0, "already_imported": True,
                        "inserted": {}, "skipped": {}, "merged": False, "remapped": {},
                        "ids": {}}
    embed_here = reembed or not head.vectors
    header = reader.verify(frozenset({"memories", "turns"}) if embed_here else frozenset())
    reader.check = None  # the load pass reads the same rows (its sha256 is checked again)
    key = IMPORT_KEY + reader.digest
    base: dict[str, Any] = {
        "archive": str(path), "sha256": reader.digest, "namespace": header.namespace,
        "embedder": header.embedder, "reembedded": 0, "merged": False, "remapped": {},
        "ids": {}}
    with store.archive_snapshot(None) as snap:
        seen = snap.meta(key)
    if seen is not None:
        return base | {"already_imported": True, "inserted": {}, "skipped": {}}
    jobs: list[tuple[str, int, str, str | None]] = []
    vecs: list[Any] = []
    if embed_here:
        jobs = archive_embedding_jobs(
            [redact_row("memories", r) for r in reader.collected.get("memories", ())],
            [redact_row("turns", r) for r in reader.collected.get("turns", ())])
        reader.collected = {}
        vecs = _embed(embedder, jobs, progress)
    skip = EMBEDDING_TABLES if reembed else frozenset()
    expected = dict(header.counts)
    if embed_here:  # the vectors are the embedded memories and turns
        expected["vectors"] = len(jobs)
    with store.archive_loader(embedder.dim, expected) as loader:
        if loader.meta(key) is not None:  # another process finished it meanwhile
            return base | {"already_imported": True, "inserted": {}, "skipped": {}}
        plan.resolve(loader.c)
        loader.keep_existing = KEEP_EXISTING
        held: dict[str, int] = {}
        for table, row in reader.rows():
            if table in skip:
                continue
            moved = plan.transform(table, redact_row(table, row))
            if moved is None:  # the store holds it, or it refers to nothing here
                held[table] = held.get(table, 0) + 1
            else:
                loader.add(table, moved)
        embedded = 0
        for (space, k, _, _), v in zip(jobs, vecs, strict=True):
            here = plan.vector_key(space, k)
            if here is not None and loader.is_new(space, here):
                loader.put_vector(space, here, v)
                embedded += 1
        loader.set_meta(key, json.dumps({"imported_at": time.time(),
                                         "namespace": header.namespace,
                                         "rows": sum(header.counts.values())}))
        inserted, skipped = dict(loader.inserted), dict(loader.skipped)
    for table, n in held.items():
        skipped[table] = skipped.get(table, 0) + n
    return base | {"already_imported": False, "inserted": inserted, "skipped": skipped,
                   "reembedded": embedded if embed_here else 0, "merged": not plan.fresh,
                   "remapped": plan.remapped(), "ids": plan.id_map()}


@contextlib.contextmanager
def _scratch_archive(store: ArchiveStore, directory: Path) -> Iterator[tuple[Path, Header, str]]:
    """The whole store written to a scratch archive in ``directory``: (a path that reads
    it, its header, its sha256). The file has no name (or, where it must have one, a name
    the next run sweeps): a killed migration leaves no copy of the store behind."""
    from tideline.archive.scratch import open_scratch

    with open_scratch(directory, "tideline-migrate", "jsonl") as scratch:
        with os.fdopen(scratch.fd, "wb", closefd=False) as f:
            header, digest = _write_body(store, f, None, True)
        yield scratch.readable(), header, digest


def migrate_store(rt: Runtime, to: str, *, progress: Progress | None = None) -> dict[str, Any]:
    """Copy every namespace of ``rt``'s store into a fresh store at ``to``, and verify it.

    ``to`` is an empty store directory or a ``postgresql://`` URL of a database that
    holds no Tideline rows yet. The source is left as it was. The copy goes through the
    archive (so it is the same path as export + import) and is then compared with the
    source row by row through the archive's sha256.

    Raises:
        BackendUnavailable: ``to`` is a URL of a database this Tideline has no backend for.
        InvalidInput: ``to`` is the source itself, or already holds data.
        UnsafePath: ``to`` or a parent is a symlink.
    """
    from tideline.store.postgres.urls import is_database_url, redact_url

    if "://" in to and not is_database_url(to):
        scheme = to.split("://", 1)[0] or "?"
        raise BackendUnavailable(
            f"no {scheme!r} backend in this Tideline: `migrate --to` takes a store directory "
            "or a postgresql:// URL")
    from tideline.runtime import Runtime

    source_db = rt.config.database
    source = redact_url(source_db) if source_db else str(Path(os.path.abspath(rt.config.home)))
    if is_database_url(to):
        if source_db is not None and source_db == to:
            raise InvalidInput("the migration target is the source store itself")
        cfg = dataclasses.replace(rt.config, database=to)
        shown, scratch_dir = redact_url(to), safe_dir(rt.config.home)
    else:
        target = safe_dir(Path(to))
        home = Path(os.path.abspath(rt.config.home))
        if source_db is None and (target == home or (home.exists()
                                                    and os.path.samefile(target, home))):
            raise InvalidInput("the migration target is the source store itself")
        cfg = dataclasses.replace(rt.config, home=target, database=None)
        shown, scratch_dir = str(target), target
    with _scratch_archive(rt.store, scratch_dir) as (tmp, header, sha):
        dest = Runtime.build(cfg, rt.embedder)
        try:
            with dest.store.archive_snapshot(None) as snap:
                held = {t: snap.count(t) for t in TABLES if t != "db_meta"}
            if any(held.values()):
                raise InvalidInput(f"{shown} already holds a store with data; migrate "
                                   "into an empty one")
            imported = import_archive(dest.store, rt.embedder, tmp, progress=progress)
            digest = archive_digest(dest.store)
        finally:
            dest.close()
    return {"from": source, "to": shown, "counts": header.counts,
            "rows": sum(header.counts.values()), "sha256": sha,
            "inserted": imported["inserted"], "verified": digest == sha}
