"""Building stores with something in every table, and reading archives back."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.conftest import hashing

from tideline import Memory
from tideline.archive.format import TABLES


def open_store(path: Path, **kw: Any) -> Memory:
    """A memory on a real store directory with the hashing test embedder."""
    return Memory.open(path, embedder=kw.pop("embedder", None) or hashing(), **kw)


def populate(mem: Memory) -> None:
    """Memories with history, raw turns, edges, cognition rows and everything sleep derives."""
    turns = mem.add_turns([
        {"session": "s1", "role": "user", "text": "the loader fails with E4521 again",
         "timestamp": "2026-11-20T09:00:00Z", "id": "m-1"},
        {"session": "s1", "role": "assistant", "text": "a new CSV column caused it",
         "timestamp": "2026-11-20T09:01:00Z", "id": "m-2"},
        {"session": "s2", "speaker": "Ana", "text": "我更喜欢喝茶 — tea, not coffee",
         "timestamp": "2026-11-21T10:00:00Z", "id": "m-3"},
    ], scope="atlas", source="jsonl")
    assert turns.inserted == 3
    ids = [t.id for t in mem.store.session_turns("s1")]
    first = mem.write("The loader broke on E4521 after a CSV column was added",
                      context="atlas nightly import", cognition_direction="check schemas",
                      kind="episode", scope="atlas", tags=["loader", "csv"],
                      entities_role="A=判断+执行; B=审查", related_entities=["Ana", "Bo"],
                      source_links=ids, importance=4, emotional=2, unresolved=3,
                      event_time="2026-11-20T09:00:00Z")
    mem.remember("Ana prefers tea over coffee", kind="preference", tags=["ana"])
    mem.remember("the deploy key lives in vault", scope="atlas")
    mem.revise(first.id, "The loader broke on E4521: a CSV column was added upstream",
               scope="atlas")
    for q in ("E4521 loader", "what does Ana drink", "deploy key"):
        mem.recall(q, scope="atlas")
    mem.reflect([first.id + 3], 0.5, scope="atlas")
    mem.update_profile("Ana", "fact", "drinks tea")
    mem.update_self_concept("terrain", "data pipelines")
    mem.add_thread("why do CSV columns appear unannounced", "ask upstream",
                   source_memories=[first.id])
    mem.sleep(force=True)


def lines(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines()


def body(path: Path) -> list[str]:
    """Every line but the header."""
    return lines(path)[1:]


def rows_by_table(mem: Memory, namespace: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every archived table of a store, row by row, through the store's own snapshot."""
    with mem.store.archive_snapshot(namespace) as snap:
        return {t: list(snap.rows(t)) for t in TABLES}


def rewrite(path: Path, edit: Any) -> None:
    """Apply ``edit`` to the parsed row lines, then recompute counts and sha256 so that
    only the edited content (not the checksum) can make the archive invalid."""
    raw = lines(path)
    header = json.loads(raw[0])
    rows = [json.loads(x) for x in raw[1:-1]]
    rows = edit(header, rows)
    counts = dict.fromkeys(header["counts"], 0)
    for r in rows:
        counts[r["t"]] = counts.get(r["t"], 0) + 1
    header["counts"] = counts
    encoded = [json.dumps(r, separators=(",", ":")) + "\n" for r in rows]
    sha = hashlib.sha256("".join(encoded).encode("utf-8")).hexdigest()
    trailer = {"end": "tideline-archive", "counts": counts, "sha256": sha}
    path.write_text(json.dumps(header) + "\n" + "".join(encoded) + json.dumps(trailer) + "\n",
                    encoding="utf-8")
