"""The :class:`Memory` facade: the one object that the CLI, MCP server, hooks and plugins call."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from tideline.cognition import CognitionMixin
from tideline.config import Config
from tideline.dream.mixin import DreamMixin
from tideline.dynamics import reinforce, retention, weaken
from tideline.embed import Embedder, EmbedGuard, embedder_from_marker, make_embedder
from tideline.errors import InputTooLarge, InvalidInput, NotFound
from tideline.inject.mixin import InjectMixin
from tideline.models import (
    KINDS,
    ImportResult,
    MemoryRecord,
    RecallPacket,
    Turn,
    WriteResult,
    compute_weight,
)
from tideline.recall.engine import RecallEngine
from tideline.recall.vectors import VectorSpaces
from tideline.sleep.mixin import SleepMixin
from tideline.store import doctor as doctor_mod
from tideline.store import reembed as reembed_mod
from tideline.store.connection import peek_meta
from tideline.store.postgres import peek_database_meta
from tideline.store.sqlite import SQLiteStore
from tideline.write.path import Writer
from tideline.write.validate import (
    clean_callback,
    clean_flag,
    clean_id,
    clean_ids,
    clean_instance,
    clean_int,
    clean_list,
    clean_name,
    clean_number,
    clean_paths,
    clean_seq,
    clean_text,
    clean_weight,
    parse_time,
)

__all__ = ["GLOBAL_KINDS", "ImportResult", "Memory", "parse_time"]

#: Kinds that hold everywhere: a write of one of them with no scope goes to ``global``,
#: not to the detected project (who the user is and what they like does not change from
#: one repository to the next). Self-concept and profiles are not scoped at all.
GLOBAL_KINDS = ("preference", "identity")

Progress = Callable[[int, int], None]


class Memory(CognitionMixin, InjectMixin, SleepMixin, DreamMixin):
    """A long-term memory over one store directory and namespace.

    Open with :meth:`open`; use as a context manager or call :meth:`close`.

    Attributes:
        config: the settings in force.
        project: the current project scope (recall sees it plus ``global``), or None.
    """

    def __init__(self, config: Config, embedder: Embedder, *, project: str | None = None) -> None:
        self.config = config
        self.project = project
        if config.database:
            from tideline.store.postgres import open_postgres

            # Typed as the SQLite store until the seam's store protocols land.
            self.store = cast(SQLiteStore, open_postgres(
                config.database, config.home, config.namespace, embedder.marker,
                retries=config.busy_retries, lock_timeout_ms=config.busy_timeout_ms))
        else:
            self.store = SQLiteStore(
                config.home, config.namespace, embedder.marker,
                busy_timeout_ms=config.busy_timeout_ms, retries=config.busy_retries,
            )
        self._use_embedder(embedder)

    def _use_embedder(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.embed_guard = EmbedGuard(embedder, cooldown_s=self.config.embed_cooldown_s,
                                      on_change=self._embedder_changed)
        spaces = getattr(self.store, "vector_spaces", None)
        self.vectors = (cast(VectorSpaces, spaces(embedder.dim, embedder.marker)) if spaces
                        else VectorSpaces(self.store, embedder.dim, embedder.marker))
        self._writer = Writer(self.store, embedder, self.vectors, self.config,
                              guard=self.embed_guard)
        self._engine = RecallEngine(self.store, embedder, self.vectors, self.config,
                                    guard=self.embed_guard)

    def _embedder_changed(self, state: str, data: dict[str, Any]) -> None:
        # Journaled on the change only (down, then up again), not on every degraded call.
        self.store.log_event(None, "embedder", {"state": state, **data})

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        *,
        namespace: str | None = None,
        embedder: str | Embedder | None = None,
        project: str | None = None,
        config: Config | None = None,
        database: str | None = None,
    ) -> Memory:
        """Open (or create) a store.

        Args:
            home: the store directory (default ``$TIDELINE_HOME`` or ``~/.tideline``).
            namespace: a fully separate memory inside the directory.
            embedder: ``e5`` (default for new stores), ``hashing``, ``http``, ``none`` (no
                vectors: full text only) or an instance; when omitted, an existing store
                opens with the embedder it was built with.
            project: the current project (recall sees it plus ``global``; writes go
                to it); ``global`` for none. Default: detected by the project rules
                (:func:`tideline.project.detect_project`: ``$TIDELINE_PROJECT``, the
                client's project directory, the git work tree, the directory).
            config: a full config; the other arguments override it.
            database: a ``postgresql://`` URL to keep the memory in (default
                ``$TIDELINE_DATABASE_URL``); ``home`` is then this host's local state.

        Returns:
            The opened memory.

        Raises:
            EmbedderMismatch: the store was built with another embedder.
            StoreCorrupt: the database file is damaged.
        """
        clean_instance(config, Config, "config", "a Config")
        clean_instance(home, (str, os.PathLike), "home", "a directory path")
        clean_instance(embedder, (str, Embedder), "embedder", "an embedder name or instance")
        clean_instance(project, str, "project", "a project name")
        clean_instance(database, str, "database", "a postgresql:// URL")
        if home is not None:
            clean_paths([home], "home")
        cfg = config or Config.load()
        overrides: dict[str, Any] = {}
        if home is not None:
            overrides["home"] = Path(home).expanduser()
        if namespace is not None:
            overrides["namespace"] = clean_name(namespace, "namespace", cfg.caps)
        if isinstance(embedder, str):
            overrides["embedder"] = embedder
        if database is not None:
            overrides["database"] = database
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        clean_name(cfg.namespace, "namespace", cfg.caps)
        stored = None
        if embedder is None and config is None and not os.environ.get("TIDELINE_EMBEDDER"):
            stored = peek_meta(cfg.home, "embedder") if not cfg.database else \
                peek_database_meta(cfg.database, "embedder")
        if stored is not None:
            instance = embedder_from_marker(stored)
        elif embedder is None or isinstance(embedder, str):
            instance = make_embedder(cfg.embedder, url=cfg.embed_url, model=cfg.embed_model)
        else:
            instance = embedder
        from tideline.project import detect_project

        if project is not None:
            clean_name(project, "project", cfg.caps)
        info = detect_project(explicit=project)
        mem = cls(cfg, instance)
        mem.use_project(info)
        return mem

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Persist derived indexes and close the database."""
        self.vectors.close()
        self.store.close()

    # -- scopes ---------------------------------------------------------------------------

    def _scope(self, scope: str | None, *, write: bool, kind: str | None = None) -> str:
        if scope is None:
            # One rule for every surface: reads and writes default to the current
            # project, except the kinds that hold everywhere.
            if write and kind in GLOBAL_KINDS:
                return "global"
            return self.project or "global"
        return clean_name(scope, "scope", self.config.caps)

    def _scopes(self, scope: str | None) -> tuple[str, list[str]]:
        current = self._scope(scope, write=False)
        return current, list(dict.fromkeys([current, "global"]))

    def _visible(self, scope: str | None) -> list[str]:
        """The scopes a read on behalf of ``scope`` may answer from: it and ``global``."""
        return self._scopes(scope)[1]

    # -- write path -----------------------------------------------------------------------

    def remember(
        self,
        text: str,
        *,
        scope: str | None = None,
        kind: str = "fact",
        tags: Iterable[str] | str | None = None,
        source_links: Sequence[int] | None = None,
        event_time: object = None,
        importance: int = 3,
        idempotency_key: str | None = None,
        source: str = "api",
        emotional: int = 1,
        recurrence: int = 1,
        unresolved: int = 1,
    ) -> WriteResult:
        """Store free text as a minimal memory (the text becomes the gesture).

        Args:
            text: what to remember.
            scope: a project name or ``global`` (default: the current project, or
                ``global`` for the kinds in :data:`GLOBAL_KINDS`).
            kind: fact, episode, preference, decision, narrative, …
            tags: labels, merged on potentiation.
            source_links: raw-turn ids this memory came from.
            event_time: when it happened (epoch, ISO text or datetime), if known.
            importance: 1–5.
            idempotency_key: makes a retried write a no-op (for good; without a key,
                the same content again is a replay only within the retry window).
            source: where the write came from.
            emotional: 1–5.
            recurrence: 1–5.
            unresolved: 1–5.

        Returns:
            The novelty gate's decision (``new``, ``potentiate`` or ``link``) and the id.

        Raises:
            InvalidInput: a field is invalid (nothing is written).
            InputTooLarge: a field is over its cap.
        """
        return self.write(text, scope=scope, kind=kind, tags=tags, source_links=source_links,
                          event_time=event_time, importance=importance, emotional=emotional,
                          recurrence=recurrence, unresolved=unresolved,
                          idempotency_key=idempotency_key, source=source)

    def write(
        self,
        gesture: str,
        *,
        context: str = "",
        cognition_direction: str = "",
        kind: str = "narrative",
        scope: str | None = None,
        tags: Iterable[str] | str | None = None,
        entities_role: str = "",
        related_entities: Iterable[str] | str | None = None,
        source_links: Sequence[int] | None = None,
        importance: int = 3,
        emotional: int = 1,
        recurrence: int = 1,
        unresolved: int = 1,
        event_time: object = None,
        idempotency_key: str | None = None,
        source: str = "api",
    ) -> WriteResult:
        """Store a structured narrative memory through the novelty gate.

        Args:
            gesture: what happened, one sentence with tone (or the plain fact).
            context: the setting.
            cognition_direction: where thinking went.
            kind: fact, episode, preference, decision, narrative, dream, reflection, …
            scope: a project name or ``global`` (default: the current project, or
                ``global`` for the kinds in :data:`GLOBAL_KINDS`).
            tags: labels.
            entities_role: who did what, e.g. ``A=判断+执行; B=审查``.
            related_entities: names involved.
            source_links: raw-turn ids the memory came from.
            importance: 1–5.
            emotional: 1–5.
            recurrence: 1–5.
            unresolved: 1–5.
            event_time: when it happened, if known.
            idempotency_key: makes a retried write a no-op (for good; without a key,
                the same content again is a replay only within
                ``config.write_retry_window_s``, later it goes through the gate).
            source: where the write came from.

        Returns:
            The gate's decision and the id.

        Raises:
            InvalidInput: a field is invalid (nothing is written).
            InputTooLarge: a field is over its cap.
        """
        draft = self._draft(
            gesture=gesture, context=context, cognition_direction=cognition_direction,
            kind=kind, scope=scope, tags=tags, entities_role=entities_role,
            related_entities=related_entities, source_links=source_links,
            importance=importance, emotional=emotional, recurrence=recurrence,
            unresolved=unresolved, event_time=event_time,
        )
        key = None
        if idempotency_key is not None:
            key = clean_text(idempotency_key, "idempotency_key", 200, required=True)
        return self._writer.write(draft, key=key, source=clean_name(source, "source",
                                                                    self.config.caps))

    def _draft(self, **f: Any) -> MemoryRecord:
        caps = self.config.caps
        kind = clean_name(f["kind"], "kind", caps)
        if kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
        weights = {k: clean_weight(f[k], k) for k in
                   ("importance", "emotional", "recurrence", "unresolved")}
        links = clean_ids(f["source_links"], "source_links", caps.source_links)
        if links:
            known = self.store.get_turns(links)
            unknown = [i for i in links if i not in known]
            if unknown:
                raise InvalidInput(f"source_links name unknown turn ids: {unknown[:5]}")
        return MemoryRecord(
            id=0,
            scope=self._scope(f["scope"], write=True, kind=kind),
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

    def add_turns(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        scope: str | None = None,
        source: str = "api",
        session: str | None = None,
        progress: Progress | None = None,
        idempotency_key: str | None = None,
    ) -> ImportResult:
        """Store raw conversation turns whole (texture), idempotent by (source, message id).

        Each mapping may hold ``session``, ``role`` and/or ``speaker``, ``text``,
        ``timestamp`` and ``id`` (the source's own message id). A turn without an id
        gets one derived from what identifies it — source, session, speaker, timestamp
        and text, and its occurrence among identical turns of this call — never from its
        position, so storing the same turns again is a no-op. Each new turn takes the
        next free index of its session (assigned inside the write transaction); a
        ``turn_index`` in the input is ignored.

        Args:
            turns: the turns, in conversation order.
            scope: the project they belong to (default: the current project).
            source: the system they came from (claude, hermes, jsonl, api…).
            session: default session id for turns that carry none.
            progress: called with (done, total) while embedding.
            idempotency_key: a retry of a call with this key stores nothing new; id-less
                turns' ids are derived with it, so the same text under another key is
                another turn.

        Returns:
            How many were inserted and skipped (already stored), the new ids
            (``turn_ids``) and the id of every turn of the batch (``batch_ids``).

        Raises:
            InvalidInput: a turn is malformed (nothing of the batch is written).
            InputTooLarge: the batch or a turn is over its cap.
        """
        from tideline.ingest.turns import prepare_turns, store_turns

        batch = clean_seq(turns, "turns")
        caps = self.config.caps
        if len(batch) > caps.batch:
            raise InputTooLarge(f"batch of {len(batch)} turns; the cap is {caps.batch}")
        if session is not None:
            session = clean_text(session, "session", caps.name_chars, required=True)
        clean_callback(progress)
        rows = cast("list[Mapping[str, Any]]", batch)  # each item is checked there
        salt = ""
        if idempotency_key is not None:
            salt = clean_text(idempotency_key, "idempotency_key", 200, required=True)
        prepared = prepare_turns(
            rows, scope=self._scope(scope, write=True), source=clean_name(source, "source", caps),
            session=session, caps=caps, next_index=self.store.next_turn_index, salt=salt,
        )
        result = store_turns(self.store, self.embedder, prepared, progress=progress,
                             txn_turns=caps.import_batch, embed=self.embed_guard.passages)
        if result.inserted and not self.embed_guard.down:
            self._writer.fill_pending()
        return result

    # -- recall ---------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        scope: str | None = None,
        limit: int | None = None,
        kind: str | None = None,
        since: object = None,
        until: object = None,
        include_turns: bool = True,
        abstain: bool = False,
        tier: str = "recall",
        log: bool = True,
    ) -> RecallPacket:
        """Recall what is relevant to ``query`` in the current project and ``global``.

        Args:
            query: free text in any language (never an FTS syntax error).
            scope: the project to search with ``global`` (default: the current project).
            limit: maximum items (default from config, capped).
            kind: only memories of this kind.
            since: only items from this time on (epoch, ISO or datetime).
            until: only items up to this time.
            include_turns: also return raw conversation turns (texture).
            abstain: return no items at all when nothing is trustworthy. By default the
                packet still lists the weak candidates (each with its low confidence)
                and sets ``abstained``, so the caller decides; injection is strict.
            tier: who asked (recall, T1, T4, …), for the attention log.
            log: journal the recall and record attention and co-recall eligibility.

        Returns:
            A :class:`~tideline.models.RecallPacket`.

        Raises:
            InvalidInput: bad query or filter.
            InputTooLarge: query or limit over its cap.
        """
        caps = self.config.caps
        text = clean_text(query, "query", caps.query_chars)
        current, scopes = self._scopes(scope)
        k = self.config.recall.limit if limit is None else clean_int(limit, "limit", lo=1)
        if k > caps.limit:
            raise InputTooLarge(f"limit {k} is over the cap {caps.limit}")
        if kind is not None:
            kind = clean_name(kind, "kind", caps)
        include_turns = clean_flag(include_turns, "include_turns")
        abstain = clean_flag(abstain, "abstain")
        log = clean_flag(log, "log")
        tier = clean_name(tier, "tier", caps)
        after, before = parse_time(since, "since"), parse_time(until, "until")
        if not text:
            return RecallPacket(query=text, scope=current, items=(), abstained=True,
                                latency_ms=0.0)
        from tideline.recall.journal import RecallJournal

        journal = RecallJournal(self.store, tier) if log else None
        return self._engine.recall(
            text, scopes=scopes, scope=current, limit=k, kind=kind,
            since=after, until=before,
            include_turns=include_turns, abstain=abstain,
            on_hits=journal.record if journal else None,
        )

    # -- feedback and edits ---------------------------------------------------------------

    def reflect(self, ids: Sequence[int], reward: float, *,
                scope: str | None = None) -> dict[str, Any]:
        """Reward (> 0) or penalise (< 0) recalled memories.

        Args:
            ids: memory ids.
            reward: −1..1; positive reinforces, negative weakens.
            scope: the project acting (default: the current one); memories of other
                projects count as missing.

        Returns:
            ``{"updated": [...], "missing": [...], "reward": r}``.

        Raises:
            InvalidInput: reward outside −1..1 or bad ids.
        """
        reward = clean_number(reward, "reward", lo=-1.0, hi=1.0)
        if ids is None:
            raise InvalidInput("ids must be a list of memory ids")
        wanted = clean_ids(ids, "ids", self.config.caps.limit)
        visible = self._visible(scope)
        now = time.time()
        dyn = self.config.dynamics
        updated: list[int] = []
        with self.store.db.write() as c:
            found = {mid: rec for mid, rec in self.store.get_memories(wanted, c).items()
                     if rec.scope in visible}
            for mid, rec in found.items():
                if reward > 0:
                    new = reinforce(rec, now, dyn, amount=float(reward))
                elif reward < 0:
                    new = weaken(rec, now, dyn, amount=-float(reward))
                else:
                    continue
                self.store.update_memory(c, new)
                updated.append(mid)
            self.store.log_event(c, "reflect", {"ids": list(wanted), "reward": reward,
                                                "updated": updated}, now=now)
        missing = [i for i in wanted if i not in found]
        return {"updated": updated, "missing": missing, "reward": reward}

    def revise(self, memory_id: int, text: str | None = None, *, scope: str | None = None,
               **fields: Any) -> WriteResult:
        """Write a new version of a memory that supersedes the old one (history kept).

        Args:
            memory_id: the memory to revise.
            text: the new gesture (default: unchanged).
            scope: the project acting (default: the current one); a memory of another
                project is not found.
            **fields: any other field of :meth:`write` to change.

        Returns:
            The new version's id (decision ``new``).

        Raises:
            NotFound: no such memory in this project or ``global``.
            Conflict: it was already superseded.
            InvalidInput: bad fields.
        """
        from tideline.write.revise import revise_memory

        return revise_memory(self, clean_id(memory_id, "memory_id"), text, fields, scope=scope)

    def forget(self, memory_id: int, *, scope: str | None = None) -> dict[str, Any]:
        """Delete a memory for real (privacy): row, indexes, edges; journaled.

        Args:
            memory_id: the memory to delete.
            scope: the project acting (default: the current one); a memory of another
                project is not found (and not deleted).

        Raises:
            NotFound: no such memory in this project or ``global``.
        """
        mid = clean_id(memory_id, "memory_id")
        visible = self._visible(scope)
        with self.store.db.write() as c:
            if self.store.get_memory(mid, c).scope not in visible:
                raise NotFound(f"no memory with id {mid}")
            rec = self.store.delete_memory(c, mid)
            self.store.log_event(c, "forget", {"scope": rec.scope, "kind": rec.kind},
                                 memory_id=mid)
        return {"forgotten": mid, "scope": rec.scope}

    # -- reading --------------------------------------------------------------------------

    def get(self, memory_id: int, *, scope: str | None = None) -> MemoryRecord:
        """One memory by id, if it belongs to the project or ``global``.

        Args:
            memory_id: the memory.
            scope: the project reading (default: the current one).

        Raises:
            NotFound: no such memory in this project or ``global`` (a memory of another
                project is not found, exactly as if it did not exist).
        """
        mid = clean_id(memory_id, "memory_id")
        rec = self.store.get_memory(mid)
        if rec.scope not in self._visible(scope):
            raise NotFound(f"no memory with id {mid}")
        return rec

    def show(self, memory_id: int, *, scope: str | None = None) -> dict[str, Any]:
        """A memory with its edges, version history, retention and linked raw turns.

        Only what the project may see is shown: history versions, edges to other
        memories and linked turns of another project are left out.

        Args:
            memory_id: the memory.
            scope: the project reading (default: the current one).

        Raises:
            NotFound: no such memory in this project or ``global``.
        """
        visible = self._visible(scope)
        rec = self.get(memory_id, scope=scope)
        history: list[dict[str, Any]] = []
        cursor = rec.supersedes
        while cursor is not None and len(history) < 50:
            found = self.store.get_memories([cursor])
            if cursor not in found or found[cursor].scope not in visible:
                break
            history.append(found[cursor].to_dict())
            cursor = found[cursor].supersedes
        edges = self.store.edges_of([rec.id])
        others = self.store.get_memories({e.src for e in edges} | {e.dst for e in edges})
        seen = {mid for mid, r in others.items() if r.scope in visible}
        out = rec.to_dict()
        out["retention"] = round(retention(rec, time.time(), self.config.dynamics), 4)
        out["edges"] = [e.to_dict() for e in edges if e.src in seen and e.dst in seen]
        out["history"] = history
        out["turns"] = [t.to_dict() for t in self.turns(rec.source_links, scope=scope)]
        return out

    def turns(self, ids: Sequence[int], *, scope: str | None = None) -> list[Turn]:
        """Raw turns by internal id (e.g. a memory's source_links).

        Args:
            ids: turn ids.
            scope: the project reading (default: the current one); turns of another
                project are left out, as if they did not exist.

        Raises:
            InvalidInput: ``ids`` is not a list of positive integer ids.
            InputTooLarge: more ids than the batch cap.
        """
        if ids is None:
            raise InvalidInput("ids must be a list of turn ids")
        visible = self._visible(scope)
        found = self.store.get_turns(clean_ids(ids, "ids", self.config.caps.batch))
        return [t for t in found.values() if t.scope in visible]

    def events(
        self, *, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """The journal, newest first.

        Raises:
            InvalidInput: ``limit`` is not an integer 1–10000 or a kind is malformed.
        """
        caps = self.config.caps
        wanted = None if kinds is None else list(clean_list(
            kinds, "kinds", item_cap=caps.name_chars, count_cap=caps.limit))
        return self.store.events(kinds=wanted, limit=clean_int(limit, "limit", lo=1, hi=10_000))

    def introspect(self) -> dict[str, Any]:
        """Store statistics, the current project and the embedder in force."""
        out = self.store.stats()
        out.update({
            "store": str(self.config.home),
            "database": str(self.store.db.path),
            "namespace": self.config.namespace,
            "project": self.project,
            "project_rule": self.project_info.rule,
            "project_detection": self.project_info.to_dict(),
            "scopes": self.store.scopes(),
            "embedder": {"name": self.embedder.name, "marker": self.embedder.marker,
                         "dim": self.embedder.dim,
                         "profile": dataclasses.asdict(self.embedder.profile)},
            "schema_version": self.store.db.schema_version(),
        })
        return out

    # -- maintenance ----------------------------------------------------------------------

    def doctor(self, *, repair: bool = False, progress: Progress | None = None) -> dict[str, Any]:
        """Check integrity, FTS integrity, foreign keys and row-count parity; repair derived data.

        Args:
            repair: rebuild full-text tables, missing vectors and index files.
            progress: called with (done, total) while re-embedding missing vectors.

        Returns:
            The findings (``ok`` is False when anything is wrong and was not repaired).
        """
        clean_callback(progress)
        return doctor_mod.run(self.store, self.embedder, self.vectors,
                              repair=clean_flag(repair, "repair"), progress=progress)

    def reembed(self, embedder: str | Embedder, *, progress: Progress | None = None,
                url: str | None = None, model: str | None = None) -> dict[str, Any]:
        """Re-embed every memory and turn with another embedder and switch the store to it.

        The new vectors are computed outside any transaction and swapped in at once;
        the store stays usable (with the old embedder) until the swap.

        Returns:
            Counts and the old and new markers.

        Raises:
            EmbedderError: the new embedder failed (the store is unchanged).
        """
        if not isinstance(embedder, str | Embedder):
            raise InvalidInput("embedder must be an embedder name or instance")
        clean_callback(progress)
        new = make_embedder(embedder, url=url, model=model) if isinstance(embedder, str) \
            else embedder
        result = reembed_mod.run(self.store, new, progress=progress)
        self.vectors.close()
        self.store.marker = new.marker
        self._use_embedder(new)
        return result

    # -- export, import, migrate ----------------------------------------------------------

    def export(self, path: str | Path, *, format: str = "jsonl", all_namespaces: bool = False,
               vectors: bool = True) -> dict[str, Any]:
        """Write this namespace (or the whole store) to a portable archive.

        Args:
            path: the archive file (``jsonl``) or a directory (``markdown``).
            format: ``jsonl`` (the versioned archive that import reads) or ``markdown``
                (one file per memory and an index, for people to read).
            all_namespaces: every namespace of the store instead of the current one.
            vectors: include the vectors (base64 float32); without them an import embeds.

        Returns:
            Where it went, the row counts and (jsonl) the body's sha256.

        Raises:
            UnsafePath: the target or one of its parents is a symlink.
            InvalidInput: unknown format, or the target cannot be written.
        """
        target = _one_path(path, "path")
        namespace = None if clean_flag(all_namespaces, "all_namespaces") else self.config.namespace
        vectors = clean_flag(vectors, "vectors")
        if format == "jsonl":
            from tideline.archive.exchange import export_archive

            return export_archive(self.store, target, namespace=namespace, vectors=vectors)
        if format == "markdown":
            from tideline.archive.markdown import export_markdown

            return export_markdown(self.store, target, namespace=namespace)
        raise InvalidInput(f"export format must be jsonl or markdown, got {format!r:.80}")

    def import_archive(self, path: str | Path, *, reembed: bool = False,
                       progress: Progress | None = None) -> dict[str, Any]:
        """Load a Tideline archive (ids kept; idempotent; all or nothing).

        Args:
            path: the archive written by :meth:`export`.
            reembed: embed its texts with this store's embedder instead of loading its
                vectors (needed when it was made with another embedder).
            progress: called with (done, total) while embedding.

        Returns:
            Rows inserted and skipped per table.

        Raises:
            ArchiveInvalid: malformed, wrong format version, truncated or tampered.
            EmbedderMismatch: made with another embedder and ``reembed`` is off.
            Conflict: an id is taken by a different row (nothing written).
        """
        from tideline.archive.exchange import import_archive

        source = _one_path(path, "path")
        reembed = clean_flag(reembed, "reembed")
        clean_callback(progress)
        return import_archive(self.store, self.embedder, source, reembed=reembed,
                              progress=progress)

    def migrate(self, to: str | Path, *, progress: Progress | None = None) -> dict[str, Any]:
        """Copy the whole store (every namespace) into an empty store directory or an
        empty PostgreSQL database (``postgresql://…``), verified.

        Raises:
            BackendUnavailable: ``to`` is a URL of a database with no backend here.
            InvalidInput: ``to`` is this store or already holds data.
            UnsafePath: ``to`` or one of its parents is a symlink.
        """
        from tideline.archive.exchange import migrate_store

        target = to if isinstance(to, str) and "://" in to else _one_path(to, "to")
        clean_callback(progress)
        return migrate_store(self, str(target), progress=progress)


def _one_path(value: object, field: str) -> Path:
    """Exactly one file or directory argument.

    Raises:
        InvalidInput: not one path (a list, an empty or NUL-holding text, another type).
    """
    if isinstance(value, list | tuple):
        raise InvalidInput(f"{field} must be one file path")
    paths = clean_paths(value, field)
    if not paths:
        raise InvalidInput(f"{field} must be one file path")
    return Path(paths[0])
