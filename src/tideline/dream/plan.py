"""Plan: ask the model (outside any transaction) and turn its answer into checked actions.

Every call is journaled as a ``dream_call`` event (layer, provider, model,
tokens in/out, duration, ok, attempt). An answer that is not valid JSON, is
truncated, breaks the layer's schema, or names memories, turns or facets the
prompt did not show is sent back once with the problems listed; a second bad
answer raises :class:`~tideline.dream.errors.LLMOutputInvalid` and nothing of
the layer is applied.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tideline.dream.context import LayerContext
from tideline.dream.errors import LLMOutputInvalid, ProviderError
from tideline.dream.prompts import prompts_of
from tideline.dream.providers import Message, Provider, estimate_tokens
from tideline.dream.schemas import SCHEMAS, parse_answer, validate
from tideline.errors import InvalidInput
from tideline.models import MemoryRecord, Turn
from tideline.write.validate import clean_name, clean_text, parse_time

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = [
    "Backfill", "CallRecord", "EdgeChange", "FacetChange", "LayerPlan", "NewMemory",
    "ThreadDraft", "WeightChange", "interpret", "plan_layer",
]

WEIGHTS = ("importance", "emotional", "recurrence", "unresolved")


@dataclass(frozen=True)
class CallRecord:
    """One LLM call, as journaled."""

    layer: str
    provider: str
    model: str
    tokens_in: int
    tokens_out: int
    duration_ms: float
    ok: bool
    attempt: int
    estimated: bool = False
    error: str = ""

    def data(self, dry_run: bool) -> dict[str, Any]:
        """The journal event's data."""
        out: dict[str, Any] = {
            "layer": self.layer, "provider": self.provider, "model": self.model,
            "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
            "duration_ms": round(self.duration_ms, 1), "ok": self.ok, "attempt": self.attempt,
        }
        if self.estimated:
            out["estimated"] = True
        if self.error:
            out["error"] = self.error[:300]
        if dry_run:
            out["dry_run"] = True
        return out


@dataclass(frozen=True)
class NewMemory:
    """A memory to write through the novelty gate, and existing memories to link it to."""

    draft: MemoryRecord
    link_to: tuple[int, ...] = ()
    link_weight: float = 0.5


@dataclass(frozen=True)
class WeightChange:
    """New 1–5 weights for an existing memory, valid only if it is still at ``expected``."""

    memory_id: int
    expected: int
    changes: dict[str, int]
    reason: str = ""


@dataclass(frozen=True)
class Backfill:
    """Raw-turn ids to add to an existing memory's source_links."""

    memory_id: int
    expected: int
    source_links: tuple[int, ...]


@dataclass(frozen=True)
class EdgeChange:
    """A ``contradicts``/``related`` edge, or a supersession (``dst`` becomes history)."""

    kind: str
    src: int
    dst: int
    weight: float = 1.0
    reason: str = ""
    expected: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class FacetChange:
    """A profile facet (``entity`` set) or self-concept facet, valid only at ``expected``."""

    entity: str | None
    facet: str
    content: str
    expected: int


@dataclass(frozen=True)
class ThreadDraft:
    """A thread to open."""

    title: str
    body: str
    source_memories: tuple[int, ...]


@dataclass
class LayerPlan:
    """What one layer wants to change, checked against what its prompt showed."""

    layer: str
    scope: str | None
    source: str = "dream"
    writes: list[NewMemory] = field(default_factory=list)
    weights: list[WeightChange] = field(default_factory=list)
    backfills: list[Backfill] = field(default_factory=list)
    edges: list[EdgeChange] = field(default_factory=list)
    facets: list[FacetChange] = field(default_factory=list)
    threads: list[ThreadDraft] = field(default_factory=list)
    skipped_turns: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    seed: int | None = None
    empty: str | None = None

    def merge(self, other: LayerPlan) -> None:
        """Fold another batch's plan of the same layer into this one."""
        self.writes += other.writes
        self.weights += other.weights
        self.backfills += other.backfills
        self.edges += other.edges
        self.facets += other.facets
        self.threads += other.threads
        self.skipped_turns += other.skipped_turns
        self.notes += other.notes


Journal = Callable[[CallRecord], None]


def plan_layer(rt: Runtime, ctx: LayerContext, provider: Provider, *,
               journal: Journal) -> LayerPlan:
    """Ask the model about every batch of ``ctx`` and check the answers.

    Args:
        rt: the memory's parts (read only here).
        ctx: the gathered context.
        provider: where answers come from.
        journal: called with each call's record right after it returns.

    Returns:
        The checked plan (empty when the context had nothing to do).

    Raises:
        LLMOutputInvalid: an answer was invalid twice.
        ProviderError: the provider failed.
    """
    plan = LayerPlan(layer=ctx.layer, scope=ctx.scope, seed=ctx.seed, empty=ctx.empty)
    if ctx.empty:
        return plan
    schema = SCHEMAS[ctx.layer]
    for index, prompt in enumerate(prompts_of(ctx)):
        messages = [Message("user", prompt)]
        for attempt in (1, 2):
            started = time.monotonic()
            try:
                answer = provider.complete(messages, schema=schema,
                                           schema_name=f"tideline_{ctx.layer}")
            except ProviderError as exc:
                journal(CallRecord(ctx.layer, provider.name, provider.model, 0, 0,
                                   (time.monotonic() - started) * 1000, False, attempt,
                                   error=str(exc)))
                raise
            elapsed = (time.monotonic() - started) * 1000
            data, problems = parse_answer(answer.text, truncated=answer.truncated)
            part = LayerPlan(layer=ctx.layer, scope=ctx.scope)
            if not problems:
                part, problems = interpret(rt, ctx, data, batch=index)
            journal(CallRecord(ctx.layer, provider.name, answer.model or provider.model,
                               answer.tokens_in, answer.tokens_out, elapsed, not problems,
                               attempt, answer.estimated, "; ".join(problems[:3])))
            plan.calls.append(CallRecord(ctx.layer, provider.name,
                                         answer.model or provider.model, answer.tokens_in,
                                         answer.tokens_out, elapsed, not problems, attempt,
                                         answer.estimated))
            if not problems:
                plan.merge(part)
                break
            if attempt == 2:
                raise LLMOutputInvalid(ctx.layer, problems, attempts=2)
            messages = [*messages, Message("assistant", answer.text[:8_000] or "(empty)"),
                        Message("user", retry_prompt(problems))]
    return plan


def retry_prompt(problems: list[str]) -> str:
    """The follow-up that sends a rejected answer's problems back to the model."""
    listed = "\n".join(f"- {p}" for p in problems[:20])
    return ("Your answer was rejected and nothing was stored. Problems:\n"
            f"{listed}\n\nAnswer again with one corrected JSON object that matches the schema, "
            "using only ids shown in the prompt, and nothing else.")


def agent_call(ctx: LayerContext, payload_text: str) -> CallRecord:
    """The journal record of an agent-driven answer (its tokens are estimates)."""
    prompt = "\n".join(prompts_of(ctx)[:1])
    return CallRecord(ctx.layer, "agent", "agent", estimate_tokens(prompt),
                      estimate_tokens(payload_text), 0.0, True, 1, estimated=True)


# -- interpretation -------------------------------------------------------------------------


class _Known:
    """Resolves ids named in an answer: against the prompt, or (agent-driven) the store."""

    def __init__(self, rt: Runtime, ctx: LayerContext, agent: bool) -> None:
        self.rt = rt
        self.ctx = ctx
        self.agent = agent

    def _in_scope(self, scope: str) -> bool:
        # An agent answering for one project names only its own and global items; an id
        # of another project is unknown, exactly as if it did not exist.
        return self.ctx.scope is None or scope in (self.ctx.scope, "global")

    def memory(self, mid: int) -> MemoryRecord | None:
        rec = self.ctx.memories.get(mid)
        if rec is None and self.agent:
            rec = self.rt.store.get_memories([mid]).get(mid)
            if rec is not None and not self._in_scope(rec.scope):
                rec = None
        return rec

    def turn(self, tid: int, batch: int) -> Turn | None:
        if self.agent:
            found = self.ctx.turns.get(tid) or self.rt.store.get_turns([tid]).get(tid)
            return found if found is not None and self._in_scope(found.scope) else None
        if batch < len(self.ctx.batch_turns) and tid not in self.ctx.batch_turns[batch]:
            return None
        return self.ctx.turns.get(tid)

    def version(self, rec: MemoryRecord, echoed: Any) -> int:
        # The snapshot the prompt showed is authoritative; an agent's echo of ``vN`` is
        # the best it can tell us about what it saw.
        if self.agent and isinstance(echoed, int):
            return echoed
        return rec.version


def _scopes_meet(a: str, b: str) -> bool:
    return a == b or "global" in (a, b)


def interpret(rt: Runtime, ctx: LayerContext, data: Any, *, batch: int = 0,
              agent: bool = False) -> tuple[LayerPlan, list[str]]:
    """Check an answer against the schema and the prompt, and turn it into a plan.

    Args:
        rt: the memory's parts.
        ctx: what the prompt showed.
        data: the parsed answer.
        batch: which prompt of ``ctx`` was answered.
        agent: the answer came from an agent; ids are checked against the store.

    Returns:
        The plan and the problems (the plan is only meaningful without problems).
    """
    plan = LayerPlan(layer=ctx.layer, scope=ctx.scope, seed=ctx.seed,
                     source="agent" if agent else "dream")
    problems = validate(data, SCHEMAS[ctx.layer])
    if problems:
        return plan, problems
    known = _Known(rt, ctx, agent)
    {"solidify": _solidify, "comb": _comb, "wander": _wander, "dream": _dream}[ctx.layer](
        rt, known, data, plan, problems, batch)
    return plan, problems[:20]


def _live(known: _Known, mid: int, where: str, problems: list[str]) -> MemoryRecord | None:
    rec = known.memory(mid)
    if rec is None:
        shown = "does not exist" if known.agent else "was not shown in the prompt"
        problems.append(f"{where}: memory #{mid} {shown}")
        return None
    if rec.status == "superseded":
        problems.append(f"{where}: memory #{mid} is superseded (history, not to be changed)")
        return None
    return rec


def _draft(rt: Runtime, where: str, problems: list[str], **fields: Any) -> MemoryRecord | None:
    try:
        return rt.draft(**fields)
    except InvalidInput as exc:
        problems.append(f"{where}: {exc}")
        return None


def _solidify(rt: Runtime, known: _Known, data: dict[str, Any], plan: LayerPlan,
              problems: list[str], batch: int) -> None:
    def turns_of(ids: list[int], where: str) -> list[Turn] | None:
        found = []
        for tid in dict.fromkeys(ids):
            t = known.turn(tid, batch)
            if t is None:
                problems.append(f"{where}: turn {tid} "
                                + ("does not exist" if known.agent else
                                   "was not shown in the prompt"))
                return None
            found.append(t)
        return found

    for i, item in enumerate(data["memories"]):
        where = f"$.memories[{i}]"
        turns = turns_of(item["source_links"], f"{where}.source_links")
        if turns is None:
            continue
        scopes = sorted({t.scope for t in turns})
        if len(scopes) > 1:
            problems.append(f"{where}.source_links: turns from different scopes "
                            f"({', '.join(scopes)}); one memory belongs to one scope")
            continue
        event_time: Any = item.get("event_time")
        if event_time is not None:
            try:
                parse_time(event_time, "event_time")
            except InvalidInput as exc:
                problems.append(f"{where}.event_time: {exc}")
                continue
        else:
            times = [t.timestamp for t in turns if t.timestamp is not None]
            event_time = min(times) if times else None
        draft = _draft(
            rt, where, problems, gesture=item["gesture"], context=item.get("context", ""),
            cognition_direction=item.get("cognition_direction", ""), kind=item["kind"],
            scope=scopes[0], tags=item.get("tags"), entities_role=item.get("entities_role", ""),
            related_entities=item.get("related_entities"),
            source_links=[t.id for t in turns], importance=item["importance"],
            emotional=item["emotional"], recurrence=item["recurrence"],
            unresolved=item["unresolved"], event_time=event_time)
        if draft is not None:
            plan.writes.append(NewMemory(draft))
    for i, item in enumerate(data.get("backfill", [])):
        where = f"$.backfill[{i}]"
        rec = _live(known, item["memory_id"], where, problems)
        turns = turns_of(item["source_links"], f"{where}.source_links")
        if rec is None or turns is None:
            continue
        if any(not _scopes_meet(t.scope, rec.scope) for t in turns):
            problems.append(f"{where}: turns from another scope than memory #{rec.id}")
            continue
        plan.backfills.append(Backfill(rec.id, known.version(rec, item.get("version")),
                                       tuple(t.id for t in turns)))
    for i, item in enumerate(data.get("skipped", [])):
        turns = turns_of(item["source_links"], f"$.skipped[{i}].source_links")
        if turns is not None:
            plan.skipped_turns += [t.id for t in turns]
            if item.get("reason"):
                plan.notes.append(f"skipped turns {[t.id for t in turns]}: {item['reason']}")


def _comb(rt: Runtime, known: _Known, data: dict[str, Any], plan: LayerPlan,
          problems: list[str], batch: int) -> None:
    caps = rt.config.caps
    seen: set[int] = set()
    for i, item in enumerate(data["weights"]):
        where = f"$.weights[{i}]"
        rec = _live(known, item["memory_id"], where, problems)
        if rec is None:
            continue
        if rec.id in seen:
            problems.append(f"{where}: memory #{rec.id} is re-weighed twice")
            continue
        seen.add(rec.id)
        given = {k: int(item[k]) for k in WEIGHTS if k in item}
        if not given:
            problems.append(f"{where}: names no weight to change")
            continue
        changes = {k: v for k, v in given.items() if getattr(rec, k) != v}
        if changes:
            plan.weights.append(WeightChange(rec.id, known.version(rec, item.get("version")),
                                             changes, str(item.get("reason", ""))))
    pairs: set[frozenset[int]] = set()
    for i, item in enumerate(data["conflicts"]):
        where = f"$.conflicts[{i}]"
        a = _live(known, item["memory_id"], where, problems)
        b = _live(known, item["other_id"], where, problems)
        if a is None or b is None:
            continue
        if a.id == b.id:
            problems.append(f"{where}: a memory cannot conflict with itself")
            continue
        if not _scopes_meet(a.scope, b.scope):
            problems.append(f"{where}: #{a.id} ({a.scope}) and #{b.id} ({b.scope}) are in "
                            "different projects")
            continue
        pair = frozenset((a.id, b.id))
        if pair in pairs:
            problems.append(f"{where}: #{a.id} and #{b.id} are paired twice")
            continue
        pairs.add(pair)
        kind = "supersedes" if item["relation"] == "supersedes" else "contradicts"
        plan.edges.append(EdgeChange(kind, a.id, b.id, 1.0, item["reason"],
                                     (a.version, b.version)))
    superseded = [e.dst for e in plan.edges if e.kind == "supersedes"]
    problems.extend(f"$.conflicts: #{e.src} both supersedes and is superseded"
                    for e in plan.edges if e.kind == "supersedes" and e.src in superseded)
    facets: set[tuple[str | None, str]] = set()
    for i, item in enumerate(data["profiles"]):
        where = f"$.profiles[{i}]"
        try:
            entity = clean_name(item["entity"], "entity", caps)
            content = clean_text(item["content"], "content", caps.field_chars, required=True)
        except InvalidInput as exc:
            problems.append(f"{where}: {exc}")
            continue
        if (entity, item["facet"]) in facets:
            problems.append(f"{where}: {entity}/{item['facet']} is written twice")
            continue
        facets.add((entity, item["facet"]))
        shown = known.ctx.profile_versions.get((entity, item["facet"]), 0)
        echoed = item.get("version")
        expected = echoed if known.agent and isinstance(echoed, int) else shown
        plan.facets.append(FacetChange(entity, item["facet"], content, expected))
    for i, item in enumerate(data["self_concept"]):
        where = f"$.self_concept[{i}]"
        try:
            content = clean_text(item["content"], "content", caps.field_chars, required=True)
        except InvalidInput as exc:
            problems.append(f"{where}: {exc}")
            continue
        if (None, item["facet"]) in facets:
            problems.append(f"{where}: self_concept/{item['facet']} is written twice")
            continue
        facets.add((None, item["facet"]))
        shown = known.ctx.self_versions.get(item["facet"], 0)
        echoed = item.get("version")
        expected = echoed if known.agent and isinstance(echoed, int) else shown
        plan.facets.append(FacetChange(None, item["facet"], content, expected))
    for i, item in enumerate(data["threads"]):
        where = f"$.threads[{i}]"
        ids = []
        for mid in dict.fromkeys(item["source_memories"]):
            rec = known.memory(mid)
            if rec is None:
                problems.append(f"{where}.source_memories: memory #{mid} "
                                + ("does not exist" if known.agent else
                                   "was not shown in the prompt"))
            else:
                ids.append(rec.id)
        try:
            title = clean_text(item["title"], "title", caps.name_chars, required=True)
            body = clean_text(item.get("body", ""), "body", caps.field_chars)
        except InvalidInput as exc:
            problems.append(f"{where}: {exc}")
            continue
        plan.threads.append(ThreadDraft(title, body, tuple(ids)))


def _links_of(recs: list[MemoryRecord], cap: int) -> list[int]:
    return list(dict.fromkeys(t for r in recs for t in r.source_links))[:cap]


def _wander(rt: Runtime, known: _Known, data: dict[str, Any], plan: LayerPlan,
            problems: list[str], batch: int) -> None:
    connections = data.get("connections") or []
    reflection = data.get("reflection")
    if not data["found"]:
        if connections or reflection:
            problems.append("$.found is false, but connections or a reflection were given")
        plan.notes.append("nothing found" + (f": {data['note']}" if data.get("note") else ""))
        return
    if not connections and not reflection:
        problems.append("$.found is true, but neither connections nor a reflection were given")
        return
    ends: list[MemoryRecord] = []
    for i, item in enumerate(connections):
        where = f"$.connections[{i}]"
        a = _live(known, item["from_id"], where, problems)
        b = _live(known, item["to_id"], where, problems)
        if a is None or b is None:
            continue
        if not known.agent and a.id not in known.ctx.starts:
            problems.append(f"{where}.from_id: #{a.id} is neither the starting memory nor one "
                            "of its close neighbours")
            continue
        if a.id == b.id:
            problems.append(f"{where}: a memory cannot connect to itself")
            continue
        if not _scopes_meet(a.scope, b.scope):
            problems.append(f"{where}: #{a.id} ({a.scope}) and #{b.id} ({b.scope}) are in "
                            "different projects")
            continue
        plan.edges.append(EdgeChange("related", a.id, b.id, round(float(item["strength"]), 4),
                                     item["insight"], (a.version, b.version)))
        ends += [a, b]
    if reflection and not problems:
        if not ends:
            seed = known.memory(known.ctx.seed) if known.ctx.seed else None
            ends = [seed] if seed else []
        scopes = {r.scope for r in ends} - {"global"}
        if len(scopes) > 1:
            problems.append("$.reflection: joins memories of different projects")
            return
        scope = scopes.pop() if scopes else (ends[0].scope if ends else None)
        linked = list(dict.fromkeys(r.id for r in ends))
        draft = _draft(
            rt, "$.reflection", problems, gesture=reflection["gesture"],
            context=reflection.get("context", ""),
            cognition_direction=reflection.get("cognition_direction", ""), kind="reflection",
            scope=scope, tags=reflection.get("tags"), entities_role="",
            related_entities=list(dict.fromkeys(e for r in ends for e in r.related_entities))[
                :rt.config.caps.entities],
            source_links=_links_of(ends, 100), importance=reflection["importance"],
            emotional=reflection["emotional"], recurrence=reflection["recurrence"],
            unresolved=reflection["unresolved"], event_time=None)
        if draft is not None:
            plan.writes.append(NewMemory(draft, tuple(linked), 0.5))
    if data.get("note"):
        plan.notes.append(str(data["note"]))


def _dream(rt: Runtime, known: _Known, data: dict[str, Any], plan: LayerPlan,
           problems: list[str], batch: int) -> None:
    symbols: list[str] = []
    sources: list[MemoryRecord] = []
    for i, item in enumerate(data["symbols"]):
        ids = []
        for mid in dict.fromkeys(item["memory_ids"]):
            rec = _live(known, mid, f"$.symbols[{i}].memory_ids", problems)
            if rec is not None:
                ids.append(rec.id)
                sources.append(rec)
        symbols.append(f"{item['symbol']} ({', '.join('#' + str(k) for k in ids)})")
    if problems:
        return
    scopes = {r.scope for r in sources} - {"global"}
    if len(scopes) > 1:
        problems.append(f"$.symbols: memories from different projects ({', '.join(sorted(scopes))})"
                        "; a dream stays within one project")
        return
    scope = scopes.pop() if scopes else (known.ctx.dream_scope or "global")
    tags = ["dream", *[t for t in data.get("tags", []) if t.casefold() != "dream"]]
    # A dream never outweighs what really happened: importance is 1 whatever the model says.
    draft = _draft(
        rt, "$", problems, gesture=data["reflection"], context=data["story"],
        cognition_direction="Symbols: " + "; ".join(symbols), kind="dream", scope=scope,
        tags=tags, entities_role="", related_entities=None,
        source_links=_links_of(sources, 100), importance=1, emotional=data["emotional"],
        recurrence=data["recurrence"], unresolved=data["unresolved"], event_time=None)
    if draft is not None:
        plan.writes.append(NewMemory(draft))


def payload_text(payload: Any) -> tuple[Any, str, list[str]]:
    """An agent's payload (a dict or JSON text) as (value, text, problems)."""
    if isinstance(payload, str | bytes):
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
        value, problems = parse_answer(text)
        return value, text, problems
    try:
        text = json.dumps(payload, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return None, "", [f"payload is not JSON-serialisable: {exc}"]
    return payload, text, []
