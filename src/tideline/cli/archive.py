"""Archive commands: ``export``, ``import tideline`` and ``migrate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tideline.cli.agent import import_app
from tideline.cli.base import app, emit, guarded
from tideline.cli.commands import EmbOpt, JsonOpt, NsOpt, StoreOpt, opened, progress_bar


def _counts(res: dict[str, Any], key: str) -> str:
    parts = [f"{t} {n}" for t, n in res.get(key, {}).items() if n]
    return ", ".join(parts) or "nothing"


@app.command("export")
@guarded
def export_cmd(
    target: Annotated[Path, typer.Argument(help="The archive file (jsonl) or a directory "
                                           "(markdown).")],
    fmt: Annotated[str, typer.Option("--format", help="jsonl (portable, importable) or "
                                     "markdown (for people to read).")] = "jsonl",
    all_namespaces: Annotated[bool, typer.Option("--all", help="Every namespace of the "
                                                 "store, not only the current one.")] = False,
    no_vectors: Annotated[bool, typer.Option("--no-vectors", help="Leave the vectors out "
                                             "(smaller; an import embeds again).")] = False,
    store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export the namespace (or --all) to a versioned JSONL archive, or Markdown to read."""
    with opened(store, namespace, embedder) as mem:
        res = mem.export(target, format=fmt, all_namespaces=all_namespaces,
                         vectors=not no_vectors)
    if fmt == "markdown":
        emit(res, as_json, lambda: f"wrote {res['memories']} memory page(s) and index.md "
                                   f"to {res['path']}")
        return
    emit(res, as_json, lambda: f"exported {res['rows']} row(s) to {res['path']} "
                               f"(sha256 {res['sha256'][:12]}…): {_counts(res, 'counts')}")


@import_app.command("tideline")
@guarded
def import_tideline_cmd(
    file: Annotated[Path, typer.Argument(help="An archive written by `tideline export`.")],
    reembed: Annotated[bool, typer.Option("--reembed", help="Embed the texts with this "
                                          "store's embedder (needed when the archive was "
                                          "made with another).")] = False,
    store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import a Tideline archive: into a store with rows it merges (new ids where taken,
    every reference remapped, the id map in --json); idempotent; all or nothing."""
    from tideline.memory import open_for_import

    mem = open_for_import(store, namespace, embedder, file)
    try:
        with progress_bar("embedding", not as_json and reembed) as bar:
            res = mem.import_archive(file, reembed=reembed, progress=bar)
    finally:
        mem.close()

    def text() -> str:
        if res["already_imported"]:
            return f"already imported ({res['sha256'][:12]}…): nothing to do"
        skipped = _counts(res, "skipped")
        moved = _counts(res, "remapped")
        return (f"imported {_counts(res, 'inserted')}"
                + (f"; already there: {skipped}" if skipped != "nothing" else "")
                + (f"; new ids (taken here): {moved} — the id map is in --json"
                   if moved != "nothing" else "")
                + (f"; re-embedded {res['reembedded']}" if res["reembedded"] else ""))

    emit(res, as_json, text)


@app.command()
@guarded
def migrate(
    to: Annotated[str, typer.Option("--to", help="An empty store directory or an empty "
                                    "PostgreSQL database (postgresql://…).")],
    store: StoreOpt = None, embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Copy the whole store (every namespace) into another store, verified row by row."""
    with opened(store, None, embedder) as mem:
        res = mem.migrate(to)
    emit(res, as_json, lambda: f"migrated {res['rows']} row(s) from {res['from']} to "
                               f"{res['to']}; verified: {res['verified']}")
