"""Claude Code transcripts: ``~/.claude/projects/<slug>/<session>.jsonl``.

Each line of a transcript is one event. User and assistant messages carry a
``uuid`` (kept as the turn's message id, so a re-import is a no-op), a
``sessionId``, an ISO ``timestamp`` (kept as event time — history is never
stamped "now"), the ``cwd`` (which names the project) and a ``message`` whose
``content`` is text or a list of blocks.

What is kept: the text of user prompts and assistant replies. What is skipped,
and counted: queue/attachment/summary events, sub-agent side chains, meta
lines (caveats, command output), slash-command echoes, interruptions,
synthetic/API-error replies, thinking, tool calls and tool results (tool
results can be kept with ``tool_results=True``, shortened). A partial last
line (the file is being written) or a malformed line is skipped, not fatal.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tideline.errors import InputTooLarge, InvalidInput, NotFound
from tideline.project import project_for_directory
from tideline.write.validate import parse_time

__all__ = ["ClaudeTranscript", "claude_projects_dir", "find_transcripts", "parse_transcript"]

SOURCE = "claude"
MAX_FILE_BYTES = 512 * 1024 * 1024
TURN_CHARS = 90_000
TOOL_RESULT_CHARS = 2_000
_NOISE_PREFIXES = ("<command-name>", "<command-message>", "<command-args>",
                   "<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
                   "<bash-input>", "<bash-stdout>", "<bash-stderr>", "<user-memory-input>")
_INTERRUPTED = ("[Request interrupted by user", "[Request cancelled")


@dataclass
class ClaudeTranscript:
    """The turns kept from one transcript file and what was skipped.

    Attributes:
        path: the file.
        turns: turn mappings for :meth:`tideline.Memory.add_turns` (``id`` = the line's
            uuid, ``session``, ``role``, ``speaker``, ``text``, ``timestamp``,
            ``turn_index``, ``scope``).
        sessions: session ids seen.
        skipped: counts of skipped lines by reason.
    """

    path: Path
    turns: list[dict[str, Any]] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    skipped: Counter[str] = field(default_factory=Counter)


def claude_projects_dir() -> Path:
    """Where Claude Code keeps transcripts (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``)/projects."""
    base = (os.environ.get("CLAUDE_CONFIG_DIR") or "").strip()
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "projects"


def find_transcripts(paths: Sequence[str | Path] | None = None) -> list[Path]:
    """Transcript files: the given files, ``*.jsonl`` under given directories, or the local ones.

    Symlinks are not followed. Oldest first (by modification time).

    Raises:
        NotFound: a given path does not exist.
    """
    roots = [Path(p).expanduser() for p in paths] if paths else [claude_projects_dir()]
    found: dict[Path, float] = {}
    for root in roots:
        if root.is_symlink():
            continue
        if root.is_file():
            found[root] = root.stat().st_mtime
            continue
        if not root.is_dir():
            if paths:
                raise NotFound(f"no such file or directory: {root}")
            continue
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                f = Path(dirpath) / name
                if name.endswith(".jsonl") and not f.is_symlink():
                    found[f] = f.stat().st_mtime
    return sorted(found, key=lambda p: (found[p], str(p)))


def _safe_text(text: str) -> str:
    # Transcripts can hold lone surrogates (\\ud83d escapes cut mid-pair) and NULs; the
    # write path rejects both, so they are repaired here instead of failing the import.
    text = text.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")
    if len(text) > TURN_CHARS:
        text = text[:TURN_CHARS] + " …[truncated]"
    return text.strip()


def _blocks_text(content: Any, role: str, tool_results: bool, skipped: Counter[str]) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_result":
            if tool_results:
                body = block.get("content")
                text = body if isinstance(body, str) else _blocks_text(body, role, False, skipped)
                if text.strip():
                    short = text.strip()[:TOOL_RESULT_CHARS]
                    parts.append(f"[tool result] {short}")
            else:
                skipped["tool_result"] += 1
        elif kind == "tool_use":
            skipped["tool_use"] += 1
        elif kind in ("thinking", "redacted_thinking"):
            skipped["thinking"] += 1
        elif kind == "image":
            skipped["image"] += 1
    return "\n".join(parts)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        yield from enumerate(fh, start=1)


def parse_transcript(path: str | Path, *, scope: str | None = None,
                     tool_results: bool = False) -> ClaudeTranscript:
    """Read one Claude Code transcript into raw turns.

    Args:
        path: the ``.jsonl`` file.
        scope: the project for every turn (default: each line's ``cwd`` by the project
            rules, :func:`tideline.project.project_for_directory`).
        tool_results: keep tool results (shortened) as turns of their own.

    Returns:
        The kept turns and the skip counts.

    Raises:
        NotFound: no such file.
        InputTooLarge: the file is over 512 MiB.
    """
    file = Path(path)
    if not file.is_file():
        raise NotFound(f"no such file: {file}")
    if file.stat().st_size > MAX_FILE_BYTES:
        raise InputTooLarge(f"{file} is larger than {MAX_FILE_BYTES} bytes")
    out = ClaudeTranscript(path=file)
    counters: dict[str, int] = {}
    scopes: dict[str, str | None] = {}
    for _number, line in _lines(file):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            out.skipped["malformed"] += 1
            continue
        if not isinstance(obj, dict):
            out.skipped["malformed"] += 1
            continue
        kind = obj.get("type")
        if kind not in ("user", "assistant"):
            out.skipped[f"event:{kind}"] += 1
            continue
        if obj.get("isSidechain"):
            out.skipped["sidechain"] += 1
            continue
        if obj.get("isMeta") or obj.get("isCompactSummary") or obj.get("isVisibleInTranscriptOnly"):
            out.skipped["meta"] += 1
            continue
        raw_message = obj.get("message")
        message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
        if obj.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
            out.skipped["synthetic"] += 1
            continue
        uuid, session = obj.get("uuid"), obj.get("sessionId")
        if not isinstance(uuid, str) or not uuid or not isinstance(session, str) or not session:
            out.skipped["no_id"] += 1
            continue
        role = "assistant" if kind == "assistant" else "user"
        text = _safe_text(_blocks_text(message.get("content"), role, tool_results, out.skipped))
        if not text:
            out.skipped["empty"] += 1
            continue
        if role == "user" and (text.startswith(_NOISE_PREFIXES) or text.startswith(_INTERRUPTED)):
            out.skipped["command"] += 1
            continue
        raw_cwd = obj.get("cwd")
        cwd: str = raw_cwd if isinstance(raw_cwd, str) else ""
        if scope is not None:
            turn_scope: str | None = scope
        else:
            if cwd not in scopes:
                # A line names the directory it was written in: that decides its project
                # (the home directory or / → global), as the hooks would have.
                scopes[cwd] = (project_for_directory(cwd).name or "global") if cwd else None
            turn_scope = scopes[cwd]
        try:
            when = parse_time(obj.get("timestamp"), "timestamp")
        except InvalidInput:
            when = None
            out.skipped["bad_timestamp"] += 1
        index = counters.get(session, 0)
        counters[session] = index + 1
        turn: dict[str, Any] = {
            "id": uuid, "session": session, "role": role, "speaker": role, "text": text,
            "timestamp": when, "turn_index": index,
        }
        if turn_scope:
            turn["scope"] = turn_scope
        out.turns.append(turn)
        out.sessions.add(session)
    return out
