"""A Markdown export for people to read: one file per memory and an index.

File names come from ids (``memories/<id>.md``), never from content, so no stored text
can choose where a file goes. Every file is written atomically; nothing is written
outside the target directory or through a symlink. This is a reading copy: it cannot be
imported back (the JSONL archive is the portable format).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tideline.archive.paths import atomic_file, inside, safe_dir

if TYPE_CHECKING:
    from tideline.store import ArchiveStore

__all__ = ["export_markdown"]


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "—"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def _one_line(text: str, cap: int = 100) -> str:
    flat = " ".join(text.split()).replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")
    return flat if len(flat) <= cap else flat[: cap - 1] + "…"


def _list(raw: Any) -> list[Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _memory_page(m: dict[str, Any]) -> str:
    lines = [f"# Memory {m['id']}", ""]
    facts = [
        ("kind", m.get("kind")), ("scope", m.get("scope")), ("namespace", m.get("namespace")),
        ("status", m.get("status")), ("version", m.get("version")),
        ("weight", f"{m.get('weight', 0):.3f} (importance {m.get('importance')}, emotional "
                   f"{m.get('emotional')}, recurrence {m.get('recurrence')}, unresolved "
                   f"{m.get('unresolved')})"),
        ("happened", _when(m.get("event_time"))), ("recorded", _when(m.get("recorded_at"))),
        ("tags", ", ".join(map(str, _list(m.get("tags")))) or "—"),
        ("entities", ", ".join(map(str, _list(m.get("related_entities")))) or "—"),
        ("source turns", ", ".join(map(str, _list(m.get("source_links")))) or "—"),
    ]
    lines += [f"- **{k}**: {v}" for k, v in facts]
    if m.get("supersedes") is not None:
        lines.append(f"- **supersedes**: [memory {m['supersedes']}]({int(m['supersedes'])}.md)")
    for title, key in (("Gesture", "gesture"), ("Context", "context"),
                       ("Cognition direction", "cognition_direction"),
                       ("Entities and roles", "entities_role")):
        if m.get(key):
            lines += ["", f"## {title}", "", "```text", str(m[key]).replace("```", "`\u200b``"),
                      "```"]
    return "\n".join(lines) + "\n"


def export_markdown(store: ArchiveStore, directory: Path, *,
                    namespace: str | None) -> dict[str, Any]:
    """Write ``index.md`` and ``memories/<id>.md`` for one namespace (or all with None).

    Returns:
        The directory and how many memory pages were written.

    Raises:
        UnsafePath: the directory or a parent is a symlink.
        InvalidInput: a file cannot be written.
    """
    root = safe_dir(directory)
    pages = safe_dir(inside(root, "memories"))
    index = ["# Tideline memories", "",
             f"Exported {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             + (f" from namespace `{namespace}`." if namespace else " (all namespaces)."), "",
             "| id | kind | scope | status | weight | gesture |", "|---|---|---|---|---|---|"]
    written = 0
    with store.archive_snapshot(namespace) as snap:
        for m in snap.rows("memories"):
            mid = int(m["id"])
            with atomic_file(inside(pages, f"{mid}.md")) as f:
                f.write(_memory_page(m).encode("utf-8"))
            index.append(f"| [{mid}](memories/{mid}.md) | {_one_line(m['kind'])} | "
                         f"{_one_line(m['scope'])} | {m['status']} | {m['weight']:.2f} | "
                         f"{_one_line(m['gesture'])} |")
            written += 1
    with atomic_file(inside(root, "index.md")) as f:
        f.write(("\n".join(index) + "\n").encode("utf-8"))
    return {"path": str(root), "format": "markdown", "memories": written}
