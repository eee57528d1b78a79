"""Sleep step ``entities``: the entity graph from ``entities_role``, feeding profiles.

``entities_role`` is semi-structured: ``A=判断+执行; B=审查`` — entries split on
``;`` (also ``；``, newlines, ``|``), each ``entity=roles`` with roles split on
``+`` (also ``＋``, ``/``, ``、``, ``,``). An entry without ``=`` names an
entity with no role; ``related_entities`` add role-less mentions. Per memory,
every entity counts once.

The graph (the seed's ``build_entity_graph``): per entity its mentions and role
counts; per entity pair the co-occurrence count and the role-pair patterns
(``判断+执行 ↔ 审查``). It feeds profiles: an entity seen in a role at least
``entity_profile_min`` times gets one deterministic line in its ``fact`` profile
(``Roles (from memories): 审查 ×5 (83 %), …``) and one in ``relationship``
(``Works with (from memories): B ×4 (判断+执行 ↔ 审查 ×3), …``). Only that line is
replaced; whatever else the facet holds (written by a person or by DREAM) is
kept, and nothing is written when the line did not change.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from itertools import combinations
from typing import Any

from tideline.cognition import SelfModel
from tideline.errors import Conflict, InvalidInput
from tideline.sleep.context import SleepContext

__all__ = ["ROLE_PREFIX", "WITH_PREFIX", "build_graph", "parse_roles", "run"]

#: How the profile facts written by sleep begin (roles, collaborators), so sleep
#: recognises and replaces its own lines and leaves what others wrote.
ROLE_PREFIX = "Roles (from memories): "
WITH_PREFIX = "Works with (from memories): "
_ENTRY = re.compile(r"[;；\n|]")
_ROLE = re.compile(r"[+＋/、,，]")
_EQ = re.compile(r"[=＝]")
_MEMORY_SAMPLE = 20


def parse_roles(text: str) -> dict[str, tuple[str, ...]]:
    """Parse ``entities_role`` into entity → roles (in order, deduplicated).

    Args:
        text: e.g. ``"A=判断+执行; B=审查"``.

    Returns:
        ``{"A": ("判断", "执行"), "B": ("审查",)}``; an entry without ``=`` maps to ``()``.
    """
    out: dict[str, list[str]] = {}
    for entry in _ENTRY.split(unicodedata.normalize("NFKC", text)):
        entry = entry.strip()
        if not entry:
            continue
        parts = _EQ.split(entry, maxsplit=1)
        name = parts[0].strip()
        if not name:
            continue
        roles = [r.strip() for r in _ROLE.split(parts[1])] if len(parts) > 1 else []
        bucket = out.setdefault(name, [])
        bucket.extend(r for r in roles if r and r not in bucket)
    return {k: tuple(v) for k, v in out.items()}


def build_graph(rows: list[tuple[int, str, str]]) -> tuple[list[dict[str, Any]],
                                                            list[dict[str, Any]]]:
    """Nodes and edges from (memory id, entities_role, related_entities JSON) rows.

    Returns:
        Nodes (entity, mentions, roles counts, a sample of memory ids) by mentions;
        edges (a < b, count, role-pair counts) by count.
    """
    mentions: Counter[str] = Counter()
    roles: dict[str, Counter[str]] = {}
    memories: dict[str, list[int]] = {}
    pairs: Counter[tuple[str, str]] = Counter()
    patterns: dict[tuple[str, str], Counter[str]] = {}
    for mid, role_text, related in rows:
        found = parse_roles(role_text)
        for name in json.loads(related or "[]"):
            name = unicodedata.normalize("NFKC", str(name)).strip()
            if name and name not in found:
                found[name] = ()
        for name, rs in found.items():
            mentions[name] += 1
            roles.setdefault(name, Counter()).update(rs)
            memories.setdefault(name, []).append(mid)
        for a, b in combinations(sorted(found), 2):
            pairs[(a, b)] += 1
            key = f"{'+'.join(found[a]) or '·'} ↔ {'+'.join(found[b]) or '·'}"
            patterns.setdefault((a, b), Counter())[key] += 1
    nodes = [{"entity": e, "mentions": n, "roles": dict(roles[e].most_common()),
              "memories": memories[e][-_MEMORY_SAMPLE:]}
             for e, n in sorted(mentions.items(), key=lambda kv: (-kv[1], kv[0]))]
    edges = [{"a": a, "b": b, "count": n, "role_pairs": dict(patterns[(a, b)].most_common())}
             for (a, b), n in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))]
    return nodes, edges


def _role_line(node: dict[str, Any]) -> str:
    total = sum(node["roles"].values())
    parts = [f"{r} ×{n} ({round(100 * n / total)} %)" for r, n in
             sorted(node["roles"].items(), key=lambda kv: (-kv[1], kv[0]))[:6]]
    return ROLE_PREFIX + ", ".join(parts) + f" — in {node['mentions']} memories"


def _with_line(entity: str, edges: list[dict[str, Any]]) -> str | None:
    mine = [e for e in edges if entity in (e["a"], e["b"])]
    if not mine:
        return None
    parts = []
    for e in sorted(mine, key=lambda e: (-e["count"], e["a"], e["b"]))[:5]:
        other = e["b"] if e["a"] == entity else e["a"]
        pattern, n = max(e["role_pairs"].items(), key=lambda kv: (kv[1], kv[0]))
        if e["a"] != entity:  # show the pattern from this entity's side
            left, _, right = pattern.partition(" ↔ ")
            pattern = f"{right} ↔ {left}"
        parts.append(f"{other} ×{e['count']} ({pattern} ×{n})")
    return WITH_PREFIX + ", ".join(parts)


def _merge_line(content: str, prefix: str, line: str) -> str:
    lines = [x for x in content.splitlines() if x.strip()]
    kept = [x for x in lines if not x.startswith(prefix)]
    idx = next((i for i, x in enumerate(lines) if x.startswith(prefix)), len(kept))
    kept.insert(min(idx, len(kept)), line)
    return "\n".join(kept)


def run(ctx: SleepContext) -> dict[str, Any]:
    """Rebuild the entity graph and refresh the generated profile lines.

    Returns:
        Metrics: entities, edges, profiles written/unchanged/conflicts.
    """
    nodes, edges = build_graph(ctx.cons.entity_rows())
    ctx.cons.replace_entity_graph(nodes, edges, ctx.now)
    written = unchanged = conflicts = skipped = 0
    model = SelfModel(ctx.rt.store, ctx.rt.config.caps)
    existing = {(p["entity"], p["facet"]): p for p in model.profiles()}
    for node in nodes:
        if sum(node["roles"].values()) < ctx.tuning.entity_profile_min:
            continue
        lines = [("fact", ROLE_PREFIX, _role_line(node))]
        with_line = _with_line(node["entity"], edges)
        if with_line is not None:
            lines.append(("relationship", WITH_PREFIX, with_line))
        for facet, prefix, line in lines:
            cur = existing.get((node["entity"], facet))
            content = _merge_line(cur["content"] if cur else "", prefix, line)
            if cur is not None and cur["content"] == content:
                unchanged += 1
                continue
            try:
                model.update_profile(node["entity"], facet, content,
                                     expected_version=cur["version"] if cur else 0)
                written += 1
            except Conflict:
                conflicts += 1
            except InvalidInput:
                skipped += 1
    return {"entities": len(nodes), "edges": len(edges), "profiles_written": written,
            "profiles_unchanged": unchanged, "conflicts": conflicts, "skipped": skipped}
