"""The session brief: T0 identity anchor, T2 prefetch cache, T2b context bridge, T3 memory map.

None of these tiers needs an embedding: they are SQL over the store
(:class:`~tideline.store.agent.AgentReader`), so the ``session-start`` hook can
build the brief without loading the model or numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tideline.errors import InvalidInput
from tideline.inject.budget import clip_text, estimate_tokens
from tideline.inject.identity import IdentityDoc
from tideline.inject.result import InjectResult, TierBlock, assemble
from tideline.inject.tuning import InjectTuning
from tideline.models import iso
from tideline.project import ProjectInfo
from tideline.render import memory_line, one_line, turn_line
from tideline.scopes import visible_scopes
from tideline.store.agent import AgentReader
from tideline.write.validate import clean_seq

__all__ = ["BRIEF_SHARES", "BRIEF_TIERS", "build_brief", "clean_tiers", "tier_t0", "tier_t2",
           "tier_t2b", "tier_t3"]

#: The tiers of the session brief, and each one's share of its token budget.
BRIEF_TIERS = ("T0", "T2", "T2b", "T3")
BRIEF_SHARES = {"T0": 0.3, "T2": 0.2, "T2b": 0.3, "T3": 0.2}


def tier_t0(reader: AgentReader, scopes: Sequence[str], info: ProjectInfo,
            identity: IdentityDoc | None, tuning: InjectTuning, agent: str = "") -> TierBlock:
    """T0 identity anchor: whose memory it is, the identity file, the self-concept, a snapshot."""
    lines: list[str] = []
    items: list[dict[str, Any]] = []
    if agent:
        lines.append(f"This is the long-term memory of {agent} (you).")
        items.append({"type": "agent", "name": agent})
    if identity is not None and identity.text:
        body = clip_text(identity.text, tuning.t0_identity_tokens)
        lines.append(f"Identity ({identity.path.name}):")
        lines.extend(body.splitlines())
        items.append({"type": "identity", "path": str(identity.path),
                      "truncated": identity.truncated or body != identity.text})
    for facet in reader.self_concept():
        lines.append(f"Self-concept/{facet['facet']} (v{facet['version']}): "
                     f"{one_line(facet['content'], tuning.item_chars)}")
        items.append({"type": "self_concept", "facet": facet["facet"],
                      "version": facet["version"]})
    snap = reader.snapshot(scopes)
    last = iso(snap["last_session_time"]) if snap["last_session_time"] else None
    where = info.name or "global"
    lines.append(
        f"Snapshot: {snap['memories_in_scope']} memories in {' + '.join(scopes)} "
        f"({snap['memories']} in the store), {snap['turns']} raw turns in "
        f"{snap['sessions']} session(s); project {where} (detected by {info.rule})"
        + (f"; last session {snap['last_session']} at {last[:16]}" if last
           else "; no sessions yet"))
    items.append({"type": "snapshot", **snap, "project": info.name, "rule": info.rule})
    return TierBlock("T0", tuple(lines), tuple(items))


def tier_t2(reader: AgentReader, scopes: Sequence[str], tuning: InjectTuning) -> TierBlock:
    """T2 prefetch cache: the high-weight pool, topped up from the top of the store.

    Memories above ``t2_min_weight`` come first (at most ``t2_top``: the seed's pool).
    While fewer than ``t2_top`` pass it, the store's next highest-weight memories fill
    T2 up to ``t2_fill`` — the threshold is absolute, a young store's weights are not
    yet high, and its brief should still carry what it holds.
    """
    rows = reader.high_weight(scopes, tuning.t2_min_weight, tuning.t2_top)
    pools = ["threshold"] * len(rows)
    if len(rows) < tuning.t2_top and len(rows) < tuning.t2_fill:
        taken = {r["id"] for r in rows}
        # weight > -1 admits every live memory: the ranking alone decides.
        for r in reader.high_weight(scopes, -1.0, tuning.t2_fill):
            if len(rows) >= tuning.t2_fill:
                break
            if r["id"] not in taken:
                rows.append(r)
                pools.append("relative")
    lines = tuple(memory_line(r, tuning.item_chars) for r in rows)
    items = tuple({"type": "memory", "id": r["id"], "weight": r["weight"], "scope": r["scope"],
                   "kind": r["kind"], "source_links": r["source_links"], "pool": pool}
                  for r, pool in zip(rows, pools, strict=True))
    if not rows:
        note = "no memory yet"
    elif "relative" in pools:
        note = (f"{pools.count('threshold')} above weight {tuning.t2_min_weight:g}; "
                f"{pools.count('relative')} more from the top of the store")
    else:
        note = ""
    return TierBlock("T2", lines, items, note=note)


def tier_t2b(reader: AgentReader, scopes: Sequence[str], tuning: InjectTuning,
             exclude_session: str | None = None) -> TierBlock:
    """T2b context bridge: raw texture of ONE session of the most recent day.

    The session whose linked memory has the highest weight; else the most recent one.
    """
    pick = reader.bridge_session(scopes, tuning.t2b_window_hours * 3600.0, exclude_session)
    if pick is None:
        return TierBlock("T2b", note="no raw texture yet")
    turns = reader.session_tail(pick["session"], tuning.t2b_turns, scopes)
    lines = tuple(turn_line(t, tuning.t2b_turn_chars) for t in turns)
    items = tuple({"type": "turn", "id": t["id"], "message_id": t["message_id"],
                   "session": t["session"], "turn_index": t["turn_index"]} for t in turns)
    if pick["reason"] == "highest_weight_memory":
        note = (f"session {pick['session']}, linked to memory #{pick['memory_id']} "
                f"w={pick['weight']:.2f}")
    else:
        note = f"session {pick['session']}, the most recent"
    return TierBlock("T2b", lines, items, note=note)


def tier_t3(reader: AgentReader, scopes: Sequence[str], tuning: InjectTuning) -> TierBlock:
    """T3 memory map: the cluster index (or tags and kinds until clusters exist) + profiles."""
    lines: list[str] = []
    items: list[dict[str, Any]] = []
    clusters = reader.clusters(scopes, tuning.t3_clusters)
    if clusters:
        note = "clusters"
        lines.append("Topics: " + ", ".join(
            f"{c['label']}({c['size']})" if c["size"] is not None else c["label"]
            for c in clusters))
        items.extend({"type": "cluster", **c} for c in clusters)
    else:
        note = "tags and kinds; clusters not built yet"
        tags = reader.tag_counts(scopes, tuning.t3_clusters)
        if tags:
            lines.append("Tags: " + ", ".join(f"{t}({n})" for t, n in tags))
            items.extend({"type": "tag", "label": t, "size": n} for t, n in tags)
    kinds = reader.kind_counts(scopes)
    if kinds:
        lines.append("Kinds: " + ", ".join(f"{k} {n}" for k, n in kinds))
        items.extend({"type": "kind", "label": k, "size": n} for k, n in kinds)
    for p in reader.profiles(tuning.t3_profiles):
        lines.append(f"Profile {p['entity']}/{p['facet']}: "
                     f"{one_line(p['content'], min(240, tuning.item_chars))}")
        items.append({"type": "profile", "entity": p["entity"], "facet": p["facet"],
                      "version": p["version"]})
    if not lines:
        note = "empty"
    return TierBlock("T3", tuple(lines), tuple(items), note=note)


def clean_tiers(tiers: object) -> tuple[str, ...]:
    """The brief tiers a caller asked for, checked.

    Raises:
        InvalidInput: not a sequence of tier names, or a tier the brief does not have.
    """
    wanted = clean_seq(tiers, "tiers")
    unknown = [t for t in wanted if not isinstance(t, str) or t not in BRIEF_TIERS]
    if unknown:
        raise InvalidInput(f"brief tiers are {', '.join(BRIEF_TIERS)}; got {unknown!r:.200}")
    return tuple(str(t) for t in wanted)


def build_brief(
    reader: AgentReader, *, info: ProjectInfo, identity: IdentityDoc | None,
    tuning: InjectTuning, budget: int | None = None, session: str | None = None,
    tiers: Sequence[str] = BRIEF_TIERS, agent: str = "",
) -> InjectResult:
    """Build the session brief (T0/T2/T2b/T3) within a token budget.

    Args:
        reader: SQL access to the store.
        info: the detected project (its scope plus ``global`` are read).
        identity: the identity file, if any.
        tuning: thresholds and sizes.
        budget: token budget (default ``tuning.brief_tokens``).
        session: the session being started (left out of T2b).
        tiers: which of T0, T2, T2b, T3 to build.
        agent: the agent's name (``Config.agent_name``), named in T0 and the fence.

    Returns:
        The fenced block and per-tier token counts.
    """
    scopes = visible_scopes(info.name)
    limit = tuning.brief_tokens if budget is None else int(budget)
    blocks: list[TierBlock] = []
    for name in BRIEF_TIERS:
        if name not in tiers:
            continue
        if name == "T0":
            blocks.append(tier_t0(reader, scopes, info, identity, tuning, agent))
        elif name == "T2":
            blocks.append(tier_t2(reader, scopes, tuning))
        elif name == "T2b":
            blocks.append(tier_t2b(reader, scopes, tuning, session))
        else:
            blocks.append(tier_t3(reader, scopes, tuning))
    text, fitted = assemble("brief", blocks, limit, BRIEF_SHARES,
                            {"project": info.name or "global", "source": "tideline",
                             "agent": agent or None})
    return InjectResult(kind="brief", text=text, tiers=fitted,
                        tokens=estimate_tokens(text), budget=limit, project=info.name,
                        rule=info.rule, session=session)

