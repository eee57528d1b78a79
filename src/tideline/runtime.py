"""The parts of one open memory, built in one place: :class:`Runtime`.

A :class:`Runtime` holds what every verb works with — the settings, the store, the
embedder behind its guard, the vector spaces, the write path, the recall engine and
the current project — plus the two rules every verb shares: which scope a call means
(:meth:`Runtime.scope`) and how a validated memory draft is made
(:meth:`Runtime.draft`). The facade (:class:`tideline.Memory`) holds one and passes
it down; sleep, dream, injection, the importers, the report and revision take it (or
a narrower part of it) as an argument, so nothing below the facade imports the facade.

Dependencies point down only: this module imports the store, the embedders, the
write and recall paths and validation, never sleep, dream, inject, ingest or report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tideline.embed.guard import EmbedGuard
from tideline.errors import InvalidInput, NotFound
from tideline.models import KINDS, MemoryRecord, Turn, compute_weight
from tideline.recall.engine import RecallEngine
from tideline.scopes import GLOBAL, default_scope, visible_scopes
from tideline.store import open_store
from tideline.write.path import Writer
from tideline.write.validate import (
    clean_id,
    clean_ids,
    clean_list,
    clean_name,
    clean_text,
    clean_weight,
    parse_time,
)

if TYPE_CHECKING:
    from tideline.config import Config
    from tideline.embed.base import Embedder
    from tideline.store.base import Store, VectorSearch

__all__ = ["Parts", "Runtime"]


class Parts(Protocol):
    """What a read-only gatherer needs: settings, store, embedder and vector spaces.

    Both a :class:`Runtime` and the facade offer these four, so a function typed
    against ``Parts`` (the dream prompt, for one) can be handed either.
    """

    @property
    def config(self) -> Config: ...

    @property
    def store(self) -> Store: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def vectors(self) -> VectorSearch: ...


@dataclass(eq=False)
class Runtime:
    """The parts one open memory works with; build with :meth:`build`.

    Attributes:
        config: the settings in force.
        store: the database of one namespace.
        embedder: the embedder the store was built with.
        guard: the embedder behind its fault guard (the write and recall paths use it).
        vectors: the vector spaces (ANN indexes) over the store.
        writer: the write path (novelty gate, idempotency, pending vectors).
        engine: the recall engine.
        project: the current project scope, or None (then only ``global``).
    """

    config: Config
    store: Store
    embedder: Embedder
    guard: EmbedGuard
    vectors: VectorSearch
    writer: Writer
    engine: RecallEngine
    project: str | None = None

    @classmethod
    def build(cls, config: Config, embedder: Embedder, *, store: Store | None = None,
              project: str | None = None) -> Runtime:
        """Open the store (unless given) and build the embedder's parts over it.

        Args:
            config: the settings.
            embedder: the embedder.
            store: an open store to build over (reembed keeps the store and swaps the rest).
            project: the current project.

        Returns:
            The runtime.

        Raises:
            EmbedderMismatch: the store was built with another embedder.
            StoreCorrupt: the database file is damaged.
        """
        if store is None:
            store = open_store(
                config.home, config.namespace, embedder.marker, database=config.database,
                busy_timeout_ms=config.busy_timeout_ms, retries=config.busy_retries,
                pool_size=config.database_pool_size, read_url=config.database_read_url,
                read_wait_ms=config.database_read_wait_ms,
            )
        opened = store

        def changed(state: str, data: dict[str, Any]) -> None:
            # Journaled on the change only (down, then up again), not on every degraded call.
            opened.log_event(None, "embedder", {"state": state, **data})

        guard = EmbedGuard(embedder, cooldown_s=config.embed_cooldown_s, on_change=changed)
        vectors = store.vector_spaces(embedder.dim, embedder.marker)
        return cls(config=config, store=store, embedder=embedder, guard=guard, vectors=vectors,
                   writer=Writer(store, embedder, vectors, config, guard=guard),
                   engine=RecallEngine(store, embedder, vectors, config, guard=guard),
                   project=project)

    def close(self) -> None:
        """Persist derived indexes and close the database."""
        self.vectors.close()
        self.store.close()

    # -- scopes ---------------------------------------------------------------------------

    def scope(self, scope: str | None, *, write: bool, kind: str | None = None) -> str:
        """The scope a call means: the one named (validated), else the default.

        Raises:
            InvalidInput: a malformed scope name.
        """
        if scope is None:
            return default_scope(self.project, write=write, kind=kind)
        return clean_name(scope, "scope", self.config.caps)

    def scopes(self, scope: str | None) -> tuple[str, list[str]]:
        """The scope a read means and the scopes it may answer from (it and ``global``).

        Raises:
            InvalidInput: a malformed scope name.
        """
        current = self.scope(scope, write=False)
        return current, visible_scopes(current)

    def visible(self, scope: str | None) -> list[str]:
        """The scopes a read on behalf of ``scope`` may answer from: it and ``global``.

        Raises:
            InvalidInput: a malformed scope name.
        """
        return self.scopes(scope)[1]

    # -- reads by id ----------------------------------------------------------------------

    def get(self, memory_id: object, *, scope: str | None = None) -> MemoryRecord:
        """One memory by id, if the scope may see it.

        Raises:
            InvalidInput: not a positive integer id.
            NotFound: no such memory in the scope or ``global``.
        """
        mid = clean_id(memory_id, "memory_id")
        rec = self.store.get_memory(mid)
        if rec.scope not in self.visible(scope):
            raise NotFound(f"no memory with id {mid}")
        return rec

    def turns(self, ids: object, *, scope: str | None = None) -> list[Turn]:
        """Raw turns by id, leaving out those the scope may not see.

        Raises:
            InvalidInput: ``ids`` is not a list of positive integer ids.
            InputTooLarge: more ids than the batch cap.
        """
        if ids is None:
            raise InvalidInput("ids must be a list of turn ids")
        visible = self.visible(scope)
        found = self.store.get_turns(clean_ids(ids, "ids", self.config.caps.batch))
        return [t for t in found.values() if t.scope in visible]

    # -- the write path's input -----------------------------------------------------------

    def draft(self, **f: Any) -> MemoryRecord:
        """A validated memory (id 0) from the fields of :meth:`tideline.Memory.write`.

        Raises:
            InvalidInput: a field is invalid, or ``source_links`` names unknown turns.
            InputTooLarge: a field is over its cap.
        """
        caps = self.config.caps
        kind = clean_name(f["kind"], "kind", caps)
        if kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
        weights = {k: clean_weight(f[k], k) for k in
                   ("importance", "emotional", "recurrence", "unresolved")}
        links = clean_ids(f["source_links"], "source_links", caps.source_links)
        scope = self.scope(f["scope"], write=True, kind=kind)
        if links:
            # Another project's turn is refused exactly like an absent one (same error,
            # same text): the answer must not tell a project which ids exist elsewhere.
            # A global memory (a preference said in a project) may cite the current
            # project's turns, which the project's reads see beside it.
            visible = visible_scopes(scope) + ([self.project] if scope == GLOBAL and
                                              self.project else [])
            known = {i for i, t in self.store.get_turns(links).items() if t.scope in visible}
            unknown = [i for i in links if i not in known]
            if unknown:
                raise InvalidInput(f"source_links name unknown turn ids: {unknown[:5]}")
        return MemoryRecord(
            id=0,
            scope=scope,
            kind=kind,
            gesture=clean_text(f["gesture"], "gesture", caps.gesture_chars, required=True),
            context=clean_text(f["context"], "context", caps.field_chars),
            cognition_direction=clean_text(f["cognition_direction"], "cognition_direction",
                                           caps.field_chars),
            tags=clean_list(f["tags"], "tags", item_cap=caps.tag_chars, count_cap=caps.tags),
            entities_role=clean_text(f["entities_role"], "entities_role", caps.field_chars),
            related_entities=clean_list(f["related_entities"], "related_entities",
                                        item_cap=caps.name_chars, count_cap=caps.entities),
            source_links=links,
            weight=compute_weight(**weights),
            stability=self.config.dynamics.episodic_half_life_days,
            event_time=parse_time(f["event_time"], "event_time"),
            importance=weights["importance"], emotional=weights["emotional"],
            recurrence=weights["recurrence"], unresolved=weights["unresolved"],
        )
