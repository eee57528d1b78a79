"""The :class:`Memory` facade: the one object that the CLI, MCP server, hooks and plugins call.

``Memory`` composes: it holds one :class:`~tideline.runtime.Runtime` (settings, store,
embedder, vector spaces, write path, recall engine, project) and each verb checks its
input and hands the runtime to the module that does the work, named after its concept:
``write/`` (feedback, revision, forgetting), ``recall/``, ``reading``, ``ingest/``,
``inject/``, ``sleep/``, ``dream/``, ``report/``, ``archive/`` and ``maintenance``;
``opening`` resolves what :meth:`Memory.open` is given. The facade itself opens no
transaction and nothing below imports it; ``tests/test_architecture.py`` keeps it so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from tideline.cognition import SelfModel
from tideline.config import Config
from tideline.embed import Embedder, EmbedGuard
from tideline.errors import InvalidInput, StoreClosed
from tideline.inject.tuning import InjectTuning
from tideline.models import ImportResult, MemoryRecord, RecallPacket, Turn, WriteResult
from tideline.project import ProjectInfo, current_project
from tideline.runtime import Runtime
from tideline.scopes import GLOBAL_KINDS
from tideline.store.base import Store, VectorSearch
from tideline.store.routing import reads_standby
from tideline.write.identity import clean_identity
from tideline.write.validate import (
    clean_callback,
    clean_flag,
    clean_id,
    clean_int,
    clean_name,
    clean_number,
    parse_time,
)

if TYPE_CHECKING:
    from tideline.dream.providers import Provider
    from tideline.dream.settings import DreamSettings
    from tideline.inject.identity import IdentityDoc
    from tideline.inject.prefetch import RecentMode
    from tideline.inject.result import InjectResult
    from tideline.sleep.scan import ScanResult
    from tideline.store.agent import AgentReader
    from tideline.store.browse import BrowseStore

__all__ = ["GLOBAL_KINDS", "ImportResult", "Memory", "open_for_import", "parse_time"]

Progress = Callable[[int, int], None]
T = TypeVar("T")


class _Part(Generic[T]):
    """A facade attribute that is a part of its runtime (``mem.store`` is ``mem._rt.store``).

    Reading and assigning behave as for a plain attribute, as they did before the
    runtime existed (``mem.config = …`` swaps the settings the verbs read).
    """

    def __init__(self, field: str) -> None:
        self.field = field

    @overload
    def __get__(self, obj: None, owner: type[Memory]) -> _Part[T]: ...

    @overload
    def __get__(self, obj: Memory, owner: type[Memory]) -> T: ...

    def __get__(self, obj: Memory | None, owner: type[Memory]) -> T | _Part[T]:
        if obj is None:
            return self
        return cast("T", getattr(obj._rt, self.field))

    def __set__(self, obj: Memory, value: T) -> None:
        setattr(obj._rt, self.field, value)


class Memory:
    """A long-term memory over one store directory and namespace.

    Open with :meth:`open`; use as a context manager or call :meth:`close`.

    Attributes:
        config: the settings in force.
        project: the current project scope (recall sees it plus ``global``), or None.
    """

    config: _Part[Config] = _Part("config")
    project: _Part[str | None] = _Part("project")
    store: _Part[Store] = _Part("store")
    embedder: _Part[Embedder] = _Part("embedder")
    embed_guard: _Part[EmbedGuard] = _Part("guard")
    vectors: _Part[VectorSearch] = _Part("vectors")

    def __init__(self, config: Config, embedder: Embedder, *, project: str | None = None) -> None:
        self._runtime: Runtime | None = Runtime.build(config, embedder, project=project)
        self._project_info: ProjectInfo | None = None
        self._inject_tuning: InjectTuning | None = None

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
        from tideline.opening import resolve

        cfg, instance, info = resolve(home, namespace=namespace, embedder=embedder,
                                      project=project, config=config, database=database)
        mem = cls(cfg, instance)
        mem.use_project(info)
        return mem

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _rt(self) -> Runtime:
        """The open runtime every verb works through.

        Raises:
            StoreClosed: :meth:`close` was called.
        """
        rt = self._runtime
        if rt is None:
            raise StoreClosed("this Memory is closed: open the store again with Memory.open")
        return rt

    @_rt.setter
    def _rt(self, rt: Runtime) -> None:
        self._runtime = rt

    def close(self) -> None:
        """Persist derived indexes and close the database; later calls are ignored.

        After it, every verb raises :class:`~tideline.errors.StoreClosed`.
        """
        rt, self._runtime = self._runtime, None
        if rt is not None:
            rt.close()

    @property
    def _agent(self) -> AgentReader:
        return self.store.agent

    def _self_model(self) -> SelfModel:
        return SelfModel(self.store, self.config.caps)

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
            The novelty gate's decision (``new``, ``potentiate``, ``link`` or ``correct``:
            the same statement as ``nearest`` with another value, kept with an
            ``updates`` edge), the id and the edge added.

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
        draft = self._rt.draft(
            gesture=gesture, context=context, cognition_direction=cognition_direction,
            kind=kind, scope=scope, tags=tags, entities_role=entities_role,
            related_entities=related_entities, source_links=source_links,
            importance=importance, emotional=emotional, recurrence=recurrence,
            unresolved=unresolved, event_time=event_time,
        )
        key = None
        if idempotency_key is not None:
            # Identity from the raw key, never from its redacted text (issue 33 item 1).
            key = clean_identity(idempotency_key, "idempotency_key", 200)
        return self._rt.writer.write(draft, key=key, source=clean_name(source, "source",
                                                                       self.config.caps))

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
        from tideline.ingest.importers import add_turns

        return add_turns(self._rt, turns, scope=scope, source=source, session=session,
                         progress=progress, idempotency_key=idempotency_key)

    # -- recall ---------------------------------------------------------------------------

    @reads_standby
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
        from tideline.recall.request import recall

        return recall(self._rt, query, scope=scope, limit=limit, kind=kind, since=since,
                      until=until, include_turns=include_turns, abstain=abstain, tier=tier, log=log)

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
        from tideline.write.feedback import reflect

        return reflect(self._rt, ids, reward, scope=scope)

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

        return revise_memory(self._rt, clean_id(memory_id, "memory_id"), text, fields, scope=scope)

    def forget(self, memory_id: int, *, scope: str | None = None) -> dict[str, Any]:
        """Delete a memory for real (privacy): row, indexes, edges; journaled.

        Args:
            memory_id: the memory to delete.
            scope: the project acting (default: the current one); a memory of another
                project is not found (and not deleted).

        Raises:
            NotFound: no such memory in this project or ``global``.
        """
        from tideline.write.forget import forget

        return forget(self._rt, memory_id, scope=scope)

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
        return self._rt.get(memory_id, scope=scope)

    @reads_standby
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
        from tideline.reading import show

        return show(self._rt, memory_id, scope=scope)

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
        return self._rt.turns(ids, scope=scope)

    def events(
        self, *, kinds: Sequence[str] | None = None, limit: int = 50, all_scopes: bool = False,
    ) -> list[dict[str, Any]]:
        """The journal, newest first, as the current project may read it (its events and
        ``global``'s; the store's own reduced to their counts while other projects exist).

        Args:
            kinds: only events of these kinds.
            limit: at most this many events.
            all_scopes: every event whole (the operator's view).

        Raises:
            InvalidInput: ``limit`` is not an integer 1–10000, a kind is malformed or
                ``all_scopes`` is not a bool.
        """
        from tideline.reading import events

        return events(self._rt, kinds=kinds, limit=limit,
                      all_scopes=clean_flag(all_scopes, "all_scopes"))

    @property
    def browse(self) -> BrowseStore:
        """Paged, index-served reads for a person browsing this namespace (the UI)."""
        from tideline.store.browse import BrowseStore

        return BrowseStore(self.store)

    def conflicts(self, *, scope: str | None = None, all_scopes: bool = False,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Open corrections and conflicts: live pairs joined by ``updates`` or ``contradicts``.

        Args:
            scope: the project (with ``global``; default: the current one).
            all_scopes: every project of the namespace instead (an explicit choice).
            limit: at most this many pairs, newest first.

        Returns:
            Pairs ``{"src", "dst", "type", "weight", "created_at", "a", "b"}``.

        Raises:
            InvalidInput: a malformed scope or limit.
        """
        from tideline.write.conflicts import conflicts

        limit = clean_int(limit, "limit", lo=1, hi=500)
        every = clean_flag(all_scopes, "all_scopes")
        return conflicts(self._rt, scopes=None if every else self._rt.visible(scope),
                         limit=limit)

    def resolve_conflict(self, src: int, dst: int, action: str, *, keep: int | None = None,
                         scope: str | None = None, all_scopes: bool = False) -> dict[str, Any]:
        """Settle a pair: ``keep_both`` (both stay; the pair becomes ``related``) or
        ``supersede`` (``keep`` supersedes the other, as DREAM's apply does); journaled.

        Raises:
            InvalidInput: bad ids or action.
            NotFound: no open pair between them visible to the scope.
            Conflict: one of them was superseded meanwhile.
        """
        from tideline.write.conflicts import resolve_conflict

        return resolve_conflict(self._rt, src, dst, action, keep=keep, scope=scope,
                                all_scopes=clean_flag(all_scopes, "all_scopes"))

    def introspect(self, *, all_scopes: bool = False) -> dict[str, Any]:
        """Store statistics, the current project and the embedder in force.

        Counts and scopes are the current project's and ``global``'s unless
        ``all_scopes`` (the operator's view).

        Raises:
            InvalidInput: ``all_scopes`` is not a bool.
        """
        from tideline.reading import introspect

        return introspect(self._rt, self.project_info,
                          all_scopes=clean_flag(all_scopes, "all_scopes"))

    # -- maintenance ----------------------------------------------------------------------

    def doctor(self, *, repair: bool = False, progress: Progress | None = None) -> dict[str, Any]:
        """Check integrity, FTS integrity, foreign keys and row-count parity; repair derived data.

        Args:
            repair: rebuild full-text tables, missing vectors and index files.
            progress: called with (done, total) while re-embedding missing vectors.

        Returns:
            The findings (``ok`` is False when anything is wrong and was not repaired).
        """
        from tideline.maintenance import doctor

        return doctor(self._rt, repair=repair, progress=progress)

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
        from tideline.maintenance import reembed

        result, self._rt = reembed(self._rt, embedder, progress=progress, url=url, model=model)
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
        from tideline.archive.exchange import export

        return export(self._rt, path, format=format, all_namespaces=all_namespaces,
                      vectors=vectors)

    def import_archive(self, path: str | Path, *, reembed: bool = False,
                       progress: Progress | None = None) -> dict[str, Any]:
        """Load a Tideline archive (idempotent; all or nothing).

        Into a store that already holds rows it merges (:mod:`tideline.archive.merge`):
        rows the store holds (same content) are skipped, the others keep their ids where
        free and get new ones where taken, and every reference follows; ``ids`` in the
        result maps the archive's memory and turn ids to this store's.

        Args:
            path: the archive written by :meth:`export`.
            reembed: embed its texts with this store's embedder instead of loading its
                vectors (needed when it was made with another embedder).
            progress: called with (done, total) while embedding.

        Returns:
            Rows inserted and skipped per table, ``merged``, ``remapped`` (ids that
            changed, per table) and ``ids`` (``{"memories": {old: new}, "turns": …}``).

        Raises:
            ArchiveInvalid: malformed, wrong format version, truncated or tampered; a row
                of another namespace, an unknown schema, an id or time out of range.
            EmbedderMismatch: made with another embedder and ``reembed`` is off.
            Conflict: a turn's identity is taken by a turn of another scope (nothing
                written).
        """
        from tideline.archive.exchange import import_archive
        from tideline.archive.paths import one_path

        source = one_path(path, "path")
        reembed = clean_flag(reembed, "reembed")
        clean_callback(progress)
        out = import_archive(self.store, self.embedder, source, reembed=reembed,
                             progress=progress)
        self._index_after_import(out.get("inserted"))
        return out

    def migrate(self, to: str | Path, *, progress: Progress | None = None) -> dict[str, Any]:
        """Copy the whole store (every namespace) into an empty store directory or an
        empty PostgreSQL database (``postgresql://…``), verified.

        Raises:
            BackendUnavailable: ``to`` is a URL of a database with no backend here.
            InvalidInput: ``to`` is this store or already holds data.
            UnsafePath: ``to`` or one of its parents is a symlink.
        """
        from tideline.archive.exchange import migrate_store
        from tideline.archive.paths import one_path

        target = to if isinstance(to, str) and "://" in to else one_path(to, "to")
        clean_callback(progress)
        return migrate_store(self._rt, str(target), progress=progress)

    # -- self-model: profiles, self-concept, threads --------------------------------------

    def profiles(self, entity: str | None = None) -> list[dict[str, Any]]:
        """Profile facets, of one entity or of all.

        Raises:
            InvalidInput: a malformed entity name.
        """
        return self._self_model().profiles(entity)

    def update_profile(self, entity: str, facet: str, content: str, *,
                       expected_version: int | None = None) -> dict[str, Any]:
        """Create or replace one facet of an entity's profile.

        Raises:
            InvalidInput: unknown facet or invalid text.
            Conflict: the stored version differs from ``expected_version``.
        """
        return self._self_model().update_profile(entity, facet, content,
                                                 expected_version=expected_version)

    def self_concept(self) -> list[dict[str, Any]]:
        """The self-concept facets (fact, terrain, reflection)."""
        return self._self_model().self_concept()

    def update_self_concept(self, facet: str, content: str, *,
                            expected_version: int | None = None) -> dict[str, Any]:
        """Create or replace one self-concept facet.

        Raises:
            InvalidInput: unknown facet or invalid text.
            Conflict: the stored version differs from ``expected_version``.
        """
        return self._self_model().update_self_concept(facet, content,
                                                      expected_version=expected_version)

    def threads(self, status: str | None = "open") -> list[dict[str, Any]]:
        """Open (or all, with ``status=None``) threads."""
        return self._self_model().threads(status)

    def add_thread(self, title: str, body: str = "",
                   source_memories: list[int] | None = None) -> int:
        """Open a thread (an exploration direction); returns its id.

        Raises:
            InvalidInput: invalid title or ids.
        """
        return self._self_model().add_thread(title, body, source_memories)

    def close_thread(self, thread_id: int) -> None:
        """Close a thread.

        Raises:
            NotFound: no such thread.
        """
        self._self_model().close_thread(thread_id)

    # -- project and injection settings ---------------------------------------------------

    def use_project(self, info: ProjectInfo) -> None:
        """Switch the current project to a detected one (keeps the rule for introspection).

        Raises:
            InvalidInput: the name is not a valid scope.
        """
        if not isinstance(info, ProjectInfo):
            raise InvalidInput(f"info must be a ProjectInfo, got {type(info).__name__}")
        self.project = None if info.name is None else clean_name(info.name, "project",
                                                                 self.config.caps)
        self._project_info = info

    @property
    def project_info(self) -> ProjectInfo:
        """The current project and how it was chosen (``explicit``, ``TIDELINE_PROJECT``…)."""
        return current_project(self.project, self._project_info)

    @property
    def inject_tuning(self) -> InjectTuning:
        """Injection thresholds (defaults, then ``TIDELINE_INJECT_*``); assignable."""
        if self._inject_tuning is None:
            self._inject_tuning = InjectTuning.load()
        return self._inject_tuning

    @inject_tuning.setter
    def inject_tuning(self, value: InjectTuning) -> None:
        if not isinstance(value, InjectTuning):
            raise InvalidInput(f"inject_tuning must be an InjectTuning, got {type(value).__name__}")
        self._inject_tuning = value

    def identity(self) -> IdentityDoc | None:
        """The identity file (``$TIDELINE_IDENTITY`` or ``<store>/SOUL.md``), if present."""
        from tideline.inject.identity import read_identity

        return read_identity(self.config.home)

    def _info_for(self, scope: str | None) -> ProjectInfo:
        if scope is None:
            return self.project_info
        name = clean_name(scope, "scope", self.config.caps)
        return ProjectInfo(None if name == "global" else name, "explicit", name)

    def _budget_session(self, budget: object, session: object) -> tuple[int | None, str | None]:
        caps = self.config.caps
        tokens = None if budget is None else clean_int(budget, "budget", lo=0)
        name = None if session is None else clean_identity(session, "session", caps.name_chars)
        return tokens, name

    # -- injection and raw context --------------------------------------------------------

    @reads_standby
    def inject_brief(
        self, *, session: str | None = None, budget: int | None = None,
        tiers: Sequence[str] = ("T0", "T2", "T2b", "T3"), scope: str | None = None,
    ) -> InjectResult:
        """The session brief: T0 identity anchor, T2 prefetch cache, T2b context bridge, T3 map.

        Needs no embedding (pure SQL). Fenced as recalled data, within a token budget.

        Args:
            session: the session being started (left out of the T2b bridge).
            budget: token budget (default ``inject_tuning.brief_tokens``).
            tiers: which tiers to build.
            scope: the project (default: the current one); ``global`` for none.

        Returns:
            The block (``.text``) and per-tier token counts (``.tier_tokens``).

        Raises:
            InvalidInput: an unknown tier, a bad scope or a negative budget.
        """
        from tideline.inject.brief import build_brief, clean_tiers

        tiers = clean_tiers(tiers)
        budget, session = self._budget_session(budget, session)
        return build_brief(self._agent, info=self._info_for(scope), identity=self.identity(),
                           tuning=self.inject_tuning, budget=budget, session=session,
                           tiers=tiers, agent=self.config.agent_name)

    @reads_standby
    def inject_prefetch(
        self, query: str, *, session: str | None = None, budget: int | None = None,
        scope: str | None = None, recent: RecentMode = "session", log: bool = True,
    ) -> InjectResult:
        """The per-prompt block: T1 session bridge and, when T1 brings too little, T4 retrieval.

        Args:
            query: the user's prompt.
            session: the current session (its turns are not repeated).
            budget: token budget (default ``inject_tuning.prefetch_tokens``).
            scope: the project (default: the current one).
            recent: ``session``, ``bridge`` or ``off`` (see :func:`build_prefetch`).
            log: journal injected hits in ``attention_log`` with tier T1/T4.

        Returns:
            The block and per-tier token counts.

        Raises:
            InvalidInput: a malformed query or setting.
            InputTooLarge: the query is over its cap.
        """
        from tideline.inject.prefetch import build_prefetch

        if not isinstance(recent, str) or recent not in ("session", "bridge", "off"):
            raise InvalidInput("recent must be session, bridge or off")
        budget, session = self._budget_session(budget, session)
        log = clean_flag(log, "log")
        return build_prefetch(self._rt, self._agent, query, info=self._info_for(scope),
                              tuning=self.inject_tuning, budget=budget, session=session,
                              recent=recent, log=log)

    @reads_standby
    def read_context(
        self, *, memory_id: int | None = None, query: str | None = None,
        session: str | None = None, around: int | None = None, radius: int = 3,
        limit: int = 20, scope: str | None = None,
    ) -> dict[str, Any]:
        """Raw turns behind memories: follow source_links, search texture, or show a window.

        Exactly one of ``memory_id`` (the turns a memory came from, each with ``radius``
        turns around it), ``query`` (search raw context by words and meaning) or
        ``session`` (a window of that session around turn ``around``, or its end).
        Every mode answers only from ``scope`` (default: the current project) and
        ``global``: another project's memory is not found, its turns are not shown.

        Raises:
            InvalidInput: none or several modes, or bad numbers.
            NotFound: no such memory in the project or ``global``.
        """
        from tideline.inject.texture import read_context

        return read_context(self._rt, self._agent, memory_id=memory_id, query=query,
                            session=session, around=around, radius=radius, limit=limit, scope=scope)

    # -- importers ------------------------------------------------------------------------

    def import_claude(
        self, paths: Sequence[str | Path] | None = None, *, scope: str | None = None,
        tool_results: bool = False, progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import Claude Code transcripts into raw context (idempotent by message uuid).

        Args:
            paths: transcript files or directories (default: ``~/.claude/projects``).
            scope: the project for all turns (default: named after each transcript's cwd).
            tool_results: keep tool results too (shortened).
            progress: called with (done, total) turns while embedding.

        Returns:
            Files, inserted and skipped (already stored) turns, sessions, skip reasons.

        Raises:
            NotFound: a given path does not exist.
        """
        from tideline.ingest.importers import import_claude

        return import_claude(self._rt, self._agent, paths, scope=scope,
                             tool_results=tool_results, progress=progress)

    def import_hermes(
        self, paths: Sequence[str | Path] | None = None, *, scope: str | None = None,
        session: str | None = None, tool_results: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import Hermes Agent sessions (``state.db`` or ``hermes sessions export`` JSONL).

        Turns the Hermes plugin already captured live are not stored twice.

        Args:
            paths: ``state.db`` files, export files or Hermes homes (default ``$HERMES_HOME``).
            scope: the project for all turns (default: each session's repo/cwd name).
            session: only this session (id or unique prefix).
            tool_results: keep tool results too (shortened).
            progress: called with (done, total) turns while embedding.

        Raises:
            NotFound: no sessions at a path.
            StoreCorrupt: a database is not Hermes'.
        """
        from tideline.ingest.importers import import_hermes

        return import_hermes(self._rt, self._agent, paths, scope=scope, session=session,
                             tool_results=tool_results, progress=progress)

    def import_jsonl(
        self, path: str | Path, *, scope: str | None = None, source: str = "jsonl",
        progress: Progress | None = None, batch: int | None = None,
    ) -> dict[str, Any]:
        """Import a generic JSONL chat of any length, streamed (see :mod:`tideline.ingest.jsonl`).

        The file is read, embedded and stored ``batch`` lines at a time, each batch one
        transaction. Running it again skips what is stored (ids of id-less turns come
        from their content, counted over the whole file), so an import that was killed
        is completed by repeating it. A malformed line stops the import there: the
        batches before it stay stored, and fixing the line and re-running resumes.

        Args:
            path: the JSONL file.
            scope: the project of turns that name none.
            source: the system the file came from.
            progress: called with (lines read, lines in the file).
            batch: turns per batch and transaction (default ``Caps.import_batch``).

        Returns:
            ``source``, ``files``, ``turns`` (read), ``inserted``, ``skipped``,
            ``sessions``, ``batches`` and ``turn_ids``.

        Raises:
            NotFound: no such file.
            InvalidInput: a line is not a JSON object or a turn is malformed.
            InputTooLarge: a line or a turn is over its cap, or ``batch`` over the batch cap.
        """
        from tideline.ingest.importers import import_jsonl

        out = import_jsonl(self._rt, path, scope=scope, source=source, progress=progress,
                           batch=batch)
        self._index_after_import(out.get("inserted"))
        return out

    def _index_after_import(self, inserted: Any) -> None:
        """Build the vector indexes now rather than at the first recall (issue 33 item 13)."""
        if inserted:
            from tideline.store.sqlite.index_build import build_after_import

            build_after_import(self._rt.vectors)

    def capture_turns(
        self, turns: Sequence[Mapping[str, Any]], *, source: str, scope: str | None = None,
    ) -> dict[str, Any]:
        """Store turns an agent runtime hands over live (hooks, plugins), skipping known ids.

        Returns:
            ``{"inserted", "skipped", "turn_ids"}``.
        """
        from tideline.ingest.importers import capture_turns

        return capture_turns(self._rt, self._agent, turns, source=source, scope=scope)

    # -- sleep and the report -------------------------------------------------------------

    def sleep(
        self, *, only: str | None = None, force: bool = False,
        progress: Callable[[str], None] | None = None, wait_s: float | None = None,
    ) -> dict[str, Any]:
        """Consolidate offline: plasticity, dynamics, recurrence, clusters, entities, scan.

        Deterministic, no LLM, safe to run at any time: it backs the store up first,
        skips in milliseconds when nothing changed since the last sleep, runs one at a
        time across processes, and never deletes a memory.

        Args:
            only: run just this step: plasticity, dynamics, recurrence, entities, topics,
                clusters, attention, backfill or scan (no gate).
            force: run even when nothing changed; let steps that stopped themselves (too
                large a change) go on; rebuild clusters from scratch.
            progress: called with each step's name as it starts.
            wait_s: how long to wait for a sleep running in another process
                (default ``SleepTuning.lock_wait_s``).

        Returns:
            ``{"skipped": True, "reason": …}`` when gated, else ``skipped: False`` with
            per-step metrics under ``steps``, ``errors``, ``stopped`` and ``needs_force``.

        Raises:
            InvalidInput: ``only`` names no step.
            StoreBusy: the database stayed locked.
        """
        from tideline.sleep.orchestrate import run_sleep

        if only is not None and not isinstance(only, str):
            raise InvalidInput(f"only must name a step, got {type(only).__name__}")
        force = clean_flag(force, "force")
        if progress is not None and not callable(progress):
            raise InvalidInput("progress must be callable")
        if wait_s is not None:
            wait_s = clean_number(wait_s, "wait_s", lo=0.0, hi=86_400.0)
        return run_sleep(self._rt, only=only, force=force, progress=progress, wait_s=wait_s)

    def attention_heatmap(
        self, *, scope: str | None = None, days: int = 30, all_scopes: bool = False,
        top: int = 10,
    ) -> dict[str, Any]:
        """Which memory clusters recall lights up, and which are deserts (JSON-ready).

        Args:
            scope: the project (default: the current one); ``global`` is always included.
            days: the window, ending now.
            all_scopes: every scope of the namespace instead.
            top: how many lit clusters and deserts to list.

        Returns:
            See :func:`tideline.sleep.attention.heatmap`.

        Raises:
            InvalidInput: ``days`` or ``top`` out of range.
        """
        from tideline.sleep.views import attention_heatmap

        return attention_heatmap(self._rt, scope=scope, days=days, all_scopes=all_scopes,
                                 top=top)

    def scan_unindexed(
        self, *, gap_minutes: int | None = None, max_turns: int | None = None,
        scope: str | None = None, all_scopes: bool = True,
    ) -> ScanResult:
        """Context not yet solidified: unlinked memories (A) and recent raw turns (B).

        Args:
            gap_minutes: a longer silence inside a session starts a new chunk.
            max_turns: at most this many (newest) turns.
            scope: only this project (with ``global``) when ``all_scopes`` is False.
            all_scopes: scan every scope (default).

        Returns:
            A :class:`~tideline.sleep.scan.ScanResult` with its Markdown.

        Raises:
            InvalidInput: a limit out of range.
        """
        from tideline.sleep.views import scan

        return scan(self._rt, gap_minutes=gap_minutes, max_turns=max_turns, scope=scope,
                    all_scopes=all_scopes)

    def topics(self, *, scope: str | None = None, limit: int = 25,
               all_scopes: bool = False) -> list[dict[str, Any]]:
        """Topic clusters (keyword → memories), largest first, built by sleep.

        Raises:
            InvalidInput: ``limit`` out of range.
        """
        from tideline.sleep.views import topics

        return topics(self._rt, scope=scope, limit=limit, all_scopes=all_scopes)

    def entity_graph(self, *, limit: int = 100) -> dict[str, list[dict[str, Any]]]:
        """The entity graph built by sleep: nodes (mentions, roles) and edges (role pairs).

        Raises:
            InvalidInput: ``limit`` out of range.
        """
        from tideline.sleep.views import entity_graph

        return entity_graph(self._rt, limit=limit)

    def cluster_map(self, *, scope: str | None = None, all_scopes: bool = False,
                    days: int = 30) -> dict[str, Any]:
        """The embedding clusters as a 2-D map (PCA of their centroids) with the attention
        grid, for one project (with ``global``) or every one; empty before the first sleep.

        Raises:
            InvalidInput: a malformed scope or ``days`` out of range.
        """
        from tideline.report.build import cluster_map

        days = clean_int(days, "days", lo=1, hi=3650)
        every = clean_flag(all_scopes, "all_scopes")
        return cluster_map(self._rt, scopes=None if every else self._rt.visible(scope),
                           days=days)

    @reads_standby
    def report(self, *, days: int = 30, all_scopes: bool = False) -> dict[str, Any]:
        """How the memory behaves over time: growth, gate, recall, dynamics, sleeps, hooks.

        Read as the current project: memories, labels, entities and hook errors of
        other projects are left out (their counts stay in the aggregate time series).

        Args:
            days: the window for time series and rates.
            all_scopes: the whole namespace, every project's words included (the
                operator's view).

        Returns:
            The JSON-ready report (see :mod:`tideline.report`).

        Raises:
            InvalidInput: ``days`` or ``all_scopes`` out of range.
        """
        from tideline.report.build import build_report

        days = clean_int(days, "days", lo=1, hi=3650)
        scopes: list[str] | None = None
        if not clean_flag(all_scopes, "all_scopes"):
            visible = self._rt.visible(None)
            if not set(self.store.scopes()) <= set(visible):
                scopes = visible
        return build_report(self._rt, days=days, scopes=scopes)

    # -- dream ----------------------------------------------------------------------------

    def dream(
        self,
        layers: Sequence[str] | str | None = None,
        *,
        provider: Provider | str | None = None,
        model: str | None = None,
        url: str | None = None,
        command: str | None = None,
        scope: str | None = None,
        dry_run: bool = False,
        force: bool = False,
        settings: DreamSettings | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Consolidate with an LLM: solidify, comb, wander and the symbolic dream.

        Each layer is planned (prompt built, model asked, answer checked — no lock
        held) and then applied in one short transaction that re-checks versions;
        later layers see what earlier ones applied. Every model call is journaled
        as ``dream_call``, every applied layer as ``dream_apply``.

        Args:
            layers: which layers to run (names or ``"solidify,comb"``); default from
                ``TIDELINE_DREAM_LAYERS``, else all four.
            provider: ``openai``, ``anthropic``, ``command`` or a provider instance;
                default from ``TIDELINE_DREAM_PROVIDER``.
            model: the model name (HTTP providers).
            url: the endpoint's base URL.
            command: the command line (``command`` provider).
            scope: dream about one project (with ``global``); default every scope.
            dry_run: show what would change; change nothing.
            force: apply even when a layer would change more than the allowed share.
            settings: all dream settings at once (the other arguments override it).
            progress: called with a short line before each layer.

        Returns:
            ``{"layers": [...], "tokens_in", "tokens_out", "calls", "dry_run", …}``; each
            layer lists its changes, conflicts (skipped changes) and counts.

        Raises:
            DreamError: no provider configured, unknown layer.
            LLMOutputInvalid: a layer's answer was invalid twice (that layer changed nothing).
            ProviderError: the provider failed.
            DreamTooLarge: a layer would change too much of the store (rerun with force).
        """
        from tideline.dream.run import check_request, run

        check_request(settings, dry_run, force, layers=layers, provider=provider,
                      texts=(("model", model), ("url", url), ("command", command)),
                      progress=progress)
        return run(self._rt, layers, provider=provider, model=model, url=url, command=command,
                   scope=scope, dry_run=dry_run, force=force, settings=settings, progress=progress)

    def apply_dream(
        self,
        layer: str,
        payload: dict[str, Any] | str | bytes,
        *,
        scope: str | None = None,
        dry_run: bool = False,
        force: bool = False,
        settings: DreamSettings | None = None,
    ) -> dict[str, Any]:
        """Apply a layer's answer written by an agent (agent-driven dreaming).

        The agent fetched the prompt (``tideline dream --print-prompt LAYER`` or the
        MCP prompt) and answered it itself. The answer is checked exactly like a
        provider's — schema, ids (against the store), turns, scopes — and applied
        in one transaction that re-checks versions: copy the ``vN`` the prompt
        showed into ``version`` fields to be protected against changes made
        meanwhile. Journaled as ``dream_call`` (provider ``agent``, estimated
        tokens) and ``dream_apply``.

        Args:
            layer: ``solidify``, ``comb``, ``wander`` or ``dream``.
            payload: the answer, as a dict or JSON text.
            scope: the project the prompt was rendered for (None: every scope).
            dry_run: show what would change; change nothing.
            force: apply even past the share guard.
            settings: dream settings (bounds, guard); default from the environment.

        Returns:
            The layer's result (changes, conflicts, counts).

        Raises:
            LLMOutputInvalid: the payload is invalid (nothing applied).
            DreamTooLarge: it would change too much of the store.
            DreamError: unknown layer.
        """
        from tideline.dream.run import apply_answer, check_request

        check_request(settings, dry_run, force)
        if not isinstance(payload, dict | str | bytes):
            raise InvalidInput("payload must be the answer as JSON text or a dict")
        if not isinstance(layer, str):
            raise InvalidInput("layer must be solidify, comb, wander or dream")
        return apply_answer(self._rt, layer, payload, scope=scope, dry_run=dry_run, force=force,
                            settings=settings)


def open_for_import(home: Path | None, namespace: str | None, embedder: str | None,
                    path: Path) -> Memory:
    """Open the target of ``tideline import tideline``: a store that does not exist yet
    is created with the archive's embedder (unless one is named).

    Raises:
        ArchiveInvalid: the archive's header is invalid.
        EmbedderError: the archive's embedder cannot be built here.
    """
    from tideline.opening import import_target

    target, chosen = import_target(home, embedder, path)
    return Memory.open(target, namespace=namespace, embedder=chosen)
