"""Commands of the ``tideline`` CLI. Each one is a thin call into :class:`tideline.Memory`."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tideline.cli.base import app, emit, fail, guarded

if TYPE_CHECKING:
    from tideline.memory import Memory

StoreOpt = Annotated[Path | None, typer.Option("--store", help="Store directory "
                                               "(default $TIDELINE_HOME or ~/.tideline).")]
NsOpt = Annotated[str | None, typer.Option("--namespace", help="A separate memory in the store.")]
ScopeOpt = Annotated[str | None, typer.Option("--scope", help="Project scope, or 'global' "
                                              "(default: the detected project — "
                                              "$TIDELINE_PROJECT, the client's project dir, "
                                              "the git work tree, the directory; writes of "
                                              "preference/identity default to global).")]
EmbOpt = Annotated[str | None, typer.Option(
    "--embedder", help="e5 (default), hashing, http or none (full text only).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
# weight = (0.35·importance + 0.25·emotional + 0.25·recurrence + 0.15·unresolved − 1) / 4
ImportanceOpt = Annotated[int, typer.Option(help="1–5: how much it matters (weight share "
                                            "0.35).")]
EmotionalOpt = Annotated[int, typer.Option(help="1–5: emotional charge (weight share 0.25).")]
RecurrenceOpt = Annotated[int, typer.Option(help="1–5: how often it comes up (weight share "
                                            "0.25).")]
UnresolvedOpt = Annotated[int, typer.Option(help="1–5: how open it still is (weight share "
                                            "0.15).")]
KeyOpt = Annotated[str | None, typer.Option("--key", help="Idempotency key: the same key "
                                            "again is a no-op, however late (without one, "
                                            "the same text is a replay only within "
                                            "$TIDELINE_WRITE_RETRY_WINDOW_S).")]


@contextlib.contextmanager
def opened(store: Path | None, namespace: str | None, embedder: str | None,
           project: str | None = None) -> Iterator[Memory]:
    """Open the memory for one command and close it afterwards."""
    from tideline.memory import Memory

    mem = Memory.open(store, namespace=namespace, embedder=embedder, project=project)
    try:
        yield mem
    finally:
        mem.close()


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal (off for --json: stdout stays clean)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@app.command()
@guarded
def init(store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
         as_json: JsonOpt = False) -> None:
    """Create (or open) a store and print where it lives."""
    with opened(store, namespace, embedder) as mem:
        info = mem.introspect()
    data = {"store": info["store"], "database": info["database"],
            "embedder": info["embedder"]["marker"], "schema_version": info["schema_version"]}
    emit(data, as_json, lambda: f"store ready at {data['store']} ({data['embedder']})")


@app.command()
@guarded
def remember(
    text: Annotated[str, typer.Argument(help="What to remember.")],
    kind: Annotated[str, typer.Option(help="fact, preference, decision, episode, …")] = "fact",
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    importance: ImportanceOpt = 3,
    emotional: EmotionalOpt = 1,
    recurrence: RecurrenceOpt = 1,
    unresolved: UnresolvedOpt = 1,
    event_time: Annotated[str | None, typer.Option("--event-time", help="ISO time.")] = None,
    key: KeyOpt = None,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Remember free text (novelty-gated: new, link or potentiate)."""
    from tideline.render import write_line

    with opened(store, namespace, embedder) as mem:
        res = mem.remember(text, scope=scope, kind=kind, tags=tag, importance=importance,
                           emotional=emotional, recurrence=recurrence, unresolved=unresolved,
                           event_time=event_time, idempotency_key=key, source="cli")
    emit(res.to_dict(), as_json, lambda: write_line(res.to_dict()))


@app.command()
@guarded
def write(
    gesture: Annotated[str, typer.Argument(help="What happened (one sentence with tone).")],
    context: Annotated[str, typer.Option(help="The setting.")] = "",
    direction: Annotated[str, typer.Option("--direction", help="cognition_direction.")] = "",
    kind: Annotated[str, typer.Option(help="narrative, episode, decision, …")] = "narrative",
    tag: Annotated[list[str] | None, typer.Option("--tag")] = None,
    entities_role: Annotated[str, typer.Option("--entities-role")] = "",
    entity: Annotated[list[str] | None, typer.Option("--entity", help="Related entity.")] = None,
    link: Annotated[list[int] | None, typer.Option("--link", help="Source turn id.")] = None,
    importance: ImportanceOpt = 3,
    emotional: EmotionalOpt = 1,
    recurrence: RecurrenceOpt = 1,
    unresolved: UnresolvedOpt = 1,
    event_time: Annotated[str | None, typer.Option("--event-time")] = None,
    key: KeyOpt = None,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Write a structured narrative memory."""
    from tideline.render import write_line

    with opened(store, namespace, embedder) as mem:
        res = mem.write(gesture, context=context, cognition_direction=direction, kind=kind,
                        scope=scope, tags=tag, entities_role=entities_role,
                        related_entities=entity, source_links=link, importance=importance,
                        emotional=emotional, recurrence=recurrence, unresolved=unresolved,
                        event_time=event_time, idempotency_key=key, source="cli")
    emit(res.to_dict(), as_json, lambda: write_line(res.to_dict()))


@app.command()
@guarded
def recall(
    query: Annotated[str, typer.Argument(help="What to recall (any language).")],
    limit: Annotated[int | None, typer.Option("--limit", "-k", help="Maximum items.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind.")] = None,
    since: Annotated[str | None, typer.Option(help="ISO time or epoch.")] = None,
    until: Annotated[str | None, typer.Option(help="ISO time or epoch.")] = None,
    no_turns: Annotated[bool, typer.Option("--no-turns", help="Memories only.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="No items at all when "
                                         "abstaining.")] = False,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Recall memories and raw turns for a query (current project + global)."""
    from tideline.render import packet_text

    with opened(store, namespace, embedder) as mem:
        packet = mem.recall(query, scope=scope, limit=limit, kind=kind, since=since,
                            until=until, include_turns=not no_turns, abstain=strict,
                            tier="cli")
    emit(packet.to_dict(), as_json, lambda: packet_text(packet))


@app.command()
@guarded
def reflect(
    ids: Annotated[list[int], typer.Argument(help="Memory ids.")],
    reward: Annotated[float, typer.Option(help="-1..1: reinforce (>0) or weaken (<0).")] = 1.0,
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Reward or penalise recalled memories (of the project and global)."""
    from tideline.render import reflect_line

    with opened(store, namespace, embedder) as mem:
        res = mem.reflect(ids, reward, scope=scope)
    emit(res, as_json, lambda: reflect_line(res))


@app.command()
@guarded
def revise(
    memory_id: Annotated[int, typer.Argument(help="Memory id.")],
    text: Annotated[str, typer.Argument(help="The new text (gesture).")],
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Write a new version that supersedes a memory (history kept)."""
    from tideline.render import revise_line

    with opened(store, namespace, embedder) as mem:
        res = mem.revise(memory_id, text, scope=scope)
    emit(res.to_dict(), as_json, lambda: revise_line(res.id, memory_id))


@app.command()
@guarded
def forget(
    memory_id: Annotated[int, typer.Argument(help="Memory id.")],
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Delete a memory for real (privacy); journaled."""
    from tideline.render import forget_line

    with opened(store, namespace, embedder) as mem:
        res = mem.forget(memory_id, scope=scope)
    emit(res, as_json, lambda: forget_line(res))


@app.command()
@guarded
def show(
    memory_id: Annotated[int, typer.Argument(help="Memory id.")],
    store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Show one memory with its edges, history and linked raw turns."""
    with opened(store, namespace, embedder) as mem:
        data = mem.show(memory_id, scope=scope)
    emit(data, as_json)


@app.command()
@guarded
def introspect(store: StoreOpt = None, namespace: NsOpt = None, scope: ScopeOpt = None,
               embedder: EmbOpt = None, as_json: JsonOpt = False,
               all_scopes: Annotated[bool, typer.Option(
                   "--all-scopes", help="Count every project, not only the current one "
                   "and global.")] = False) -> None:
    """Store statistics, the detected project and the embedder."""
    with opened(store, namespace, embedder, project=scope) as mem:
        data = mem.introspect(all_scopes=all_scopes)
    emit(data, as_json)


@app.command()
@guarded
def reembed(
    to: Annotated[str, typer.Argument(help="Target embedder: e5, hashing or http.")],
    url: Annotated[str | None, typer.Option(help="http: endpoint base URL.")] = None,
    model: Annotated[str | None, typer.Option(help="http: model name.")] = None,
    store: StoreOpt = None, namespace: NsOpt = None, as_json: JsonOpt = False,
) -> None:
    """Re-embed the whole store with another embedder."""
    from tideline.memory import Memory

    mem = Memory.open(store, namespace=namespace)
    try:
        with progress_bar("re-embedding", not as_json) as bar:
            res = mem.reembed(to, progress=bar, url=url, model=model)
    finally:
        mem.close()
    emit(res, as_json, lambda: f"re-embedded {res['memories']} memories and {res['turns']} "
                               f"turns: {res['from']} → {res['to']}")


@app.command()
@guarded
def doctor(
    repair: Annotated[bool, typer.Option("--repair", help="Rebuild derived indexes.")] = False,
    store: StoreOpt = None, namespace: NsOpt = None, embedder: EmbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check integrity, FTS integrity, row-count parity; --repair rebuilds derived data."""
    with opened(store, namespace, embedder) as mem, \
            progress_bar("repairing", not as_json and repair) as bar:
        res = mem.doctor(repair=repair, progress=bar)
    emit(res, as_json, lambda: ("ok" if res["ok"] else f"problems: {res['problems']}")
         + (f"; found {res['found']}" if res.get("found") else "")
         + (f"; repaired {res['repaired']}" if res["repaired"] else "")
         + "\n" + json.dumps(res["checks"]["parity"])
         + (f"\n{res['restore']}" if res.get("restore") else ""))
    if not res["ok"]:
        raise fail("store has problems (run `tideline doctor --repair`)", 13)
