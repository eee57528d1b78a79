"""Apply: one short transaction per layer that re-checks every version it relies on.

The slow work — embedding new memories and asking the novelty gate — happens
before the transaction. Inside it, each planned change is checked against the
row as it is now: a memory changed since the prompt was built (its ``version``
moved, or it was superseded) keeps its new state, and the planned change is
skipped and reported as a conflict. New memories go through the gate (a
rephrasing potentiates, a near one links); nothing is ever deleted.

A layer that would change more than ``max_share`` of the live memories stops
with :class:`~tideline.dream.errors.DreamTooLarge` unless forced. A dry run
computes the same diff and changes nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from tideline.dream.errors import DreamTooLarge
from tideline.dream.plan import EdgeChange, LayerPlan, NewMemory
from tideline.dream.settings import DreamSettings
from tideline.models import MemoryRecord, WriteResult, compute_weight
from tideline.store.cognition import CognitionStore
from tideline.store.dream import DreamStore
from tideline.write.path import PreparedWrite, gate_decision

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["apply_plan"]

_ID_CAP = 500


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _prepare(rt: Runtime, plan: LayerPlan) -> list[tuple[NewMemory, PreparedWrite | WriteResult]]:
    """Embed and gate every planned write (outside any transaction)."""
    out: list[tuple[NewMemory, PreparedWrite | WriteResult]] = []
    if not plan.writes:
        return out
    # One batch; when the embedder is down each write is gated lexically, vector pending.
    vectors = rt.guard.passages([w.draft.text for w in plan.writes])
    for item, vector in zip(plan.writes, vectors if vectors is not None
                            else [None] * len(plan.writes), strict=True):
        prepared = rt.writer.prepare(item.draft, key=None, source=plan.source, vector=vector)
        if isinstance(prepared, PreparedWrite) and item.draft.kind == "dream" \
                and prepared.nearest is not None:
            # A dream may only echo an earlier dream; it never potentiates or links real memory.
            near = rt.store.get_memories([prepared.nearest]).get(prepared.nearest)
            if near is None or near.kind != "dream":
                prepared = dataclasses.replace(prepared, nearest=None, similarity=0.0,
                                               decision="new")
        out.append((item, prepared))
    return out


def _touched(plan: LayerPlan, prepared: Iterable[tuple[NewMemory, Any]]) -> set[int]:
    """Existing memories whose row this plan would change."""
    ids = {w.memory_id for w in plan.weights} | {b.memory_id for b in plan.backfills}
    ids |= {e.dst for e in plan.edges if e.kind == "supersedes"}
    ids |= {p.nearest for _, p in prepared
            if isinstance(p, PreparedWrite) and p.decision == "potentiate" and p.nearest}
    return ids


def _guard(rt: Runtime, plan: LayerPlan, touched: set[int], settings: DreamSettings,
           force: bool, dry_run: bool) -> dict[str, Any]:
    live = DreamStore(rt.store).live_count()
    allowed = max(settings.guard_floor, int(settings.max_share * live))
    info = {"touched": len(touched), "live": live, "allowed": allowed,
            "blocked": len(touched) > allowed and not force}
    if info["blocked"] and not dry_run:
        raise DreamTooLarge(
            f"{plan.layer} would change {len(touched)} of {live} memories, more than the "
            f"allowed {settings.max_share:.0%}; review it with --dry-run and rerun with "
            "--force if it is right")
    return info


def apply_plan(rt: Runtime, plan: LayerPlan, settings: DreamSettings, *, dry_run: bool = False,
               force: bool = False, touched_before: set[int] | None = None) -> dict[str, Any]:
    """Apply (or, with ``dry_run``, only describe) one layer's plan.

    Args:
        rt: the memory's parts.
        plan: the checked plan.
        settings: the guard's share and floor.
        dry_run: describe the diff, change nothing.
        force: apply even past the share guard.
        touched_before: memories earlier layers of the same run changed (the guard counts
            the whole run).

    Returns:
        The layer's result: status, changes, conflicts, counts, tokens.

    Raises:
        DreamTooLarge: the run would change too much of the store (not with dry_run).
        StoreBusy: the write lock could not be had.
    """
    result: dict[str, Any] = {
        "layer": plan.layer, "source": plan.source, "status": "empty" if plan.empty else "",
        "changes": [], "conflicts": [], "notes": list(plan.notes), "counts": {},
        "calls": len(plan.calls), "tokens_in": sum(c.tokens_in for c in plan.calls),
        "tokens_out": sum(c.tokens_out for c in plan.calls), "touched_ids": [],
    }
    if plan.seed is not None:
        result["seed"] = plan.seed
    if plan.empty:
        result["notes"].append(plan.empty)
        return result
    prepared = _prepare(rt, plan)
    touched = _touched(plan, prepared)
    guard = _guard(rt, plan, touched | (touched_before or set()), settings, force, dry_run)
    result["guard"] = guard
    result["touched_ids"] = sorted(touched)
    if dry_run:
        _describe(rt, plan, prepared, result)
        result["status"] = "blocked" if guard["blocked"] else "dry_run"
        return result
    _Applier(rt, plan, prepared, result).run()
    result["status"] = "applied"
    return result


class _Applier:
    """The transaction of one layer."""

    def __init__(self, rt: Runtime, plan: LayerPlan,
                 prepared: list[tuple[NewMemory, PreparedWrite | WriteResult]],
                 result: dict[str, Any]) -> None:
        self.rt = rt
        self.store = rt.store
        self.plan = plan
        self.prepared = prepared
        self.result = result
        self.counts = dict.fromkeys(
            ("written", "linked", "corrected", "potentiated", "replayed", "updated", "backfilled",
             "superseded", "contradicts", "related", "profiles", "self_concept", "threads",
             "conflicts"), 0)
        self.before: dict[int, int] = {}  # version of each memory before this layer changed it
        self.rows: dict[int, MemoryRecord] = {}

    def conflict(self, op: str, reason: str, **ids: Any) -> None:
        self.counts["conflicts"] += 1
        self.result["conflicts"].append({"op": op, "reason": reason, **ids})

    def current(self, c: Any, mid: int) -> MemoryRecord | None:
        if mid not in self.rows:
            found = self.store.get_memories([mid], c).get(mid)
            if found is None:
                return None
            self.rows[mid] = found
        return self.rows[mid]

    def unchanged(self, c: Any, mid: int, expected: int, op: str) -> MemoryRecord | None:
        """The memory if it is still as planned (changes by this same layer do not count)."""
        rec = self.current(c, mid)
        if rec is None:
            self.conflict(op, f"memory #{mid} no longer exists", id=mid)
            return None
        seen = self.before.get(mid, rec.version)
        if rec.status == "superseded" and mid not in self.before:
            self.conflict(op, f"memory #{mid} was superseded since the plan", id=mid)
            return None
        if seen != expected:
            self.conflict(op, f"memory #{mid} changed since the plan (v{expected} → "
                              f"v{seen}); the planned change was skipped", id=mid)
            return None
        return rec

    def save(self, c: Any, rec: MemoryRecord) -> None:
        old = self.rows.get(rec.id)
        if old is not None:
            self.before.setdefault(rec.id, old.version)
        self.store.update_memory(c, rec)
        self.rows[rec.id] = rec

    def run(self) -> None:
        changes: list[dict[str, Any]] = self.result["changes"]
        with self.store.transaction() as c:
            now = time.time()
            for _, p in self.prepared:  # snapshot the potentiation targets' versions
                if isinstance(p, PreparedWrite) and p.nearest is not None:
                    rec = self.current(c, p.nearest)
                    if rec is not None:
                        self.before.setdefault(rec.id, rec.version)
            new_ids = self._writes(c, now, changes)
            self._backfills(c, now, changes)
            self._weights(c, now, changes)
            for edge in self.plan.edges:
                self._edge(c, edge, now, changes)
            self._facets(c, changes)
            self._threads(c, changes)
            data: dict[str, Any] = {"layer": self.plan.layer, "source": self.plan.source,
                                    "dry_run": False, **self.counts,
                                    "tokens_in": self.result["tokens_in"],
                                    "tokens_out": self.result["tokens_out"],
                                    "calls": self.result["calls"],
                                    "memory_ids": new_ids[:_ID_CAP]}
            if self.plan.seed is not None:
                data["seed"] = self.plan.seed
            if self.plan.skipped_turns:
                data["skipped_turns"] = list(dict.fromkeys(self.plan.skipped_turns))[:5_000]
            self.store.log_event(c, "dream_apply", data, now=now)
        self.result["counts"] = self.counts

    def _writes(self, c: Any, now: float, changes: list[dict[str, Any]]) -> list[int]:
        profile = self.rt.embedder.profile
        committed: list[tuple[int, str, np.ndarray]] = []
        ids: list[int] = []
        for item, p in self.prepared:
            if isinstance(p, WriteResult):
                self.counts["replayed"] += 1
                changes.append({"op": "write", "decision": "replayed", "id": p.id,
                                "kind": item.draft.kind, "scope": item.draft.scope,
                                "gesture": _short(item.draft.gesture)})
                continue
            if item.draft.kind != "dream":
                # Two drafts of the same layer can be rephrasings of each other: the gate
                # sees the ones this transaction already wrote, too.
                pv = p.vector
                for mid, scope, vec in committed:
                    if pv is None:  # stored without a vector: the batch was not embedded
                        break
                    sim = float(np.dot(vec, pv))
                    if scope == item.draft.scope and sim > p.similarity:
                        p = dataclasses.replace(p, nearest=mid, similarity=sim,
                                                decision=gate_decision(sim, profile.same,
                                                                       profile.related))
            if p.decision == "potentiate" and p.nearest is not None:
                target = self.current(c, p.nearest)
                if target is not None:
                    self.before.setdefault(target.id, target.version)
            res = self.rt.writer.commit(c, p, now)
            self.rows.pop(res.id, None)
            key = {"new": "written", "link": "linked", "correct": "corrected",
                   "potentiate": "potentiated"}[res.decision]
            self.counts[key] += 1
            if res.replayed:
                self.counts[key] -= 1
                self.counts["replayed"] += 1
            if res.decision != "potentiate" and p.vector is not None:
                committed.append((res.id, item.draft.scope, p.vector))
            ids.append(res.id)
            changes.append({"op": "write", "decision": res.decision, "id": res.id,
                            "nearest": res.nearest, "similarity": res.similarity,
                            "kind": item.draft.kind, "scope": item.draft.scope,
                            "gesture": _short(item.draft.gesture),
                            "source_links": list(item.draft.source_links)[:50],
                            "weights": {k: getattr(item.draft, k) for k in
                                        ("importance", "emotional", "recurrence", "unresolved")}})
            for other in item.link_to:
                end = self.current(c, other)
                if end is None or end.status == "superseded" or other == res.id:
                    continue
                self.store.add_edge(c, res.id, other, "related", item.link_weight, now)
                self.counts["related"] += 1
        return ids

    def _backfills(self, c: Any, now: float, changes: list[dict[str, Any]]) -> None:
        for b in self.plan.backfills:
            rec = self.unchanged(c, b.memory_id, b.expected, "backfill")
            if rec is None:
                continue
            links = tuple(dict.fromkeys((*rec.source_links, *b.source_links)))
            if links == rec.source_links:
                continue
            self.save(c, dataclasses.replace(rec, source_links=links, version=rec.version + 1,
                                             updated_at=now))
            self.counts["backfilled"] += 1
            changes.append({"op": "backfill", "id": rec.id, "source_links": list(b.source_links)})

    def _weights(self, c: Any, now: float, changes: list[dict[str, Any]]) -> None:
        for w in self.plan.weights:
            rec = self.unchanged(c, w.memory_id, w.expected, "weights")
            if rec is None:
                continue
            before = {k: getattr(rec, k) for k in w.changes}
            imp, emo, recur, unres = (w.changes.get(k, getattr(rec, k)) for k in
                                      ("importance", "emotional", "recurrence", "unresolved"))
            new = dataclasses.replace(
                rec, importance=imp, emotional=emo, recurrence=recur, unresolved=unres,
                weight=compute_weight(imp, emo, recur, unres), version=rec.version + 1,
                updated_at=now)
            self.save(c, new)
            self.counts["updated"] += 1
            changes.append({"op": "weights", "id": rec.id, "from": before, "to": w.changes,
                            "reason": w.reason})

    def _edge(self, c: Any, edge: EdgeChange, now: float, changes: list[dict[str, Any]]) -> None:
        if edge.kind == "supersedes":
            newer = self.unchanged(c, edge.src, edge.expected[0], "supersede")
            older = self.unchanged(c, edge.dst, edge.expected[1], "supersede") if newer else None
            if newer is None or older is None:
                return
            self.before.setdefault(older.id, older.version)
            self.store.set_status(c, older.id, "superseded", now)
            self.rows.pop(older.id, None)
            self.store.add_edge(c, newer.id, older.id, "supersedes", 1.0, now)
            self.counts["superseded"] += 1
            changes.append({"op": "supersede", "id": newer.id, "other": older.id,
                            "reason": edge.reason})
            return
        a, b = self.current(c, edge.src), self.current(c, edge.dst)
        for mid, rec in ((edge.src, a), (edge.dst, b)):
            if rec is None or rec.status == "superseded":
                state = "no longer exists" if rec is None else "was superseded since the plan"
                self.conflict(edge.kind, f"memory #{mid} {state}", id=edge.src, other=edge.dst)
                return
        if DreamStore(self.store).has_edge_in(c, edge.src, edge.dst, edge.kind):
            self.result["notes"].append(f"#{edge.src} and #{edge.dst} were already "
                                        f"{edge.kind}")
            return
        self.store.add_edge(c, edge.src, edge.dst, edge.kind, edge.weight, now)
        self.counts[edge.kind] += 1
        changes.append({"op": edge.kind, "id": edge.src, "other": edge.dst,
                        "weight": edge.weight, "reason": edge.reason})

    def _facets(self, c: Any, changes: list[dict[str, Any]]) -> None:
        ds = DreamStore(self.store)
        cog = CognitionStore(self.store)
        for f in self.plan.facets:
            current = ds.facet_version_in(c, f.entity, f.facet)
            name = f"{f.entity}/{f.facet}" if f.entity else f"self_concept/{f.facet}"
            op = "profile" if f.entity else "self_concept"
            if current != f.expected:
                self.conflict(op, f"{name} changed since the plan (version {f.expected} → "
                                  f"{current}); the planned text was skipped", facet=name)
                continue
            if f.entity is None:
                cog.put_self_concept(f.facet, f.content, expected_version=current)
                self.counts["self_concept"] += 1
            else:
                cog.put_profile(f.entity, f.facet, f.content, expected_version=current)
                self.counts["profiles"] += 1
            changes.append({"op": op, "facet": name, "version": current + 1,
                            "content": _short(f.content, 400)})

    def _threads(self, c: Any, changes: list[dict[str, Any]]) -> None:
        cog = CognitionStore(self.store)
        open_titles = DreamStore(self.store).thread_titles()
        for t in self.plan.threads:
            if t.title.casefold() in open_titles:
                self.result["notes"].append(f"thread {t.title!r} is already open")
                continue
            ids = [m for m in t.source_memories if self.current(c, m) is not None]
            tid = cog.add_thread(t.title, t.body, ids)
            open_titles.add(t.title.casefold())
            self.counts["threads"] += 1
            changes.append({"op": "thread", "id": tid, "title": t.title, "source_memories": ids})


def _describe(rt: Runtime, plan: LayerPlan,
              prepared: list[tuple[NewMemory, PreparedWrite | WriteResult]],
              result: dict[str, Any]) -> None:
    """The diff a dry run prints: the same entries apply would make, with current conflicts."""
    changes: list[dict[str, Any]] = result["changes"]
    conflicts: list[dict[str, Any]] = result["conflicts"]
    ids = {w.memory_id for w in plan.weights} | {b.memory_id for b in plan.backfills} | {
        e.src for e in plan.edges} | {e.dst for e in plan.edges}
    now_rows = rt.store.get_memories(ids)
    versions, selfv = DreamStore(rt.store).facet_versions()

    def moved(mid: int, expected: int) -> bool:
        rec = now_rows.get(mid)
        if rec is None or rec.status == "superseded" or rec.version != expected:
            conflicts.append({"op": "check", "id": mid, "reason": f"memory #{mid} changed "
                              "since the plan; the change would be skipped"})
            return True
        return False

    for item, p in prepared:
        decision = "replayed" if isinstance(p, WriteResult) else p.decision
        nearest = p.id if isinstance(p, WriteResult) else p.nearest
        changes.append({"op": "write", "decision": decision, "nearest": nearest,
                        "kind": item.draft.kind, "scope": item.draft.scope,
                        "gesture": _short(item.draft.gesture),
                        "source_links": list(item.draft.source_links)[:50],
                        "weights": {k: getattr(item.draft, k) for k in
                                    ("importance", "emotional", "recurrence", "unresolved")},
                        "link_to": list(item.link_to)})
    changes.extend({"op": "backfill", "id": b.memory_id, "source_links": list(b.source_links)}
                   for b in plan.backfills if not moved(b.memory_id, b.expected))
    for w in plan.weights:
        if not moved(w.memory_id, w.expected):
            rec = now_rows[w.memory_id]
            changes.append({"op": "weights", "id": w.memory_id,
                            "from": {k: getattr(rec, k) for k in w.changes}, "to": w.changes,
                            "reason": w.reason})
    for e in plan.edges:
        if e.kind == "supersedes" and (moved(e.src, e.expected[0])
                                       or moved(e.dst, e.expected[1])):
            continue
        op = "supersede" if e.kind == "supersedes" else e.kind
        changes.append({"op": op, "id": e.src, "other": e.dst, "weight": e.weight,
                        "reason": e.reason})
    for f in plan.facets:
        current = selfv.get(f.facet, 0) if f.entity is None else versions.get(
            (f.entity, f.facet), 0)
        name = f"{f.entity}/{f.facet}" if f.entity else f"self_concept/{f.facet}"
        if current != f.expected:
            conflicts.append({"op": "facet", "facet": name, "reason": f"{name} changed since "
                              "the plan; the text would be skipped"})
            continue
        changes.append({"op": "profile" if f.entity else "self_concept", "facet": name,
                        "version": current + 1, "content": _short(f.content, 400)})
    changes.extend({"op": "thread", "title": t.title, "source_memories": list(t.source_memories)}
                   for t in plan.threads)
