"""No secret reaches any byte of the store, whichever surface it came through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from tests.conftest import hashing
from tests.hooks.conftest import SESSION, line, run_hook_process

from mcp import Client
from tideline import Memory
from tideline.bench.secrets import FakeSecret, fake_secrets
from tideline.config import Config
from tideline.hooks.claude import run_hook
from tideline.mcp.server import build_server
from tideline.project import ProjectInfo


def _cli(store: Path, *args: str) -> None:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr


def _leaks(store: Path, corpus: list[FakeSecret]) -> list[tuple[str, str]]:
    """(file, label) for every needle found in the raw bytes of any file of the store."""
    found = []
    files = [p for p in store.rglob("*") if p.is_file()]
    assert any(p.name.endswith("-wal") for p in files) or files
    for path in files:
        raw = path.read_bytes()
        for secret in corpus:
            for needle in secret.needles:
                if needle.encode() in raw or json.dumps(needle)[1:-1].encode() in raw:
                    found.append((str(path.relative_to(store)), secret.label))
    return found


def test_fake_secrets_through_every_surface_leave_no_byte(tmp_path: Path) -> None:
    """Issue 9, item 9: secrets reached memories, turns, FTS content, keywords, sleep state,
    clusters and events in plain text. Here 60 fake secrets go in through the Python API
    (remember, write, revise, add_turns), the CLI (remember, write, turns import), the MCP
    tools (memorize with text and turns, revise, update_profile, update_self_concept,
    apply_dream), the hooks (transcript capture at Stop, a hook error that is journaled)
    and a dream answer; then sleep runs (backup, keywords, clusters, sleep state) and every
    file in the store directory — database, WAL, backups, index files — is searched."""
    corpus = fake_secrets(seed=19)
    assert len(corpus) >= 40
    texts = [s.text for s in corpus]
    store = tmp_path / "store"
    project = tmp_path / "atlas"
    (project / ".git").mkdir(parents=True)
    chunks = [texts[i::8] for i in range(8)]

    # Python API
    mem = Memory.open(store, embedder=hashing())
    first = None
    for n, text in enumerate(chunks[0]):
        res = mem.remember(f"note {n}: {text}", scope="atlas", tags=["creds"])
        first = first or res.id
    for n, text in enumerate(chunks[1]):
        mem.write(f"ops decision {n}", context=text, cognition_direction=f"why: {text}",
                  entities_role=text[:200], scope="atlas", kind="decision")
    assert first is not None
    mem.revise(first, f"revised: {chunks[2][0]}", scope="atlas")
    mem.add_turns([{"session": "api", "role": "user", "text": t, "id": f"api-{i}"}
                   for i, t in enumerate(chunks[2][1:])], scope="atlas")
    mem.close()

    # CLI
    for text in chunks[3][:3]:
        _cli(store, "remember", text, "--scope", "atlas")
    _cli(store, "write", "cli decision", "--context", chunks[3][3], "--scope", "atlas")
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps({"session": "cli", "role": "user", "text": t,
                                          "id": f"cli-{i}"})
                              for i, t in enumerate(chunks[3][4:])) + "\n", encoding="utf-8")
    _cli(store, "turns", "import", str(chat), "--scope", "atlas")

    # MCP tools through the SDK client
    mem = Memory.open(store, embedder=hashing())
    mem.use_project(ProjectInfo("atlas", "git_root", str(project)))
    mcp_texts = chunks[4]

    async def body(client: Client) -> list[Any]:
        out = [await client.call_tool("memorize", {"text": mcp_texts[0]})]
        out.append(await client.call_tool("memorize", {
            "text": "turns came in", "turns": [{"role": "user", "text": t, "id": f"mcp-{i}"}
                                               for i, t in enumerate(mcp_texts[1:3])]}))
        out.append(await client.call_tool("revise", {"memory_id": first + 1,
                                                     "text": mcp_texts[3]}))
        out.append(await client.call_tool("update_profile", {
            "entity": "Mira", "facet": "fact", "content": mcp_texts[4]}))
        out.append(await client.call_tool("update_self_concept", {
            "facet": "fact", "content": mcp_texts[5]}))
        ids = [r.id for r in mem.store.list_memories(scopes=["atlas"], limit=3)]
        answer = {"symbols": [{"symbol": "key", "memory_ids": ids[:1]},
                              {"symbol": "lock", "memory_ids": ids[1:2]},
                              {"symbol": "door", "memory_ids": ids[:2]}],
                  "story": mcp_texts[6], "reflection": "Keys travel.", "importance": 3,
                  "emotional": 2, "recurrence": 1, "unresolved": 2}
        out.append(await client.call_tool("apply_dream", {"layer": "dream",
                                                          "answer": json.dumps(answer)}))
        return out

    async def main() -> list[Any]:
        async with Client(build_server(mem)) as client:
            return await body(client)

    results = anyio.run(main)
    assert not any(r.is_error for r in results), [r.content for r in results]
    mem.close()

    # Hooks: the Stop hook captures a transcript; a failing hook journals its message.
    rows = [line("user" if i % 2 == 0 else "assistant", f"h-{i}",
                 t if i % 2 == 0 else [{"type": "text", "text": t}],
                 ts=f"2026-11-20T09:{i:02d}:00Z", cwd=str(project))
            for i, t in enumerate(chunks[5] + chunks[6])]
    transcript = project / "t.jsonl"
    transcript.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    stop = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(project),
            "hook_event_name": "Stop", "stop_hook_active": False}
    proc = run_hook_process("stop", stop, store, cwd=project)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    for text in chunks[7]:
        outcome = run_hook("prompt", json.dumps({"hook_event_name": text[:300],
                                                 "session_id": SESSION}),
                           Config.load(home=store, embedder="hashing"))
        assert outcome.stderr  # refused: named another event; the message is journaled

    # Sleep: backup, keywords, clusters, sleep state. The last Memory stays open so
    # the WAL is on disk while the files are searched.
    mem = Memory.open(store, embedder=hashing())
    try:
        mem.sleep(force=True)
        assert mem.events(kinds=["hook_error"], limit=50)
        stored = mem.introspect()
        assert stored["memories"] >= 20 and stored["turns"] >= 20
        assert (store / "backups").exists()
        assert _leaks(store, corpus) == []
    finally:
        mem.close()
    assert _leaks(store, corpus) == []
