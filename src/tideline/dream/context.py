"""What each layer gets to see: the day's data, gathered from the store without locks.

A :class:`LayerContext` holds the filled placeholders of a layer's prompt
(one set per batch; only solidify ever needs more than one) and everything the
prompt showed — memories with their versions, raw turns, profile and
self-concept versions, the wander's seed — so that the answer can be checked
against exactly what the model saw, and apply can re-check versions.
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tideline.cognition import SelfModel
from tideline.dream.settings import DreamSettings
from tideline.models import MemoryRecord, Turn, iso
from tideline.render import fence
from tideline.scopes import visible_scopes
from tideline.store.dream import DreamStore

if TYPE_CHECKING:
    from tideline.runtime import Parts
    from tideline.sleep.scan import Chunk

__all__ = ["LayerContext", "gather"]

DAY = 86_400.0
_NOTHING = "(none)"


@dataclass
class LayerContext:
    """Everything one layer's prompt showed.

    Attributes:
        layer: the layer.
        scope: the scope asked for (None: every scope).
        batches: placeholder values of each prompt (solidify may need several).
        memories: every memory shown, by id, as it was when gathered.
        turns: every raw turn shown, by id.
        batch_turns: the turn ids of each batch.
        profile_versions: ``(entity, facet) → version`` as shown.
        self_versions: ``facet → version`` as shown.
        seed: the memory the wander starts from.
        starts: ids a wander connection may start from (the seed and its near neighbours).
        dream_scope: the scope the symbolic dream is written to.
        empty: why there is nothing to do (no LLM call is made), or None.
    """

    layer: str
    scope: str | None
    batches: list[dict[str, str]] = field(default_factory=list)
    memories: dict[int, MemoryRecord] = field(default_factory=dict)
    turns: dict[int, Turn] = field(default_factory=dict)
    batch_turns: list[frozenset[int]] = field(default_factory=list)
    profile_versions: dict[tuple[str, str], int] = field(default_factory=dict)
    self_versions: dict[str, int] = field(default_factory=dict)
    seed: int | None = None
    starts: frozenset[int] = frozenset()
    dream_scope: str | None = None
    empty: str | None = None

    @property
    def scopes(self) -> list[str] | None:
        """The scopes the layer looks at: the project with ``global``, or None for all."""
        return None if self.scope is None else visible_scopes(self.scope)


def gather(rt: Parts, layer: str, settings: DreamSettings, *, scope: str | None = None,
           now: float | None = None) -> LayerContext:
    """Collect the data of one layer's prompt.

    Args:
        rt: the memory's parts (a Runtime, or the facade itself).
        layer: solidify, comb, wander or dream.
        settings: bounds (how many memories, how many characters, …).
        scope: one project (with ``global``), or None for every scope.
        now: the time to treat as now (tests).

    Returns:
        The context; ``empty`` says why when there is nothing to do.
    """
    now = time.time() if now is None else now
    ctx = LayerContext(layer=layer, scope=scope)
    gatherer = {"solidify": _solidify, "comb": _comb, "wander": _wander, "dream": _dream}[layer]
    gatherer(rt, ctx, settings, now)
    return ctx


# -- rendering helpers ----------------------------------------------------------------------


def _clip(text: str, cap: int) -> str:
    text = text.strip()
    if len(text) <= cap:
        return text
    return text[:cap].rstrip() + f" …[{len(text) - cap} more characters in the store]"


def memory_block(rec: MemoryRecord, *, attention: int | None = None, cap: int = 1_200) -> str:
    """One memory for a prompt: a header line with id, version, kind, scope, weights, then text."""
    when = (iso(rec.event_time or rec.recorded_at) or "")[:16].replace("T", " ")
    head = [f"#{rec.id} v{rec.version}", f"{rec.kind}@{rec.scope}", when,
            f"imp {rec.importance} emo {rec.emotional} rec {rec.recurrence} "
            f"unres {rec.unresolved}", rec.status]
    if rec.tags:
        head.append("tags: " + ", ".join(rec.tags[:12]))
    if rec.related_entities:
        head.append("entities: " + ", ".join(rec.related_entities[:12]))
    if rec.entities_role:
        head.append(f"roles: {rec.entities_role[:200]}")
    if rec.source_links:
        head.append(f"{len(rec.source_links)} source turn(s)")
    if attention is not None:
        head.append(f"recalled {attention}×")
    lines = [" · ".join(h for h in head if h), "  " + _clip(rec.gesture, cap)]
    if rec.context:
        lines.append("  Context: " + _clip(rec.context, cap // 2))
    if rec.cognition_direction:
        lines.append("  Direction: " + _clip(rec.cognition_direction, cap // 2))
    return "\n".join(lines)


def _memories_text(label: str, recs: list[MemoryRecord],
                   attention: dict[int, int] | None = None) -> str:
    if not recs:
        return _NOTHING
    body = "\n\n".join(memory_block(r, attention=None if attention is None
                                    else attention.get(r.id, 0)) for r in recs)
    return fence(label, body)


def _facets_text(rt: Parts, ctx: LayerContext, entities: set[str], *, budget: int,
                 limit: int = 40) -> str:
    rows = SelfModel(rt.store, rt.config.caps).profiles()
    ctx.profile_versions = {(r["entity"], r["facet"]): int(r["version"]) for r in rows}
    # The people and systems of the memories shown come first; the rest fill up to the cap.
    # A facet is shown whole (up to the 4,000 characters an answer may write back).
    rows.sort(key=lambda r: (r["entity"] not in entities, r["entity"], r["facet"]))
    lines: list[str] = []
    used = 0
    for r in rows[:limit]:
        line = (f"{r['entity']} / {r['facet']} (version {r['version']}): "
                f"{_clip(r['content'], 4_000)}")
        if lines and used + len(line) > budget:
            break
        lines.append(line)
        used += len(line)
    if not lines:
        return _NOTHING + " — no profiles yet"
    body = "\n".join(lines)
    more = f"\n({len(rows) - len(lines)} more facets not shown)" if len(rows) > len(lines) \
        else ""
    return fence("profiles", body) + more


def _self_text(rt: Parts, ctx: LayerContext) -> str:
    rows = SelfModel(rt.store, rt.config.caps).self_concept()
    ctx.self_versions = {r["facet"]: int(r["version"]) for r in rows}
    if not rows:
        return _NOTHING + " — no self-concept yet (facets fact, terrain, reflection; version 0)"
    return fence("self_concept", "\n".join(
        f"{r['facet']} (version {r['version']}): {_clip(r['content'], 4_000)}" for r in rows))


def _dreams_text(rt: Parts, settings: DreamSettings, scopes: list[str] | None) -> str:
    dreams = DreamStore(rt.store).by_kind("dream", scopes=scopes, limit=settings.recent_dreams)
    if not dreams:
        return _NOTHING
    body = "\n\n".join(
        f"dream #{d.id}, {(iso(d.recorded_at) or '')[:10]}: {_clip(d.context, 1_200)}\n"
        f"  Reflection: {_clip(d.gesture, 600)}\n  {d.cognition_direction}" for d in dreams)
    return fence("recent_dreams", body)


def _remember(ctx: LayerContext, recs: list[MemoryRecord]) -> None:
    for r in recs:
        ctx.memories.setdefault(r.id, r)


# -- solidify -------------------------------------------------------------------------------


def _solidify(rt: Parts, ctx: LayerContext, settings: DreamSettings, now: float) -> None:
    from tideline.sleep.scan import scan_unindexed

    ds = DreamStore(rt.store)
    scopes = ctx.scopes
    scan = scan_unindexed(rt.store, scopes=scopes, max_memories=settings.solidify_unlinked)
    turns_all = [t for ch in scan.track_b for t in ch.turns]
    since = min((t.recorded_at for t in turns_all), default=now)
    # The scanner leaves out linked turns; turns an earlier solidify judged not worth
    # keeping are not asked about again either.
    done = ds.reviewed_turns(since)
    unlinked = list(scan.track_a)
    budget = settings.prompt_chars
    batches: list[list[tuple[Chunk, list[Turn]]]] = []
    current: list[tuple[Chunk, list[Turn]]] = []
    used = sum(len(m.gesture[:300]) + 80 for m in unlinked)
    for ch in scan.track_b:
        group: list[Turn] = []
        for t in ch.turns:
            if t.id in done:
                continue
            size = min(len(t.text), settings.turn_chars) + 80
            if used + size > budget and (current or group):
                if group:
                    current.append((ch, group))
                    group = []
                batches.append(current)
                current, used = [], 0
            group.append(t)
            used += size
        if group:
            current.append((ch, group))
    if current:
        batches.append(current)
    if not batches and not unlinked:
        ctx.empty = "no unindexed conversation to solidify"
        return
    _remember(ctx, unlinked)
    for batch in batches:
        ids = frozenset(t.id for _, turns in batch for t in turns)
        ctx.turns.update({t.id: t for _, turns in batch for t in turns})
        ctx.batch_turns.append(ids)
    verbatim = len(batches) <= 1 and not (done & {t.id for t in turns_all})
    if verbatim:  # the common daily case: the scanner's own Markdown, as it is
        ctx.batches.append({"scan": fence("unindexed_context", scan.markdown)})
        ctx.batch_turns[:] = [frozenset(ctx.turns)]
        return
    for number, batch in enumerate(batches, start=1):
        text = _scan_markdown(unlinked if number == 1 else [], batch, settings.turn_chars)
        note = (f"\n(Batch {number} of {len(batches)}; the other turns are asked about "
                "separately.)")
        ctx.batches.append({"scan": fence("unindexed_context", text) + note})


def _scan_markdown(unlinked: list[MemoryRecord], batch: list[tuple[Chunk, list[Turn]]],
                   cap: int) -> str:
    """One batch in the scanner's layout (used when the backlog needs several prompts)."""
    out = ["# Unindexed context", "", f"## Track A — memories without source_links "
           f"({len(unlinked)})", ""]
    out += [f"- memory #{m.id} · {m.scope} · {m.kind} · {iso(m.event_time or m.recorded_at)}: "
            f"{_clip(m.gesture.replace(chr(10), ' '), 300)}" for m in unlinked] or ["_None._"]
    n = sum(len(turns) for _, turns in batch)
    out += ["", f"## Track B — raw turns ({n} turns in {len(batch)} chunks)", ""]
    for i, (ch, turns) in enumerate(batch, 1):
        first, last = turns[0], turns[-1]
        out += [f"### Chunk {i} — session `{ch.session}` · scope {ch.scope} · "
                f"{iso(first.timestamp or first.recorded_at)} → "
                f"{iso(last.timestamp or last.recorded_at)} ({len(turns)} turns)", ""]
        for t in turns:
            out.append(f"turn {t.id} · {iso(t.timestamp or t.recorded_at)} · "
                       f"{t.speaker or t.role}:")
            out += ["> " + line for line in _clip(t.text, cap).splitlines() or [""]]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- comb -----------------------------------------------------------------------------------


def _comb(rt: Parts, ctx: LayerContext, settings: DreamSettings, now: float) -> None:
    ds = DreamStore(rt.store)
    scopes = ctx.scopes
    since = ds.last_applied("comb") or now - settings.comb_days * DAY
    cap = settings.comb_memories
    recent = ds.recent(since, scopes=scopes, limit=max(1, cap * 2 // 3),
                       exclude_kinds=("dream",))
    if not recent:
        ctx.empty = "no memory recorded or changed since the last comb"
        return
    chosen: dict[int, MemoryRecord] = {r.id: r for r in recent}
    # Older neighbours of what is new: where conflicts and re-weighing usually hide.
    vectors = rt.store.memory_vectors(recent[:20], rt.embedder.dim)
    for r in recent[:20]:
        vec = vectors.get(r.id)
        if vec is None or len(chosen) >= cap:
            continue
        near = rt.vectors.search("m", visible_scopes(r.scope), vec, 4)
        found = rt.store.get_memories([k for k in near if k not in chosen])
        for k in sorted(found, key=lambda k: -near[k])[:3]:
            if found[k].status != "superseded" and len(chosen) < cap:
                chosen[k] = found[k]
    for r in ds.heaviest(scopes=scopes, limit=10, exclude_kinds=("dream",),
                         exclude_ids=chosen, min_unresolved=4):
        if len(chosen) < cap:
            chosen[r.id] = r
    corrections = _corrections(rt, chosen)
    recs = sorted(chosen.values(), key=lambda r: (r.scope, r.recorded_at, r.id))
    _remember(ctx, recs)
    week = now - 7 * DAY
    attention = ds.attention(week, ids=list(chosen), limit=len(chosen))
    top = ds.attention(week, limit=10, scopes=scopes)
    top_recs = rt.store.get_memories(top)
    top_lines = [f"#{k} recalled {n}× — {_clip(top_recs[k].gesture, 120)}"
                 for k, n in top.items() if k in top_recs]
    entities = {e for r in recs for e in r.related_entities}
    threads = SelfModel(rt.store, rt.config.caps).threads("open")[:20]
    thread_text = fence("threads", "\n".join(
        f"thread {t['id']}: {t['title']} — {_clip(t['body'], 300)} (from "
        f"{', '.join('#' + str(i) for i in t['source_memories'][:10])})" for t in threads)
    ) if threads else _NOTHING
    ctx.batches.append({
        "now": iso(now) or "",
        "memories": _memories_text("memories", recs, attention) + corrections,
        "attention": "\n".join(top_lines) if top_lines else "(no recalls in the last 7 days)",
        "profiles": _facets_text(rt, ctx, entities, budget=settings.prompt_chars // 3),
        "self_concept": _self_text(rt, ctx),
        "threads": thread_text,
        "dreams": _dreams_text(rt, settings, scopes),
    })


def _corrections(rt: Parts, chosen: dict[int, MemoryRecord]) -> str:
    """The write path's corrections among ``chosen`` (``updates`` edges: a new memory
    states an older one with another value), both ends brought into ``chosen``, as lines
    for the comb's conflict detection; empty when there are none."""
    edges = rt.store.edges_of(list(chosen), ["updates"])
    missing = rt.store.get_memories([i for e in edges for i in (e.src, e.dst)
                                     if i not in chosen])
    chosen.update({k: r for k, r in missing.items() if r.status != "superseded"})
    lines = [f"#{e.src} updates #{e.dst}" for e in edges if e.src in chosen and e.dst in chosen]
    if not lines:
        return ""
    return ("\n\nCorrections the write path kept (the newer memory states the older one "
            "with another value; both are stored — a conflict to settle, usually "
            "`supersedes` from the newer one):\n" + "\n".join(lines))


# -- wander ---------------------------------------------------------------------------------


def _rng(rt: Parts, now: float, salt: str) -> random.Random:
    """A generator seeded by namespace and day: the same prompt all day, a new one tomorrow."""
    day = int(now // DAY)
    digest = hashlib.sha256(f"{rt.store.namespace}:{day}:{salt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))  # noqa: S311 - not for secrets


def _wander(rt: Parts, ctx: LayerContext, settings: DreamSettings, now: float) -> None:
    ds = DreamStore(rt.store)
    scopes = ctx.scopes
    resting = ds.wander_seeds(now - settings.wander_rest_days * DAY)
    top = ds.heaviest(scopes=scopes, limit=1, exclude_kinds=("dream",), exclude_ids=resting)
    if not top:
        ctx.empty = "no memory to start a wander from"
        return
    seed = top[0]
    pool_scopes = (visible_scopes(seed.scope) if seed.scope != "global"
                   else scopes)
    pool = [i for i in ds.live_ids(scopes=pool_scopes, limit=20_000,
                                   exclude_kinds=("dream",)) if i != seed.id]
    if len(pool) < 2:
        ctx.empty = "too few memories to wander among"
        return
    rng = _rng(rt, now, f"wander:{seed.id}")
    sample = rng.sample(pool, min(len(pool), 1_000))
    records = rt.store.get_memories(sample)
    vectors = rt.store.memory_vectors([seed, *records.values()], rt.embedder.dim)
    seed_vec = vectors.get(seed.id)
    keys = [k for k in sample if k in vectors and k in records]
    if seed_vec is None or not keys:
        ctx.empty = "no embedded memories to wander among"
        return
    sims = dict(zip(keys, (np.stack([vectors[k] for k in keys]) @ seed_vec).tolist(),
                    strict=True))
    ranked = sorted(keys, key=lambda k: -sims[k])
    near = ranked[:3]
    shown = set(near)
    marks = {*(e.casefold() for e in seed.related_entities), *(t.casefold() for t in seed.tags)}
    median = sims[ranked[len(ranked) // 2]]
    bridges = [k for k in sorted(keys, key=lambda k: sims[k]) if k not in shown
               and sims[k] <= median and marks & {
                   *(e.casefold() for e in records[k].related_entities),
                   *(t.casefold() for t in records[k].tags)}][:3]
    shown |= set(bridges)
    far = [k for k in sorted(keys, key=lambda k: sims[k]) if k not in shown][:settings.wander_far]
    shown |= set(far)
    quiet_pool = [k for k in ds.quiet_ids(now - 30 * DAY, scopes=pool_scopes, limit=200,
                                          exclude_kinds=("dream",))
                  if k not in shown and k != seed.id]
    quiet_ids = rng.sample(quiet_pool, min(len(quiet_pool), settings.wander_random))
    quiet = rt.store.get_memories(quiet_ids)
    ctx.seed = seed.id
    ctx.starts = frozenset([seed.id, *near])
    _remember(ctx, [seed, *(records[k] for k in near + bridges + far), *quiet.values()])

    def block(ids: list[int], label: str) -> str:
        recs = [ctx.memories[k] for k in ids if k in ctx.memories]
        if not recs:
            return _NOTHING
        body = "\n\n".join(
            memory_block(r) + (f"\n  (similarity to the start {sims[r.id]:.2f})"
                               if r.id in sims else "") for r in recs)
        return fence(label, body)

    ctx.batches.append({
        "seed": fence("seed", memory_block(seed)),
        "near": block(near, "near"),
        "bridges": block(bridges, "bridges"),
        "far": block(far, "far"),
        "quiet": block(quiet_ids, "rarely_recalled"),
    })


# -- dream ----------------------------------------------------------------------------------


def _dream(rt: Parts, ctx: LayerContext, settings: DreamSettings, now: float) -> None:
    ds = DreamStore(rt.store)
    scopes = ctx.scopes
    since = max(now - DAY, ds.last_applied("dream") or 0.0)
    day = ds.recent(since, scopes=scopes, limit=settings.dream_memories * 3,
                    exclude_kinds=("dream",))
    if not day:
        ctx.empty = "no memories from the day to dream about"
        return
    # One dream, in one scope: the project that weighed most today (global joins any).
    weight: dict[str, float] = {}
    for r in day:
        weight[r.scope] = weight.get(r.scope, 0.0) + r.weight + 0.01
    projects = {s: w for s, w in weight.items() if s != "global"}
    target = ctx.scope or (max(sorted(projects), key=lambda s: projects[s]) if projects
                           else "global")
    allowed = {target, "global"}
    recs = sorted((r for r in day if r.scope in allowed), key=lambda r: (-r.weight, r.id))
    recs = recs[:settings.dream_memories]
    ctx.dream_scope = target
    _remember(ctx, recs)
    ctx.batches.append({
        "memories": _memories_text("memories_of_the_day", recs),
        "self_concept": _self_text(rt, ctx),
        "dreams": _dreams_text(rt, settings, sorted(allowed)),
    })

