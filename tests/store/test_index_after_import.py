"""Issue 33 item 13: a bulk import leaves the vector index built, not the first recall.

At 100k memories the first recall in a new process after ``import tideline`` took 30.9 s
while the index was rebuilt from the store. The import now brings every space's index up
to date and saves it: a new process loads the file (its sync says ``loaded …``, nothing
is rebuilt), for an archive import and a JSONL turn import alike.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import hashing

from tideline import Memory
from tideline.store.sqlite.vector_index import SyncReport, VectorIndex
from tideline.store.sqlite.vector_spaces import VectorSpaces, _file_name


def _fresh_process_sync(store: Path, kind: str) -> SyncReport:
    """What a new process's first search does to the space's index: open and sync it."""
    mem = Memory.open(store, embedder=hashing(), project="global")
    try:
        spaces = mem.vectors
        assert isinstance(spaces, VectorSpaces)
        space = spaces.store.space(kind, "global")
        index = VectorIndex(spaces.directory, _file_name(space), spaces.dim, spaces.marker)
        report = index.sync(spaces.store.source(kind, "global", spaces.dim))
        assert len(index) > 0
        index.close()
        return report
    finally:
        mem.close()


def test_archive_import_builds_the_index(tmp_path: Path) -> None:
    source = tmp_path / "a"
    with Memory.open(source, embedder=hashing(), project="global") as mem:
        for n in range(120):
            mem.remember(f"release note {n}: the exporter {n * 7} shipped batch {n % 13}")
        mem.export(tmp_path / "a.jsonl")
    target = tmp_path / "b"
    with Memory.open(target, embedder=hashing(), project="global") as mem:
        out = mem.import_archive(tmp_path / "a.jsonl")
        assert out["inserted"]
    report = _fresh_process_sync(target, "m")
    assert not report.rebuilt and report.reason.startswith("loaded"), report
    with Memory.open(target, embedder=hashing(), project="global") as mem:
        hits = mem.recall("release note 42 exporter", log=False).items
        assert any("release note 42:" in h.text for h in hits)


def test_jsonl_import_builds_the_turn_index(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"session": f"s{n % 5}", "role": "user",
                                        "text": f"turn {n} about the atlas migration step {n}",
                                        "id": f"t{n}"}) + "\n" for n in range(150)),
                    encoding="utf-8")
    target = tmp_path / "c"
    with Memory.open(target, embedder=hashing(), project="global") as mem:
        assert mem.import_jsonl(chat, scope="global")["inserted"] == 150
    report = _fresh_process_sync(target, "t")
    assert not report.rebuilt and report.reason.startswith("loaded"), report
