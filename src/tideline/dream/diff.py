"""The human rendering of a dream's result: what changed (or would), per layer.

Shared by every surface that shows a dream to a person (CLI, MCP text content).
"""

from __future__ import annotations

from typing import Any

__all__ = ["layer_text", "run_text"]

_SYMBOL = {"write": "+", "weights": "~", "backfill": "↩", "supersede": "⇒",
           "contradicts": "⟂", "related": "↔", "profile": "◆", "self_concept": "◇",
           "thread": "?"}


def _weights(w: dict[str, Any]) -> str:
    return " ".join(f"{k[:3]} {v}" for k, v in w.items())


def change_line(ch: dict[str, Any]) -> str:
    """One change as a line."""
    op = ch["op"]
    mark = _SYMBOL.get(op, "·")
    if op == "write":
        target = f"#{ch['id']}" if ch.get("id") else "new"
        said = {"link": "related to", "correct": "updates"}.get(ch["decision"])
        near = f" ({said} #{ch['nearest']})" if ch.get("nearest") and said else ""
        links = ch.get("source_links") or []
        shown = f" · from turns {links[:6]}{'…' if len(links) > 6 else ''}" if links else ""
        weights = f" · {_weights(ch['weights'])}" if ch.get("weights") else ""
        return (f"  {mark} {ch['decision']} {target}{near} {ch['kind']}@{ch['scope']}: "
                f"{ch['gesture']}{weights}{shown}")
    if op == "weights":
        moves = ", ".join(f"{k} {ch['from'].get(k)}→{v}" for k, v in ch["to"].items())
        why = f" — {ch['reason']}" if ch.get("reason") else ""
        return f"  {mark} #{ch['id']} {moves}{why}"
    if op == "backfill":
        return f"  {mark} #{ch['id']} gains source turns {ch['source_links']}"
    if op in ("supersede", "contradicts", "related"):
        verb = {"supersede": "supersedes", "contradicts": "contradicts",
                "related": "is related to"}[op]
        return f"  {mark} #{ch['id']} {verb} #{ch['other']} — {ch.get('reason', '')}"
    if op in ("profile", "self_concept"):
        return f"  {mark} {ch['facet']} → v{ch['version']}: {ch['content']}"
    if op == "thread":
        return f"  {mark} thread “{ch['title']}” from {ch['source_memories']}"
    return f"  {mark} {ch}"


def layer_text(result: dict[str, Any]) -> str:
    """A layer's result: a heading with counts and tokens, then its changes and conflicts."""
    status = result["status"]
    counts = {k: v for k, v in result.get("counts", {}).items() if v}
    head = f"{result['layer']}: {status}"
    if counts:
        head += " (" + ", ".join(f"{v} {k}" for k, v in counts.items()) + ")"
    elif status in ("dry_run", "blocked"):
        head += f" ({len(result['changes'])} change(s) planned)"
    elif status == "applied" and not result["changes"]:
        head += " (nothing to change)"
    if result.get("calls"):
        head += (f" · {result['calls']} call(s), {result['tokens_in']:,} → "
                 f"{result['tokens_out']:,} tokens")
    lines = [head]
    guard = result.get("guard") or {}
    if guard.get("blocked"):
        lines.append(f"  ! would change {guard['touched']} of {guard['live']} memories "
                     f"(allowed {guard['allowed']}); apply needs --force")
    lines += [change_line(ch) for ch in result["changes"]]
    lines += [f"  ! conflict: {c['reason']}" for c in result["conflicts"]]
    lines += [f"  · {n}" for n in result.get("notes", [])]
    return "\n".join(lines)


def run_text(run: dict[str, Any]) -> str:
    """A whole run: each layer, then the token total."""
    parts = [layer_text(r) for r in run["layers"]]
    mode = "dry run — nothing was changed" if run.get("dry_run") else "applied"
    parts.append(f"— {mode}; {run['calls']} call(s) to {run['provider']} ({run['model']}), "
                 f"{run['tokens_in']:,} tokens in, {run['tokens_out']:,} out")
    return "\n".join(parts)
